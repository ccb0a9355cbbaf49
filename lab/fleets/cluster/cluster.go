// Package cluster runs a one-node Kubernetes cluster on this machine, from
// real components, so that pods really run: etcd as k3s runs it (its
// metrics on 127.0.0.1:2381), kube-apiserver, kube-controller-manager,
// kube-scheduler, containerd with runc and the CNI bridge, and a kubelet.
// Images are imported from tarballs (lab/kit/image), so no registry is needed.
//
// It is harness (test/pods stands on it), and it runs as root on a machine
// other tests share, so it keeps to its own: its files in the test's
// temporary directory (the kubelet's root, containerd's root and state, its
// network namespaces, the CNI configuration and IP allocations), an
// interface holding the node's address, a bridge of its own, and its own
// ports. What the kubelet and CNI make on the host regardless (iptables
// KUBE-* chains, the kubepods cgroups, kernel settings, the probe's
// hostPath) is removed or restored when the test ends, also when it fails;
// see Start.
//
// The settings this kind of host needs (docs/testing.md, "What the harness
// rests on"): containerd's restrict_oom_score_adj (the VM's
// capability bounding set lacks CAP_SYS_RESOURCE), runc rather than crun
// (hybrid cgroups), the kubelet's failCgroupV1: false with the cgroupfs
// driver (containerd 1.6 lacks the RuntimeConfig call), and, with no
// kube-proxy, the kubernetes Service's address routed to the API server.
package cluster

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleet-role/fleet-role/lab/kit/hostfs"
	"github.com/fleet-role/fleet-role/lab/run/apiserver"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
	"github.com/fleet-role/fleet-role/lab/run/proc"
)

// The cluster's addresses. They are from the shared address space of RFC
// 6598 (100.64.0.0/10), which neither this machine's own network nor the
// mesh scenario's lab (198.18.0.0/15) uses, and they live only on the
// cluster's own interfaces.
var (
	// NodeIP is the node's InternalIP, on an interface of its own: the API
	// server, etcd's client and peer listeners and the kubelet bind it.
	NodeIP = netip.MustParseAddr("100.77.0.1")
	// PodSubnet is the CNI bridge's range for pods not on the host's
	// network.
	PodSubnet = netip.MustParsePrefix("100.77.1.0/24")
	// ServiceIP is the kubernetes Service's address in k3s's default
	// service range (10.43.0.0/16): pods find the API server there.
	ServiceIP = netip.MustParseAddr("10.43.0.1")
)

const (
	nodeLink    = "frpods-node" // the portless bridge holding NodeIP
	bridgeLink  = "frpods-br0"  // the CNI bridge
	chainPrefix = "FRPODS-"     // the cluster's own iptables chains
	svcChain    = chainPrefix + "SVC"
	// serviceRange is k3s's default service range; ServiceIP is its first.
	serviceRange = "10.43.0.0/16"
	// startTimeout bounds each component's start on a loaded 2-core machine.
	startTimeout = 3 * time.Minute
	// stopGrace is how long a component gets after SIGTERM.
	stopGrace = 20 * time.Second
	// drainTimeout bounds the wait for the kubelet to stop every pod it
	// runs (each with its grace period, the probe's 30 s at most; the
	// cluster deletes them with a shorter one).
	drainTimeout = 90 * time.Second
)

// Config says what to run.
type Config struct {
	// Dir holds every file of the cluster (the test's temporary directory).
	Dir string
	// Node is the node's name.
	Node string
	// NodeLabels are given to the kubelet with --node-labels, as k3s passes
	// the node-label entries of its configuration.
	NodeLabels map[string]string
	// The binaries (lab/kit/testenv finds them).
	Etcd, APIServer, ControllerManager, Scheduler, Kubelet string
	// PauseImage is the tag of the sandbox image among Images.
	PauseImage string
	// Images are image tarballs imported into containerd's k8s.io
	// namespace before the kubelet starts.
	Images []string
}

// Cluster is the running cluster.
type Cluster struct {
	Node    string
	API     *apiserver.Server
	Etcd    *etcdproc.Cluster
	Admin   kubernetes.Interface
	AdminKC string // an admin kubeconfig, for kubectl
	Sock    string // containerd's socket
	// KubeletRoot is the kubelet's --root-dir (pods' volumes are under it).
	KubeletRoot string

	cfg   Config
	t     testing.TB
	host  *hostState
	procs map[string]*proc.Proc
}

