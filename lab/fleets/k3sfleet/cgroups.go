package k3sfleet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleet-role/fleet-role/lab/kit/hostfs"
	"github.com/fleet-role/fleet-role/lab/kit/leftover"
)

// A host's cgroup, in every hierarchy this machine mounts (cgroup v1 with
// each controller mounted alone, and the v2 hierarchy beside them):
//
//	/BASE/HOST/system  the host's own processes: the holder of its
//	                   namespaces, containerd (and so its shims), k3s
//	/BASE/HOST/pods    the kubelet's --cgroup-root: it makes kubepods
//	                   under it, and runc puts each container there
//
// BASE is named after the test process (lab/kit/leftover: cgroupPrefix-PID-SEQ),
// so that a later run can sweep what a killed run left (sweepCgroups). Every host has a root of its own
// because a kubelet treats every pod cgroup under its root that it did not
// make as an orphan to remove: four kubelets under one /kubepods would
// remove each other's pods. And a host that is all one subtree can be
// paused as one (the freezer) and emptied as one at the end.
type hostCgroup struct {
	rel    string   // BASE/HOST
	mounts []string // the hierarchies' mount points
}

func newHostCgroup(base, host string) (*hostCgroup, error) {
	c := &hostCgroup{rel: filepath.Join(base, host), mounts: hostfs.CgroupMounts()}
	if len(c.mounts) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	for _, m := range c.mounts {
		for _, d := range []string{base, c.rel, c.system(), c.pods()} {
			p := filepath.Join(m, d)
			if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return nil, fmt.Errorf("make cgroup %s: %w", p, err)
			}
			// A new cpuset cgroup has no CPUs and no memory nodes, and
			// takes no process until it has both: give it its parent's.
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(filepath.Dir(p), f))
				if err != nil {
					continue // not the cpuset hierarchy
				}
				if cur, _ := os.ReadFile(filepath.Join(p, f)); strings.TrimSpace(string(cur)) != "" {
					continue
				}
				if err := os.WriteFile(filepath.Join(p, f), b, 0o644); err != nil {
					return nil, fmt.Errorf("set %s of %s: %w", f, p, err)
				}
			}
		}
	}
	return c, nil
}

func (c *hostCgroup) system() string { return filepath.Join(c.rel, "system") }

// Pods is the kubelet's --cgroup-root.
func (c *hostCgroup) Pods() string { return "/" + c.pods() }

func (c *hostCgroup) pods() string { return filepath.Join(c.rel, "pods") }

// procsFiles are the cgroup.procs files of the host's system cgroup in
// every hierarchy: a process written to each is the host's.
func (c *hostCgroup) procsFiles() []string {
	var out []string
	for _, m := range c.mounts {
		out = append(out, filepath.Join(m, c.system(), "cgroup.procs"))
	}
	return out
}

// pids lists every process in the host's cgroups, in any hierarchy.
func (c *hostCgroup) pids() []int {
	seen := map[int]bool{}
	for _, m := range c.mounts {
		_ = filepath.WalkDir(filepath.Join(m, c.rel), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	var out []int
	for pid := range seen {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// freezer is the v1 freezer hierarchy's copy of the host's cgroup.
func (c *hostCgroup) freezer() (string, error) {
	for _, m := range c.mounts {
		p := filepath.Join(m, c.rel, "freezer.state")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no freezer hierarchy is mounted")
}

// setFrozen freezes or thaws every process of the host at once, containers
// included, and returns once the kernel reports the state reached.
func (c *hostCgroup) setFrozen(frozen bool) error {
	p, err := c.freezer()
	if err != nil {
		return err
	}
	want := "THAWED"
	if frozen {
		want = "FROZEN"
	}
	if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
		return fmt.Errorf("write %s to %s: %w", want, p, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		got := strings.TrimSpace(string(b))
		if got == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s reads %s 30 s after writing %s", p, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killAll thaws the host and kills every process left in its cgroups
// (shims and containers outlive containerd and k3s), until none is left.
func (c *hostCgroup) killAll(logf func(string, ...any)) error {
	if err := c.setFrozen(false); err != nil {
		logf("thaw %s before killing its processes: %v", c.rel, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := c.pids()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in %s 30 s after SIGKILL", pids, c.rel)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		waitGone(pids, 5*time.Second)
	}
}

// remove removes the host's cgroups in every hierarchy, deepest first.
func (c *hostCgroup) remove() []error {
	var errs []error
	for _, m := range c.mounts {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(m, c.rel), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		for _, d := range dirs {
			if err := rmdirRetry(d, 10*time.Second); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// removeBase removes the fleet's own top cgroup in every hierarchy, once
// every host's is gone.
func removeBase(base string) []error {
	var errs []error
	for _, m := range hostfs.CgroupMounts() {
		if err := rmdirRetry(filepath.Join(m, base), 10*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// cgroupPrefix starts the name of every fleet's top cgroup.
const cgroupPrefix = "fleet-role-k3s"

// sweepCgroups removes the top cgroups that fleets of runs which ended
// without their cleanup left (a test binary killed outright: k3s and
// containerd die with it, but the shims and the pods' containers are
// reparented and live on in the cgroups): those whose name's process no
// longer runs (leftover.Stale). Their processes are killed first; a live
// concurrent run's cgroup is never touched.
func sweepCgroups(logf func(string, ...any)) []error {
	mounts := hostfs.CgroupMounts()
	stale := map[string]bool{}
	for _, m := range mounts {
		ents, _ := os.ReadDir(m)
		for _, e := range ents {
			if e.IsDir() && leftover.Stale(e.Name(), cgroupPrefix) {
				stale[e.Name()] = true
			}
		}
	}
	var errs []error
	for name := range stale {
		// Every hierarchy at once: a frozen process dies only once thawed.
		c := &hostCgroup{rel: name, mounts: mounts}
		if pids := c.pids(); len(pids) > 0 {
			logf("killing %d processes a killed run left in the cgroups %s", len(pids), name)
		}
		if err := c.killAll(logf); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, c.remove()...)
	}
	return errs
}
