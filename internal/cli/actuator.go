package cli

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/actuator"
	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// newActuatorCommand is what the fleet-role-actuator DaemonSet runs on each
// eligible k3s server.
func newActuatorCommand() *cobra.Command {
	var (
		node, hostRoot, stateDir, restart, unit, nsenter, kubeconfig string
		etcdEndpoint, etcdCA, etcdCert, etcdKey                      string
	)
	cmd := &cobra.Command{
		Use:   "actuator",
		Short: "Carry out this host's commands of a swap's journal: its k3s drop-in, a k3s restart, etcd's leadership, the newcomer's removal",
		Long: `Runs on each eligible k3s server (the fleet-role-actuator DaemonSet: host
network, host PID, the host paths it uses mounted under --host-root). It watches the swap's journal,
the ConfigMap ` + acting.JournalConfigMap + ` in fleet-role's namespace (a watch of that one
name: a command's deadline counts from the controller's write of it, two
sample periods for prewrite, and a poll would spend part of it on every
eligible host, where the watch sees the write at once and costs nothing
while no swap runs), and carries out, one at a time, each command the
journal addresses to this node (--node):

  etcd-on        writes the voter drop-in to ` + acting.DropInPath + `
                 under --host-root (a temporary file, synced, renamed), then
                 restarts k3s when the command says so
  etcd-off       the same with the standby drop-in (disable-etcd: true)
  restart        restarts k3s
  move-leader    hands etcd's leadership from the local member to the
                 command's target (a member ID, hex) when the local member
                 leads; when it does not, there is nothing to move and the
                 command is done
  remove-member  removes the member whose peer URL is the target: only the
                 plan's newcomer, only while the swap aborts

It refuses, and reports why with a stable code, a command whose term is
below the leaseTransitions of the controller's Lease (` + controller.LeaseName + `; a deposed
controller's), one of another plan than its journal's, one while the
journal's phase is neither running nor aborting, a remove-member of any
other member or outside an abort, and a move-leader to a member that is no
voter. Another host's commands it leaves to that host.

k3s restarts (--k3s-restart): systemd runs the host's nsenter, chrooted into
/proc/1/root (the host's root as its PID 1 sees it: the pod runs with the
host's PID namespace), to run systemctl restart --k3s-unit in PID 1's
namespaces (it returns once k3s's Type=notify unit has started again); file:DIR is the
lab's protocol: a token written to DIR/k3s-restart.request, and the
supervisor's same token awaited in DIR/k3s-restart.done (DIR a path on the
host, read under --host-root). A restart may take learner_stall_time, the
controller's deadline for every step that restarts k3s.

etcd is called through its member's HTTP API (gRPC's JSON gateway), which
k3s serves on ` + actuator.DefaultEtcdEndpoint + ` with the same client certificate
authentication as 2379: an https endpoint needs --etcd-ca, --etcd-cert and
--etcd-key (k3s's, under --host-root, by default); an http one, an etcd
without TLS (the lab's), needs none.

Each command is carried out at most once: it is written to the local state
(--state-dir, a hostPath that outlives the pod) before it starts and when it
ends. Started and never ended (the actuator stopped mid-command) reports it
failed as interrupted; done reports it done again, without redoing it. The
report goes to this node's record, the ConfigMap ` + acting.ActuatorRecordPrefix + `NODE in
fleet-role's namespace (labelled fleet-role.io/record=` + acting.ActuatorRecordLabel + `, owned by the
Node, one key ` + acting.ReportKey + `), after the command ended: after k3s started again
for a restart (the pod's containers outlive k3s's restart).

It exits 2 on a bad flag or setting, 1 when its local state cannot be read,
and 0 on SIGTERM.`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&node, "node", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME, from the downward API)")
	f.StringVar(&hostRoot, "host-root", "/", "where the host's / is mounted: the drop-in, k3s's etcd certificates and the restart directory are read under it")
	f.StringVar(&stateDir, "state-dir", "/var/lib/fleet-role/actuator", "directory of the local state (a hostPath, so that it outlives the pod: it keeps a command from being carried out twice)")
	f.StringVar(&restart, "k3s-restart", actuator.RestartSystemd, "how k3s is restarted: "+actuator.RestartSystemd+" (a real host) or "+actuator.RestartFilePrefix+"DIR (the lab's supervisor; DIR a path on the host, e.g. "+actuator.RestartFilePrefix+"/run/fleet-role-lab)")
	f.StringVar(&unit, "k3s-unit", actuator.DefaultK3sUnit, "k3s's systemd unit (with --k3s-restart="+actuator.RestartSystemd+")")
	f.StringVar(&nsenter, "nsenter", actuator.DefaultNsenter, "nsenter on the host (with --k3s-restart="+actuator.RestartSystemd+"; run chrooted into "+actuator.HostInitRoot+")")
	f.StringVar(&etcdEndpoint, "etcd-endpoint", actuator.DefaultEtcdEndpoint, "the local etcd member's HTTP API (k3s serves it on 2382; http: an etcd without TLS)")
	f.StringVar(&etcdCA, "etcd-ca", actuator.DefaultEtcdCA, "etcd's server CA, a path on the host (https endpoint)")
	f.StringVar(&etcdCert, "etcd-cert", actuator.DefaultEtcdCert, "etcd client certificate, a path on the host (https endpoint)")
	f.StringVar(&etcdKey, "etcd-key", actuator.DefaultEtcdKey, "etcd client key, a path on the host (https endpoint)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: the in-cluster ServiceAccount)")
	sf := settings.AddFlagsOf(f, "namespace", "election_timeout", "sample_period", "learner_stall_time")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		s, err := loadSettings(sf)
		if err != nil {
			return err
		}
		if node == "" {
			return usageErrorf("--node is empty: set NODE_NAME from the downward API (spec.nodeName) or pass --node")
		}
		if _, err := acting.ActuatorRecordName(node); err != nil {
			return usageErrorf("--node %s: %w", node, err)
		}
		if !filepath.IsAbs(hostRoot) {
			return usageErrorf("--host-root %q is not an absolute path: give / or where the host's / is mounted", hostRoot)
		}
		if !filepath.IsAbs(stateDir) {
			return usageErrorf("--state-dir %q is not an absolute path: give the hostPath mounted for the local state", stateDir)
		}
		clk, ok := wall.(clock.WithTicker)
		if !ok {
			clk = clock.RealClock{}
		}
		restarter, err := actuator.ParseRestarter(restart, hostRoot, unit, nsenter, clk)
		if err != nil {
			return usageError(err)
		}
		onHost := func(p string) string {
			if p == "" {
				return ""
			}
			return actuator.HostPath(hostRoot, p)
		}
		files := actuator.EtcdTLS{CA: onHost(etcdCA), Cert: onHost(etcdCert), Key: onHost(etcdKey)}
		etcd, err := actuator.NewEtcd(etcdEndpoint, files)
		if err != nil {
			return usageError(err)
		}
		log := newLogger(cmd.ErrOrStderr(), "actuator")
		// A swap stops the leaving voter's API server until k3s restarts
		// there, which is this host's own command to see
		// (kube.RedialAfterFailure).
		client, err := kube.NewClientWith(kubeconfig, kube.RedialAfterFailure)
		if err != nil {
			return usageErrorf("kubernetes client: %w", err)
		}
		leases, err := client.Leases(s.Namespace)
		if err != nil {
			return err
		}
		rec, err := client.ActuatorRecord(s.Namespace, node)
		if err != nil {
			return usageError(err)
		}
		if err := client.Rewatch(actuator.RetryEvery(s)); err != nil {
			return err
		}
		journal := client.NewJournalInformer(s.Namespace)
		a, err := actuator.New(actuator.Config{
			Node:     node,
			HostRoot: hostRoot,
			Settings: s,
			Journal:  journal,
			Lease:    kube.LeaseTerm{Leases: leases, Name: controller.LeaseName},
			Record:   rec,
			Etcd:     etcd,
			Restart:  restarter,
			State:    actuator.FileState{Dir: stateDir, Node: node},
			Clock:    clk,
			Log:      log,
		})
		if err != nil {
			return usageError(err)
		}
		ctx, cancel := signalContext(cmd.Context())
		defer cancel()
		return runParts(ctx,
			part{"journal informer", journal.Run},
			part{"actuator loop", a.Run})
	}
	return cmd
}