// logf logs to the test.
func (c *Cluster) logf(format string, args ...any) { c.t.Logf(format, args...) }

// CheckHost fails the test unless it runs as root with containerd, runc,
// ctr, iptables and the CNI plugins installed (hack/tools.sh containerd):
// a missing tool fails, never skips.
func CheckHost(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("a cluster with a kubelet needs root (CI runs as root)")
	}
	for _, tool := range []string{"containerd", "runc", "ctr", "iptables", "ip6tables", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run hack/tools.sh containerd (it installs containerd, runc and the CNI plugins with apt-get): %v", tool, err)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Fatalf("the CNI plugins are not in /usr/lib/cni: run hack/tools.sh containerd: %v", err)
	}
}

// Start brings the cluster up and returns once the node is Ready. Every
// part is stopped, and the host put back as it was, in t.Cleanup: pods are
// deleted and drained by the kubelet first, then the kubelet, containerd
// and the control plane stop, then whatever is left (containers, mounts,
// cgroups, chains, links, directories, kernel settings) is removed. A
// leftover that cannot be removed fails the test.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	CheckHost(t)
	if _, err := os.Stat(filepath.Join("/sys/class/net", nodeLink)); err == nil {
		t.Fatalf("the interface %s exists: another run of this cluster is going on, or one was killed (ip link delete %s)", nodeLink, nodeLink)
	}
	if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(etcdproc.StandardMetricsPort))); err != nil {
		t.Fatalf("127.0.0.1:%d, where k3s's etcd serves its metrics, is taken: %v", etcdproc.StandardMetricsPort, err)
	} else {
		l.Close()
	}
	host, err := snapshotHost()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Node: cfg.Node, cfg: cfg, t: t, host: host, procs: map[string]*proc.Proc{}}
	t.Cleanup(c.cleanHost) // registered first: runs after every process stopped
	ctx, cancel := context.WithTimeout(context.Background(), 3*startTimeout)
	defer cancel()

	c.network(t)
	c.startEtcd(t, ctx)
	c.startAPIServer(t, ctx)
	c.startControlPlane(t)
	c.startContainerd(t, ctx)
	c.startKubelet(t, ctx)
	return c
}

// network makes the interface holding the node's address: a bridge with no
// ports, since this kind of host's kernel has no dummy module.
func (c *Cluster) network(t testing.TB) {
	t.Helper()
	run(t, "ip", "link", "add", nodeLink, "type", "bridge")
	run(t, "ip", "addr", "add", NodeIP.String()+"/32", "dev", nodeLink)
	run(t, "ip", "link", "set", nodeLink, "up")
}

// ClientAddresses adds n more addresses to the interface holding the
// node's address and returns them: clients of the node's servers that are,
// to those servers, other hosts (their address is not the one they reach).
// Loopback addresses cannot stand in: the kubelet's KUBE-FIREWALL chain
// drops a packet to 127.0.0.0/8 from any other source, so a reply from the
// node's address to one is lost. They go with the interface at cleanup.
func (c *Cluster) ClientAddresses(t testing.TB, n int) []net.IP {
	t.Helper()
	var out []net.IP
	for i := range n {
		ip := net.IPv4(100, 77, 3, byte(i+1))
		run(t, "ip", "addr", "add", ip.String()+"/32", "dev", nodeLink)
		out = append(out, ip)
	}
	return out
}

// routeService sends the kubernetes Service's address and port to the API
// server, for pods (PREROUTING) and the host's own network (OUTPUT), as
// kube-proxy would; it needs the API server's port.
func (c *Cluster) routeService(t testing.TB, port int) {
	t.Helper()
	run(t, "iptables", "-w", "-t", "nat", "-N", svcChain)
	run(t, "iptables", "-w", "-t", "nat", "-A", svcChain, "-d", ServiceIP.String()+"/32", "-p", "tcp", "--dport", "443",
		"-m", "comment", "--comment", "fleet-role test/pods: kubernetes Service to the API server",
		"-j", "DNAT", "--to-destination", net.JoinHostPort(NodeIP.String(), strconv.Itoa(port)))
	run(t, "iptables", "-w", "-t", "nat", "-A", "PREROUTING", "-j", svcChain)
	run(t, "iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-j", svcChain)
}

