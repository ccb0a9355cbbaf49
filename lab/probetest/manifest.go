package probetest

import (
	"os"
	"strings"
	"testing"
)

// ImageTag is the image deploy/fleet-role.yaml names.
const ImageTag = "ghcr.io/fleet-role/fleet-role:latest"

// LocalManifest is deploy/fleet-role.yaml as a scenario that runs it as
// real pods installs it: each substitution made where its old text stands,
// which must be exactly once (or the manifest changed under the scenario
// and the test fails), and imagePullPolicy: Never on every container, since
// the image is imported into containerd from the checkout's build and a
// :latest tag would otherwise be pulled (there is no registry here).
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
	var out []string
	images := 0
	for _, line := range strings.Split(text, "\n") {
		out = append(out, line)
		if strings.TrimSpace(line) == "image: "+ImageTag {
			indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
			out = append(out, indent+"imagePullPolicy: Never")
			images++
		}
	}
	if images != 3 {
		t.Fatalf("deploy/fleet-role.yaml names the image %s %d times, want 3 (controller, probe, its init container)", ImageTag, images)
	}
	return []byte(strings.Join(out, "\n"))
}
