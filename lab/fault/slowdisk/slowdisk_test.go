//go:build linux

package slowdisk

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/etcdmetrics"
	"github.com/fleet-role/fleet-role/internal/fsync"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary a server that mounts a slow disk and then
// waits to be killed: a crashed run, for TestSweepClearsCrashedMount.
const helperEnv = "SLOWDISK_TEST_HELPER" // BACKING:MOUNTPOINT

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		backing, mnt, _ := strings.Cut(v, ":")
		d, err := Mount(Config{Backing: backing, Mountpoint: mnt})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("mounted", d.Source())
		for { // until killed: the crash the test makes
			time.Sleep(time.Hour)
		}
	}
	os.Exit(m.Run())
}

// requireFUSE fails the test (never skips it) unless a FUSE mount can be
// made here: root and /dev/fuse.
func requireFUSE(t *testing.T) {
	t.Helper()
	testenv.RequireRoot(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Fatalf("a slow disk needs /dev/fuse: %v", err)
	}
}

// tmpfsDir is a fresh tmpfs, as the campaign's backing directories are: a
// sync on it costs nothing, so what a sync through the slow disk costs is
// FUSE's overhead and the delay.
func tmpfsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=512m,mode=0700"); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount the tmpfs on %s: %v", dir, err)
		}
	})
	return dir
}

// mountSlow mounts a slow disk over a fresh tmpfs and closes it, checking
// that nothing is left mounted, when the test ends.
func mountSlow(t *testing.T, delay time.Duration) *Disk {
	t.Helper()
	requireFUSE(t)
	d, err := Mount(Config{Backing: tmpfsDir(t), Mountpoint: t.TempDir(), Delay: delay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		assertNotMounted(t, d)
	})
	return d
}

// assertNotMounted fails unless /proc/self/mountinfo lists no mount of d.
func assertNotMounted(t *testing.T, d *Disk) {
	t.Helper()
	ms, err := Mounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Source == d.Source() || m.Mountpoint == d.Mountpoint() {
			t.Errorf("still mounted: %s on %s", m.Source, m.Mountpoint)
		}
	}
}

// timedSync writes a block to path and times its fdatasync.
func timedSync(t *testing.T, path string, flags int) time.Duration {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|flags, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	if _, err := f.Write(make([]byte, 2300)); err != nil {
		t.Fatal(err)
	}
	if flags&syscall.O_DSYNC == 0 {
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			t.Fatalf("fdatasync %s: %v", path, err)
		}
	}
	return time.Since(start)
}

