package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/httpserve"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/nodeevents"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/statuspage"
)

// newControllerCommand is what the fleet-role Deployment runs.
func newControllerCommand() *cobra.Command {
	var metricsAddr, kubeconfig string
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Decide twice a period from the probes' samples and publish fleet-role-status (dry-run)",
		Long: `Runs as the fleet-role Deployment. Twice every sample period it reads the
probes' records (a shared informer lists and watches the ConfigMaps labelled
fleet-role.io/record=probe in its namespace) and the Nodes (watched the same
way, keeping of each one only what the decision reads), decides which hosts
are fit, unfit or unknown and the swap it would make, and writes the status
document to status.json of the fleet-role-status ConfigMap: at once when the
decision or a verdict changed, at most once a period when only figures did,
and at least once a window. It reads its previous status once, at start, so
that what a decision remembers survives a restart. It changes nothing else.

It records an Event on a host's Node (in namespace default, where kubectl
describe node shows it) when the host's verdict changes and when the swap is
advised or held back by another step.

Dry-run is the only mode: it refuses to start unless FLEET_ROLE_DRY_RUN=true
(exit 2). It serves /metrics, /healthz and /readyz (ready while a decision
succeeded within the last three sample periods), and /status: a read-only
HTML page of its last decision, the link matrix and the verdicts of the
decisions it remembers (a window's worth).`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	checkAddr := metricsAddressFlag(f, &metricsAddr, controllerMetricsEnv, controllerMetricsPort, "/metrics, /healthz, /readyz and the status page "+statuspage.Path)
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: the in-cluster ServiceAccount)")
	sf := settings.AddFlags(f)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		// Checked before anything else, so that nothing is read or
		// written by a controller that was not told it only reports.
		if v := os.Getenv(settings.EnvName("dry_run")); v != "true" {
			return usageErrorf("FLEET_ROLE_DRY_RUN is %q: fleet-role only reports what it would do, and starts only with FLEET_ROLE_DRY_RUN=true", v)
		}
		s, err := loadSettings(sf)
		if err != nil {
			return err
		}
		if !s.DryRun {
			return usageErrorf("dry_run is false in the settings: dry-run is the only mode fleet-role has")
		}
		if err := checkAddr(); err != nil {
			return err
		}
		log := newLogger(cmd.ErrOrStderr(), "controller")
		client, err := kube.NewClient(kubeconfig)
		if err != nil {
			return usageErrorf("kubernetes client: %w", err)
		}
		metrics := controller.NewMetrics()
		page := statuspage.NewServer(statuspage.HistoryFor(s, controller.DecisionsPerPeriod), "controller "+kube.EventComponent)
		rec, stopEvents, err := client.EventRecorder()
		if err != nil {
			return err
		}
		defer stopEvents()
		records := client.NewRecordInformer(s.Namespace)
		nodes := client.NewNodeInformer(decide.NodeView(s))
		c, err := controller.New(controller.Config{
			Settings: s,
			Store:    client.ConfigMaps(s.Namespace),
			Records:  records,
			Nodes:    nodes,
			Log:      log,
			Metrics:  metrics,
			Page:     page,
			Events:   nodeevents.New(rec),
		})
		if err != nil {
			return usageError(err)
		}
		server, err := serveMetrics(metricsAddr, metrics.Registry, c.Ready, log, httpserve.Route{Pattern: statuspage.Path, Handler: page})
		if err != nil {
			return err
		}
		ctx, cancel := signalContext(cmd.Context())
		defer cancel()
		return runParts(ctx, append(server,
			part{"records informer", records.Run},
			part{"nodes informer", nodes.Run},
			part{"decision loop", c.Run})...)
	}
	return cmd
}
