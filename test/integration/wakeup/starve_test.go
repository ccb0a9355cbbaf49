//go:build linux

package wakeup

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/wakeup"
	"github.com/fleet-role/fleet-role/lab/fault/cpulimit"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

// The child process of TestStarvedProcessWakesLate: the test binary run
// again with childEnv set to "free" or "starved", in the group named by
// groupEnv.
const (
	childEnv = "WAKEUP_TEST_CHILD"
	groupEnv = "WAKEUP_TEST_GROUP"
)

// The figures of the test, at k3s's timing.
const (
	heartbeat = 500 * time.Millisecond // the timer's interval, and the limit
	// samplePeriod is how often the child reads its Meter, as the fault
	// campaign's probes sample.
	samplePeriod = 2 * time.Second
	samples      = 10
	// demand is the share of a core the child's work needs: about what
	// etcd needs at a small k3s control plane's load (lab/cmd/votercpu:
	// 3.2 to 3.7%). Work not done when owed is owed still, as requests
	// queue for etcd: starved of it, the child is behind and runnable
	// whenever its group may run.
	demand = 0.04
	// share and cfsPeriod are the starvation: 1.5% of a core, enforced
	// per second (lab/cmd/votercpu: every trial at 2% or less with a 1 s
	// period made a timer about 900 ms late).
	share     = 0.015
	cfsPeriod = time.Second
	// tailP is the campaign's tail percentile: with 10 samples its tail
	// is the 9th, and one sample is forgiven.
	tailP = 0.9
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		if err := child(mode, os.Getenv(groupEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childLine is what the child prints: one line when its Meter starts, then
// one per sample.
type childLine struct {
	// Started: the Meter started; for a starved child, the gap it took
	// for the start of a CFS period (the throttled time before it).
	Started bool  `json:"started,omitempty"`
	GapUs   int64 `json:"gap_us,omitempty"`
	LateUs  int64 `json:"late_us"`
	Wakes   int   `json:"wakes"`
}

// child works at demand and reads a Meter at k3s's heartbeat every
// samplePeriod, printing each reading, until it is killed. Starved, it
// first waits to be in its group and throttled, and places the Meter's
// schedule half a heartbeat into a CFS period: the CFS period is two
// heartbeats, so a schedule keeps its place in it, and one whose due times
// fell inside the slice the group runs in at each period's start would
// wake on time there and late by under a heartbeat at the other; half a
// heartbeat in, each due time is throttled and runs at the next period's
// start, 750 ms late. (etcd's own ticker is placed as chance has it; so is
// a probe's.)
func child(mode, group string) error {
	if err := pinThreads(); err != nil {
		return err
	}
	go work()
	var origin time.Time
	var gap time.Duration
	if mode == "starved" {
		if err := waitInGroup(group, 10*time.Second); err != nil {
			return err
		}
		// A few periods, so that the work owed is behind the quota.
		time.Sleep(3 * cfsPeriod)
		var err error
		origin, gap, err = periodStart(10 * time.Second)
		if err != nil {
			return err
		}
		origin = origin.Add(heartbeat / 2)
	}
	// The free child's origin is zero: New's schedule.
	m := wakeup.NewFrom(heartbeat, origin)
	m.Start(context.Background())
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(childLine{Started: true, GapUs: gap.Microseconds()}); err != nil {
		return err
	}
	for {
		time.Sleep(samplePeriod)
		r, _ := m.Take()
		if err := enc.Encode(childLine{LateUs: r.Late.Microseconds(), Wakes: r.Wakes}); err != nil {
			return err
		}
	}
}

// work burns CPU at demand, on a thread of its own: each millisecond of
// work is one of this thread's CPU time, so that the work done is what ran,
// however the thread was held off.
func work() {
	runtime.LockOSThread()
	start, done := time.Now(), time.Duration(0)
	for {
		if owed := time.Duration(demand * float64(time.Since(start))); done >= owed {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		c0 := threadCPU()
		for threadCPU()-c0 < time.Millisecond {
		}
		done += threadCPU() - c0
	}
}

// pinThreads binds every thread of this process to the CPU the first of
// them runs on; threads made later inherit it from the thread that makes
// them. A group's quota is handed to each CPU in slices
// (sched_cfs_bandwidth_slice_us), and a CPU keeps up to a millisecond of
// it when its threads sleep: a timer's thread waking on the other CPU than
// the throttled work's may run there on that remainder, on time, while the
// group is throttled, so that which ticks read late depends on where the
// kernel placed each thread (CI read every tick a quarter into the period
// on time, and the tail 250 ms where 750 ms is due). On one CPU the group's
// quota is one pool, and throttled means throttled for every thread.
// GOMAXPROCS is held at 2 by the parent (runChild), so that the Go
// runtime, which would follow the affinity down to one P, still runs the
// timer's goroutine beside the locked work thread, as etcd's ticker runs
// beside its work, and not after the work's 10 ms of preemption.
func pinThreads() error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return fmt.Errorf("affinity: %w", err)
	}
	cpu := -1
	for i := 0; i < set.Count()+1024 && cpu < 0; i++ {
		if set.IsSet(i) {
			cpu = i
		}
	}
	if cpu < 0 {
		return fmt.Errorf("affinity: no CPU in the set")
	}
	set.Zero()
	set.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("threads: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("pin thread %d to CPU %d: %w", tid, cpu, err)
		}
	}
	return nil
}

func threadCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitInGroup polls /proc/self/cgroup until this process is in the cpu
// group (its path under the cpu hierarchy).
func waitInGroup(group string, within time.Duration) error {
	want := strings.TrimPrefix(group, cpulimit.DefaultRoot)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile("/proc/self/cgroup")
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.SplitN(line, ":", 3); len(f) == 3 && f[1] == "cpu" && f[2] == want {
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("not in cpu group %s after %v", want, within)
}

// periodStart waits for the start of a CFS period: the first time a sleep
// of a millisecond returns more than half a heartbeat after the last, the
// group having been throttled meanwhile.
func periodStart(within time.Duration) (time.Time, time.Duration, error) {
	last := time.Now()
	deadline := last.Add(within)
	for last.Before(deadline) {
		time.Sleep(time.Millisecond)
		now := time.Now()
		if gap := now.Sub(last); gap > heartbeat/2 {
			return now, gap, nil
		}
		last = now
	}
	return time.Time{}, 0, fmt.Errorf("no gap over %v in %v: not throttled", heartbeat/2, within)
}

// runChild runs the child in g and returns its first n samples after its
// Meter started (the first, which may cover less than a sample period, is
// left out), and the gap it started at.
func runChild(t *testing.T, g *cpulimit.Group, mode string, n int) ([]time.Duration, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n+2)*samplePeriod+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	// GOMAXPROCS set, the runtime keeps two Ps whatever the child's
	// affinity (pinThreads) and its group's quota say.
	cmd.Env = append(os.Environ(), childEnv+"="+mode, groupEnv+"="+g.Path, "GOMAXPROCS=2")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var lates []time.Duration
	var gap time.Duration
	started, skipped := false, false
	for len(lates) < n && sc.Scan() {
		var l childLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s child: %q: %v", mode, sc.Text(), err)
		}
		switch {
		case l.Started:
			started, gap = true, time.Duration(l.GapUs)*time.Microsecond
		case !started:
		case !skipped:
			skipped = true
		case l.Wakes == 0:
			t.Fatalf("%s child: a sample of %v with no wake-up of a %v timer", mode, samplePeriod, heartbeat)
		default:
			lates = append(lates, time.Duration(l.LateUs)*time.Microsecond)
		}
	}
	if len(lates) < n {
		t.Fatalf("%s child: %d samples of %d (%v), then: %v", mode, len(lates), n, lates, sc.Err())
	}
	return lates, gap
}

