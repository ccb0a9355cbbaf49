package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/fleet-role/fleet-role/lab/kit/hostfs"
	"golang.org/x/sys/unix"
)

// KubeletSysctls are the kernel settings the kubelet sets on start
// (k8s.io/kubernetes pkg/kubelet/cm/container_manager_linux.go,
// setupKernelTunables, k3s's v1.34.2+k3s1) unless protectKernelDefaults is on, in which
// case it refuses to start on a machine whose values differ. The cluster
// reads them before the kubelet starts and writes them back after it stops.
var KubeletSysctls = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// hostDirs are the well-known places a kubelet, containerd or a k3s
// DaemonSet write on a host. Those absent before the cluster starts are
// removed after it stops (the probe's hostPath creates /var/lib/rancher;
// containerd's shims put their sockets under /run/containerd/s whatever its
// configured state directory). /run/netns is not among them: other tests
// make network namespaces there, and containerd is told to keep its own
// under its state directory.
var hostDirs = []string{
	"/var/lib/kubelet", "/var/log/pods", "/var/log/containers",
	"/var/lib/containerd", "/run/containerd", "/opt/containerd",
	"/etc/cni", "/opt/cni", "/var/lib/cni",
	"/var/lib/rancher", "/usr/libexec/kubernetes", "/etc/kubernetes",
}

// ownedChain says which iptables chains the cluster's kubelet and CNI make,
// and the cluster's own service routing: all removed at the end.
func ownedChain(name string) bool {
	return strings.HasPrefix(name, "KUBE-") || strings.HasPrefix(name, "CNI-") || strings.HasPrefix(name, chainPrefix)
}

var iptablesTables = []string{"filter", "nat", "mangle", "raw"}

// hostState is what the machine held before the cluster started.
type hostState struct {
	sysctls map[string]string
	absent  []string // hostDirs not present before
}

// snapshotHost reads the kubelet's sysctls and the host directories, and
// refuses to start when a kubelet's traces are already there (chains,
// kubepods cgroups): they would be another cluster's, or an earlier run's
// that was killed, and removing them is not this run's business.
func snapshotHost() (*hostState, error) {
	h := &hostState{sysctls: map[string]string{}}
	for _, s := range KubeletSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			return nil, fmt.Errorf("read sysctl %s: %w", s, err)
		}
		h.sysctls[s] = strings.TrimSpace(string(b))
	}
	for _, d := range hostDirs {
		if _, err := os.Lstat(d); errors.Is(err, os.ErrNotExist) {
			h.absent = append(h.absent, d)
		}
	}
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, table := range iptablesTables {
			chains, _, err := hostfs.ListChains(bin, table)
			if err != nil {
				return nil, err
			}
			for _, c := range chains {
				if ownedChain(c) {
					return nil, fmt.Errorf("%s table %s already has chain %s: another kubelet, kube-proxy or CNI runs on this machine, or an earlier run was killed; remove its chains first", bin, table, c)
				}
			}
		}
	}
	if cg := kubepodsCgroups(); len(cg) > 0 {
		return nil, fmt.Errorf("cgroups %s already exist: another kubelet runs on this machine, or an earlier run was killed", strings.Join(cg, ", "))
	}
	return h, nil
}

// restore writes the sysctls back and removes the host directories that
// appeared. It returns what it could not do.
func (h *hostState) restore(logf func(string, ...any)) []error {
	var errs []error
	for _, s := range KubeletSysctls {
		path := filepath.Join("/proc/sys", s)
		b, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("read sysctl %s: %w", s, err))
			continue
		}
		if now := strings.TrimSpace(string(b)); now != h.sysctls[s] {
			if err := os.WriteFile(path, []byte(h.sysctls[s]), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restore sysctl %s to %s: %w", s, h.sysctls[s], err))
				continue
			}
			logf("restored sysctl %s from %s to %s", strings.ReplaceAll(s, "/", "."), now, h.sysctls[s])
		}
	}
	for _, d := range h.absent {
		if _, err := os.Lstat(d); err != nil {
			continue
		}
		if m := hostfs.MountsUnder(d); len(m) > 0 {
			errs = append(errs, fmt.Errorf("%s appeared and still holds mounts %s", d, strings.Join(m, ", ")))
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
			continue
		}
		logf("removed %s, which the cluster made", d)
	}
	return errs
}

