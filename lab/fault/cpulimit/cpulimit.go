//go:build linux

// Package cpulimit starves a set of processes of CPU with cgroup v1's cpu
// controller (CFS bandwidth control): a group of its own under
// /sys/fs/cgroup/cpu, processes moved into it whole (every thread), and a
// quota of a fraction of one core per period. It is how the fault campaign
// makes a voter's etcd and probe as slow as a busy desktop makes them
// (fault voter-cpu), and how it shows the starvation was real: the group's
// cpu.stat counts the periods in which it was throttled and for how long.
//
// This machine mounts cgroup v1 controllers each in its own hierarchy
// (hybrid cgroups; docs/testing.md), the cpu controller at
// /sys/fs/cgroup/cpu. A group is named PREFIX-PID-SEQ after the process that
// made it, so that Sweep can remove what a crashed run left, as lab/fault/netlab
// does for network namespaces, without touching a live run's groups.
//
// The kernel's bounds (Documentation/scheduler/sched-bwc.rst): a period of
// 1 ms to 1 s, a quota of at least 1 ms. A fraction of a core is therefore
// at least 1 ms / period: 1% needs a period of 100 ms or more, 0.5% one of
// 200 ms or more.
package cpulimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fleet-role/fleet-role/lab/kit/leftover"
)

// DefaultRoot is where the cpu controller's hierarchy is mounted here.
const DefaultRoot = "/sys/fs/cgroup/cpu"

// DefaultPrefix names the groups of this package.
const DefaultPrefix = "fleet-role-cpulimit"

// The kernel's bounds on CFS bandwidth (kernel/sched/core.c: min_cfs_quota_period,
// max_cfs_quota_period, min_cfs_quota).
const (
	MinPeriod = time.Millisecond
	MaxPeriod = time.Second
	MinQuota  = time.Millisecond
)

// ErrNotRoot is returned by New when the process is not root.
var ErrNotRoot = errors.New("cpulimit: making a cgroup needs root")

// Config says where to make a group.
type Config struct {
	// Root is the cpu controller's hierarchy; "" is DefaultRoot.
	Root string
	// Prefix names the group (PREFIX-PID-SEQ); "" is DefaultPrefix.
	Prefix string
}

// Group is one cpu cgroup made by this package.
type Group struct {
	// Path is the group's directory.
	Path string
	// Parent is the group its processes go back to: the directory it was
	// made in.
	Parent string

	name       string
	removeOnce sync.Once
	removeErr  error
}

// New makes an empty group with no quota, after sweeping the groups crashed
// runs left (Sweep). Call Remove whether or not the caller fails later.
func New(cfg Config) (*Group, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	root, prefix := defaults(cfg.Root, cfg.Prefix)
	if strings.ContainsAny(prefix, "/ \t\n") {
		return nil, fmt.Errorf("cpulimit: prefix %q: must not contain '/' or white space", prefix)
	}
	if _, err := os.Stat(filepath.Join(root, "cpu.cfs_quota_us")); err != nil {
		return nil, fmt.Errorf("cpulimit: %s is not a cgroup v1 cpu hierarchy with CFS bandwidth control: %w", root, err)
	}
	if err := Sweep(root, prefix); err != nil {
		return nil, err
	}
	name := leftover.Name(prefix) // in use until Remove
	g := &Group{Path: filepath.Join(root, name), Parent: root, name: name}
	if err := os.Mkdir(g.Path, 0o755); err != nil {
		leftover.Release(name)
		return nil, fmt.Errorf("cpulimit: make group %s: %w", g.Path, err)
	}
	return g, nil
}

