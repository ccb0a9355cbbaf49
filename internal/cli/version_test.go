package cli

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/version"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
	"github.com/fleet-role/fleet-role/lab/run/fleetbin"
)

// The binary built from this checkout names the commit it was built from
// (and -dirty when the tree has changes), the Go that built it and its
// platform; --version says the same line as `version`.
func TestVersionOfTheBuiltBinary(t *testing.T) {
	bin := fleetbin.Build(t)
	root := testkit.RepoRoot(t)
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	commit := git("rev-parse", "HEAD")
	if git("status", "--porcelain", "--untracked-files=no") != "" {
		commit += "-dirty"
	}
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("fleet-role version -o json: %v", err)
	}
	var got version.Info
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("fleet-role version -o json printed %q: %v", out, err)
	}
	if got.Commit != commit || got.GoVersion != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH || got.Version == "" || got.Version == "(devel)" {
		t.Errorf("version %+v, want commit %s, %s, %s/%s and a version stamped from the checkout", got, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	line, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	flag, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(line) != string(flag) || !strings.Contains(string(line), got.Commit) {
		t.Errorf("version printed %q and --version %q: want one line naming commit %s", line, flag, got.Commit)
	}
	t.Logf("fleet-role version: %s", strings.TrimSpace(string(line)))
}

func TestVersionRefusesAnUnknownFormat(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"version", "-o", "yaml"}, &stdout, &stderr); code != ExitUsage || !strings.Contains(stderr.String(), `-o "yaml": want text or json`) || stdout.Len() != 0 {
		t.Errorf("version -o yaml: exit %d, stdout %q, stderr %q; want 2 and the rule", code, stdout.String(), stderr.String())
	}
}
