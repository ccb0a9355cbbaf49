package cli

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/httpserve"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// newProbeCommand is what the fleet-role-probe DaemonSet runs on every node.
func newProbeCommand() *cobra.Command {
	var (
		node, hostRoot, fsyncDir, metricsURL, metricsAddr, kubeconfig, settingsConfigMap string
	)
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Sample this node every period into its own record (a ConfigMap named after the node)",
		Long: `Runs on every node (the fleet-role-probe DaemonSet, host network). It watches
the Nodes (an informer that keeps of each one only what it reads). Each sample
period it reads them from that cache, and when this node is a voter or marked
eligible it takes one sample: the TCP connect time to every other voter's etcd
peer port, what the local etcd member's metrics gained (voters), memory and its
pressure, the class of the link the default route leaves by, how late a timer
due once a heartbeat interval woke (the largest lateness since the last
sample: the timer runs beside the samples all the time), and once a window
the fdatasync reading (non-voters). It appends the sample to its window and
writes the window to its node's record: the ConfigMap named after the node in
the records' namespace (records_namespace), labelled fleet-role.io/record=probe
and owned by the Node. A node that is neither a voter nor eligible records nothing and deletes
the record it had.

It fails closed: at start and once every entry_unchanged it asks the API
server, with a server-side dry run that changes nothing, to create a record not
its node's, which the admission policy fleet-role-probe-records must refuse.
Until it has seen it refused it writes no samples; once it sees it admitted it
replaces its record by a marker that says why, logs it, serves /readyz as not
ready and sets fleet_role_probe_policy_enforced to 0, and writes its window
again once the refusal comes back.

With --settings-configmap it follows that ConfigMap while it runs: a valid
change of the settings applies from its next sample; one that does not
validate, or that changes a key applying only at a restart, is refused and
logged, and the settings in force stay.

It never exits on a failed reading or write; it exits 2 on a bad setting at
start and 0 on SIGTERM, after writing what it holds. It serves /metrics, /healthz and
/readyz (ready while it writes its samples).`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&node, "node", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME, from the downward API)")
	f.StringVar(&hostRoot, "host-root", "/", "where the host's /proc and /sys are mounted")
	f.StringVar(&fsyncDir, "fsync-dir", "/var/lib/fleet-role/fsync", "directory on the disk etcd would use, for the fdatasync reading")
	f.StringVar(&metricsURL, "metrics-url", "http://127.0.0.1:2381/metrics", "the local etcd member's metrics page (k3s serves it here)")
	checkAddr := metricsAddressFlag(f, &metricsAddr, probeMetricsEnv, probeMetricsPort, "/metrics and /healthz")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: the in-cluster ServiceAccount)")
	sf := settings.AddFlags(f)
	settingsConfigMapFlag(f, &settingsConfigMap)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		s, err := loadSettings(sf)
		if err != nil {
			return err
		}
		if err := checkAddr(); err != nil {
			return err
		}
		if node == "" {
			return usageErrorf("--node is empty: set NODE_NAME from the downward API (spec.nodeName) or pass --node")
		}
		if hostRoot == "" {
			return usageErrorf("--host-root is empty: give / or where the host is mounted")
		}
		log := newLogger(cmd.ErrOrStderr(), "probe") // the probe adds its node to every line
		client, err := kube.NewClient(kubeconfig)
		if err != nil {
			return usageErrorf("kubernetes client: %w", err)
		}
		format, err := client.RecordFormat(s.Namespace, controller.LeaseName)
		if err != nil {
			return usageErrorf("kubernetes client: %w", err)
		}
		metrics := probe.NewMetrics()
		nodes := client.NewNodeInformer(kube.NodeView(s, probe.PeerAddressAnnotation), kube.NodeSelectors(s)...)
		p, err := probe.New(probe.Config{
			Node:     node,
			Settings: s,
			Records:  client.RecordsInLayout(s.RecordsNamespace(), kube.Layout{Format: format, RetryAfter: s.Window, CheckEvery: s.StalePeriods()}),
			Policy:   client.PolicyCheck(s.RecordsNamespace()),
			Nodes:    nodes,
			Sampler:  probe.NewHost(s, hostRoot, metricsURL, fsyncDir),
			Log:      log,
			Metrics:  metrics,
		})
		if err != nil {
			return usageError(err)
		}
		// Ready while it writes its samples: the API server refuses it a
		// write to a record not its own (internal/probe/policy.go).
		server, err := serveMetrics(metricsAddr, metrics.Registry, httpserve.Plain(p.Ready), log)
		if err != nil {
			return err
		}
		ctx, cancel := signalContext(cmd.Context())
		defer cancel()
		loop := func(ctx context.Context) error {
			// The first period needs the Nodes: wait for the informer's
			// first list, for a period at most. With the API server away
			// that long the probe starts anyway, and each period without
			// the Nodes says so and takes no sample until they arrive.
			wctx, wcancel := context.WithTimeout(ctx, s.SamplePeriod)
			if err := nodes.WaitForSync(wctx); err != nil && ctx.Err() == nil {
				log.Warn("the Nodes have not arrived yet; starting without them", "err", err)
			}
			wcancel()
			return p.Run(ctx)
		}
		follow := followSettings(client, s, sf, settingsConfigMap, metrics.Registry, log, func(s settings.Settings, _ settings.Source) { p.SetSettings(s) })
		return runParts(ctx, append(append(server, follow...),
			part{"nodes informer", nodes.Run},
			part{"probe loop", loop})...)
	}
	return cmd
}
