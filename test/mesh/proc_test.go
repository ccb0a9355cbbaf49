package mesh

import (
	"os/exec"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/lab/proc"
)

// stopGrace is how long a component gets to write what it holds after
// SIGTERM before it is killed: the probe's own flush is bounded by 10 s.
const stopGrace = 15 * time.Second

// startProc starts cmd with its output in logPath and registers its stop in
// t.Cleanup, so that it ends before anything registered earlier (the API
// server, etcd, the lab) whatever happens to the test.
func startProc(t *testing.T, name string, cmd *exec.Cmd, logPath string) *proc.Proc {
	t.Helper()
	p, err := proc.Start(name, cmd, logPath)
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(func() { p.Stop(stopGrace) })
	return p
}

// tail is the last n lines of a log file, for failure messages.
func tail(path string, n int) string { return proc.Tail(path, n) }
