package deploy

import (
	"os"
	"regexp"
	"testing"

	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// The image the manifest runs is the release's: the tag
// deploy/base/kustomization.yaml sets is CHANGELOG.md's newest version
// (hack/release.sh stamps the binaries with it), never latest, and the
// tag the tests import the checkout's image under.
func TestImageTagIsTheRelease(t *testing.T) {
	changelog, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## (v[0-9]+\.[0-9]+\.[0-9]+\S*)`).FindSubmatch(changelog)
	if m == nil {
		t.Fatal("CHANGELOG.md has no entry '## vX.Y.Z'")
	}
	version := string(m[1])
	kust, err := os.ReadFile("base/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tags := regexp.MustCompile(`(?m)^\s+newTag:\s*(\S+)\s*$`).FindAllSubmatch(kust, -1)
	if len(tags) != 1 || string(tags[0][1]) != version {
		t.Fatalf("deploy/base/kustomization.yaml sets newTag %q, want one, CHANGELOG.md's newest version %s", tags, version)
	}
	if want := "ghcr.io/fleet-role/fleet-role:" + version; testkit.ImageTag != want {
		t.Errorf("testkit.ImageTag is %s, want %s", testkit.ImageTag, want)
	}
}
