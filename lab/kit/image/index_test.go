package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

// machines is the ELF machine of each platform's binary.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "arm": elf.EM_ARM}

// TestBuildIndex builds fleet-role's image index for every platform it
// ships for, as a release does (hack/release.sh), and reads it back as an
// OCI layout: one index named by the tag, one image per platform with that
// platform in its descriptor and its configuration, each holding a static
// binary for that machine (GOARM=7 for arm/v7). Each binary is run: this
// machine's natively, the others under Debian's qemu-user-static, each
// saying its own platform (`version -o json`) and reading this host's
// memory against its limit (`check memory`), and the version stamped into
// it. (hack/release's test builds the archive twice and holds the two to
// the byte.)
func TestBuildIndex(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// Found first, so that a missing emulator fails before minutes of
	// builds.
	emulators := map[string]string{}
	for _, p := range Platforms {
		if p.Arch != runtime.GOARCH {
			emulators[p.Arch] = testenv.Qemu(t, p.Arch)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	const version = "v0.0.0-test"
	const tag = "ghcr.io/fleet-role/fleet-role:" + version
	spec, err := Versioned(FleetRole, version)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "index.tar")
	if err := BuildIndex(ctx, root, spec, Platforms, tag, out); err != nil {
		t.Fatal(err)
	}

	layoutDir := filepath.Join(dir, "layout")
	untar(t, out, layoutDir)
	top, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatalf("read the archive as an OCI layout: %v", err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 {
		t.Fatalf("the layout's index lists %d entries, want the one image index", len(tm.Manifests))
	}
	if a := tm.Manifests[0].Annotations; a["io.containerd.image.name"] != tag || a["org.opencontainers.image.ref.name"] != "v0.0.0-test" {
		t.Errorf("the index's annotations %v do not name %s", a, tag)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(Platforms) {
		t.Fatalf("the image index lists %d images, want one for each of %v", len(im.Manifests), Platforms)
	}
	for i, p := range Platforms {
		t.Run(strings.ReplaceAll(p.String(), "/", "-"), func(t *testing.T) {
			d := im.Manifests[i]
			if d.Platform == nil || d.Platform.OS != p.OS || d.Platform.Architecture != p.Arch || d.Platform.Variant != p.Variant {
				t.Fatalf("image %d's descriptor names platform %+v, want %s", i, d.Platform, p)
			}
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != p.OS || cf.Architecture != p.Arch || cf.Variant != p.Variant || cf.Config.User != FleetRole.User {
				t.Errorf("configuration: %s/%s/%s user %s, want %s user %s", cf.OS, cf.Architecture, cf.Variant, cf.Config.User, p, FleetRole.User)
			}
			bin := filepath.Join(t.TempDir(), "fleet-role")
			if err := os.WriteFile(bin, binaryOf(t, img, FleetRole.Path), 0o755); err != nil {
				t.Fatal(err)
			}
			checkMachine(t, bin, p)
			var run []string
			if e, ok := emulators[p.Arch]; ok {
				run = []string{e, bin}
			} else {
				run = []string{bin}
			}
			var v struct {
				Version  string `json:"version"`
				Platform string `json:"platform"`
			}
			stdout, code := runBinary(t, ctx, append(run, "version", "-o", "json"))
			if err := json.Unmarshal(stdout, &v); code != 0 || err != nil {
				t.Fatalf("%s version -o json: exit %d, %v: %s", p, code, err, stdout)
			}
			if v.Platform != p.String() || v.Version != version {
				t.Errorf("%s's binary says version %q on platform %q", p, v.Version, v.Platform)
			}
			// check memory judges this host's MemAvailable: fit (0) or unfit
			// (3) are both a reading taken; 1 is none.
			stdout, code = runBinary(t, ctx, append(run, "check", "memory"))
			if (code != 0 && code != 3) || !strings.Contains(string(stdout), "memory_available") {
				t.Errorf("%s check memory: exit %d, want a judged reading (0 or 3):\n%s", p, code, stdout)
			}
			t.Logf("%s: %s, platform %s; check memory exit %d", p, v.Version, v.Platform, code)
		})
	}
}

// checkMachine fails unless bin is a static ELF binary for p, and for an
// ARM variant built with that GOARM.
func checkMachine(t *testing.T, bin string, p Platform) {
	t.Helper()
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := checkStatic(f); err != nil {
		t.Error(err)
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	if ef.Machine != machines[p.Arch] {
		t.Errorf("%s's binary is for %v, want %v", p, ef.Machine, machines[p.Arch])
	}
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	if set["GOARCH"] != p.Arch || set["CGO_ENABLED"] != "0" {
		t.Errorf("%s's binary was built with GOARCH=%s CGO_ENABLED=%s", p, set["GOARCH"], set["CGO_ENABLED"])
	}
	if want := strings.TrimPrefix(p.Variant, "v"); p.Arch == "arm" && set["GOARM"] != want {
		t.Errorf("%s's binary was built with GOARM=%q, want %s", p, set["GOARM"], want)
	}
}

func runBinary(t *testing.T, ctx context.Context, argv []string) ([]byte, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stdout.Bytes(), 0
	case errors.As(err, &exit):
		return append(stdout.Bytes(), stderr.Bytes()...), exit.ExitCode()
	default:
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
		return nil, -1
	}
}

// oneLayer reads img's layer, which must be its only one.
func oneLayer(t *testing.T, img v1.Image) *tar.Reader {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	return tar.NewReader(rc)
}

// binaryOf reads the file at path out of img's one layer.
func binaryOf(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	tr := oneLayer(t, img)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("the layer holds no %s", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if "/"+h.Name == path {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// untar writes the tar at file into dir.
func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, dir+string(filepath.Separator)) {
			t.Fatalf("the archive names %q, outside it", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("the archive holds %q of type %c, not a file or a directory", h.Name, h.Typeflag)
		}
	}
}

// ParsePlatform takes the platforms the image is built for and names the
// rule when refusing one.
func TestParsePlatform(t *testing.T) {
	for _, p := range Platforms {
		got, err := ParsePlatform(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePlatform(%q) = %v, %v", p.String(), got, err)
		}
	}
	for in, want := range map[string]string{
		"linux":           "want os/arch or os/arch/variant",
		"linux/arm":       "fleet-role's image is built for linux/amd64, linux/arm64, linux/arm/v7",
		"linux/riscv64":   "fleet-role's image is built for",
		"linux/arm/v7/x":  "want os/arch or os/arch/variant",
		"windows/amd64":   "fleet-role's image is built for",
		"linux/arm64/v8x": "fleet-role's image is built for",
	} {
		if _, err := ParsePlatform(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePlatform(%q): %v, want an error saying %q", in, err, want)
		}
	}
}

// Versioned stamps a release version and refuses anything else.
func TestVersioned(t *testing.T) {
	spec, err := Versioned(FleetRole, "v1.2.0-rc.1")
	if err != nil {
		t.Fatal(err)
	}
	if want := "-ldflags=-s -w -X github.com/fleet-role/fleet-role/internal/version.version=v1.2.0-rc.1"; !slices.Contains(spec.BuildFlags, want) {
		t.Errorf("build flags %q lack %q", spec.BuildFlags, want)
	}
	if slices.Contains(FleetRole.BuildFlags, "-ldflags=-s -w -X github.com/fleet-role/fleet-role/internal/version.version=v1.2.0-rc.1") {
		t.Error("Versioned changed the spec it was given")
	}
	for _, bad := range []string{"", "1.2.0", "v1.2", "v1.2.0 -X main.x=y", "v01.2.0", "latest"} {
		if _, err := Versioned(FleetRole, bad); err == nil || !strings.Contains(err.Error(), "want v, then major.minor.patch") {
			t.Errorf("Versioned(%q): %v, want it refused", bad, err)
		}
	}
}
