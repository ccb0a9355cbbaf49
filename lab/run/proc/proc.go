// Package proc runs the processes a scenario starts (fleet-role's probes and
// controller, a kubelet, containerd, the control plane) with their output in
// a log file each, and stops them: SIGTERM, then SIGKILL after a grace. The
// kernel kills each should the test binary die without cleaning up.
package proc

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Proc is one started process.
type Proc struct {
	Name string
	Log  string // the path of its output
	cmd  *exec.Cmd
	done chan struct{}

	mu  sync.Mutex
	err error
}

// Start starts cmd with its output in logPath.
func Start(name string, cmd *exec.Cmd, logPath string) (*Proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// No process may outlive the test binary, even one killed outright.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended, and its exit error (nil for
// status 0).
func (p *Proc) Exited() (gone bool, err error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// Stop continues the process should it be paused, sends SIGTERM, and kills
// it after grace. It returns once the process has exited; safe to repeat.
func (p *Proc) Stop(grace time.Duration) {
	if gone, _ := p.Exited(); gone {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Pause stops the process (SIGSTOP) and returns once the kernel reports it
// stopped, since the signal is delivered asynchronously: waitid for a stop,
// leaving the report in place (WNOWAIT) for nobody else to miss.
func (p *Proc) Pause() error {
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("pause %s: %w", p.Name, err)
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.cmd.Process.Pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("pause %s: wait for the stop: %w", p.Name, err)
		}
		return nil
	}
}

// Resume continues a paused process (SIGCONT).
func (p *Proc) Resume() error {
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume %s: %w", p.Name, err)
	}
	return nil
}

// PID is the process's ID (a command run through `ip netns exec` is the
// program itself, which that command execs in place).
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Tail is the last n lines of the process's log, for failure messages.
func (p *Proc) Tail(n int) string { return Tail(p.Log, n) }

// Crash is where a Go program's log says it crashed: the last line that
// begins a panic or a fatal runtime error, and up to n lines from it (the
// goroutine that crashed comes first); "" when the log says neither. A
// crash's last lines are other goroutines' frames, which say nothing of
// its cause.
func Crash(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "panic: ") || strings.HasPrefix(lines[i], "fatal error: ") {
			return strings.Join(lines[i:min(len(lines), i+n)], "\n")
		}
	}
	return ""
}

// Tail is the last n lines of a log file, for failure messages.
func Tail(path string, n int) string {
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
