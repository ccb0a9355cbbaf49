// Package fleetbin runs fleet-role's command line for tests: through
// internal/cli's Main (RunMain, and Decided, which replays a golden
// scenario), and as a process of the binary built from cmd/fleet-role as
// the image builds it (Build, Run). internal/cli's own tests (the version
// the binary carries, decide over hostile records) and test/integration/cli's
// (the probe and the controller as processes on a real API server, status
// on one) share it, so that both run the command line the same way.
package fleetbin

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// Build builds cmd/fleet-role as the image does (static, CGO off), with the
// checkout's version stamped in, into the test's temporary directory.
func Build(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fleet-role")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=true", "-o", bin, "./cmd/fleet-role")
	cmd.Dir = testkit.RepoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fleet-role: %v\n%s", err, out)
	}
	return bin
}

// Buffer is an output that one goroutine may write while another reads it
// (a process's output, or a command's run through MainContext while the
// test watches what it prints).
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Process is one run of the built binary, its stdout and stderr together
// in its Buffer.
type Process struct {
	Buffer
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Run starts bin with args, the test's environment and env after it. The
// process is killed when the test ends if it is still running, and its
// output is logged when the test failed.
func Run(t testing.TB, bin string, env []string, args ...string) *Process {
	t.Helper()
	p := &Process{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("fleet-role %s log:\n%s", args[0], p.String())
		}
	})
	return p
}

// Log is what the process has written so far.
func (p *Process) Log() string { return p.String() }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits for the process to exit and returns its exit code, failing
// the test when it has not exited within the time given.
func (p *Process) Wait(t testing.TB, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("the process did not exit within %v", within)
	}
	if p.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) {
		t.Fatal(p.err)
	}
	return ee.ExitCode()
}

// Running fails the test if the process has exited.
func (p *Process) Running(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
		t.Fatalf("the process exited: %v\n%s", p.err, p.String())
	default:
	}
}
