// Package hack holds the repository's scripts; its test runs the release
// script as a maintainer would.
package hack

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestReleaseIsReproducible runs hack/release.sh twice from this checkout
// into two directories and holds the two to the byte (their SHA256SUMS, and
// the files against them), then reads what it wrote: the three binaries,
// the image index and the manifest, named by CHANGELOG.md's newest version,
// and this machine's binary saying that version.
func TestReleaseIsReproducible(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## (v[0-9][^ ]*)`).FindSubmatch(changelog)
	if m == nil {
		t.Fatal("CHANGELOG.md names no version")
	}
	version := string(m[1])
	var sums [2][]byte
	dirs := [2]string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	for i, dir := range dirs {
		start := time.Now()
		cmd := exec.Command(filepath.Join(root, "hack", "release.sh"), "--allow-dirty", dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hack/release.sh (run %d): %v\n%s", i+1, err, stderr.Bytes())
		}
		t.Logf("run %d, %v:\n%s", i+1, time.Since(start).Round(time.Second), out)
		if sums[i], err = os.ReadFile(filepath.Join(dir, "SHA256SUMS")); err != nil {
			t.Fatal(err)
		}
		check := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
		check.Dir = dir
		if b, err := check.CombinedOutput(); err != nil {
			t.Fatalf("sha256sum --check in run %d's directory: %v\n%s", i+1, err, b)
		}
	}
	if !bytes.Equal(sums[0], sums[1]) {
		t.Fatalf("two releases from one checkout differ:\n%s\nthen\n%s", sums[0], sums[1])
	}
	want := []string{
		"fleet-role-" + version + "-linux-amd64",
		"fleet-role-" + version + "-linux-arm64",
		"fleet-role-" + version + "-linux-armv7",
		"fleet-role-" + version + "-image.tar",
		"fleet-role.yaml",
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(sums[0])), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || len(f[0]) != 64 {
			t.Fatalf("SHA256SUMS line %q: want a checksum and a name", line)
		}
		got = append(got, f[1])
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the release holds %v, want %v", got, want)
	}
	manifest, err := os.ReadFile(filepath.Join(dirs[0], "fleet-role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(manifest), "image: ghcr.io/fleet-role/fleet-role:"+version+"\n"); n != 3 {
		t.Errorf("the released manifest names ghcr.io/fleet-role/fleet-role:%s %d times, want 3", version, n)
	}
	// This machine's binary, natively (lab/kit/image's test runs the others
	// under qemu).
	platform := "linux/" + runtime.GOARCH
	name := "fleet-role-" + version + "-linux-" + runtime.GOARCH
	if runtime.GOARCH == "arm" {
		platform, name = platform+"/v7", name+"v7"
	}
	bin := filepath.Join(dirs[0], name)
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("%s version -o json: %v", bin, err)
	}
	var v struct{ Version, Platform string }
	if err := json.Unmarshal(out, &v); err != nil || v.Version != version || v.Platform != platform {
		t.Errorf("the released %s binary says %s (%v), want version %s on %s", platform, out, err, version, platform)
	}
}
