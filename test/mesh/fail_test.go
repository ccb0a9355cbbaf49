package mesh

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// failures keeps every failure message of the scenario so that the end of
// its log says them again: the scenario logs a line a decision for minutes,
// and CI shows only the tail of the output, where the failures would
// otherwise be far above.
var failures struct {
	sync.Mutex
	msgs []string
}

func noteFailure(t testing.TB, msg string) {
	failures.Lock()
	defer failures.Unlock()
	failures.msgs = append(failures.msgs, t.Name()+": "+msg)
}

// fail notes msg and fails t with it, stopping the test when stop is set.
func fail(t testing.TB, msg string, stop bool) {
	t.Helper()
	noteFailure(t, msg)
	if stop {
		t.Fatal(msg)
	}
	t.Error(msg)
}

func errorf(t testing.TB, format string, args ...any) {
	t.Helper()
	fail(t, fmt.Sprintf(format, args...), false)
}

func errorv(t testing.TB, args ...any) {
	t.Helper()
	fail(t, fmt.Sprint(args...), false)
}

func fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	fail(t, fmt.Sprintf(format, args...), true)
}

func fatal(t testing.TB, args ...any) {
	t.Helper()
	fail(t, fmt.Sprint(args...), true)
}

// repeatFailures, registered first, runs last of the scenario's cleanups and
// logs every failure again, each cut to its first lines.
func repeatFailures(t *testing.T) {
	t.Cleanup(func() {
		failures.Lock()
		defer failures.Unlock()
		if len(failures.msgs) == 0 {
			return
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%d failures, again:", len(failures.msgs))
		for _, m := range failures.msgs {
			lines := strings.Split(m, "\n")
			// Enough for the campaign's failed faults, one a line.
			if len(lines) > 24 {
				lines = append(lines[:24], fmt.Sprintf("... (%d more lines above)", len(lines)-24))
			}
			b.WriteString("\n  " + strings.Join(lines, "\n    "))
		}
		t.Log(b.String())
	})
}
