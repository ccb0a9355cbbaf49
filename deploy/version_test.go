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
	for _, k := range []string{"base/kustomization.yaml", "acting/kustomization.yaml"} {
		kust, err := os.ReadFile(k)
		if err != nil {
			t.Fatal(err)
		}
		tags := regexp.MustCompile(`(?m)^\s+newTag:\s*(\S+)\s*$`).FindAllSubmatch(kust, -1)
		if len(tags) != 1 || string(tags[0][1]) != version {
			t.Fatalf("deploy/%s sets newTag %q, want one, CHANGELOG.md's newest version %s", k, tags, version)
		}
	}
	// Every image either rendered file runs is that tag's.
	for _, f := range []string{rendered, renderedActing} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^\s+image:\s*(\S+)\s*$`).FindAllSubmatch(b, -1) {
			if got := string(m[1]); got != "ghcr.io/fleet-role/fleet-role:"+version {
				t.Errorf("deploy/%s runs the image %s, want ghcr.io/fleet-role/fleet-role:%s", f, got, version)
			}
		}
	}
	if want := "ghcr.io/fleet-role/fleet-role:" + version; testkit.ImageTag != want {
		t.Errorf("testkit.ImageTag is %s, want %s", testkit.ImageTag, want)
	}
}
