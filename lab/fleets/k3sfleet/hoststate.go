package k3sfleet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fleet-role/fleet-role/lab/fleets/cluster"
	"github.com/fleet-role/fleet-role/lab/kit/hostfs"
)

// globalSysctls are the machine-wide kernel settings a k3s host could
// change from inside its namespaces: the kubelet's own (lab/fleets/cluster's
// KubeletSysctls, set on start unless protectKernelDefaults is on, which
// would refuse to start on a machine whose values differ), conntrack's
// table size (k3s's syssetup and kube-proxy set it from
// conntrack-max-per-core, which the fleet sets to 0; a non-initial network
// namespace may not write it anyway), and the inotify limits tools raise.
// The network settings k3s writes otherwise (forwarding,
// bridge-nf-call-iptables, route_localnet) are each network namespace's
// own and go with the host's namespace. The fleet reads these before the
// first host starts and writes back any that changed.
var globalSysctls = append(slices.Clone(cluster.KubeletSysctls),
	"net/netfilter/nf_conntrack_max",
	"fs/inotify/max_user_instances",
	"fs/inotify/max_user_watches",
)

// hostDirs are where k3s, its kubelet and containerd write on a host. Each
// host mounts a memory filesystem of its own on every one, in its own
// mount namespace, so nothing they write reaches this machine's disk and
// no two hosts share one; the mount points themselves are made here when
// absent and removed at the end.
var hostDirs = []string{
	"/etc/rancher",            // k3s's configuration, its drop-ins, the node password
	"/var/lib/rancher",        // k3s's data: etcd, certificates, the manifests directory
	"/run/k3s",                // k3s's sockets
	"/var/lib/kubelet",        // the kubelet's root: pods' volumes, the probe's token
	"/run/containerd",         // containerd's state; its shims' sockets are always under /run/containerd/s
	"/var/lib/cni",            // CNI's results cache
	"/var/log/pods",           // containers' logs
	"/var/log/containers",     // the kubelet's links to them
	"/usr/libexec/kubernetes", // the kubelet's volume plugin directory
	"/etc/kubernetes",         // the kubelet's manifests directory when no other is set
	"/var/lib/containerd",     // containerd's root when none is set (ctr, plugins)
	"/opt/cni",                // the CNI plugins' default directory
	"/etc/cni",                // the CNI configuration's default directory
	LabDir,                    // the lab's own files on the host: the k3s restart requests (supervisor.go)
	"/var/lib/fleet-role",     // fleet-role's own hostPaths: the probe's fsync directory, the actuator's state
}

// iptablesTables are the tables whose chains are compared before and after.
var iptablesTables = []string{"filter", "nat", "mangle", "raw"}

// hostState is what the machine held before the fleet started.
type hostState struct {
	sysctls map[string]string
	made    []string            // hostDirs made here as mount points
	chains  map[string][]string // "iptables nat" -> chains of this machine's own namespace
}

// snapshotHost reads what the fleet must leave as it found it, and refuses
// to start over traces of another kubelet (a kubepods cgroup of the root):
// those would be a concurrent run's, or one killed before its cleanup.
func snapshotHost() (*hostState, error) {
	h := &hostState{sysctls: map[string]string{}, chains: map[string][]string{}}
	for _, s := range globalSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if errors.Is(err, os.ErrNotExist) {
			continue // not in this kernel
		}
		if err != nil {
			return nil, fmt.Errorf("read sysctl %s: %w", s, err)
		}
		h.sysctls[s] = strings.TrimSpace(string(b))
	}
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, table := range iptablesTables {
			chains, _, err := hostfs.ListChains(bin, table)
			if err != nil {
				return nil, err
			}
			h.chains[bin+" "+table] = chains
		}
	}
	for _, m := range hostfs.CgroupMounts() {
		for _, name := range []string{"kubepods", "kubepods.slice", "k3s"} {
			if _, err := os.Stat(filepath.Join(m, name)); err == nil {
				return nil, fmt.Errorf("cgroup %s exists: another kubelet or k3s runs on this machine, or an earlier run was killed", filepath.Join(m, name))
			}
		}
	}
	return h, nil
}

// makeMountPoints makes the hostDirs that are absent, remembering which.
func (h *hostState) makeMountPoints() error {
	for _, d := range hostDirs {
		if _, err := os.Lstat(d); err == nil {
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("mount point %s: %w", d, err)
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("make mount point %s: %w", d, err)
		}
		h.made = append(h.made, d)
	}
	return nil
}

// restore writes changed sysctls back and removes the mount points made,
// which must be empty (every host mounted its own filesystem over them).
func (h *hostState) restore(logf func(string, ...any)) []error {
	var errs []error
	for s, was := range h.sysctls {
		path := filepath.Join("/proc/sys", s)
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("read sysctl %s: %w", s, err))
			continue
		}
		if now := strings.TrimSpace(string(b)); now != was {
			if err := os.WriteFile(path, []byte(was), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restore sysctl %s to %s: %w", s, was, err))
				continue
			}
			logf("restored sysctl %s from %s to %s", strings.ReplaceAll(s, "/", "."), now, was)
		}
	}
	for i := len(h.made) - 1; i >= 0; i-- {
		d := h.made[i]
		if m := hostfs.MountsUnder(d); len(m) > 0 {
			errs = append(errs, fmt.Errorf("%s still holds mounts in this machine's namespace: %s", d, strings.Join(m, ", ")))
			continue
		}
		// Remove, not RemoveAll: anything in it was written past the
		// host's own filesystem, which is a leftover to report.
		if err := os.Remove(d); err != nil {
			ents, _ := os.ReadDir(d)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			errs = append(errs, fmt.Errorf("remove mount point %s (holding %v): %w", d, names, err))
		}
	}
	return errs
}

// leftovers compares the machine with the snapshot: sysctls, iptables
// chains of this machine's own network namespace, mount points, and the
// cgroups a kubelet or k3s makes at the top of a hierarchy.
func (h *hostState) leftovers() []error {
	var errs []error
	for s, was := range h.sysctls {
		b, _ := os.ReadFile(filepath.Join("/proc/sys", s))
		if got := strings.TrimSpace(string(b)); got != was {
			errs = append(errs, fmt.Errorf("sysctl %s is %s, was %s", s, got, was))
		}
	}
	for key, was := range h.chains {
		bin, table, _ := strings.Cut(key, " ")
		now, _, err := hostfs.ListChains(bin, table)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range now {
			if !slices.Contains(was, c) {
				errs = append(errs, fmt.Errorf("%s chain %s appeared in table %s of this machine's namespace", bin, c, table))
			}
		}
	}
	for _, d := range h.made {
		if _, err := os.Lstat(d); err == nil {
			errs = append(errs, fmt.Errorf("%s left", d))
		}
	}
	for _, m := range hostfs.CgroupMounts() {
		for _, name := range []string{"kubepods", "kubepods.slice", "k3s"} {
			if _, err := os.Stat(filepath.Join(m, name)); err == nil {
				errs = append(errs, fmt.Errorf("cgroup %s left", filepath.Join(m, name)))
			}
		}
	}
	return errs
}

// waitGone waits up to d for every pid to have exited.
func waitGone(pids []int, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		var left []int
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); err == nil {
				left = append(left, pid)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rmdirRetry removes a cgroup, waiting up to d for killed processes to
// leave it (a cgroup with members is busy).
func rmdirRetry(dir string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
