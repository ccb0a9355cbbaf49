//go:build linux

// Package fleet runs a whole fleet-role fleet on one machine, each host its
// own network namespace (lab/fault/netlab): a real etcd v3.6.15 member on every
// voter with k3s's metrics address, a real kube-apiserver with RBAC and the
// probes' admission policy in the root namespace, deploy/fleet-role.yaml
// applied with kubectl, the Nodes registered as k3s registers them, and a
// real `fleet-role probe` process inside every host and a real `fleet-role
// controller` beside the API server, each with the token its pod would
// have. It is what the mesh scenario (test/mesh) and the fault campaign
// (lab/fault/campaign) stand on; both inject faults through its parts.
//
// Every part is stopped by Close, in the reverse order of its start:
// processes before the disks they write and the namespaces they run in.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/fault/netlab"
	"github.com/fleet-role/fleet-role/lab/run/apiserver"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
	"github.com/fleet-role/fleet-role/lab/run/proc"
)

// ServiceAccounts of deploy/fleet-role.yaml.
const (
	ProbeSA      = "fleet-role-probe"
	ControllerSA = "fleet-role"
)

// StopGrace is how long a fleet-role process is given after SIGTERM.
const StopGrace = 10 * time.Second

// A Disk is a directory whose fsyncs can be slowed (lab/fault/slowdisk mounts
// one). The fleet mounts one over every voter's etcd WAL directory
// (--wal-dir) and every standby's fsync directory when Config.MountDisk is
// set.
type Disk interface {
	SetDelay(time.Duration)
	Close() error
}

// Config says what fleet to run.
type Config struct {
	// Dir holds everything the fleet writes: logs, kubeconfigs, the API
	// server's files, and the tmpfs that holds etcd's data. Required.
	Dir string
	// Binary is the fleet-role binary; EtcdBinary, APIServerBinary and
	// Kubectl the real components (lab/kit/testenv or lab/kit/toolcache find them).
	Binary, EtcdBinary, APIServerBinary, Kubectl string
	// Manifest is deploy/fleet-role.yaml.
	Manifest string
	// Voters and Standbys are the hosts' counts: voter-1.. hold an etcd
	// member each, standby-1.. are agents that may take a vote.
	Voters, Standbys int
	// Settings is the settings file every process reads (--settings). It is
	// validated as the product validates it.
	Settings string
	// Prefix names the namespaces (netlab.Config.Prefix).
	Prefix string
	// MountDisk, when set, mounts a Disk over dir (an empty directory on the
	// fleet's tmpfs) and returns it.
	MountDisk func(dir string) (Disk, error)
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any)
	// StartTimeout bounds each real component's start (default 3 minutes:
	// a loaded 2-core machine).
	StartTimeout time.Duration
	// LabNice, when negative, raises this process's threads to that nice
	// value and starts every host's process (etcd, the API server, the
	// probes, the controller) at the default of 0: the lab's network (the
	// TUN goroutines that hold and drop packets) and disks (the FUSE
	// servers) stand for hardware, which does not wait for a core behind the
	// hosts' processes, while the hosts' processes compete with whatever
	// else the machine runs, as on a busy host. It needs CAP_SYS_NICE.
	LabNice int
}

// Fleet is a running fleet. Its methods are safe for concurrent use only
// where they say so.
type Fleet struct {
	Settings     settings.Settings
	SettingsPath string
	Lab          *netlab.Lab
	Etcd         *etcdproc.Cluster
	API          *apiserver.Server
	Admin        kubernetes.Interface
	// AdminKubeconfig holds the API server's admin token.
	AdminKubeconfig string
	// Voters, Standbys and Hosts name the hosts; Pinned is the first voter,
	// pinned as an owner pins the first server of an inventory. The API
	// server stores its objects through the pinned voter's member, as k3s's
	// first server's API server does through its own.
	Voters, Standbys, Hosts []string
	Pinned                  string
	// Disks holds each host's Disk when Config.MountDisk is set: a voter's
	// under its etcd WAL directory, a standby's under its fsync directory.
	Disks map[string]Disk
	// ProbeTokens are the probes' tokens, each bound to a Pod on its host's
	// node, as the kubelet issues the DaemonSet's pod there.
	ProbeTokens map[string]string
	Probes      map[string]*proc.Proc
	Controller  *proc.Proc

	cfg      Config
	dir      string
	fsyncDir string
	undo     []func() error // in the order of start; Close runs them backwards
	closed   sync.Once
	closeErr error
}