// TestStarvedProcessWakesLate runs a process (this test binary again) that
// works at about what etcd needs and keeps a Meter at k3s's heartbeat, in a
// cgroup: first with no quota, then at 1.5% of a core with a 1 s CFS period.
// Its samples' tail, as the campaign's window judges it (p90 of 10), is
// under the heartbeat, the wakeup_late limit, unstarved; starved, it is
// over it, and near what the quota predicts: a tick due half a heartbeat
// into a CFS period is throttled (the group runs its quota's slice at the
// period's start) and runs at the next period's start, 1 s - 250 ms =
// 750 ms late. The tolerance is the noise measured unstarved: the largest
// unstarved reading, which both the starved wake-up and the child's finding
// of the period's start may carry, twice, and the quota's slice, anywhere
// in which the wake-up may run. Some starved samples may read nearly on
// time: the kernel hands a group's quota to each CPU in slices
// (sched_cfs_bandwidth_slice_us, 5 ms here), and a thread on another CPU
// than the work's may run on what is left there while the rest of the
// group is throttled. The tail is judged, as the signal is.
func TestStarvedProcessWakesLate(t *testing.T) {
	testenv.RequireRoot(t)
	g, err := cpulimit.New(cpulimit.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Remove(); err != nil {
			t.Errorf("remove: %v", err)
		}
	})
	free, _ := runChild(t, g, "free", samples)

	if err := g.SetQuota(share, cfsPeriod); err != nil {
		t.Fatal(err)
	}
	stat0, err := g.Stat()
	if err != nil {
		t.Fatal(err)
	}
	starved, gap := runChild(t, g, "starved", samples)
	stat1, err := g.Stat()
	if err != nil {
		t.Fatal(err)
	}

	tail := func(v []time.Duration) time.Duration {
		f := make([]float64, len(v))
		for i, d := range v {
			f[i] = float64(d)
		}
		q, _ := quantile.High(f, tailP)
		return time.Duration(q)
	}
	quota, _ := cpulimit.Quota(share, cfsPeriod)
	noise := slices.Max(free)
	expected := cfsPeriod - heartbeat/2
	tol := 2*noise + quota
	freeTail, starvedTail := tail(free), tail(starved)
	figures := fmt.Sprintf("unstarved: samples %v, p%g %v; starved at %.1f%% of a core (%v per %v): samples %v, p%g %v, expected %v +- %v "+
		"(tolerance: twice the largest unstarved reading %v, and the quota's slice %v); the child found the period's start after a gap of %v; "+
		"the group was throttled in %d of %d periods for %v",
		ms(free), 100*tailP, freeTail, 100*share, quota, cfsPeriod, ms(starved), 100*tailP, starvedTail, expected, tol,
		noise, quota, gap.Round(time.Millisecond), stat1.Throttled-stat0.Throttled, stat1.Periods-stat0.Periods,
		(stat1.ThrottledFor - stat0.ThrottledFor).Round(time.Millisecond))
	t.Log(figures)
	if noise >= heartbeat/2 {
		t.Fatalf("the machine's noise alone is half a heartbeat or more: a starved reading cannot be told from it; run the test alone: %s", figures)
	}
	if freeTail >= heartbeat {
		t.Errorf("unstarved, the tail is not under the heartbeat %v: %s", heartbeat, figures)
	}
	if starvedTail <= heartbeat {
		t.Errorf("starved, the tail is not past the heartbeat %v: %s", heartbeat, figures)
	}
	if starvedTail < expected-tol || starvedTail > expected+tol {
		t.Errorf("starved, the tail %v is not %v +- %v: %s", starvedTail, expected, tol, figures)
	}
}

func ms(v []time.Duration) string {
	s := make([]string, len(v))
	for i, d := range v {
		s[i] = d.Round(time.Millisecond).String()
	}
	return "[" + strings.Join(s, " ") + "]"
}
