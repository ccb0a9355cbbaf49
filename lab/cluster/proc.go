package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one process the cluster started, its output in a log file.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{}

	mu  sync.Mutex
	err error
}

// startProc starts cmd with its output in logPath. The kernel kills it
// should the test binary die without cleaning up (Pdeathsig).
func startProc(name string, cmd *exec.Cmd, logPath string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
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
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM, kills after grace, and returns once the process has
// exited. Safe to repeat.
func (p *proc) stop(grace time.Duration) {
	if gone, _ := p.exited(); gone {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail is the last n lines of the process's log, for failures.
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
