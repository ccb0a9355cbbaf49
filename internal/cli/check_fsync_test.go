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
	// A busy machine's disk may be over etcd's 10 ms: then it says so.
	if code != ExitOK && code != ExitUnfit {
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
	p99, _ := r["p99_seconds"].(float64)
	if p99 <= 0 {
		t.Errorf("p99_seconds %v, want above zero", r["p99_seconds"])
	}
	judged, _ := r["judged"].(map[string]any)
	if want := map[bool]string{true: "fit", false: "unfit"}[p99 < 0.01]; judged["verdict"] != want || (code == ExitUnfit) != (want == "unfit") {
		t.Errorf("p99 %v s judged %v with exit %d, want %s (under 10 ms is fit, exit 3 when not)", p99, judged, code, want)
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
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"dir " + dir, "tmpfs (memory, no disk measured)", "fdatasync p50 ", "note tmpfs keeps files in memory", "verdict not_judged: " + dir + " is a memory filesystem (tmpfs)"} {
		if !strings.Contains(flat, want) {
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
// exits 1 and leaves no file behind. On a fast disk the whole reading can
// end before the signal arrives, when this test is descheduled between
// seeing the file and sending it (the race step runs four packages on two
// cores): a reading that ended first, exit 0, is not the case under test,
// and the test tries again, a few times at most.
func TestCheckFsyncInterrupted(t *testing.T) {
	const attempts = 5
	for i := 1; ; i++ {
		stderr, interrupted := interruptCheckFsync(t)
		if interrupted {
			if !strings.Contains(stderr, "context canceled") || !strings.Contains(stderr, "the file was removed") {
				t.Errorf("stderr %q, want it to say the reading stopped and the file was removed", stderr)
			}
			t.Logf("stderr: %s", stderr)
			return
		}
		if i == attempts {
			t.Fatalf("in %d attempts every reading ended before the signal reached it", attempts)
		}
		t.Logf("attempt %d: the reading ended before the signal reached it; trying again", i)
	}
}

// interruptCheckFsync runs check fsync in a process of its own, sends it
// SIGINT once its file appears, and returns its stderr and whether the
// signal stopped it (exit 1); it fails the test on any other end but a
// reading that ended first (exit 0). Either way no file is left behind.
func interruptCheckFsync(t *testing.T) (string, bool) {
	t.Helper()
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
	assertDirEmpty(t, dir)
	if err == nil {
		return stderr.String(), false
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitFail {
		t.Fatalf("exit %v, want code 1; stderr %s", err, stderr.String())
	}
	return stderr.String(), true
}

// check fsync holds its p99 to etcd's 10 ms (under is fit), at a
// microsecond under, at and over the limit, as the reading of
// 10.4 ms; a memory filesystem is not judged. The verdict carries the
// limit and its basis, and unfit exits 3.
func TestCheckFsyncVerdict(t *testing.T) {
	for _, c := range []struct {
		p99    float64
		memory bool
		want   string
	}{
		{0.009999, false, checkFit},
		{0.010, false, checkUnfit},
		{0.010001, false, checkUnfit},
		{0.0104, false, checkUnfit},
		{0.5, true, checkNotJudged},
	} {
		r := fsync.Reading{Dir: "/var/lib/rancher/k3s/server", Filesystem: "ext4", MeasuredDisk: !c.memory, P99Seconds: c.p99}
		if c.memory {
			r.Filesystem = "tmpfs"
		}
		v := fsyncVerdict(r)
		var b strings.Builder
		v.write(&b)
		exit := v.exit()
		if v.Verdict != c.want || v.Limit.Value != 0.01 || !strings.Contains(b.String(), "limit basis\tetcd's disk check: fdatasync p99 under 10ms") ||
			(exit != nil) != (c.want == checkUnfit) {
			t.Errorf("p99 %v (memory %v): %+v, exit %v, printed %q; want %s held to 10ms", c.p99, c.memory, v, exit, b.String(), c.want)
		}
		if c.p99 == 0.0104 && !strings.Contains(b.String(), "verdict\tunfit: fdatasync p99: 10.4ms, must be under 10ms") {
			t.Errorf("the issue's reading printed %q", b.String())
		}
	}
}
