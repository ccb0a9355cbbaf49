package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestRenderK3sConfig(t *testing.T) {
	// The label keys come from the settings file the probe and the
	// controller read, so that the labels written are the labels read.
	file := filepath.Join(t.TempDir(), "settings.yaml")
	if err := os.WriteFile(file, []byte("eligible_label: example.com/may-vote\npinned_label: example.com/keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want []string // node-label+ entries
	}{
		{[]string{"--eligible=true", "--pinned=false"}, ExitOK,
			[]string{"fleet-role.io/voter-eligible=true", "fleet-role.io/voter-pinned=false"}},
		{[]string{"--eligible=false", "--pinned=false"}, ExitOK,
			[]string{"fleet-role.io/voter-eligible=false", "fleet-role.io/voter-pinned=false"}},
		{[]string{"--eligible", "--pinned=true"}, ExitOK,
			[]string{"fleet-role.io/voter-eligible=true", "fleet-role.io/voter-pinned=true"}},
		{[]string{"--eligible=false", "--pinned=true", "--eligible-label=example.com/vote", "--pinned-label=pin"}, ExitOK,
			[]string{"example.com/vote=false", "pin=true"}},
		{[]string{"--eligible=true", "--pinned=true", "--settings=" + file}, ExitOK,
			[]string{"example.com/may-vote=true", "example.com/keep=true"}},
		{[]string{"--eligible=true", "--pinned=true", "--settings=" + file + ".missing"}, ExitFail, nil},
		{[]string{"--eligible=true"}, ExitUsage, nil},
		{[]string{"--pinned=true"}, ExitUsage, nil},
		{nil, ExitUsage, nil},
		{[]string{"--eligible=yes", "--pinned=false"}, ExitUsage, nil},
		{[]string{"--eligible=true", "--pinned=false", "--eligible-label=not a key"}, ExitUsage, nil},
		{[]string{"--eligible=true", "--pinned=false", "--pinned-label=fleet-role.io/voter-eligible"}, ExitUsage, nil},
		{[]string{"--eligible=true", "--pinned=false", "extra"}, ExitUsage, nil},
		// Keys a kubelet may not set on itself: k3s would refuse the drop-in.
		{[]string{"--eligible=true", "--pinned=false", "--eligible-label=node-restriction.kubernetes.io/fleet-role-voter-eligible"}, ExitUsage, nil},
		{[]string{"--eligible=true", "--pinned=false", "--pinned-label=fleet-role.node-restriction.kubernetes.io/voter-pinned"}, ExitUsage, nil},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(append([]string{"render", "k3s-config"}, c.args...), &out, &errb)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, c.code, errb.String())
			}
			if c.code != ExitOK {
				if out.Len() != 0 {
					t.Errorf("printed %q on a usage error", out.String())
				}
				return
			}
			if !strings.HasPrefix(out.String(), "# fleet-role's node labels for this host. Goes in /etc/rancher/k3s/config.yaml.d/fleet-role.yaml;") {
				t.Errorf("output does not start with where it goes:\n%s", out.String())
			}
			var doc map[string][]string
			if err := yaml.UnmarshalStrict(out.Bytes(), &doc); err != nil {
				t.Fatalf("not YAML k3s can read: %v\n%s", err, out.String())
			}
			if want := map[string][]string{"node-label+": c.want}; !reflect.DeepEqual(doc, want) {
				t.Errorf("got %v, want %v", doc, want)
			}
		})
	}
}