// removeChains deletes every rule that jumps to an owned chain from the
// chains not owned, then flushes and deletes the owned chains, in both
// address families and every table.
func removeChains(logf func(string, ...any)) []error {
	var errs []error
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, table := range iptablesTables {
			chains, rules, err := hostfs.ListChains(bin, table)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			var owned []string
			for _, c := range chains {
				if ownedChain(c) {
					owned = append(owned, c)
				}
			}
			for _, r := range rules {
				words := shellWords(r)
				if len(words) == 0 || ownedChain(words[0]) {
					continue
				}
				j := slices.Index(words, "-j")
				if j < 0 || j+1 >= len(words) || !ownedChain(words[j+1]) {
					continue
				}
				args := append([]string{"-w", "-t", table, "-D"}, words...)
				if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
					errs = append(errs, fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, out))
				}
			}
			for _, step := range []string{"-F", "-X"} {
				for _, c := range owned {
					if out, err := exec.Command(bin, "-w", "-t", table, step, c).CombinedOutput(); err != nil {
						errs = append(errs, fmt.Errorf("%s -t %s %s %s: %w: %s", bin, table, step, c, err, out))
					}
				}
			}
			if len(owned) > 0 {
				logf("removed %s chains of table %s: %s", bin, table, strings.Join(owned, " "))
			}
		}
	}
	return errs
}

// shellWords splits an iptables -S line at unquoted spaces, dropping the
// double quotes around comments.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	quoted, in := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && quoted && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			quoted, in = !quoted, true
		case c == ' ' && !quoted:
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// kubepodsCgroups are the kubelet's cgroup trees (cgroupfs driver, cgroup
// root /) in every hierarchy.
func kubepodsCgroups() []string {
	var out []string
	for _, m := range hostfs.CgroupMounts() {
		p := filepath.Join(m, "kubepods")
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// removeCgroups kills every process left in the kubelet's cgroups (the
// pods' processes, should any survive their runtime) and removes the
// cgroups, deepest first.
func removeCgroups(logf func(string, ...any)) []error {
	var errs []error
	for _, root := range kubepodsCgroups() {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for _, d := range dirs {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					logf("killing process %d left in %s", pid, d)
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		var failed []string
		for _, d := range dirs {
			if err := retryRmdir(d); err != nil {
				failed = append(failed, d)
			}
		}
		if len(failed) > 0 {
			errs = append(errs, fmt.Errorf("remove cgroups %s", strings.Join(failed, ", ")))
		} else {
			logf("removed the cgroup tree %s (%d cgroups)", root, len(dirs))
		}
	}
	return errs
}

// retryRmdir removes a cgroup, waiting briefly for killed processes to
// leave it (a cgroup with members is busy).
func retryRmdir(d string) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = unix.Rmdir(d); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		sleepBrief()
	}
	return err
}

// unmountUnder detaches every mount at or below each dir, deepest first.
func unmountUnder(logf func(string, ...any), dirs ...string) []error {
	var errs []error
	for pass := 0; pass < 3; pass++ {
		var ms []string
		for _, d := range dirs {
			ms = append(ms, hostfs.MountsUnder(d)...)
		}
		if len(ms) == 0 {
			return nil
		}
		slices.SortFunc(ms, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		errs = nil
		for _, m := range ms {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
			}
		}
		logf("unmounted %d mounts under %s", len(ms), strings.Join(dirs, ", "))
	}
	return errs
}

// deleteLink removes a network link, when present.
func deleteLink(name string) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", name)); err != nil {
		return nil
	}
	if out, err := exec.Command("ip", "link", "delete", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link delete %s: %w: %s", name, err, out)
	}
	return nil
}

// linksOf lists the links whose master is the bridge (the pods' veth ends).
func linksOf(bridge string) []string {
	ents, err := os.ReadDir(filepath.Join("/sys/class/net", bridge, "brif"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
