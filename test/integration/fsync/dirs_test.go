package fsync

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fleet-role/fleet-role/internal/fsync"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

// diskDir is a fresh directory on this machine's disk: under fsync.DefaultDir,
// which the test requires to be on one, so that no reading here is of memory.
func diskDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(fsync.DefaultDir, "fleet-role-fsync-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if fs, err := fsync.FilesystemAt(dir); err != nil || fs.Memory {
		t.Fatalf("%s is on %s (%v), not a disk: these tests need %s on a disk", dir, fs.Name, err, fsync.DefaultDir)
	}
	return dir
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("%s still holds %v, want nothing left behind", dir, names)
	}
}

// tmpfsDir mounts a tmpfs of its own for one test.
func tmpfsDir(t *testing.T) string {
	t.Helper()
	testenv.RequireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("fleet-role-test", dir, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
