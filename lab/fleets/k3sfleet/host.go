package k3sfleet

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleet-role/fleet-role/lab/fault/netlab"
	"github.com/fleet-role/fleet-role/lab/fleets/cluster"
	"github.com/fleet-role/fleet-role/lab/run/proc"
)

// Host is one host of the fleet: a k3s server (with its agent) or a k3s
// agent, with its own containerd.
type Host struct {
	Name   string
	Server bool
	// Standby: the host started as a control-plane-only server
	// (Config.Standbys); Server is true too. It says how the host started,
	// not what k3s runs on it now: a swap makes a standby a voter.
	Standby bool
	Addr    netip.Addr
	Net     *netlab.Host
	// Sock is its containerd's socket, reachable from this machine's
	// namespaces too (it is on the test's directory, not on a host's own
	// filesystems).
	Sock string
	// AuditLog is a server's API audit log, when the fleet has a policy.
	AuditLog string

	dir        string
	cg         *hostCgroup
	holder     *proc.Proc
	containerd *proc.Proc
	k3sArgs    []string
	// k3sMu guards k3s and k3sStarts: the restart supervisor restarts k3s
	// while the test reads it.
	k3sMu     sync.Mutex
	k3s       *proc.Proc
	k3sStarts int
}

// File is path as the host's own processes see it: through the holder's
// root, so inside the host's mount namespace (its k3s data, its kubelet's
// pods, its configuration drop-ins).
func (h *Host) File(path string) string {
	return filepath.Join("/proc", strconv.Itoa(h.holder.PID()), "root", path)
}

// K3s is the host's k3s process. During a restart it waits for the new
// one, so that the old process's exit, which the restart caused, is never
// read as a crash (Fleet.Exited).
func (h *Host) K3s() *proc.Proc {
	h.k3sMu.Lock()
	defer h.k3sMu.Unlock()
	return h.k3s
}

// Pause freezes every process of the host at once: k3s (its etcd, API
// server and kubelet), containerd, the pods' containers, as a suspended
// machine stops. The kernel still answers TCP for it, as for SIGSTOP.
func (h *Host) Pause() error {
	if err := h.cg.setFrozen(true); err != nil {
		return fmt.Errorf("pause %s: %w", h.Name, err)
	}
	return nil
}

// Resume thaws what Pause froze.
func (h *Host) Resume() error {
	if err := h.cg.setFrozen(false); err != nil {
		return fmt.Errorf("resume %s: %w", h.Name, err)
	}
	return nil
}

// Processes lists the host's processes (its cgroups' members).
func (h *Host) Processes() []int { return h.cg.pids() }

// holdScript runs in the host's new mount and UTS namespaces, inside its
// network namespace: it names the host, mounts a memory filesystem of the
// host's own on each of k3s's, the kubelet's and containerd's directories,
// mounts a sysfs that shows the host's network namespace (its eth0, not
// this machine's interfaces: the kubelet and fleet-role's probe read
// /sys/class/net) with this machine's cgroup hierarchies moved back under
// it, and then holds the namespaces open until killed. The host's other
// processes join them with nsenter.
const holdScript = `set -e
hostname "$1"; shift
for d in "$@"; do mount -t tmpfs -o mode=0755 k3s-host "$d"; done
mkdir /run/k3s/.cgroup
mount --rbind /sys/fs/cgroup /run/k3s/.cgroup
mount -t sysfs sysfs /sys
mount --move /run/k3s/.cgroup /sys/fs/cgroup
rmdir /run/k3s/.cgroup
echo ready
exec sleep infinity
`

// placeScript puts itself into the host's cgroups and then execs its
// arguments, so that the program is the host's from its first instruction
// (and its children, containerd's shims, are too).
const placeScript = `for f in $FLEET_ROLE_CGROUP_PROCS; do echo $$ > "$f" || exit 1; done; exec "$@"`

// placed is a command that starts in the host's cgroups.
func (h *Host) placed(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("sh", append([]string{"-c", placeScript, "sh", name}, args...)...)
	cmd.Env = append(os.Environ(), "FLEET_ROLE_CGROUP_PROCS="+strings.Join(h.cg.procsFiles(), " "))
	return cmd
}

// entered is a command run inside the host's network, mount and UTS
// namespaces and its cgroups. nsenter execs the program (no PID
// namespace), so the process is the program: signals reach it directly.
func (h *Host) entered(name string, args ...string) *exec.Cmd {
	return h.placed("nsenter", append([]string{"--target", strconv.Itoa(h.holder.PID()), "--mount", "--uts", "--net", "--", name}, args...)...)
}

