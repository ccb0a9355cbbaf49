//go:build linux

package cpulimit

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

// helperEnv makes the test binary a process of several threads that waits
// to be killed (Go's runtime starts a few), for TestAddMovesEveryThread.
const helperEnv = "CPULIMIT_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		// Asleep, not blocked for good: a bare select{} would end the
		// process with Go's deadlock error.
		for {
			time.Sleep(time.Hour)
		}
	}
	os.Exit(m.Run())
}

// newGroup makes a group for a test and holds, when it ends, that Remove
// leaves nothing.
func newGroup(t *testing.T) *Group {
	t.Helper()
	testenv.RequireRoot(t)
	g, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Remove(); err != nil {
			t.Errorf("remove: %v", err)
		}
		if _, err := os.Stat(g.Path); !os.IsNotExist(err) {
			t.Errorf("group %s still there after Remove (stat: %v)", g.Path, err)
		}
	})
	return g
}

// start starts a process the test kills when it ends.
func start(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// cpuGroupOf is the cpu cgroup /proc/PID[/task/TID]/cgroup names.
func cpuGroupOf(t *testing.T, procPath string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(procPath, "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && f[1] == "cpu" {
			return f[2]
		}
	}
	t.Fatalf("%s/cgroup names no cpu group: %q", procPath, b)
	return ""
}

