package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// heldElsewhere reports whether another process finds the lock at path
// taken: flock(1) -n exits 1 when it cannot take it.
func heldElsewhere(t *testing.T, path string) bool {
	t.Helper()
	err := exec.Command("flock", "-n", path, "true").Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return false
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return true
	default:
		t.Fatalf("flock -n %s true: %v", path, err)
		return false
	}
}

// TestHoldLock: a free lock is taken for the test and let go when it ends.
func TestHoldLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.lock")
	t.Run("hold", func(t *testing.T) {
		holdLock(t, path)
		if !heldElsewhere(t, path) {
			t.Errorf("another process could take %s while the test holds it", path)
		}
	})
	if heldElsewhere(t, path) {
		t.Errorf("%s is still held after the test that took it ended", path)
	}
}

// TestHoldLockInherited: a lock this process already holds on a descriptor
// (as flock(1) around go test passes one on) counts as held, and taking it
// returns at once instead of waiting for itself.
func TestHoldLockInherited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	t.Run("hold", func(t *testing.T) { holdLock(t, path) })
	if !heldElsewhere(t, path) {
		t.Errorf("%s was let go: the inherited lock must stay with its descriptor", path)
	}
}

// TestHoldLockWaits: a lock another process holds is taken once that
// process lets it go.
func TestHoldLockWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.lock")
	holder := exec.Command("flock", path, "cat")
	in, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for !heldElsewhere(t, path) { // until flock(1) has taken it
		if time.Now().After(deadline) {
			t.Fatal("flock(1) has not taken the lock after 10 s")
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Run("hold", func(t *testing.T) {
			holdLock(t, path)
			if !heldElsewhere(t, path) {
				t.Errorf("another process could take %s while the test holds it", path)
			}
		})
	}()
	in.Close() // cat ends, flock(1) exits and lets the lock go
	<-done
}
