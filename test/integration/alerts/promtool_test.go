package alerts

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

// testdata holds the promtool unit tests and rules internal/alerts generates
// from the recordings (its TestPromtoolFiles holds them to what the
// recordings give).
const testdata = "../../../deploy/monitoring/testdata"

// TestPromtool runs the real promtool: check rules on the shipped file and
// the generated ones, and test rules on the tests from the recordings.
func TestPromtool(t *testing.T) {
	bin := testenv.Promtool(t)
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = testdata
		out, err := cmd.CombinedOutput()
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
		if err != nil {
			t.Errorf("promtool %s: %v", strings.Join(args, " "), err)
		}
	}
	run("check", "rules", "../fleet-role.rules.yaml")
	rules, _ := filepath.Glob(filepath.Join(testdata, "rules-*.yaml"))
	tests, _ := filepath.Glob(filepath.Join(testdata, "*.test.yaml"))
	if len(rules) == 0 || len(tests) == 0 {
		t.Fatalf("no generated rules (%d) or tests (%d) in %s", len(rules), len(tests), testdata)
	}
	for _, f := range rules {
		run("check", "rules", filepath.Base(f))
	}
	args := []string{"test", "rules"}
	for _, f := range tests {
		args = append(args, filepath.Base(f))
	}
	run(args...)
}
