package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// HostLockPath is the lock every run that starts a kubelet, containerd or
// k3s holds (the scenarios of test/pods and test/k3s): they touch what the
// machine has once (its kernel settings, the cgroup hierarchies, the ports
// k3s fixes), so only one may run at a time. By hand:
// flock /tmp/fleet-role-host.lock go test ./test/k3s.
const HostLockPath = "/tmp/fleet-role-host.lock"

// HoldHost takes the host lock for the rest of the test, waiting for
// another holder to finish (and saying so every minute). A lock taken
// already by the command that started the test (flock(1) around go test,
// whose descriptor the test inherits) counts as held: taking it again on
// a new descriptor would wait for ever on itself.
func HoldHost(t testing.TB) { t.Helper(); holdLock(t, HostLockPath) }

// holdLock is HoldHost with the lock file at path.
func holdLock(t testing.TB, path string) {
	t.Helper()
	if inherited(t, path) {
		t.Logf("the host lock %s is held by the command that started the test", path)
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatalf("open the host lock: %v", err)
	}
	began := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			t.Fatalf("take the host lock %s: %v", path, err)
		}
		waited := make(chan error, 1)
		go func() { waited <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		t.Logf("waiting for the host lock %s: another run with a kubelet, containerd or k3s holds it", path)
	wait:
		for {
			select {
			case err := <-waited:
				if err != nil {
					f.Close()
					t.Fatalf("take the host lock %s: %v", path, err)
				}
				break wait
			case <-tick.C:
				t.Logf("still waiting for the host lock %s after %.0f s", path, time.Since(began).Seconds())
			}
		}
	}
	if d := time.Since(began); d > time.Second {
		t.Logf("took the host lock after waiting %.0f s", d.Seconds())
	}
	t.Cleanup(func() { f.Close() }) // closing the last descriptor releases the lock
}

// inherited reports whether a descriptor this process inherited refers to
// the lock file and holds its lock: flock on the descriptor that holds it
// succeeds again, on any other it would not.
func inherited(t testing.TB, path string) bool {
	want, err := os.Stat(path)
	if err != nil {
		return false
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("list this process's descriptors: %v", err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fi, err := os.Stat(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || !os.SameFile(fi, want) {
			continue
		}
		if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			return true
		} else if !errors.Is(err, syscall.EWOULDBLOCK) {
			t.Logf("descriptor %d of %s: %v", fd, path, fmt.Errorf("flock: %w", err))
		}
	}
	return false
}
