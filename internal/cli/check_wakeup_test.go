package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func mainWakeup(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(append([]string{"check", "wakeup"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// One reading of this host: a 10 ms timer kept for 300 ms wakes, and its
// lateness is judged against its interval.
func TestCheckWakeupThisHost(t *testing.T) {
	code, out, errs := mainWakeup("--interval", "10ms", "--for", "300ms", "--json")
	// A busy machine may wake a 10 ms timer more than 10 ms late: then it
	// is unfit, and exits 3.
	if code != ExitOK && code != ExitUnfit {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r wakeupReading
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	// A loaded machine may hold the timer back, but 300 ms of a 10 ms
	// timer wake it at least once.
	if r.Wakes < 1 || r.IntervalSeconds != 0.01 || r.LimitSeconds != 0.01 || r.ForSeconds != 0.3 ||
		r.LateMaxSeconds < 0 || r.Under != (r.LateMaxSeconds < r.LimitSeconds) {
		t.Errorf("%+v", r)
	}
	if want := map[bool]string{true: checkFit, false: checkUnfit}[r.Under]; r.Judged.Verdict != want || (code == ExitUnfit) != !r.Under ||
		r.Judged.Limit.Value != 0.01 || r.Judged.Limit.Name != "wakeup_late" {
		t.Errorf("late %v s under %v: judged %+v with exit %d, want %s against wakeup_late 10ms", r.LateMaxSeconds, r.Under, r.Judged, code, want)
	}
	if !strings.Contains(errs, "timing a 10ms timer for 300ms") {
		t.Errorf("no progress line: %q", errs)
	}

	code, out, errs = mainWakeup("--interval", "10ms", "--for", "100ms")
	if code != ExitOK && code != ExitUnfit {
		t.Fatalf("exit %d: %s", code, errs)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"timer due every 10ms for 100ms: ", " wake-ups ", "late_max ", " the limit of 10ms, the interval)", "verdict ", ", must be under 10ms", "limit basis heartbeat_interval 10ms: "} {
		if !strings.Contains(flat, want) {
			t.Errorf("human output lacks %q:\n%s", want, out)
		}
	}
}

func TestCheckWakeupUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--interval", "0s"}, "--interval 0s: must be at least 1ms"},
		{[]string{"--interval", "999us"}, "--interval 999µs: must be at least 1ms"},
		{[]string{"--interval", "1s", "--for", "999ms"}, "--for 999ms: must be at least --interval 1s"},
		{[]string{"extra"}, "unknown command"},
	} {
		code, _, errs := mainWakeup(c.args...)
		if code != ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want exit %d with %q", c.args, code, errs, ExitUsage, c.want)
		}
	}
}
