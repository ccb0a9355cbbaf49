package actuator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// Restarter restarts k3s on this host and returns once it has started
// again, or with why not. token is unique per command (RestartToken); ctx
// carries the deadline.
type Restarter interface {
	Restart(ctx context.Context, token string) error
	// String names the implementation for the logs.
	String() string
}

// RestartToken is the token of command (planID, seq, term): unique per
// command and per term, on one line.
func RestartToken(planID string, seq int, term int32) string {
	return fmt.Sprintf("%s/%d/%d", planID, seq, term)
}

// The --k3s-restart values.
const (
	RestartSystemd    = "systemd"
	RestartFilePrefix = "file:"
)

// DefaultK3sUnit is the unit k3s's install script writes for a server.
const DefaultK3sUnit = "k3s.service"

// DefaultNsenter is where nsenter (util-linux) is on the host.
const DefaultNsenter = "/usr/bin/nsenter"

// ParseRestarter reads a --k3s-restart value: "systemd" or "file:DIR" (DIR
// an absolute path on the host). hostRoot is where the host's / is.
func ParseRestarter(v, hostRoot, unit, nsenter string, clk clock.WithTicker) (Restarter, error) {
	switch {
	case v == RestartSystemd:
		if unit == "" || strings.ContainsAny(unit, "/ \t\n") {
			return nil, fmt.Errorf("--k3s-unit %q: want a systemd unit name such as %s", unit, DefaultK3sUnit)
		}
		if !filepath.IsAbs(nsenter) {
			return nil, fmt.Errorf("--nsenter %q: want an absolute path on the host, such as %s", nsenter, DefaultNsenter)
		}
		return Systemd{Root: HostInitRoot, Unit: unit, Nsenter: nsenter}, nil
	case strings.HasPrefix(v, RestartFilePrefix):
		dir := strings.TrimPrefix(v, RestartFilePrefix)
		if !filepath.IsAbs(dir) {
			return nil, fmt.Errorf("--k3s-restart %q: the directory after %s must be an absolute path on the host, such as %s/run/fleet-role-lab", v, RestartFilePrefix, RestartFilePrefix)
		}
		return &FileRestarter{Dir: HostPath(hostRoot, dir), Clock: clk}, nil
	}
	return nil, fmt.Errorf("--k3s-restart %q: want %s (a real host) or %sDIR (the lab's supervisor, DIR a path on the host)", v, RestartSystemd, RestartFilePrefix)
}

// HostInitRoot is the host's root as its PID 1 sees it: with the host's
// PID namespace (the DaemonSet's hostPID), PID 1 is the host's init, and
// its root is the host's whole filesystem, whatever the pod mounts.
const HostInitRoot = "/proc/1/root"

// Systemd restarts k3s as systemd's unit on the host: `systemctl restart`
// run in the host's namespaces (nsenter into PID 1's, the host's systemd).
// It returns once k3s's unit, Type=notify, has told systemd it started
// again. The image holds no nsenter (distroless), so the host's own runs,
// chrooted into Root (HostInitRoot), where its libraries are.
type Systemd struct {
	Root, Unit, Nsenter string
}

func (s Systemd) String() string { return "systemd unit " + s.Unit }

// Command is the command Restart runs.
func (s Systemd) Command(ctx context.Context) *exec.Cmd {
	cmd := exec.CommandContext(ctx, s.Nsenter, "-t", "1", "-m", "-u", "-i", "-n", "-p", "--", "systemctl", "restart", s.Unit)
	if root := filepath.Clean(s.Root); root != "/" {
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
		cmd.Dir = "/"
	}
	return cmd
}

// Restart runs the command; ctx's deadline bounds it (k3s's unit has no
// start timeout of its own: its install script sets TimeoutStartSec=0).
func (s Systemd) Restart(ctx context.Context, _ string) error {
	cmd := s.Command(ctx)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("systemctl restart %s: not started again in time: %w", s.Unit, context.Cause(ctx))
		}
		return fmt.Errorf("systemctl restart %s: %w: %s", s.Unit, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// The lab's restart protocol with its supervisor (lab/fleets/k3sfleet): the
// actuator writes a token to RequestFile, and the supervisor, once it has
// restarted k3s and k3s answers again, writes the same token to DoneFile.
const (
	RequestFile = "k3s-restart.request"
	DoneFile    = "k3s-restart.done"
)

// restartPoll is how often FileRestarter looks for the done token. A k3s
// restart takes 20 to 60 s (docs/k3s.md, a restart is about a join), and the
// controller reads the reports twice a sample period (7.5 s at the
// default): a second adds at most a second to a report, for one stat a
// second while it waits.
const restartPoll = time.Second

// FileRestarter asks the lab's supervisor to restart k3s through files in
// Dir.
type FileRestarter struct {
	Dir   string
	Clock clock.WithTicker
}

func (f *FileRestarter) String() string { return "file protocol in " + f.Dir }

// Restart writes token to the request file (a temporary file renamed over
// it, so that the supervisor never reads half a token) and waits until the
// done file holds the same token, or ctx ends.
func (f *FileRestarter) Restart(ctx context.Context, token string) error {
	if token == "" || strings.ContainsAny(token, "\n\r") {
		return fmt.Errorf("k3s restart: token %q must be one non-empty line", token)
	}
	if err := writeFileAtomic(filepath.Join(f.Dir, RequestFile), []byte(token+"\n"), 0o644); err != nil {
		return fmt.Errorf("k3s restart: request: %w", err)
	}
	done := filepath.Join(f.Dir, DoneFile)
	t := f.Clock.NewTicker(restartPoll)
	defer t.Stop()
	for {
		b, err := os.ReadFile(done)
		switch {
		case err == nil && strings.TrimSpace(string(b)) == token:
			return nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("k3s restart: read %s: %w", done, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("k3s restart: %s never held token %q: %w", done, token, context.Cause(ctx))
		case <-t.C():
		}
	}
}
