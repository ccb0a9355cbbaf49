package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/link"
)

// check all on this host: every reading taken and judged, one verdict that
// is unfit exactly when a reading is, and the exit code that says it.
func TestCheckAllThisHost(t *testing.T) {
	dir := fsyncTestDir(t, "/var/tmp")
	r := runMain("check", "all", "--dir", dir, "--wakeup-for", "300ms", "--json")
	var rep allReport
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("exit %d, stdout %q, stderr %q: %v", r.Code, r.Stdout, r.Stderr, err)
	}
	unfit := false
	var names []string
	for _, row := range rep.Readings {
		names = append(names, row.Reading)
		if row.Judged == nil {
			t.Errorf("%s not taken: %s", row.Reading, row.Err)
			continue
		}
		unfit = unfit || row.Judged.Verdict == checkUnfit
	}
	if got := strings.Join(names, " "); got != "link memory wakeup fsync" {
		t.Errorf("readings %s, want link memory wakeup fsync (no --peer: no connect)", got)
	}
	want, code := checkFit, ExitOK
	if unfit {
		want, code = checkUnfit, ExitUnfit // a busy machine's disk or timer
	}
	if rep.Verdict != want || r.Code != code {
		t.Errorf("verdict %s with exit %d, want %s and %d: %+v", rep.Verdict, r.Code, want, code, rep)
	}
	for _, p := range []string{"link...", "memory...", "wakeup, a 500ms timer for 300ms...", "fsync in " + dir + "..."} {
		if !strings.Contains(r.Stderr, p) {
			t.Errorf("progress lacks %q: %q", p, r.Stderr)
		}
	}
	assertDirEmpty(t, dir)

	// A peer that refuses: the connect reading is unfit, and so the host.
	r = runMain("check", "all", "--dir", dir, "--wakeup-for", "100ms", "--peer", "127.0.0.1:1")
	if r.Code != ExitUnfit || !strings.Contains(r.Stdout, "connect  unfit    the connect to 127.0.0.1:1 failed") || !strings.HasSuffix(r.Stdout, "this host: unfit\n") {
		t.Errorf("with a refusing peer: exit %d, output:\n%s", r.Code, r.Stdout)
	}
	if r := runMain("check", "all", "--peer", "nohost"); r.Code != ExitUsage || !strings.Contains(r.Stderr, `"nohost"`) {
		t.Errorf("--peer nohost: exit %d, %q", r.Code, r.Stderr)
	}
}

// The link is judged as the decision judges it.
func TestLinkVerdict(t *testing.T) {
	for class, want := range map[link.Class]string{link.WiFi: checkUnfit, link.Wired: checkFit, link.Unknown: checkNotJudged} {
		if v := linkVerdict(link.Reading{Interface: "wlp2s0", Class: class}); v.Verdict != want {
			t.Errorf("class %s: %+v, want %s", class, v, want)
		}
	}
}