// Add moves process pid into the group: every one of its threads, since a
// pid written to cgroup.procs moves the whole thread group. Children it
// forks later are born in the group.
func (g *Group) Add(pid int) error {
	if err := writeFile(filepath.Join(g.Path, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
		return fmt.Errorf("cpulimit: add pid %d to %s: %w", pid, g.Path, err)
	}
	return nil
}

// Procs lists the processes in the group.
func (g *Group) Procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(g.Path, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cpulimit: list processes of %s: %w", g.Path, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("cpulimit: %s/cgroup.procs: %q is no pid", g.Path, f)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// Quota returns the quota per period that gives the group fraction of one
// core, or an error naming the kernel's bound it breaks: a period from
// MinPeriod to MaxPeriod, a quota of at least MinQuota, and a fraction above
// zero (more than 1 is more than one core, which a group may have).
func Quota(fraction float64, period time.Duration) (time.Duration, error) {
	if period < MinPeriod || period > MaxPeriod {
		return 0, fmt.Errorf("cpulimit: period %v: the kernel takes %v to %v", period, MinPeriod, MaxPeriod)
	}
	if !(fraction > 0) || math.IsInf(fraction, 0) {
		return 0, fmt.Errorf("cpulimit: fraction %v of a core: must be above 0", fraction)
	}
	// Rounded to the microsecond, the unit of cpu.cfs_quota_us.
	quota := time.Duration(math.Round(fraction*float64(period)/float64(time.Microsecond))) * time.Microsecond
	if quota < MinQuota {
		least := time.Duration(math.Ceil(float64(MinQuota)/fraction/float64(time.Microsecond))) * time.Microsecond
		hint := fmt.Sprintf("take a period of at least %v", least)
		if least > MaxPeriod {
			hint = fmt.Sprintf("no period the kernel takes gives so small a share (the least is %.3g%% of a core, at %v)",
				100*float64(MinQuota)/float64(MaxPeriod), MaxPeriod)
		}
		return 0, fmt.Errorf("cpulimit: %.3g%% of a core over a period of %v is a quota of %v, under the kernel's least quota of %v: %s",
			fraction*100, period, quota, MinQuota, hint)
	}
	return quota, nil
}

// SetQuota limits the group to fraction of one core, enforced per period:
// in each period its processes together run for at most fraction x period
// and are then held off the CPU until the next. A longer period lets them
// run longer before holding them off longer (Quota says the bounds).
func (g *Group) SetQuota(fraction float64, period time.Duration) error {
	quota, err := Quota(fraction, period)
	if err != nil {
		return err
	}
	// No quota first: the kernel checks each write against the quota and
	// period in force, and a new period with the old quota may break them.
	if err := g.Unlimit(); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(g.Path, "cpu.cfs_period_us"), strconv.FormatInt(period.Microseconds(), 10)); err != nil {
		return fmt.Errorf("cpulimit: set period %v on %s: %w", period, g.Path, err)
	}
	if err := writeFile(filepath.Join(g.Path, "cpu.cfs_quota_us"), strconv.FormatInt(quota.Microseconds(), 10)); err != nil {
		return fmt.Errorf("cpulimit: set quota %v on %s: %w", quota, g.Path, err)
	}
	return nil
}

// Unlimit lifts the group's quota (-1: no limit).
func (g *Group) Unlimit() error {
	if err := writeFile(filepath.Join(g.Path, "cpu.cfs_quota_us"), "-1"); err != nil {
		return fmt.Errorf("cpulimit: lift the quota of %s: %w", g.Path, err)
	}
	return nil
}

// Limit is the quota and period in force; quota 0 means none.
func (g *Group) Limit() (quota, period time.Duration, err error) {
	q, err := readInt(filepath.Join(g.Path, "cpu.cfs_quota_us"))
	if err != nil {
		return 0, 0, fmt.Errorf("cpulimit: %w", err)
	}
	p, err := readInt(filepath.Join(g.Path, "cpu.cfs_period_us"))
	if err != nil {
		return 0, 0, fmt.Errorf("cpulimit: %w", err)
	}
	if q < 0 {
		q = 0
	}
	return time.Duration(q) * time.Microsecond, time.Duration(p) * time.Microsecond, nil
}

// Stat is the group's cpu.stat: how often and how long it was starved.
type Stat struct {
	// Periods is the enforcement periods that have elapsed while the group
	// had a quota and something to run (nr_periods).
	Periods uint64
	// Throttled is the periods in which the group used its quota up and
	// was held off the CPU (nr_throttled).
	Throttled uint64
	// ThrottledFor is the time its processes were held off in all
	// (throttled_time; the sum over CPUs, so it may exceed wall time).
	ThrottledFor time.Duration
}

// Stat reads the group's cpu.stat.
func (g *Group) Stat() (Stat, error) {
	b, err := os.ReadFile(filepath.Join(g.Path, "cpu.stat"))
	if err != nil {
		return Stat{}, fmt.Errorf("cpulimit: read stat of %s: %w", g.Path, err)
	}
	return parseStat(b)
}

func parseStat(b []byte) (Stat, error) {
	var s Stat
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("cpulimit: cpu.stat %s %q: %w", f[0], f[1], err)
		}
		switch f[0] {
		case "nr_periods":
			s.Periods = v
		case "nr_throttled":
			s.Throttled = v
		case "throttled_time":
			s.ThrottledFor = time.Duration(v) // nanoseconds
		default:
			continue
		}
		seen++
	}
	if seen != 3 {
		return Stat{}, fmt.Errorf("cpulimit: cpu.stat lacks nr_periods, nr_throttled or throttled_time: %q", b)
	}
	return s, nil
}