func TestAddMovesEveryThreadAndRemoveMovesThemBack(t *testing.T) {
	g := newGroup(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	p := start(t, cmd)
	pid := p.Process.Pid
	// Go's runtime starts its threads as it starts; wait for a few.
	tasks := func() []string {
		es, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Name())
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(tasks()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the helper has %d threads after 10 s, want several", len(tasks()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := cpuGroupOf(t, fmt.Sprintf("/proc/%d", pid))
	if err := g.Add(pid); err != nil {
		t.Fatal(err)
	}
	want := "/" + filepath.Base(g.Path)
	for _, tid := range tasks() {
		if got := cpuGroupOf(t, fmt.Sprintf("/proc/%d/task/%s", pid, tid)); got != want {
			t.Errorf("thread %s of pid %d is in cpu group %s, want %s", tid, pid, got, want)
		}
	}
	procs, err := g.Procs()
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) != 1 || procs[0] != pid {
		t.Errorf("group lists processes %v, want [%d]", procs, pid)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, tid := range tasks() {
		if got := cpuGroupOf(t, fmt.Sprintf("/proc/%d/task/%s", pid, tid)); got != before {
			t.Errorf("after Remove thread %s of pid %d is in cpu group %s, want %s where it was", tid, pid, got, before)
		}
	}
	if err := g.Remove(); err != nil {
		t.Errorf("a second Remove: %v", err)
	}
}

// TestRemoveAfterTheProcessExited: a process that exited in the group, reaped
// or not yet, leaves nothing that stops Remove.
func TestRemoveAfterTheProcessExited(t *testing.T) {
	for _, reaped := range []bool{true, false} {
		t.Run(fmt.Sprintf("reaped=%v", reaped), func(t *testing.T) {
			g := newGroup(t)
			p := start(t, exec.Command("sleep", "3600"))
			if err := g.Add(p.Process.Pid); err != nil {
				t.Fatal(err)
			}
			p.Process.Kill()
			if reaped {
				p.Wait()
			} else {
				// A zombie: killed, not yet waited for. Poll until the
				// kernel says it has exited.
				deadline := time.Now().Add(10 * time.Second)
				for state(t, p.Process.Pid) != "Z" {
					if time.Now().After(deadline) {
						t.Fatalf("pid %d not a zombie 10 s after SIGKILL", p.Process.Pid)
					}
					time.Sleep(time.Millisecond)
				}
			}
			if err := g.Remove(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func state(t *testing.T, pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0]
}

// TestSweep: a group named after a process that has exited is removed, its
// still running process moved back first; one named after a live process,
// and this process's open group, are left.
func TestSweep(t *testing.T) {
	mine := newGroup(t)
	const prefix = "fleet-role-cpulimit-sweeptest"
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadDir := filepath.Join(DefaultRoot, fmt.Sprintf("%s-%d-1", prefix, dead.Process.Pid))
	liveDir := filepath.Join(DefaultRoot, fmt.Sprintf("%s-%d-1", prefix, 1)) // pid 1 always runs
	for _, d := range []string{deadDir, liveDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { remove(d, DefaultRoot) })
	}
	p := start(t, exec.Command("sleep", "3600"))
	if err := writeFile(filepath.Join(deadDir, "cgroup.procs"), strconv.Itoa(p.Process.Pid)); err != nil {
		t.Fatal(err)
	}
	if err := Sweep(DefaultRoot, prefix); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(deadDir); !os.IsNotExist(err) {
		t.Errorf("the dead run's group %s is still there (stat: %v)", deadDir, err)
	}
	if got := cpuGroupOf(t, fmt.Sprintf("/proc/%d", p.Process.Pid)); got != "/" {
		t.Errorf("the dead run's process is in cpu group %s after the sweep, want /", got)
	}
	if _, err := os.Stat(liveDir); err != nil {
		t.Errorf("the live run's group %s was swept: %v", liveDir, err)
	}
	// The default prefix's sweep, which New runs, leaves this process's
	// open group.
	if err := Sweep("", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mine.Path); err != nil {
		t.Errorf("this process's open group %s was swept: %v", mine.Path, err)
	}
	gs, err := Groups("", "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range gs {
		found = found || g == mine.Path
	}
	if !found {
		t.Errorf("Groups lists %v, without %s", gs, mine.Path)
	}
}

// TestQuotaBounds holds Quota to the kernel's bounds, each at, just under
// and just over, and SetQuota to what the kernel then holds.
func TestQuotaBounds(t *testing.T) {
	for _, c := range []struct {
		fraction float64
		period   time.Duration
		quota    time.Duration // 0: refused
		want     string
	}{
		{0.05, 100 * time.Millisecond, 5 * time.Millisecond, ""},
		{0.01, 100 * time.Millisecond, time.Millisecond, ""},                                            // the least quota
		{0.00999, 100 * time.Millisecond, 0, "a quota of 999µs, under the kernel's least quota of 1ms"}, // just under it
		{0.01001, 100 * time.Millisecond, 1001 * time.Microsecond, ""},                                  // just over it
		{0.0099, 100 * time.Millisecond, 0, "take a period of at least 101.011ms"},                      // the hint
		{0.005, 100 * time.Millisecond, 0, "take a period of at least 200ms"},                           // 0.5% at 100 ms
		{0.005, 200 * time.Millisecond, time.Millisecond, ""},                                           // 0.5% at 200 ms
		{1, MinPeriod, MinPeriod, ""},                                                                   // the shortest period
		{1, MinPeriod - time.Microsecond, 0, "the kernel takes 1ms to 1s"},                              // just under it
		{1, MinPeriod + time.Microsecond, MinPeriod + time.Microsecond, ""},                             // just over it
		{0.5, MaxPeriod, 500 * time.Millisecond, ""},                                                    // the longest period
		{0.5, MaxPeriod + time.Microsecond, 0, "the kernel takes 1ms to 1s"},                            // just over it
		{0.5, MaxPeriod - 2*time.Microsecond, 499999 * time.Microsecond, ""},                            // just under it
		{2, 100 * time.Millisecond, 200 * time.Millisecond, ""},                                         // two cores
		{0, 100 * time.Millisecond, 0, "must be above 0"},                                               // none
		{math.NaN(), 100 * time.Millisecond, 0, "must be above 0"},                                      // not a number
		{math.Inf(1), 100 * time.Millisecond, 0, "must be above 0"},                                     // infinite
		{-0.1, 100 * time.Millisecond, 0, "must be above 0"},                                            // negative
		{0.001, time.Second, time.Millisecond, ""},                                                      // the least share at all
		{0.000999, time.Second, 0, "no period the kernel takes gives so small a share (the least is 0.1% of a core, at 1s)"},
		{0.012345, 100 * time.Millisecond, 1235 * time.Microsecond, ""}, // rounded to the µs
		{0.02, 500 * time.Millisecond, 10 * time.Millisecond, ""},       // a long period
	} {
		q, err := Quota(c.fraction, c.period)
		switch {
		case c.quota == 0 && err == nil:
			t.Errorf("Quota(%v, %v) = %v, want an error containing %q", c.fraction, c.period, q, c.want)
		case c.quota == 0 && !strings.Contains(err.Error(), c.want):
			t.Errorf("Quota(%v, %v): %v, want it to contain %q", c.fraction, c.period, err, c.want)
		case c.quota != 0 && err != nil:
			t.Errorf("Quota(%v, %v): %v, want %v", c.fraction, c.period, err, c.quota)
		case c.quota != 0 && q != c.quota:
			t.Errorf("Quota(%v, %v) = %v, want %v", c.fraction, c.period, q, c.quota)
		}
	}

	g := newGroup(t)
	for _, c := range []struct {
		fraction float64
		period   time.Duration
	}{{0.01, 100 * time.Millisecond}, {1, MinPeriod}, {0.001, MaxPeriod}, {0.05, 100 * time.Millisecond}} {
		if err := g.SetQuota(c.fraction, c.period); err != nil {
			t.Fatalf("SetQuota(%v, %v): %v", c.fraction, c.period, err)
		}
		want, _ := Quota(c.fraction, c.period)
		q, p, err := g.Limit()
		if err != nil {
			t.Fatal(err)
		}
		if q != want || p != c.period {
			t.Errorf("after SetQuota(%v, %v) the kernel holds quota %v period %v, want %v and %v", c.fraction, c.period, q, p, want, c.period)
		}
	}
	if err := g.Unlimit(); err != nil {
		t.Fatal(err)
	}
	if q, _, err := g.Limit(); err != nil || q != 0 {
		t.Errorf("after Unlimit: quota %v (%v), want none", q, err)
	}
}

func TestParseStat(t *testing.T) {
	// cpu.stat of a v1 group on this machine's kernel (6.18).
	s, err := parseStat([]byte("nr_periods 120\nnr_throttled 118\nthrottled_time 11234567890\nnr_bursts 0\nburst_time 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stat{Periods: 120, Throttled: 118, ThrottledFor: 11234567890}); s != want {
		t.Errorf("parsed %+v, want %+v", s, want)
	}
	for _, bad := range []string{"", "nr_periods 1\nnr_throttled 1\n", "nr_periods x\nnr_throttled 1\nthrottled_time 1\n"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) succeeded", bad)
		}
	}
}

// schedstat is a thread's time on a CPU and time waiting runnable, from
// /proc/PID/schedstat (nanoseconds).
func schedstat(t *testing.T, pid int) (run, wait time.Duration) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		t.Fatalf("/proc/%d/schedstat: %q", pid, b)
	}
	r, err1 := strconv.ParseInt(f[0], 10, 64)
	w, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/schedstat: %q", pid, b)
	}
	return time.Duration(r), time.Duration(w)
}

// TestQuotaStarvesABusyLoop puts a busy loop (one thread, so its schedstat
// is the whole process's) in a group at 5% of a core and measures what it
// gets over ten windows of a second. The kernel enforces the quota per
// period, so over the whole span the loop may run at most one period's
// quota more or less than 5% of it (where the span's ends fall in a
// period); beyond that, the tolerance is three standard errors of the
// windows' readings, the noise measured here. A loop starved further by the
// machine's other load shows it as waiting time not spent throttled, which
// the failure message gives.
func TestQuotaStarvesABusyLoop(t *testing.T) {
	const (
		fraction = 0.05
		period   = 100 * time.Millisecond
		windows  = 10
		window   = time.Second
	)
	g := newGroup(t)
	loop := start(t, exec.Command("sh", "-c", "while :; do :; done"))
	pid := loop.Process.Pid
	if err := g.Add(pid); err != nil {
		t.Fatal(err)
	}
	if err := g.SetQuota(fraction, period); err != nil {
		t.Fatal(err)
	}
	// Let the first throttled periods pass, so the loop's earlier run
	// without a quota is not in the windows.
	time.Sleep(2 * period)

	stat0, err := g.Stat()
	if err != nil {
		t.Fatal(err)
	}
	run0, wait0 := schedstat(t, pid)
	t0 := time.Now()
	var shares []float64
	prevRun, prevT := run0, t0
	for range windows {
		time.Sleep(window)
		r, _ := schedstat(t, pid)
		now := time.Now()
		shares = append(shares, float64(r-prevRun)/float64(now.Sub(prevT)))
		prevRun, prevT = r, now
	}
	run1, wait1 := schedstat(t, pid)
	elapsed := time.Since(t0)
	stat1, err := g.Stat()
	if err != nil {
		t.Fatal(err)
	}

	share := float64(run1-run0) / float64(elapsed)
	var mean, ss float64
	for _, s := range shares {
		mean += s
	}
	mean /= float64(len(shares))
	for _, s := range shares {
		ss += (s - mean) * (s - mean)
	}
	stderr := math.Sqrt(ss/float64(len(shares)-1)) / math.Sqrt(float64(len(shares)))
	quota, _ := Quota(fraction, period)
	phase := float64(quota) / float64(elapsed)
	tol := phase + 3*stderr
	throttled := stat1.ThrottledFor - stat0.ThrottledFor
	periods := stat1.Periods - stat0.Periods
	nThrottled := stat1.Throttled - stat0.Throttled
	// Waiting runnable while not throttled is the machine's other load.
	contention := max((wait1-wait0)-throttled, 0)
	figures := fmt.Sprintf("the loop ran %.2f%% of a core over %v (windows: %s); quota %.1f%% (%v per %v); tolerance %.2f%% (one period's quota over the span %.2f%%, 3 standard errors of the windows %.2f%%); throttled in %d of %d periods for %v; waited runnable %v, of it not throttled %v",
		share*100, elapsed.Round(time.Millisecond), percents(shares), fraction*100, quota, period, tol*100, phase*100, 3*stderr*100,
		nThrottled, periods, throttled.Round(time.Millisecond), (wait1 - wait0).Round(time.Millisecond), contention.Round(time.Millisecond))
	t.Log(figures)
	if math.Abs(share-fraction) > tol {
		t.Errorf("the loop's share is not its quota: %s", figures)
	}
	// A busy loop uses its quota up in every period, so nearly every
	// period is throttled; the others are where it waited for the CPU.
	if periods == 0 || float64(nThrottled) < 0.9*float64(periods) {
		t.Errorf("throttled in %d of %d periods, want nearly all for a busy loop: %s", nThrottled, periods, figures)
	}
}

func percents(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.2f", x*100)
	}
	return strings.Join(s, " ")
}
