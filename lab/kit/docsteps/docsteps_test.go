package docsteps

import (
	"slices"
	"strings"
	"testing"
)

// The checkout's own docs/install.md reads as four blocks, and each host's
// block is removals alone.
func TestReadUninstall(t *testing.T) {
	u, err := ReadUninstall("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(u.Once, "delete addon") || !strings.Contains(u.Cluster, "kubectl delete namespace") {
		t.Errorf("step 1's once %q, step 2 %q", u.Once, u.Cluster)
	}
	for _, b := range []string{u.Servers, u.Host} {
		if _, err := Removed(b); err != nil {
			t.Error(err)
		}
	}
}

// Removed takes `sudo rm -f` and `sudo rm -rf` of an absolute path and
// comments; anything else is refused, naming the line.
func TestRemoved(t *testing.T) {
	got, err := Removed("# a comment\nsudo rm -f /etc/a.yaml\n\nsudo rm -rf /var/lib/d\n")
	if err != nil || !slices.Equal(got, []string{"/etc/a.yaml", "/var/lib/d"}) {
		t.Errorf("Removed: %q, %v", got, err)
	}
	for _, bad := range []string{"rm -f /etc/a", "sudo rm -f relative", "sudo rm -f /a /b", "sudo systemctl restart k3s", "# only a comment"} {
		if _, err := Removed(bad); err == nil {
			t.Errorf("Removed(%q) took it", bad)
		}
	}
}
