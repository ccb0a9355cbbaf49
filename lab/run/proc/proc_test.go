package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Crash finds the last panic or fatal error of a log and the lines after
// it, up to its bound; a log without one has none; Tail keeps the end.
func TestCrashAndTail(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	panicked := write("panic.log", "level=info msg=started", "panic: first", "", "goroutine 1 [running]:",
		"level=info msg=restarted", "panic: runtime error: invalid memory address", "", "goroutine 7 [running]:", "main.f()", "\t/src/main.go:3")
	if got, want := Crash(panicked, 3), "panic: runtime error: invalid memory address\n\ngoroutine 7 [running]:"; got != want {
		t.Errorf("Crash(3) = %q, want %q", got, want)
	}
	if got := Crash(panicked, 100); !strings.HasSuffix(got, "\t/src/main.go:3") || strings.Contains(got, "first") {
		t.Errorf("Crash(100) = %q, want the last panic to the log's end", got)
	}
	fatal := write("fatal.log", "fatal error: concurrent map writes", "", "goroutine 3 [running]:")
	if got := Crash(fatal, 1); got != "fatal error: concurrent map writes" {
		t.Errorf("Crash of a fatal error = %q", got)
	}
	clean := write("clean.log", "level=info msg=\"panic: not at the start\"", "level=info msg=stopped")
	if got := Crash(clean, 10); got != "" {
		t.Errorf("Crash of a log without one = %q, want none", got)
	}
	if got := Crash(filepath.Join(dir, "missing.log"), 10); got != "" {
		t.Errorf("Crash of no log = %q", got)
	}
	if got := Tail(panicked, 2); got != "main.f()\n\t/src/main.go:3" {
		t.Errorf("Tail(2) = %q", got)
	}
}
