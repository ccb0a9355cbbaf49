package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ImageTag is the image deploy/fleet-role.yaml names: the release's tag,
// the version CHANGELOG.md names last (deploy's tests hold the three equal).
const ImageTag = "ghcr.io/fleet-role/fleet-role:v0.1.0"

// LocalManifest is deploy/fleet-role.yaml as a scenario that runs it as
// real pods installs it: each substitution made where its old text stands,
// which must be exactly once (or the manifest changed under the scenario
// and the test fails), and imagePullPolicy: Never on every container for
// the manifest's IfNotPresent: the image is imported into containerd from
// the checkout's build, and one missing must fail the pod at once, not
// after a pull from a registry this machine cannot reach.
func LocalManifest(t testing.TB, substitutions [][2]string) []byte {
	t.Helper()
	return localManifest(t, Manifest(t), 3, "controller, probe, its init container", substitutions)
}

// LocalActingManifest is LocalManifest of deploy/fleet-role-acting.yaml,
// the install that acts (deploy/acting), with its actuator's image too.
func LocalActingManifest(t testing.TB, substitutions [][2]string) []byte {
	t.Helper()
	return localManifest(t, filepath.Join(RepoRoot(t), "deploy", "fleet-role-acting.yaml"), 4, "controller, probe, its init container, actuator", substitutions)
}

func localManifest(t testing.TB, path string, want int, which string, substitutions [][2]string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, s := range substitutions {
		if n := strings.Count(text, s[0]); n != 1 {
			t.Fatalf("%s holds %q %d times, want once: the substitution no longer applies", path, s[0], n)
		}
		text = strings.Replace(text, s[0], s[1], 1)
	}
	lines := strings.Split(text, "\n")
	images := 0
	for i, line := range lines {
		if strings.TrimSpace(line) != "image: "+ImageTag {
			continue
		}
		images++
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		if i+1 >= len(lines) || lines[i+1] != indent+"imagePullPolicy: IfNotPresent" {
			t.Fatalf("%s: the image on line %d is not followed by imagePullPolicy: IfNotPresent", path, i+1)
		}
		lines[i+1] = indent + "imagePullPolicy: Never"
	}
	if images != want {
		t.Fatalf("%s names the image %s %d times, want %d (%s)", path, ImageTag, images, want, which)
	}
	return []byte(strings.Join(lines, "\n"))
}
