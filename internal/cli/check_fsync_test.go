package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fleet-role/fleet-role/internal/fsync"
)

// mainFsync runs fleet-role check fsync through Main.
func mainFsync(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(append([]string{"check", "fsync"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func fsyncTestDir(t *testing.T, parent string) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, "fleet-role-check-fsync-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func assertDirEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("%s holds %d entries after the check (first %s), want none", dir, len(entries), entries[0].Name())
	}
}

func TestCheckFsyncJSON(t *testing.T) {
	dir := fsyncTestDir(t, fsync.DefaultDir)
	code, out, errs := mainFsync("--dir", dir, "--json")
	if code != ExitOK {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	for _, k := range []string{"dir", "filesystem", "measured_disk", "writes", "block_bytes", "p50_seconds", "p99_seconds", "max_seconds", "elapsed_seconds"} {
		if _, ok := r[k]; !ok {
			t.Errorf("field %s missing from %s", k, out)
		}
	}
	if r["dir"] != dir || r["measured_disk"] != true || r["writes"] != float64(fsync.DefaultSizeBytes/fsync.DefaultBlockBytes) || r["block_bytes"] != float64(fsync.DefaultBlockBytes) {
		t.Errorf("reading %s, want dir %s on a disk with the default recipe", out, dir)
	}
	if p99, _ := r["p99_seconds"].(float64); p99 <= 0 {
		t.Errorf("p99_seconds %v, want above zero", r["p99_seconds"])
	}
	assertDirEmpty(t, dir)
}

func TestCheckFsyncHumanOnTmpfs(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/shm", &st); err != nil {
		t.Fatal(err)
	}
	if fs := fsync.FilesystemOf(uint32(st.Type)); !fs.Memory {
		t.Fatalf("/dev/shm is %s here, want tmpfs for this test", fs.Name)
	}
	dir := fsyncTestDir(t, "/dev/shm")
	code, out, errs := mainFsync("--dir", dir)
	if code != ExitOK {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	for _, want := range []string{"dir         " + dir, "tmpfs (memory, no disk measured)", "fdatasync   p50 ", "note        tmpfs keeps files in memory"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	assertDirEmpty(t, dir)
}

func TestCheckFsyncFailures(t *testing.T) {
	absent := filepath.Join(t.TempDir(), "absent")
	code, _, errs := mainFsync("--dir", absent)
	if code != ExitFail || !strings.Contains(errs, absent) {
		t.Errorf("--dir %s: exit %d, stderr %q; want 1 naming the directory", absent, code, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dir", ""}, "--dir is empty"},
		{[]string{"extra"}, "extra"},
		{[]string{"--size", "1"}, "unknown flag"},
	} {
		code, _, errs := mainFsync(tc.args...)
		if code != ExitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("check fsync %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestCheckFsyncHelperProcess is not a test: TestCheckFsyncInterrupted runs
// the test binary again with it, as the fleet-role process to interrupt.
func TestCheckFsyncHelperProcess(t *testing.T) {
	dir := os.Getenv("FLEET_ROLE_TEST_FSYNC_DIR")
	if dir == "" {
		return
	}
	os.Exit(Main([]string{"check", "fsync", "--dir", dir}, os.Stdout, os.Stderr))
}

// TestCheckFsyncInterrupted sends SIGINT to a check fsync in progress: it
// exits 1 and leaves no file behind.
func TestCheckFsyncInterrupted(t *testing.T) {
	dir := fsyncTestDir(t, fsync.DefaultDir)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckFsyncHelperProcess$")
	cmd.Env = append(os.Environ(), "FLEET_ROLE_TEST_FSYNC_DIR="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })

	// The file appears only after the command has set its signal handler.
	deadline := time.Now().Add(30 * time.Second)
	for {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no file appeared in %s within 30 s; stderr %s", dir, stderr.String())
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitFail {
		t.Fatalf("exit %v, want code 1; stderr %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "context canceled") || !strings.Contains(stderr.String(), "the file was removed") {
		t.Errorf("stderr %q, want it to say the reading stopped and the file was removed", stderr.String())
	}
	t.Logf("stderr: %s", stderr.String())
	assertDirEmpty(t, dir)
}