// Remove moves every process in the group back to its parent group and
// removes the group. A process that exits meanwhile needs no moving; one
// forked meanwhile is moved on the next pass. It is idempotent.
func (g *Group) Remove() error {
	g.removeOnce.Do(func() {
		g.removeErr = remove(g.Path, g.Parent)
		if g.removeErr == nil {
			leftover.Release(g.name)
		}
	})
	return g.removeErr
}

// removeTimeout bounds how long remove keeps moving processes out of a group
// whose processes keep forking.
const removeTimeout = 10 * time.Second

func remove(path, parent string) error {
	deadline := time.Now().Add(removeTimeout)
	for {
		b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cpulimit: list processes of %s: %w", path, err)
		}
		for _, pid := range strings.Fields(string(b)) {
			err := writeFile(filepath.Join(parent, "cgroup.procs"), pid)
			if err != nil && !errors.Is(err, syscall.ESRCH) { // ESRCH: it exited meanwhile
				return fmt.Errorf("cpulimit: move pid %s from %s back to %s: %w", pid, path, parent, err)
			}
		}
		err = os.Remove(path)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("cpulimit: remove group %s: %w", path, err)
		}
		// EBUSY: a process forked into the group after the listing.
	}
}

// Sweep removes the groups with this prefix under root that runs which
// ended without Remove left: those named after a process that no longer
// runs, or after this process but not open (leftover.Stale). Their
// processes, if any still run, go back to root first. A live concurrent
// run's group is never touched. New calls it.
func Sweep(root, prefix string) error {
	root, prefix = defaults(root, prefix)
	groups, err := Groups(root, prefix)
	if err != nil {
		return err
	}
	var errs []error
	for _, path := range groups {
		if leftover.Stale(filepath.Base(path), prefix) {
			if err := remove(path, root); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Groups lists the groups with this prefix under root, of every run; ""
// takes DefaultRoot and DefaultPrefix.
func Groups(root, prefix string) ([]string, error) {
	root, prefix = defaults(root, prefix)
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("cpulimit: read %s: %w", root, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && leftover.PID(e.Name(), prefix) != 0 {
			out = append(out, filepath.Join(root, e.Name()))
		}
	}
	return out, nil
}

func defaults(root, prefix string) (string, string) {
	if root == "" {
		root = DefaultRoot
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return root, prefix
}

// writeFile writes one value to a cgroup file. The kernel takes each write
// as one request and answers it with the write's error, so the file is
// opened without O_CREATE or O_TRUNC, which cgroupfs does not need.
func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(value)
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q: %w", path, b, err)
	}
	return v, nil
}