func (c *Cluster) startEtcd(t testing.TB, ctx context.Context) {
	t.Helper()
	logf, err := os.Create(filepath.Join(c.cfg.Dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	// k3s's timing (docs/facts.md: heartbeat 500 ms, election timeout 5 s) and
	// its metrics on 127.0.0.1:2381, where the probe reads them; the data
	// on this machine's disk, as k3s keeps it.
	cl, err := etcdproc.Start(ctx, etcdproc.Config{
		Binary:            c.cfg.Etcd,
		Dir:               filepath.Join(c.cfg.Dir, "etcd"),
		Members:           1,
		HeartbeatInterval: 500 * time.Millisecond,
		ElectionTimeout:   5 * time.Second,
		Name:              func(int) string { return c.cfg.Node },
		Host:              func(int) string { return NodeIP.String() },
		Command: func(_ int, name string, args []string) *exec.Cmd {
			out := append([]string(nil), args...)
			for i, a := range out {
				if strings.HasPrefix(a, "--listen-metrics-urls=") {
					out[i] = a + ",http://127.0.0.1:" + strconv.Itoa(etcdproc.StandardMetricsPort)
				}
			}
			return exec.Command(name, out...)
		},
		Stdout:       logf,
		StartTimeout: startTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	c.Etcd = cl
}

func (c *Cluster) startAPIServer(t testing.TB, ctx context.Context) {
	t.Helper()
	dir := filepath.Join(c.cfg.Dir, "apiserver")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The serving certificate, written before Start so that the harness
	// keeps it: pods reach the API server at the Service's address and
	// verify it against kube-root-ca.crt, so the address must be in it.
	if _, _, err := writeCert(dir, "serving", pkix.Name{CommonName: "kube-apiserver"}, true,
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeIP.String()), net.ParseIP(ServiceIP.String())},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, nil, nil); err != nil {
		t.Fatal(err)
	}
	// The API server's client certificate for the kubelet (exec, logs),
	// from a CA the kubelet trusts; system:masters passes the kubelet's
	// webhook authorisation.
	ca, caKey, err := writeCert(dir, "kubelet-client-ca", pkix.Name{CommonName: "kubelet-client-ca"}, true, nil, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := writeCert(dir, "kubelet-client", pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}, false,
		nil, nil, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, ca, caKey); err != nil {
		t.Fatal(err)
	}
	api, err := apiserver.Start(ctx, apiserver.Config{
		Binary:      c.cfg.APIServer,
		EtcdServers: []string{c.Etcd.Members[0].ClientURL},
		Dir:         dir,
		BindAddress: NodeIP.String(),
		ExtraArgs: []string{
			"--kubelet-client-certificate=" + filepath.Join(dir, "kubelet-client.crt"),
			"--kubelet-client-key=" + filepath.Join(dir, "kubelet-client.key"),
			"--kubelet-preferred-address-types=InternalIP",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Stop)
	c.API = api
	c.AdminKC = filepath.Join(c.cfg.Dir, "admin.kubeconfig")
	if err := api.Kubeconfig(c.AdminKC, ""); err != nil {
		t.Fatal(err)
	}
	if c.Admin, err = kubernetes.NewForConfig(api.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(api.URL[strings.LastIndex(api.URL, ":")+1:])
	if err != nil {
		t.Fatalf("the API server's port in %s: %v", api.URL, err)
	}
	c.routeService(t, port)
}

// startControlPlane runs kube-controller-manager (every default controller:
// Deployments, DaemonSets, the garbage collector, the ServiceAccount and
// kube-root-ca.crt publishers) and kube-scheduler, as the admin.
func (c *Cluster) startControlPlane(t testing.TB) {
	t.Helper()
	dir := filepath.Join(c.cfg.Dir, "apiserver")
	c.start(t, "kube-controller-manager", exec.Command(c.cfg.ControllerManager,
		"--kubeconfig="+c.AdminKC, "--leader-elect=false", "--secure-port=0",
		"--root-ca-file="+filepath.Join(dir, "serving.crt"),
		"--service-account-private-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range="+serviceRange,
		"--flex-volume-plugin-dir="+filepath.Join(c.cfg.Dir, "kubelet", "volume-plugins"), "--v=2"))
	c.start(t, "kube-scheduler", exec.Command(c.cfg.Scheduler,
		"--kubeconfig="+c.AdminKC, "--leader-elect=false", "--secure-port=0", "--v=2"))
}

// start runs a component and stops it in t.Cleanup, printing its log's
// tail when the test failed.
func (c *Cluster) start(t testing.TB, name string, cmd *exec.Cmd) *proc.Proc {
	t.Helper()
	p, err := proc.Start(name, cmd, filepath.Join(c.cfg.Dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	c.procs[name] = p
	t.Cleanup(func() {
		if gone, err := p.Exited(); gone {
			t.Errorf("%s had exited before the end: %v\n%s", name, err, p.Tail(30))
		}
		p.Stop(stopGrace)
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", name, p.Tail(40))
		}
	})
	return p
}

// CNIConfig is a CNI configuration list of one bridge plugin: the bridge
// named bridge, acting as the pods' gateway, with host-local addresses of
// subnet kept in ipamDir, and masquerading of what the pods send to other
// hosts when masquerade is set. The one-node cluster needs none (its pods
// talk only to the node's own address); hosts that have no route to each
// other's pod ranges do.
func CNIConfig(name, bridge, subnet, ipamDir string, masquerade bool) string {
	return fmt.Sprintf(cniConfig, name, bridge, masquerade, subnet, ipamDir)
}

const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": %t,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`

// ContainerdConfig is containerd 1.6's configuration (version 2) with
// every path given: its root and state directories, its socket, its opt
// plugin's directory, the CNI configuration directory and runc's state
// root; the pods' sandbox image; and the settings this kind of host needs
// (containerdConfig).
func ContainerdConfig(root, state, sock, opt, sandboxImage, cniConfDir, runcRoot string) string {
	return fmt.Sprintf(containerdConfig, root, state, sock, opt, sandboxImage, cniConfDir, runcRoot)
}

// containerdConfig is containerd 1.6's configuration (version 2) with
// every path in the cluster's directory. restrict_oom_score_adj: this VM's
// capability bounding set lacks CAP_SYS_RESOURCE, and without it every
// sandbox fails ("can't get final child's PID from pipe").
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %[3]q

[ttrpc]
  address = "%[3]s.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[7]q
`

func (c *Cluster) startContainerd(t testing.TB, ctx context.Context) {
	t.Helper()
	dir := filepath.Join(c.cfg.Dir, "containerd")
	cniDir := filepath.Join(c.cfg.Dir, "cni", "net.d")
	for _, d := range []string{dir, cniDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	conflist := CNIConfig("fleet-role-test-pods", bridgeLink, PodSubnet.String(), filepath.Join(c.cfg.Dir, "cni", "ipam"), false)
	if err := os.WriteFile(filepath.Join(cniDir, "10-fleet-role-test.conflist"), []byte(conflist), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Sock = filepath.Join(dir, "containerd.sock")
	conf := ContainerdConfig(filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.Sock,
		filepath.Join(dir, "opt"), c.cfg.PauseImage, cniDir, filepath.Join(dir, "runc"))
	confPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	p := c.start(t, "containerd", exec.Command("containerd", "--config", confPath))
	if err := WaitFor(ctx, "containerd's socket", func() error {
		if gone, err := p.Exited(); gone {
			return fmt.Errorf("containerd exited: %v\n%s", err, p.Tail(20))
		}
		_, err := c.ctr("version")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, img := range c.cfg.Images {
		if out, err := c.ctr("images", "import", img); err != nil {
			t.Fatalf("import %s: %v\n%s", img, err, out)
		}
	}
}

// ctr runs containerd's own client in the k8s.io namespace, where the CRI
// plugin keeps its images and containers.
func (c *Cluster) ctr(args ...string) (string, error) {
	out, err := exec.Command("ctr", append([]string{"--address", c.Sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	return string(out), err
}

// kubeletConfig: failCgroupV1 false (this host's hybrid cgroups),
// cgroupfs (containerd 1.6 lacks the RuntimeConfig call; the kubelet's
// fallback to its own setting ends in 1.38), webhook authentication and
// authorisation with the API server's client CA, swap allowed, and eviction
// and image garbage collection relaxed so that a shared disk's use does not
// evict the pods or delete the imported images (nothing here can pull them
// again). protectKernelDefaults stays off: on it, the kubelet refuses to
// start on a machine whose settings differ from its own; the cluster
// restores them instead.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]q
port: %[2]d
healthzPort: 0
readOnlyPort: 0
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: false
containerRuntimeEndpoint: unix://%[3]s
podLogsDir: %[4]q
volumePluginDir: %[5]q
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[6]q
authorization:
  mode: Webhook
evictionHard:
  memory.available: "50Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`

func (c *Cluster) startKubelet(t testing.TB, ctx context.Context) {
	t.Helper()
	dir := filepath.Join(c.cfg.Dir, "kubelet")
	c.KubeletRoot = filepath.Join(dir, "root")
	for _, d := range []string{c.KubeletRoot, filepath.Join(dir, "pod-logs"), filepath.Join(dir, "volume-plugins")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	port, err := apiserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(kubeletConfig, NodeIP.String(), port, c.Sock, filepath.Join(dir, "pod-logs"),
		filepath.Join(dir, "volume-plugins"), filepath.Join(c.cfg.Dir, "apiserver", "kubelet-client-ca.crt"))
	confPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var labels []string
	for k, v := range c.cfg.NodeLabels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	args := []string{
		"--config=" + confPath, "--kubeconfig=" + c.AdminKC, "--root-dir=" + c.KubeletRoot,
		"--hostname-override=" + c.cfg.Node, "--node-ip=" + NodeIP.String(), "--v=2",
	}
	if len(labels) > 0 {
		args = append(args, "--node-labels="+strings.Join(labels, ","))
	}
	// The kubelet's cleanup (registered after it starts, so it runs before
	// the kubelet is stopped) lets the kubelet stop every pod it runs, as a
	// node drain would, so that the CNI takes each pod's network down.
	p := c.start(t, "kubelet", exec.Command(c.cfg.Kubelet, args...))
	t.Cleanup(c.drain)
	if err := WaitFor(ctx, "node "+c.cfg.Node+" Ready", func() error {
		if gone, err := p.Exited(); gone {
			return fmt.Errorf("the kubelet exited: %v\n%s", err, p.Tail(30))
		}
		n, err := c.Admin.CoreV1().Nodes().Get(ctx, c.cfg.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("Ready %s: %s", cond.Status, cond.Message)
			}
		}
		return errors.New("no Ready condition yet")
	}); err != nil {
		t.Fatal(err)
	}
}

// drain deletes every pod (their controllers first, so that none is made
// again) and waits until containerd runs no container: the kubelet stopped
// each with the CNI's teardown.
func (c *Cluster) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	cs := c.Admin
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		c.t.Errorf("drain: %v", err)
		return
	}
	bg := metav1.DeletePropagationBackground
	grace := int64(5)
	for _, ns := range nss.Items {
		n := ns.Name
		_ = cs.AppsV1().DaemonSets(n).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{})
		_ = cs.AppsV1().Deployments(n).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{})
		_ = cs.AppsV1().ReplicaSets(n).DeleteCollection(ctx, metav1.DeleteOptions{PropagationPolicy: &bg}, metav1.ListOptions{})
		_ = cs.CoreV1().Pods(n).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
	}
	err = WaitFor(ctx, "the kubelet to stop every pod", func() error {
		out, err := c.ctr("tasks", "list", "--quiet")
		if err != nil {
			return fmt.Errorf("ctr tasks list: %w: %s", err, out)
		}
		if ids := strings.Fields(out); len(ids) > 0 {
			return fmt.Errorf("%d containers still run", len(ids))
		}
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d pods remain", len(pods.Items))
		}
		return nil
	})
	if err != nil {
		c.logf("drain: %v; what is left is removed by force", err)
	}
}

// cleanHost runs after every process has stopped: it removes the
// containers left running (their shims outlive containerd), the mounts
// under the cluster's directory, the cgroups, chains and links, the host
// directories that appeared, and writes the kernel settings back; then it
// checks that nothing of the cluster is left and fails the test when
// anything is.
func (c *Cluster) cleanHost() {
	var errs []error
	// Container processes and shims the drain did not end: shims carry
	// containerd's socket in their command line.
	if c.Sock != "" {
		for _, pid := range hostfs.ProcessesMatching(c.Sock) {
			c.logf("killing containerd shim %d left running", pid)
			_ = killPid(pid)
		}
	}
	errs = append(errs, removeCgroups(c.logf)...)
	errs = append(errs, unmountUnder(c.logf, c.cfg.Dir)...)
	for _, l := range linksOf(bridgeLink) {
		if err := deleteLink(l); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range []string{bridgeLink, nodeLink} {
		if err := deleteLink(l); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, removeChains(c.logf)...)
	errs = append(errs, c.host.restore(c.logf)...)
	errs = append(errs, c.leftovers()...)
	for _, err := range errs {
		c.t.Errorf("host cleanup: %v", err)
	}
}

// leftovers checks that nothing the cluster made is left on the host.
func (c *Cluster) leftovers() []error {
	var errs []error
	if cg := kubepodsCgroups(); len(cg) > 0 {
		errs = append(errs, fmt.Errorf("cgroups left: %s", strings.Join(cg, ", ")))
	}
	if m := hostfs.MountsUnder(c.cfg.Dir); len(m) > 0 {
		errs = append(errs, fmt.Errorf("mounts left: %s", strings.Join(m, ", ")))
	}
	for _, l := range []string{bridgeLink, nodeLink} {
		if _, err := os.Stat(filepath.Join("/sys/class/net", l)); err == nil {
			errs = append(errs, fmt.Errorf("link %s left", l))
		}
	}
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, table := range iptablesTables {
			chains, _, err := hostfs.ListChains(bin, table)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			for _, ch := range chains {
				if ownedChain(ch) {
					errs = append(errs, fmt.Errorf("%s chain %s left in table %s", bin, ch, table))
				}
			}
		}
	}
	for _, s := range KubeletSysctls {
		b, _ := os.ReadFile(filepath.Join("/proc/sys", s))
		if got := strings.TrimSpace(string(b)); got != c.host.sysctls[s] {
			errs = append(errs, fmt.Errorf("sysctl %s is %s, was %s", s, got, c.host.sysctls[s]))
		}
	}
	for _, d := range c.host.absent {
		if _, err := os.Lstat(d); err == nil {
			errs = append(errs, fmt.Errorf("%s left", d))
		}
	}
	if pids := hostfs.ProcessesMatching(c.cfg.Dir); len(pids) > 0 {
		errs = append(errs, fmt.Errorf("processes left running with the cluster's directory in their command line: %v", pids))
	}
	return errs
}

// ExitedComponents names the components that have exited, with the tail of
// each one's log.
func (c *Cluster) ExitedComponents() []string {
	var out []string
	for name, p := range c.procs {
		if gone, err := p.Exited(); gone {
			out = append(out, fmt.Sprintf("%s exited (%v):\n%s", name, err, p.Tail(20)))
		}
	}
	sort.Strings(out)
	return out
}

// run runs a command the cluster needs, failing the test on error.
func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// WaitFor polls cond every pollInterval until it returns nil or ctx ends,
// and then returns cond's last error with what was awaited.
func WaitFor(ctx context.Context, what string, cond func() error) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %v: %w", what, err, ctx.Err())
		case <-tick.C:
		}
	}
}

// pollInterval is how often a wait looks again.
const pollInterval = 250 * time.Millisecond

func sleepBrief() { time.Sleep(100 * time.Millisecond) }

// killPid kills a process and waits (briefly) until it is gone.
func killPid(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if err := p.Kill(); err != nil {
		return err
	}
	for i := 0; i < 50; i++ {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err != nil {
			return nil
		}
		sleepBrief()
	}
	return fmt.Errorf("process %d still there after SIGKILL", pid)
}

// ContainerPID is the host PID of a running container's first process,
// given the container ID a pod's status shows (containerd://ID).
func (c *Cluster) ContainerPID(containerID string) (int, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	out, err := c.ctr("tasks", "list")
	if err != nil {
		return 0, fmt.Errorf("ctr tasks list: %w: %s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == id {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("containerd runs no task %s:\n%s", id, out)
}
