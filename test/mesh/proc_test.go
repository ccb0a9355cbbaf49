package mesh

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stopGrace is how long a component gets to write what it holds after
// SIGTERM before it is killed: the probe's own flush is bounded by 10 s.
const stopGrace = 15 * time.Second

// proc is one fleet-role process of the scenario (a probe or the
// controller), its output in a file.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd

	done chan struct{}
	mu   sync.Mutex
	err  error
}

// startProc starts cmd with its output in logPath and registers its stop in
// t.Cleanup, so that it ends before anything registered earlier (the API
// server, etcd, the lab) whatever happens to the test.
func startProc(t *testing.T, name string, cmd *exec.Cmd, logPath string) *proc {
	t.Helper()
	f, err := os.Create(logPath)
	if err != nil {
		fatal(t, err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// No process may outlive the test binary, even one killed outright.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		f.Close()
		fatalf(t, "start %s: %v", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	return p
}

// exited reports whether the process has ended, and its exit error (nil
// for status 0).
func (p *proc) exited() (gone bool, err error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// stop continues the process if it is paused, sends SIGTERM, and kills it
// after stopGrace. It returns once the process has exited; safe to repeat.
func (p *proc) stop() {
	if gone, _ := p.exited(); gone {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// pause stops the process (SIGSTOP) and returns once the kernel reports it
// stopped, since the signal is delivered asynchronously: waitid for a stop,
// leaving the report in place (WNOWAIT) for nobody else to miss.
func (p *proc) pause() error {
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause %s: %w", p.name, err)
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.cmd.Process.Pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("pause %s: wait for the stop: %w", p.name, err)
		}
		return nil
	}
}

func (p *proc) resume() error {
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume %s: %w", p.name, err)
	}
	return nil
}

// tail is the last n lines of a log file, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
