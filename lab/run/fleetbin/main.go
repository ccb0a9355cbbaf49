package fleetbin

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// Main is internal/cli's Main, which the helpers below are given rather
// than import: internal/cli's own tests use them, and a package they import
// cannot import internal/cli back.
type Main func(args []string, stdout, stderr io.Writer) int

// Ran is one run of the command line through Main: its exit code and what
// it printed.
type Ran struct {
	Code           int
	Stdout, Stderr string
}

// RunMain runs the command line args through main.
func RunMain(main Main, args ...string) Ran {
	var out, errb bytes.Buffer
	code := main(args, &out, &errb)
	return Ran{code, out.String(), errb.String()}
}

// Decided runs `fleet-role decide` through main on one of the decision
// core's golden scenarios (internal/decide/testdata/SCENARIO), as an
// operator would replay it, and returns its JSON, its table and the
// scenario's now (RFC 3339). A swap exits swap (cli.StatusExitSwap), an
// answer as status's is: the two runs must exit alike, at most swap, with
// nothing on stderr.
func Decided(t testing.TB, main Main, swap int, scenario string) (doc, table, now string) {
	t.Helper()
	dir := filepath.Join(testkit.RepoRoot(t), "internal", "decide", "testdata", scenario)
	at, err := os.ReadFile(filepath.Join(dir, "now"))
	if err != nil {
		t.Fatal(err)
	}
	now = strings.TrimSpace(string(at))
	args := []string{"decide", "--probe", filepath.Join(dir, "records.json"), "--nodes", filepath.Join(dir, "nodes.json"), "--now", now}
	for flag, file := range map[string]string{"--previous": "previous.json", "--settings": "settings.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			args = append(args, flag, filepath.Join(dir, file))
		}
	}
	j := RunMain(main, append(args, "-o", "json")...)
	tb := RunMain(main, append(args, "-o", "table")...)
	if j.Code > swap || tb.Code != j.Code || j.Stderr != "" || tb.Stderr != "" {
		t.Fatalf("decide %s: exit %d/%d: %s%s", scenario, j.Code, tb.Code, j.Stderr, tb.Stderr)
	}
	return j.Stdout, tb.Stdout, now
}
