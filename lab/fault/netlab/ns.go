//go:build linux

package netlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// netnsDir is where `ip netns add` binds the namespaces it names.
const netnsDir = "/run/netns"

// errExists marks an ip command refused because the object exists already.
var errExists = errors.New("exists")

func nsPath(name string) string { return filepath.Join(netnsDir, name) }

// ip runs the ip command of iproute2. Its error carries the command line and
// what ip printed, which is the only place RTNETLINK's reason appears.
func ip(ctx context.Context, args ...string) error {
	_, err := ipOutput(ctx, args...)
	return err
}

func ipOutput(ctx context.Context, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "File exists") {
			err = fmt.Errorf("%w: %w", errExists, err)
		}
		return nil, fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	return stdout.Bytes(), nil
}

func ipAll(ctx context.Context, cmds ...[]string) error {
	for _, args := range cmds {
		if err := ip(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// doIn runs fn on a fresh goroutine locked to its OS thread, with that thread
// moved into the network namespace at path. The thread goes back to its own
// namespace afterwards; if that fails, it stays locked and the runtime ends it
// with the goroutine, so no other goroutine can ever run in the wrong place.
// (The Go runtime starts new threads from a clean template thread while a
// locked thread runs, so none inherits the namespace.)
func doIn(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- func() error {
			self, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				runtime.UnlockOSThread()
				return fmt.Errorf("open own namespace: %w", err)
			}
			defer self.Close()
			target, err := os.Open(path)
			if err != nil {
				runtime.UnlockOSThread()
				return fmt.Errorf("open namespace: %w", err)
			}
			err = unix.Setns(int(target.Fd()), unix.CLONE_NEWNET)
			target.Close()
			if err != nil {
				runtime.UnlockOSThread() // still in its own namespace
				return fmt.Errorf("setns %s: %w", path, err)
			}
			ferr := fn()
			if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err == nil {
				runtime.UnlockOSThread()
			}
			return ferr
		}()
	}()
	return <-errc
}

// writeSysctls writes /proc/sys entries; under doIn the net/ ones are the
// namespace's own, because /proc/sys/net resolves by the opening thread.
func writeSysctls(kv map[string]string) error {
	for k, v := range kv {
		p := filepath.Join("/proc/sys", k)
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}