// TestSyncsAreDelayed holds that every kind of sync etcd makes waits for the
// delay (fdatasync and fsync of a file, fsync of a directory) and so does a
// write to a file opened O_DSYNC, which passthrough would take past the
// server; that no sync waits at delay zero; and that the data reach the
// backing directory.
func TestSyncsAreDelayed(t *testing.T) {
	const delay = 40 * time.Millisecond
	d := mountSlow(t, 0)
	file := filepath.Join(d.Mountpoint(), "wal")

	before := d.Stats()
	timedSync(t, file, 0)
	if s := d.Stats(); s.Syncs != before.Syncs+1 || s.Delayed != before.Delayed {
		t.Fatalf("at delay 0 one fdatasync: stats went from %+v to %+v, want one sync more and none delayed", before, s)
	}

	d.SetDelay(delay)
	if d.Delay() != delay {
		t.Fatalf("Delay() = %v after SetDelay(%v)", d.Delay(), delay)
	}
	cases := []struct {
		name string
		sync func() error
	}{
		{"fdatasync of a file", func() error {
			timedSync(t, file, 0)
			return nil
		}},
		{"fsync of a file", func() error {
			f, err := os.OpenFile(file, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Sync()
		}},
		{"fsync of a directory", func() error {
			f, err := os.Open(d.Mountpoint())
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Sync()
		}},
		{"a write to a file opened O_DSYNC", func() error {
			timedSync(t, file, syscall.O_DSYNC)
			return nil
		}},
	}
	for _, c := range cases {
		before := d.Stats()
		start := time.Now()
		if err := c.sync(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		took := time.Since(start)
		after := d.Stats()
		if after.Delayed < before.Delayed+1 {
			t.Errorf("%s: no sync delayed (stats %+v, then %+v)", c.name, before, after)
		}
		if took < delay {
			t.Errorf("%s took %v, under the delay %v", c.name, took, delay)
		}
		if slept := after.DelayedFor - before.DelayedFor; slept < delay {
			t.Errorf("%s: the delayed syncs slept %v in all, under the delay %v", c.name, slept, delay)
		}
	}

	b, err := os.ReadFile(filepath.Join(d.backing, "wal"))
	if err != nil {
		t.Fatalf("the file written through the mount is not in the backing directory: %v", err)
	}
	if len(b) != 2300 {
		t.Errorf("backing file holds %d bytes, want 2300", len(b))
	}
}

// TestMountRefusesBadInput holds Mount to naming what is wrong.
func TestMountRefusesBadInput(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Mountpoint: dir}, "no backing directory given"},
		{Config{Backing: dir}, "no mount point given"},
		{Config{Backing: file, Mountpoint: other}, "is not a directory"},
		{Config{Backing: filepath.Join(dir, "absent"), Mountpoint: other}, "no such file"},
		{Config{Backing: sub, Mountpoint: dir}, "is the mount point " + dir + " or under it"},
		{Config{Backing: dir, Mountpoint: dir}, "or under it"},
		{Config{Backing: dir, Mountpoint: sub}, "mount point " + sub + " is under the backing directory " + dir},
		{Config{Backing: sub, Mountpoint: other, Delay: -time.Millisecond}, "must not be negative"},
	} {
		d, err := Mount(c.cfg)
		if err == nil {
			d.Close()
			t.Errorf("Mount(%+v) succeeded, want an error containing %q", c.cfg, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("Mount(%+v): %v, want it to contain %q", c.cfg, err, c.want)
		}
	}
}

