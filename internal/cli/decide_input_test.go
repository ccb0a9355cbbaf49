package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// decide refuses an input that is not what it wants, names it and says how
// to get it: an empty file, YAML (kubectl's -o yaml), JSON that does not
// parse, and inputs that parse but hold no record or no Node, which a
// decision would otherwise judge as a fleet of unknowns in silence.
func TestDecideSaysWhatItWants(t *testing.T) {
	dir := filepath.Join("..", "decide", "testdata", "all-fit")
	records, nodes := filepath.Join(dir, "records.json"), filepath.Join(dir, "nodes.json")
	file := func(name, text string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	wantProbe := "want the records and their tails as `kubectl -n fleet-role-records get configmap -l fleet-role.io/record -o json` prints them"
	wantNodes := "want the Nodes as `kubectl get nodes -o json` prints them"
	for _, c := range []struct {
		name        string
		probe, node string
		previous    string
		want        string
	}{
		{"an empty records file", file("r.json", "\n"), nodes, "", "the file is empty; " + wantProbe},
		{"records as YAML", file("r.yaml", "apiVersion: v1\nkind: List\nitems: []\n"), nodes, "", `not JSON (it begins "apiVersion: v1\nkind:", YAML or text?); ` + wantProbe},
		{"records that do not parse", file("r.json", `{"kind": "List", "items": [`), nodes, "", "unexpected end of JSON input; " + wantProbe},
		{"an object that is no record", file("r.json", "{}"), nodes, "", "holds no probe record; " + wantProbe},
		{"a list of no records", file("r.json", `{"kind": "List", "items": []}`), nodes, "", "holds no probe record"},
		{"a ConfigMap that is no record", file("r.json", `{"kind": "ConfigMap", "metadata": {"name": "other"}, "data": {"a": "b"}}`), nodes, "", "holds no probe record; " + wantProbe},
		{"the shared ConfigMap of installs before records", file("r.json", `{"kind": "ConfigMap", "metadata": {"name": "fleet-role-probe"}, "data": {"server-1": "{}"}}`), nodes, "",
			"ConfigMap fleet-role-probe is the one shared ConfigMap of installs before records, which no release wrote and fleet-role no longer reads"},
		{"no Nodes", records, file("n.json", `{"kind": "NodeList", "items": []}`), "", "holds no Node; " + wantNodes},
		{"Nodes as YAML", records, file("n.yaml", "kind: NodeList\n"), "", `not JSON (it begins "kind: NodeList", YAML or text?); ` + wantNodes},
		{"a previous status as YAML", records, nodes, file("p.yaml", "schema: x\n"), "--previous"},
	} {
		args := []string{"decide", "--probe", c.probe, "--nodes", c.node, "--now", "2026-11-29T12:00:00Z"}
		if c.previous != "" {
			args = append(args, "--previous", c.previous)
		}
		r := runMain(args...)
		if r.Code != ExitUsage || !strings.Contains(r.Stderr, c.want) || r.Stdout != "" {
			t.Errorf("%s: exit %d, stdout %d bytes, stderr %q; want 2 saying %q", c.name, r.Code, len(r.Stdout), r.Stderr, c.want)
		}
	}
	// The scenario itself is decided.
	if r := runMain("decide", "--probe", records, "--nodes", nodes, "--now", "2026-11-29T12:00:00Z", "-o", "table"); r.Code != 0 {
		t.Errorf("the scenario: exit %d: %s", r.Code, r.Stderr)
	}
}

// status and render list, and take, only the settings flags they read: the
// ones that name the status, and the label keys.
func TestHelpListsOnlyTheFlagsUsed(t *testing.T) {
	for _, c := range []struct {
		cmd        []string
		has, hasnt []string
	}{
		{[]string{"status"}, []string{"-n, --namespace", "--status-configmap", "--settings"}, []string{"--window", "--eligible-label", "--election-timeout"}},
		{[]string{"render", "k3s-config"}, []string{"--eligible-label", "--pinned-label", "--settings"}, []string{"--window", "--namespace", "--status-configmap"}},
		{[]string{"decide"}, []string{"--window", "--election-timeout", "-n, --namespace"}, nil},
	} {
		r := runMain(append(c.cmd, "--help")...)
		for _, w := range c.has {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("%v --help lacks %s", c.cmd, w)
			}
		}
		for _, w := range c.hasnt {
			if strings.Contains(r.Stdout, w+" ") {
				t.Errorf("%v --help lists %s, which it does not read", c.cmd, w)
			}
		}
	}
	if r := runMain("status", "--window", "50"); r.Code != ExitUsage || !strings.Contains(r.Stderr, "unknown flag: --window") {
		t.Errorf("status --window 50: exit %d, stderr %q; want 2, unknown flag", r.Code, r.Stderr)
	}
}