// VoterName and StandbyName name the hosts.
func VoterName(i int) string   { return "voter-" + strconv.Itoa(i+1) }
func StandbyName(i int) string { return "standby-" + strconv.Itoa(i+1) }

func (f *Fleet) logf(format string, args ...any) {
	if f.cfg.Logf != nil {
		f.cfg.Logf(format, args...)
	}
}

// Start brings the fleet up to the point where its components can start:
// the lab, etcd, the API server, the manifests, the Nodes and the probes'
// tokens. StartComponents then starts the probes and the controller. On
// failure it removes everything it made.
func Start(ctx context.Context, cfg Config) (_ *Fleet, err error) {
	switch {
	case cfg.Dir == "":
		return nil, errors.New("fleet: no directory given")
	case cfg.Voters < 1:
		return nil, fmt.Errorf("fleet: %d voters: at least one", cfg.Voters)
	case cfg.Standbys < 0:
		return nil, fmt.Errorf("fleet: %d standbys: must not be negative", cfg.Standbys)
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 3 * time.Minute
	}
	if cfg.LabNice < 0 {
		if err := raiseThreads(cfg.LabNice); err != nil {
			return nil, err
		}
	}
	f := &Fleet{cfg: cfg, dir: cfg.Dir, Disks: map[string]Disk{}, Probes: map[string]*proc.Proc{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Close())
		}
	}()
	for i := range cfg.Voters {
		f.Voters = append(f.Voters, VoterName(i))
	}
	for i := range cfg.Standbys {
		f.Standbys = append(f.Standbys, StandbyName(i))
	}
	f.Hosts = append(append([]string(nil), f.Voters...), f.Standbys...)
	f.Pinned = f.Voters[0]

	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	f.SettingsPath = filepath.Join(f.dir, "settings.yaml")
	if err := os.WriteFile(f.SettingsPath, []byte(cfg.Settings), 0o644); err != nil {
		return nil, fmt.Errorf("fleet: write the settings: %w", err)
	}
	s, err := settings.ReadFile(f.SettingsPath, settings.Defaults())
	if err == nil {
		err = s.Validate()
	}
	if err != nil {
		return nil, fmt.Errorf("fleet: the settings: %w", err)
	}
	f.Settings = s

	lab, err := netlab.New(ctx, netlab.Config{Prefix: cfg.Prefix, Hosts: f.Hosts, ConnectRoot: true})
	if err != nil {
		return nil, err
	}
	f.Lab = lab
	f.undo = append(f.undo, lab.Close)
	f.logf("lab: %s, root namespace at %s", lab.Subnet, lab.RootAddr)

	mem := filepath.Join(f.dir, "tmpfs")
	if err := mountTmpfs(mem); err != nil {
		return nil, err
	}
	f.undo = append(f.undo, func() error { return unmount(mem) })
	etcdDir := filepath.Join(mem, "etcd")
	walDir := filepath.Join(mem, "wal")
	f.fsyncDir = filepath.Join(mem, "fsync")
	for _, h := range f.Hosts {
		dir := filepath.Join(f.fsyncDir, h)
		if slices.Contains(f.Voters, h) {
			dir = filepath.Join(walDir, h)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
		if cfg.MountDisk != nil {
			d, err := cfg.MountDisk(dir)
			if err != nil {
				return nil, fmt.Errorf("fleet: the disk of %s: %w", h, err)
			}
			f.Disks[h] = d
			f.undo = append(f.undo, d.Close)
		}
	}

	etcdLog, err := os.Create(filepath.Join(f.dir, "etcd.log"))
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	f.undo = append(f.undo, etcdLog.Close)
	cl, err := etcdproc.Start(ctx, etcdproc.Config{
		Binary:            cfg.EtcdBinary,
		Dir:               etcdDir,
		Members:           len(f.Voters),
		HeartbeatInterval: s.HeartbeatInterval,
		ElectionTimeout:   s.ElectionTimeout,
		Name:              func(i int) string { return f.Voters[i] },
		Host:              func(i int) string { return lab.Host(f.Voters[i]).Addr.String() },
		Command: func(i int, name string, args []string) *exec.Cmd {
			// The WAL (what a slow disk slows first, and what etcd's WAL
			// fsync metric times) in a directory of its own, on the voter's
			// Disk when it has one; the backend stays on the tmpfs, so that
			// its commits carry no FUSE round trip per write.
			args = append(withLoopbackMetrics(args), "--wal-dir="+filepath.Join(walDir, f.Voters[i], "wal"))
			return f.hostCommand(lab.Host(f.Voters[i]), name, args...)
		},
		Stdout:       etcdLog,
		StartTimeout: cfg.StartTimeout,
	})
	if err != nil {
		return nil, err
	}
	f.Etcd = cl
	f.undo = append(f.undo, func() error { cl.Stop(); return nil })
	if err := f.MoveLeader(ctx, f.Pinned); err != nil {
		return nil, err
	}

	// The API server records who did what to which object, so that a
	// scenario can hold that each probe wrote only its own record.
	policy := filepath.Join(f.dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	began := time.Now()
	api, err := apiserver.Start(ctx, apiserver.Config{
		Binary:      cfg.APIServerBinary,
		EtcdServers: []string{cl.Members[0].ClientURL},
		Dir:         filepath.Join(f.dir, "apiserver"),
		BindAddress: lab.RootAddr.String(), // reachable from the hosts, and only there
		Command:     func(name string, args ...string) *exec.Cmd { return f.command(name, args...) },
		ExtraArgs:   []string{"--audit-policy-file=" + policy, "--audit-log-path=" + f.AuditLog()},
	})
	if err != nil {
		return nil, err
	}
	f.API = api
	f.undo = append(f.undo, func() error { api.Stop(); return nil })
	f.logf("kube-apiserver ready at %s in %.1f s", api.URL, time.Since(began).Seconds())
	f.AdminKubeconfig = filepath.Join(f.dir, "admin.kubeconfig")
	if err := api.Kubeconfig(f.AdminKubeconfig, ""); err != nil {
		return nil, err
	}
	if f.Admin, err = kubernetes.NewForConfig(api.AdminConfig()); err != nil {
		return nil, fmt.Errorf("fleet: admin client: %w", err)
	}

	// The manifests, applied as an operator would: the namespace, the
	// ServiceAccounts, their RBAC and the probes' admission policy, and the
	// status and settings ConfigMaps. The Deployment and DaemonSet are
	// stored too; no kubelet runs them.
	if _, err := f.Kubectl(ctx, "apply", "--server-side", "-f", cfg.Manifest); err != nil {
		return nil, err
	}
	if err := f.registerNodes(ctx); err != nil {
		return nil, err
	}
	f.ProbeTokens = map[string]string{}
	for _, h := range f.Hosts {
		if f.ProbeTokens[h], err = f.probeToken(ctx, h); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// AuditLog is where the API server writes its audit log.
func (f *Fleet) AuditLog() string { return filepath.Join(f.dir, "apiserver", "audit.log") }

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
`

// Kubectl runs kubectl as the admin and returns its output.
func (f *Fleet) Kubectl(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, f.cfg.Kubectl, append([]string{"--kubeconfig", f.AdminKubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// withLoopbackMetrics adds the host's own 127.0.0.1:2381 to a member's
// metrics listeners: k3s serves etcd's metrics there (docs/limits.md), where
// the probe reads them, while etcdproc checks the member's health at its
// address from outside the host.
func withLoopbackMetrics(args []string) []string {
	out := append([]string(nil), args...)
	const flag = "--listen-metrics-urls="
	for i, a := range out {
		if strings.HasPrefix(a, flag) {
			out[i] = a + ",http://127.0.0.1:" + strconv.Itoa(etcdproc.StandardMetricsPort)
		}
	}
	return out
}

func mountTmpfs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=2g,mode=0755"); err != nil {
		return fmt.Errorf("fleet: mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// unmount detaches dir even while a process still holds a file in it; the
// processes are stopped first, so nothing is left behind.
func unmount(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("fleet: unmount %s: %w", dir, err)
	}
	return nil
}

// renderedLabels runs `fleet-role render k3s-config` for a host and returns
// the labels its drop-in gives k3s (node-label+ entries, key=value).
func (f *Fleet) renderedLabels(ctx context.Context, eligible, pinned bool) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, f.cfg.Binary, "render", "k3s-config",
		"--eligible="+strconv.FormatBool(eligible), "--pinned="+strconv.FormatBool(pinned)).Output()
	if err != nil {
		return nil, fmt.Errorf("fleet: fleet-role render k3s-config: %w", err)
	}
	var dropIn map[string][]string
	if err := yaml.Unmarshal(out, &dropIn); err != nil {
		return nil, fmt.Errorf("fleet: parse the rendered drop-in: %w\n%s", err, out)
	}
	entries := dropIn["node-label+"]
	if len(entries) == 0 {
		return nil, fmt.Errorf("fleet: the rendered drop-in has no node-label+ entries:\n%s", out)
	}
	labels := map[string]string{}
	for _, e := range entries {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("fleet: rendered node label %q is not key=value", e)
		}
		labels[k] = v
	}
	return labels, nil
}

// registerNodes creates the Nodes as k3s would: every node's hostname, OS
// and InternalIP; on voters the etcd role label, the etcd annotations and
// the EtcdIsVoter condition; and on every host the labels fleet-role's
// drop-in prescribes (all eligible, the first voter pinned). It checks that
// fleet-role reads them as meant.
func (f *Fleet) registerNodes(ctx context.Context) error {
	for _, h := range f.Lab.Hosts {
		voter := slices.Contains(f.Voters, h.Name)
		labels := map[string]string{
			"kubernetes.io/hostname":           h.Name,
			"kubernetes.io/os":                 "linux",
			"kubernetes.io/arch":               runtime.GOARCH,
			"node.kubernetes.io/instance-type": "k3s",
		}
		rendered, err := f.renderedLabels(ctx, true, h.Name == f.Pinned)
		if err != nil {
			return err
		}
		for k, v := range rendered {
			labels[k] = v
		}
		annotations := map[string]string{}
		var conds []corev1.NodeCondition
		if voter {
			labels[k3snode.EtcdRoleLabel] = "true"
			labels["node-role.kubernetes.io/control-plane"] = "true"
			labels["node-role.kubernetes.io/master"] = "true"
			annotations["etcd.k3s.cattle.io/node-name"] = h.Name
			annotations[k3snode.NodeAddressAnnotation] = h.Addr.String()
			now := metav1.Now()
			conds = append(conds, corev1.NodeCondition{Type: k3snode.EtcdIsVoterCondition, Status: corev1.ConditionTrue,
				Reason: "MemberNotLearner", Message: "Node is a voting member of the etcd cluster",
				LastHeartbeatTime: now, LastTransitionTime: now})
		}
		n, err := f.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: h.Name, Labels: labels, Annotations: annotations},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("fleet: register node %s: %w", h.Name, err)
		}
		// Status is its own subresource, as the kubelet writes it.
		n.Status = corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: h.Addr.String()},
				{Type: corev1.NodeHostName, Address: h.Name},
			},
			Conditions: conds,
		}
		if _, err := f.Admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("fleet: node %s status: %w", h.Name, err)
		}
	}
	got, err := f.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("fleet: list nodes: %w", err)
	}
	nodes := kube.NodesFromKube(got.Items, f.Settings)
	if len(nodes) != len(f.Hosts) {
		return fmt.Errorf("fleet: %d nodes registered, want %d", len(nodes), len(f.Hosts))
	}
	for _, n := range nodes {
		h := f.Lab.Host(n.Name)
		wantVoter := slices.Contains(f.Voters, n.Name)
		if n.Voter != wantVoter || !n.Eligible || n.Pinned != (n.Name == f.Pinned) || n.PeerAddress != h.Addr.String() {
			return fmt.Errorf("fleet: node %s reads %+v: want voter %v, eligible, pinned %v, peer address %s",
				n.Name, n, wantVoter, n.Name == f.Pinned, h.Addr)
		}
	}
	return nil
}

// probeToken gives a host's probe the credential the kubelet would give the
// DaemonSet's pod there: the admin creates a Pod of the probe's
// ServiceAccount with spec.nodeName set to the host's node (no kubelet runs
// it), and a token bound to that Pod carries the node in the user's extra,
// by which the admission policy holds the probe to that node's record.
func (f *Fleet) probeToken(ctx context.Context, node string) (string, error) {
	name, uid, err := ProbePod(ctx, f.Admin, f.Settings.Namespace, node)
	if err != nil {
		return "", err
	}
	return f.API.TokenForPod(ctx, f.Settings.Namespace, ProbeSA, name, uid, 24*time.Hour)
}

// ProbePod creates a Pod of the probe's ServiceAccount bound to node, as the
// DaemonSet's pod there would be; no kubelet runs it.
func ProbePod(ctx context.Context, admin kubernetes.Interface, namespace, node string) (string, types.UID, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "fleet-role-probe-", Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: ProbeSA,
			// Hardened as the DaemonSet's pod is, so that the namespace's
			// restricted Pod Security level takes it without a warning.
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{Name: "probe", Image: "fleet-role:test",
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				}}},
		},
	}
	created, err := admin.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return "", "", fmt.Errorf("fleet: create a probe pod on %s: %w", node, err)
	}
	return created.Name, created.UID, nil
}

// WriteKubeconfig writes a kubeconfig holding token, with the API server at
// the lab's root address, and returns its path.
func (f *Fleet) WriteKubeconfig(name, token string) (string, error) {
	path := filepath.Join(f.dir, name+".kubeconfig")
	return path, f.API.Kubeconfig(path, token)
}

// FsyncDir is the directory a host's probe reads its disk in.
func (f *Fleet) FsyncDir(host string) string { return filepath.Join(f.fsyncDir, host) }

// StartComponents runs a probe inside every host's namespace, as the
// DaemonSet would with the host's network and a token bound to a Pod on the
// host's node, and the controller in the root namespace beside the API
// server with its ServiceAccount's token.
func (f *Fleet) StartComponents(ctx context.Context) error {
	tok, err := f.API.TokenFor(ctx, f.Settings.Namespace, ControllerSA, 24*time.Hour)
	if err != nil {
		return err
	}
	controllerKC, err := f.WriteKubeconfig(ControllerSA, tok)
	if err != nil {
		return err
	}
	for _, h := range f.Lab.Hosts {
		kc, err := f.WriteKubeconfig("probe-"+h.Name, f.ProbeTokens[h.Name])
		if err != nil {
			return err
		}
		fsyncDir := f.FsyncDir(h.Name)
		if err := os.MkdirAll(fsyncDir, 0o755); err != nil {
			return fmt.Errorf("fleet: %w", err)
		}
		cmd := f.hostCommand(h, f.cfg.Binary, "probe",
			"--kubeconfig", kc,
			"--settings", f.SettingsPath,
			"--node", h.Name,
			"--host-root", "/",
			"--fsync-dir", fsyncDir,
			"--metrics-url", fmt.Sprintf("http://127.0.0.1:%d/metrics", etcdproc.StandardMetricsPort),
			"--metrics-address", "127.0.0.1:9871", // the host's own loopback
		)
		p, err := proc.Start("probe on "+h.Name, cmd, filepath.Join(f.dir, "probe-"+h.Name+".log"))
		if err != nil {
			return err
		}
		f.Probes[h.Name] = p
		f.undo = append(f.undo, func() error { p.Stop(StopGrace); return nil })
	}
	cmd := f.command(f.cfg.Binary, "controller",
		"--kubeconfig", controllerKC,
		"--settings", f.SettingsPath,
		"--metrics-address", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), settings.EnvName("dry_run")+"=true")
	p, err := proc.Start("controller", cmd, filepath.Join(f.dir, "controller.log"))
	if err != nil {
		return err
	}
	f.Controller = p
	f.undo = append(f.undo, func() error { p.Stop(StopGrace); return nil })
	return nil
}

// command is a process of a host of the fleet that runs beside the lab (the
// API server, the controller): at the default priority when the lab's own is
// raised (Config.LabNice), through nice(1), which execs it in place.
func (f *Fleet) command(name string, args ...string) *exec.Cmd {
	if f.cfg.LabNice < 0 {
		return exec.Command("nice", append([]string{"-n", strconv.Itoa(-f.cfg.LabNice), name}, args...)...)
	}
	return exec.Command(name, args...)
}

// hostCommand is a process inside host h, at the default priority when the
// lab's own is raised: nice(1) execs `ip netns exec`, which execs the
// program, so its pid is the program's and signals reach it.
func (f *Fleet) hostCommand(h *netlab.Host, name string, args ...string) *exec.Cmd {
	cmd := h.Command(context.Background(), name, args...)
	if f.cfg.LabNice < 0 {
		cmd = exec.Command("nice", append([]string{"-n", strconv.Itoa(-f.cfg.LabNice)}, cmd.Args...)...)
	}
	return cmd
}

// raiseThreads sets every thread of this process to nice: on Linux a nice
// value belongs to a thread, and a new thread or process takes its
// creator's, so the threads the runtime makes later (and the processes they
// start) take it too.
func raiseThreads(nice int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil {
			return fmt.Errorf("fleet: raise thread %d to nice %d (the lab's network and disks run ahead of the hosts): %w", tid, nice, err)
		}
	}
	return nil
}

// Components lists every fleet-role process started, probes first in host
// order, then the controller.
func (f *Fleet) Components() []*proc.Proc {
	var ps []*proc.Proc
	for _, h := range f.Hosts {
		if p := f.Probes[h]; p != nil {
			ps = append(ps, p)
		}
	}
	if f.Controller != nil {
		ps = append(ps, f.Controller)
	}
	return ps
}

// Exited returns an error naming the first fleet-role process that has
// exited, with its log's tail.
func (f *Fleet) Exited() error {
	for _, p := range f.Components() {
		if gone, err := p.Exited(); gone {
			return fmt.Errorf("%s exited (%v):\n%s", p.Name, err, p.Tail(30))
		}
	}
	return nil
}

// StopComponents stops the probes and the controller (SIGTERM: each writes
// what it holds) and returns an error naming any that had exited before or
// exited other than by the signal.
func (f *Fleet) StopComponents() error {
	var errs []error
	for _, p := range f.Components() {
		if gone, err := p.Exited(); gone {
			errs = append(errs, fmt.Errorf("%s had exited before the end (%v):\n%s", p.Name, err, p.Tail(20)))
			continue
		}
		p.Stop(StopGrace)
		if _, err := p.Exited(); err != nil {
			errs = append(errs, fmt.Errorf("%s after SIGTERM: %w\n%s", p.Name, err, p.Tail(20)))
		}
	}
	return errors.Join(errs...)
}

// Status reads the published status document as the admin would.
func (f *Fleet) Status(ctx context.Context) (*status.Status, error) {
	cm, err := f.Admin.CoreV1().ConfigMaps(f.Settings.Namespace).Get(ctx, f.Settings.StatusConfigMap, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	raw, ok := cm.Data[status.StatusKey]
	if !ok {
		return nil, fmt.Errorf("%s has no %s yet", f.Settings.StatusConfigMap, status.StatusKey)
	}
	return status.UnmarshalStatus([]byte(raw))
}

// Member is the etcd member of a voter, or nil.
func (f *Fleet) Member(name string) *etcdproc.Member {
	if f.Etcd == nil {
		return nil
	}
	for _, m := range f.Etcd.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// MoveLeader makes the named member etcd's leader and returns once it
// leads. k3s's first server starts the cluster alone and leads it when the
// others join; members started at once elect any of them. Which member leads
// changes what a slow voter costs: every write of the cluster waits for the
// leader's round trips.
func (f *Fleet) MoveLeader(ctx context.Context, name string) error {
	to := f.Member(name)
	if to == nil {
		return fmt.Errorf("fleet: no member %s", name)
	}
	for {
		leader, err := f.Etcd.Leader(ctx)
		if err != nil {
			return err
		}
		if leader == to {
			return nil
		}
		id, err := strconv.ParseUint(to.MemberID(), 16, 64)
		if err != nil {
			return fmt.Errorf("fleet: member ID of %s: %w", name, err)
		}
		// Only the leader takes a transfer request.
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leader.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return fmt.Errorf("fleet: etcd client of %s: %w", leader.Name, err)
		}
		_, err = cli.MoveLeader(ctx, id)
		cli.Close()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("fleet: move etcd's leadership from %s to %s: %w", leader.Name, name, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// Close stops and removes everything the fleet made, in the reverse order
// of its start, and returns every error met. It is idempotent.
func (f *Fleet) Close() error {
	f.closed.Do(func() {
		var errs []error
		for i := len(f.undo) - 1; i >= 0; i-- {
			if err := f.undo[i](); err != nil {
				errs = append(errs, err)
			}
		}
		f.closeErr = errors.Join(errs...)
	})
	return f.closeErr
}

func ptr[T any](v T) *T { return &v }