// runFio runs etcd's disk check (docs/facts.md) through dir, on a smaller file
// than etcd's 22 MiB so that it takes seconds at a delay of tens of
// milliseconds: 1 MiB in writes of 2300 bytes is 456 fdatasyncs, enough for
// a p99 of its own (the fifth largest).
func runFio(t *testing.T, fio, dir string) fsync.FioReading {
	t.Helper()
	cmd := exec.Command(fio, "--rw=write", "--ioengine=sync", "--fdatasync=1", "--directory="+dir,
		"--size=1m", "--bs=2300", "--name=slowdisk", "--output-format=json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	r, err := fsync.ParseFio(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "slowdisk.0.0")); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFioSeesTheDelay runs fio's fdatasync check through the mount at no
// delay and at 30 ms: its p99 must rise by the delay. Every sync sleeps at
// least the delay, so the p99 cannot read less than it (less fio's
// histogram resolution, under 2% at these latencies). Above it, it must stay
// under twice the delay, which a delay applied twice would read at least.
// The longest sleep the server measured plus the undelayed p99 is not the
// bound: fio's own wake-up after the reply is noise that neither counts (one
// run on a quiet machine read 34.3 ms against 32.6 + 0.2), so the figures
// print it beside the p99 only.
func TestFioSeesTheDelay(t *testing.T) {
	const delay = 30 * time.Millisecond
	fio := testenv.Fio(t)
	d := mountSlow(t, 0)

	base := runFio(t, fio, d.Mountpoint())
	if base.P99Seconds >= delay.Seconds()/2 {
		t.Fatalf("fio's fdatasync p99 through the mount without delay is %.3f ms, not well under the delay %v: the delay could not be told apart", base.P99Seconds*1e3, delay)
	}
	d.SetDelay(delay)
	before := d.Stats()
	slow := runFio(t, fio, d.Mountpoint())
	after := d.Stats()
	const resolution = 0.02 // fio's latency bins
	limit := 2 * delay.Seconds() * (1 - resolution)
	figures := fmt.Sprintf("fio p99 %.3f ms at no delay (%d syncs), %.3f ms at %v (%d syncs); %d syncs delayed, the longest sleep %.3f ms; limit %.3f ms",
		base.P99Seconds*1e3, base.Syncs, slow.P99Seconds*1e3, delay, slow.Syncs, after.Delayed-before.Delayed, after.Longest.Seconds()*1e3, limit*1e3)
	t.Log(figures)
	if got := after.Delayed - before.Delayed; got < uint64(slow.Syncs) {
		t.Errorf("%d syncs delayed while fio timed %d fdatasyncs: %s", got, slow.Syncs, figures)
	}
	if slow.P99Seconds < delay.Seconds()*(1-resolution) {
		t.Errorf("fio's p99 does not show the delay: %s", figures)
	}
	if slow.P99Seconds > limit {
		t.Errorf("fio's p99 reads the delay applied twice: %s", figures)
	}
}

// scrape reads a member's metrics page.
func scrape(t *testing.T, m *etcdproc.Member) *etcdmetrics.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := etcdmetrics.Scrape(ctx, nil, m.MetricsURL)
	if err != nil {
		t.Fatalf("scrape %s: %v", m.Name, err)
	}
	return s
}

// loadAndGain writes n keys and returns what the member's WAL fsync and
// backend commit histograms gained meanwhile.
func loadAndGain(t *testing.T, c *etcdproc.Cluster, n int) etcdmetrics.Reading {
	t.Helper()
	m := c.Members[0]
	prev := scrape(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Put(ctx, n); err != nil {
		t.Fatal(err)
	}
	return etcdmetrics.Gained(prev, scrape(t, m))
}

func mean(g etcdmetrics.Gain) float64 {
	if g.Count == 0 {
		return 0
	}
	return g.SumSeconds / float64(g.Count)
}

func describe(r etcdmetrics.Reading) string {
	p99 := func(g etcdmetrics.Gain) string {
		if g.P99Seconds == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f ms", *g.P99Seconds*1e3)
	}
	return fmt.Sprintf("WAL fsync: %d, mean %.2f ms, p99 %s; backend commit: %d, mean %.2f ms, p99 %s",
		r.WALFsync.Count, mean(r.WALFsync)*1e3, p99(r.WALFsync), r.BackendCommit.Count, mean(r.BackendCommit)*1e3, p99(r.BackendCommit))
}

// TestEtcdWALFsyncRisesByTheDelay runs a real etcd member with its data
// directory on the slow disk and holds its own WAL fsync histogram, the
// signal fleet-role judges a voter's disk by, to the delay: at none it is
// far under it, at 30 ms its mean rises by at least the delay and its p99
// reads at least the delay. Then it closes the disk while etcd still runs:
// the mount must be gone from mountinfo at once, etcd must go on writing
// (the lazy unmount keeps its open files served), and the server must end
// once etcd has stopped.
func TestEtcdWALFsyncRisesByTheDelay(t *testing.T) {
	const delay = 30 * time.Millisecond
	bin := testenv.Etcd(t)
	requireFUSE(t)
	d, err := Mount(Config{Backing: tmpfsDir(t), Mountpoint: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	c, err := etcdproc.Start(context.Background(), etcdproc.Config{Binary: bin, Dir: d.Mountpoint(), Members: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)

	const writes = 100
	base := loadAndGain(t, c, writes)
	d.SetDelay(delay)
	before := d.Stats()
	slow := loadAndGain(t, c, writes)
	after := d.Stats()
	figures := fmt.Sprintf("no delay: %s; at %v: %s; syncs delayed %d", describe(base), delay, describe(slow), after.Delayed-before.Delayed)
	t.Log(figures)

	if base.WALFsync.Count < writes || slow.WALFsync.Count < writes {
		t.Fatalf("fewer WAL fsyncs than the %d writes: %s", writes, figures)
	}
	if after.Delayed-before.Delayed < slow.WALFsync.Count {
		t.Errorf("fewer syncs delayed than etcd's WAL fsyncs: %s", figures)
	}
	if mean(base.WALFsync) >= delay.Seconds()/2 {
		t.Fatalf("etcd's WAL fsync through the mount without delay is not well under the delay: %s", figures)
	}
	if rise := mean(slow.WALFsync) - mean(base.WALFsync); rise < delay.Seconds() {
		t.Errorf("etcd's mean WAL fsync rose by %.2f ms, under the delay %v: %s", rise*1e3, delay, figures)
	}
	if slow.WALFsync.P99Seconds == nil || *slow.WALFsync.P99Seconds < delay.Seconds() {
		t.Errorf("etcd's WAL fsync p99 does not show the delay: %s", figures)
	}
	// bbolt's commit syncs its file too (twice: the pages, then the meta
	// page), so no commit can take less than the delay. Its rise is not
	// judged: at no delay a hundred writes make only a few commits (one
	// every 100 ms batch), too few for a mean to compare.
	if slow.BackendCommit.Count == 0 || mean(slow.BackendCommit) < delay.Seconds() {
		t.Errorf("etcd's mean backend commit is under the delay %v: %s", delay, figures)
	}

	// Close while etcd holds its WAL and database open on the disk.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	assertNotMounted(t, d)
	if !c.Members[0].Running() {
		t.Fatalf("etcd exited when the slow disk was unmounted; log tail:\n%s", c.Members[0].LogTail())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Put(ctx, 10); err != nil {
		t.Fatalf("etcd cannot write after the lazy unmount: %v", err)
	}
	c.Stop()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Wait(ctx); err != nil {
		t.Fatalf("the server did not end after etcd stopped: %v", err)
	}
}

// TestCloseWithoutHolders: with nothing open on the disk, Close leaves no
// mount and the server ends.
func TestCloseWithoutHolders(t *testing.T) {
	d := mountSlow(t, time.Hour)
	if err := os.WriteFile(filepath.Join(d.Mountpoint(), "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	assertNotMounted(t, d)
	if _, err := os.Stat(filepath.Join(d.Mountpoint(), "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mount point still shows the slow disk's file after Close (stat: %v)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// TestCloseEndsASleepingSync: a sync sleeping an hour's delay ends when the
// disk is closed, so that a process holding files on it is not held up by a
// fault that has ended.
func TestCloseEndsASleepingSync(t *testing.T) {
	d := mountSlow(t, time.Hour)
	f, err := os.Create(filepath.Join(d.Mountpoint(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	done := make(chan error, 1)
	go func() { done <- f.Sync() }()
	deadline := time.Now().Add(10 * time.Second)
	for d.Stats().Syncs == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sync never reached the server")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("the sync returned (%v) while it should sleep an hour", err)
	default:
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the sync ended in %v, want success", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sync still sleeps 10 s after Close")
	}
	assertNotMounted(t, d)
}

// TestSweepClearsACrashedMount kills a server outright, leaving a dead mount
// (every access fails with ENOTCONN), and holds that Sweep clears it and
// that a live concurrent server's mount is left alone.
func TestSweepClearsACrashedMount(t *testing.T) {
	requireFUSE(t)
	mine := mountSlow(t, 0)

	backing, mnt := tmpfsDir(t), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+backing+":"+mnt)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the helper did not mount: %v", err)
	}
	source := strings.TrimSpace(strings.TrimPrefix(line, "mounted "))
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) }) // should the sweep fail

	// A live server of another process: the sweep leaves it.
	if err := Sweep(); err != nil {
		t.Fatal(err)
	}
	if !listed(t, source) {
		t.Fatalf("Sweep detached %s, whose server still runs", source)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(mnt, "x")); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("after the server was killed, stat under its mount gives %v, want ENOTCONN (a dead mount)", err)
	}
	if !listed(t, source) {
		t.Fatalf("the killed server's mount %s is not listed: nothing to sweep, the test proves nothing", source)
	}
	if err := Sweep(); err != nil {
		t.Fatal(err)
	}
	if listed(t, source) {
		t.Fatalf("Sweep left the dead mount %s", source)
	}
	if _, err := os.Stat(mnt); err != nil {
		t.Errorf("the mount point is not usable after the sweep: %v", err)
	}
	if !listed(t, mine.Source()) {
		t.Errorf("Sweep detached this process's open disk %s", mine.Source())
	}
}

func listed(t *testing.T, source string) bool {
	t.Helper()
	ms, err := Mounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Source == source {
			return true
		}
	}
	return false
}
