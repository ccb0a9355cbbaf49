package testkit

import (
	"os"
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
	b, err := os.ReadFile(Manifest(t))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for _, s := range substitutions {
		if n := strings.Count(text, s[0]); n != 1 {
			t.Fatalf("deploy/fleet-role.yaml holds %q %d times, want once: the substitution no longer applies", s[0], n)
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
			t.Fatalf("deploy/fleet-role.yaml: the image on line %d is not followed by imagePullPolicy: IfNotPresent", i+1)
		}
		lines[i+1] = indent + "imagePullPolicy: Never"
	}
	if images != 3 {
		t.Fatalf("deploy/fleet-role.yaml names the image %s %d times, want 3 (controller, probe, its init container)", ImageTag, images)
	}
	return []byte(strings.Join(lines, "\n"))
}
