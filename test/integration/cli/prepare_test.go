package cli

// prepare-fsync-dir, the probe's init container, run through Main as the
// container runs it, on real directories: it must leave the directory owned
// by the probe's user with mode 0700. Chown needs root (the init container's
// CAP_CHOWN); the tests run as root, as CI does. Its refusals of bad flags,
// which touch no disk, are internal/cli's own tests.

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fleet-role/fleet-role/internal/cli"
)

// requireChown fails the test unless it may give a file to another user.
func requireChown(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("prepare-fsync-dir chowns a directory: this test needs root (CI runs as root)")
	}
}

// prepare runs `fleet-role prepare-fsync-dir args...` and returns its exit
// code, stdout and stderr.
func prepare(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(append([]string{"prepare-fsync-dir"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// owner returns the owner, group and permission bits of path, not following
// a symlink.
func owner(t *testing.T, path string) (uid, gid uint32, perm os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid, fi.Mode().Perm()
}
func TestPrepareFsyncDirMakesAndGivesTheDirectory(t *testing.T) {
	requireChown(t)
	// As the DaemonSet has it: the kubelet's DirectoryOrCreate makes the
	// hostPath root-owned 0755; here it is absent too, with a parent.
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"absent", func(*testing.T, string) {}},
		{"root-owned 0755, as the kubelet makes it", func(t *testing.T, dir string) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"already prepared", func(t *testing.T, dir string) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, 65532, 65532); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db", "fleet-role-fsync")
			tc.setup(t, dir)
			code, out, errOut := prepare(t, "--dir="+dir, "--owner=65532:65532")
			if code != cli.ExitOK {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if uid, gid, perm := owner(t, dir); uid != 65532 || gid != 65532 || perm != 0o700 {
				t.Errorf("%s is %d:%d %v, want 65532:65532 -rwx------", dir, uid, gid, perm)
			}
			if want := dir + ": owner 65532:65532, mode 0700\n"; out != want {
				t.Errorf("stdout %q, want %q", out, want)
			}
		})
	}
}

// It touches DIR alone: what the probe left in it keeps its owner and mode.
func TestPrepareFsyncDirLeavesTheContents(t *testing.T) {
	requireChown(t)
	dir := filepath.Join(t.TempDir(), "fsync")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(dir, "fleet-role-fsync.tmp")
	if err := os.WriteFile(inside, []byte("x"), 0o640); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := prepare(t, "--dir="+dir, "--owner=65532:65532"); code != cli.ExitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if uid, gid, perm := owner(t, inside); uid != 0 || gid != 0 || perm != 0o640 {
		t.Errorf("%s became %d:%d %v; prepare-fsync-dir must leave the directory's contents as they were (0:0 -rw-r-----)", inside, uid, gid, perm)
	}
}

// The owner's IDs at, just under and just over each end of the range chown
// can set: 0, and 4294967294 (4294967295 is chown's "leave unchanged", and
// the system call truncates a larger figure to 32 bits: 4294967296 would
// give the directory to root).
func TestPrepareFsyncDirOwnerRange(t *testing.T) {
	requireChown(t)
	for _, tc := range []struct {
		owner    string
		uid, gid uint32
		ok       bool
	}{
		{"0:0", 0, 0, true},
		{"1:1", 1, 1, true},
		{"-1:0", 0, 0, false},
		{"0:-1", 0, 0, false},
		{"4294967293:4294967293", 4294967293, 4294967293, true},
		{"4294967294:4294967294", 4294967294, 4294967294, true},
		{"4294967295:0", 0, 0, false},
		{"0:4294967295", 0, 0, false},
		{"4294967296:4294967296", 0, 0, false},
		{"18446744073709551616:0", 0, 0, false},
	} {
		t.Run(tc.owner, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "fsync")
			code, _, errOut := prepare(t, "--dir="+dir, "--owner="+tc.owner)
			if !tc.ok {
				if code != cli.ExitUsage || !strings.Contains(errOut, "want a whole number from 0 to 4294967294") {
					t.Errorf("exit %d, stderr %q; want exit %d naming the range", code, errOut, cli.ExitUsage)
				}
				if _, err := os.Lstat(dir); !os.IsNotExist(err) {
					t.Errorf("a refused --owner left %s made (%v): flags are checked before the disk is touched", dir, err)
				}
				return
			}
			if code != cli.ExitOK {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			if uid, gid, perm := owner(t, dir); uid != tc.uid || gid != tc.gid || perm != 0o700 {
				t.Errorf("%s is %d:%d %v, want %d:%d -rwx------", dir, uid, gid, perm, tc.uid, tc.gid)
			}
		})
	}
}

// A path that is not a directory (a file, or a symlink even to a directory)
// is refused with exit 1, and neither it nor what a symlink points at
// changes owner or mode.
func TestPrepareFsyncDirRefusesANonDirectory(t *testing.T) {
	requireChown(t)
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "elsewhere")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, kind string
		untouched  []string
		perm       os.FileMode
	}{
		{file, "regular file", []string{file}, 0o644},
		{link, "symlink", []string{target}, 0o755},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			code, _, errOut := prepare(t, "--dir="+tc.path, "--owner=65532:65532")
			// A file fails at mkdir (ENOTDIR), a symlink at the Lstat after.
			if code != cli.ExitFail || !strings.Contains(errOut, tc.path+": not a directory") && !strings.Contains(errOut, tc.path+" is not a directory") {
				t.Errorf("exit %d, stderr %q; want exit %d saying %s is not a directory", code, errOut, cli.ExitFail, tc.path)
			}
			for _, p := range tc.untouched {
				if uid, gid, perm := owner(t, p); uid != 0 || gid != 0 || perm != tc.perm {
					t.Errorf("%s became %d:%d %v, want 0:0 %v", p, uid, gid, perm, tc.perm)
				}
			}
		})
	}
}