// startHolder starts the process that holds the host's namespaces and
// waits until its mounts are in place.
func (h *Host) startHolder(ctx context.Context) error {
	ns := filepath.Join("/run/netns", h.Net.Namespace)
	args := append([]string{"--net=" + ns, "unshare", "--mount", "--uts", "--propagation", "private",
		"sh", "-c", holdScript, "sh", h.Name}, hostDirs...)
	p, err := proc.Start(h.Name+" namespaces", h.placed("nsenter", args...), filepath.Join(h.dir, "holder.log"))
	if err != nil {
		return err
	}
	h.holder = p
	return waitFor(ctx, h.Name+"'s namespaces", func() error {
		if gone, err := p.Exited(); gone {
			return fmt.Errorf("the holder exited (%v): %s", err, p.Tail(10))
		}
		if !strings.Contains(p.Tail(5), "ready") {
			return fmt.Errorf("mounts not in place yet")
		}
		return nil
	})
}

// startContainerd writes the host's containerd and CNI configuration,
// starts containerd in the host and imports the images.
func (h *Host) startContainerd(ctx context.Context, index int, pauseImage string, images []string) error {
	dir := filepath.Join(h.dir, "containerd")
	cniDir := filepath.Join(h.dir, "cni", "net.d")
	for _, d := range []string{dir, cniDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	// The host's pod network: a bridge in its own network namespace, a
	// /24 of k3s's cluster CIDR of its own, and masquerading, so that a pod
	// reaches the API servers at the other hosts' addresses (there is no
	// flannel; the lab's router routes each pod range to its host, so a
	// connection made to a pod is answered, but a pod's own go out as its
	// host's).
	subnet := podRange(index)
	conflist := cluster.CNIConfig("fleet-role-k3s", "cni0", subnet, filepath.Join(h.dir, "cni", "ipam"), true)
	if err := os.WriteFile(filepath.Join(cniDir, "10-fleet-role-k3s.conflist"), []byte(conflist), 0o644); err != nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	h.Sock = filepath.Join(dir, "containerd.sock")
	// lab/fleets/cluster's configuration (docs/testing.md, "What the harness rests
	// on"), with
	// the root on the test's directory and the state (the pods' rootfs
	// mounts, network namespaces and shim sockets, which are always under
	// /run/containerd/s) on the host's own /run/containerd.
	conf := cluster.ContainerdConfig(filepath.Join(dir, "root"), "/run/containerd/state", h.Sock,
		filepath.Join(dir, "opt"), pauseImage, cniDir, filepath.Join(dir, "runc"))
	confPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	p, err := proc.Start(h.Name+" containerd", h.entered("containerd", "--config", confPath), filepath.Join(h.dir, "containerd.log"))
	if err != nil {
		return err
	}
	h.containerd = p
	if err := waitFor(ctx, h.Name+"'s containerd", func() error {
		if gone, err := p.Exited(); gone {
			return fmt.Errorf("containerd exited (%v):\n%s", err, p.Tail(20))
		}
		_, err := h.Ctr(ctx, "version")
		return err
	}); err != nil {
		return err
	}
	for _, img := range images {
		if out, err := h.Ctr(ctx, "images", "import", img); err != nil {
			return fmt.Errorf("%s: import %s: %w\n%s", h.Name, img, err, out)
		}
	}
	return nil
}

// Ctr runs containerd's own client against the host's containerd, in the
// k8s.io namespace, where the CRI plugin keeps images and containers.
func (h *Host) Ctr(ctx context.Context, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, "ctr", append([]string{"--address", h.Sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	return string(out), err
}

// startK3s starts (or starts again) the host's k3s with its arguments.
func (h *Host) startK3s() error {
	h.k3sMu.Lock()
	defer h.k3sMu.Unlock()
	return h.startK3sLocked()
}

func (h *Host) startK3sLocked() error {
	h.k3sStarts++
	name := "k3s.log"
	if h.k3sStarts > 1 {
		name = fmt.Sprintf("k3s-%d.log", h.k3sStarts)
	}
	p, err := proc.Start(h.Name+" k3s", h.entered(h.k3sArgs[0], h.k3sArgs[1:]...), filepath.Join(h.dir, name))
	if err != nil {
		return err
	}
	h.k3s = p
	return nil
}

// RestartK3s stops the host's k3s (SIGTERM, as systemctl restart does:
// its containers keep running) and starts it again, as an operator does
// after changing its configuration. It returns once the new process has
// started, not once k3s is up: the caller waits for what it needs.
func (h *Host) RestartK3s() error {
	h.k3sMu.Lock()
	defer h.k3sMu.Unlock()
	h.k3s.Stop(stopGrace)
	return h.startK3sLocked()
}

// podRange is the pod range of the index-th host: a /24 of k3s's cluster
// CIDR, 10.42.0.0/16.
func podRange(index int) string { return fmt.Sprintf("10.42.%d.0/24", index) }
