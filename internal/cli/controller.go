package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"k8s.io/client-go/rest"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/httpserve"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/nodeevents"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/statuspage"
)

// newControllerCommand is what the fleet-role Deployment runs.
func newControllerCommand() *cobra.Command {
	var metricsAddr, kubeconfig, settingsConfigMap, pageService string
	var elect bool
	var leaseDuration, renewDeadline, retryPeriod time.Duration
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Decide twice a period from the probes' samples and publish fleet-role-status (dry-run)",
		Long: `Runs as the fleet-role Deployment. Twice every sample period it reads the
probes' records (a shared informer lists and watches the ConfigMaps labelled
fleet-role.io/record=probe in the records' namespace) and the Nodes (watched the same
way, keeping of each one only what the decision reads), decides which hosts
are fit, unfit or unknown and the swap it would make, and writes the status
document to status.json of the fleet-role-status ConfigMap: at once when the
decision or a verdict changed, at most once a period when only figures did,
and at least once a window. It reads its previous status once, at start, so
that what a decision remembers survives a restart. It changes nothing else.

It records an Event on a host's Node (in namespace default, where kubectl
describe node shows it) when the host's verdict changes and when the swap is
advised or held back by another step.

One writer: the Deployment runs two replicas, and only the one that holds the
Lease fleet-role (coordination.k8s.io, in its namespace) decides and writes;
the other waits to take the Lease over, within the lease duration and two
retry periods of the leader's last renewal (at once when the leader stops and
gives it up). A leader whose renewals fail for the renew deadline stops writing;
each write is conditioned on the status's resourceVersion as that leader last
saw it, so a write that lands after another leader's fails. The status names
its writer. $POD_NAME (the downward API), else the host name, and a random
suffix make its identity.

With --settings-configmap it follows that ConfigMap while it runs: a valid
change of the settings applies from its next decision, and the status names
the version in force (settings.source); one that does not validate, or that
changes a key applying only at a restart, is refused, logged and named in the
status, and the settings in force stay.

It starts only when FLEET_ROLE_DRY_RUN is set (exit 2 otherwise): true,
the install's, and it changes nothing; false, with the setting acting:
guided or auto (deploy/acting), and it carries out the swap it publishes,
one step at a time, keeping its journal in the ConfigMap fleet-role-swap:
guided once an operator approves the plan (fleet-role approve), auto once
the same swap was published for a window. With acting: plan the status
carries the published swap's steps, each with its guards, and nothing else
is written (docs/acting.md). It serves /metrics, /healthz and /readyz (ready while a decision
succeeded within the last three sample periods; a follower while it reads
the Lease), and /status: a read-only HTML page of its last decision, the
link matrix and the verdicts of the decisions it remembers (a window's
worth). While it leads it names its page in the Endpoints of the Service
--page-service (the manifests' fleet-role), which reaches the leader's page.`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	checkAddr := metricsAddressFlag(f, &metricsAddr, controllerMetricsEnv, controllerMetricsPort, "/metrics, /healthz, /readyz and the status page "+statuspage.Path)
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default: the in-cluster ServiceAccount)")
	f.BoolVar(&elect, "leader-elect", true, "run for the Lease and decide only while holding it (false: decide and write at once, as the only controller)")
	f.DurationVar(&leaseDuration, "leader-elect-lease-duration", controller.DefaultLeaseDuration, "how long a follower waits after the last renewal it saw before it takes the Lease over")
	f.DurationVar(&renewDeadline, "leader-elect-renew-deadline", controller.DefaultRenewDeadline, "how long the leader keeps writing while its renewals fail")
	f.DurationVar(&retryPeriod, "leader-elect-retry-period", controller.DefaultRetryPeriod, "how often the Lease is renewed, or tried")
	f.StringVar(&pageService, "page-service", "", "name this controller's page, while it leads, in the Endpoints of this Service of the namespace (the manifests name fleet-role, a Service without a selector): its Pod from $POD_NAME, its address from $POD_IP and --metrics-address's port (docs/operators.md, The status page); empty: none")
	sf := settings.AddFlags(f)
	settingsConfigMapFlag(f, &settingsConfigMap)

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		// Checked before anything else, so that nothing is read or
		// written by a controller that was not told in so many words
		// whether it only reports.
		if v := os.Getenv(settings.EnvName("dry_run")); v != "true" && v != "false" {
			return usageErrorf("FLEET_ROLE_DRY_RUN is %q: the controller starts only when it is set, true to only report (the install's), false to carry out the swaps acting guided or auto allows (deploy/acting)", v)
		}
		s, err := loadSettings(sf)
		if err != nil {
			return err
		}
		if s.Acts() && !elect {
			return usageErrorf("acting = %s with --leader-elect=false: a controller that changes the cluster must hold the Lease, whose term fences its journal and its commands (docs/acting.md)", s.Acting)
		}
		if err := checkAddr(); err != nil {
			return err
		}
		if pageService != "" && !elect {
			return usageErrorf("--page-service %s with --leader-elect=false: the leader names its page while its term lasts, and a controller that runs for no Lease has none", pageService)
		}
		log := newLogger(cmd.ErrOrStderr(), "controller")
		if self := s.SelfSetLabels(); len(self) > 0 {
			// Said once, at start: the labels work, but a compromised node
			// can mark itself (docs/install.md, Mark the hosts).
			log.Warn("a node's kubelet may set these labels on its own node, so a compromised node can mark itself eligible or pinned; keys under "+settings.NodeRestrictionPrefix+" are set by an administrator alone",
				"settings", self, "eligible_label", s.EligibleLabel, "pinned_label", s.PinnedLabel)
		}
		var tune func(*rest.Config)
		if s.Acts() {
			// A swap stops one server's API server until k3s restarts
			// there (kube.RedialAfterFailure).
			tune = kube.RedialAfterFailure
		}
		client, err := kube.NewClientWith(kubeconfig, tune)
		if err != nil {
			return usageErrorf("kubernetes client: %w", err)
		}
		if s.Acts() {
			// A swap removes a server's etcd member, whose API server
			// then serves no events until k3s restarts there: the
			// informers make their watches anew each sample period.
			if err := client.Rewatch(s.SamplePeriod); err != nil {
				return err
			}
		}
		metrics := controller.NewMetrics()
		page := statuspage.NewServer(statuspage.HistoryFor(s, controller.DecisionsPerPeriod), "controller "+kube.EventComponent)
		page.SetRefresh(s.SamplePeriod)
		sink, err := client.EventSink()
		if err != nil {
			return err
		}
		events := nodeevents.Start(sink, kube.EventComponent, nil, log)
		defer events.Stop()
		nodes := client.NewNodeInformer(kube.NodeView(s), kube.NodeSelectors(s)...)
		// The records of nodes no vote could go to are counted, not held
		// (docs/performance.md, Bounded cost).
		records := client.NewRecordInformerHolding(s.RecordsNamespace(), func(node string) (bool, bool) {
			n, ok := nodes.Get(node)
			if !ok {
				// The informer holds every Node that could vote
				// (kube.NodeSelectors): once it has its first lists,
				// a Node it lacks could not, or does not exist.
				return false, nodes.HasSynced()
			}
			return kube.NodeCanVote(n, s), true
		})
		c, err := controller.New(controller.Config{
			Settings: s,
			Store:    client.ConfigMaps(s.Namespace),
			Records:  records,
			Nodes:    nodes,
			Log:      log,
			Metrics:  metrics,
			Page:     page,
			Events:   events,
			Policy:   client.PolicyReader(),
			Swap:     client.SwapStore(s.Namespace),
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
		decisions := part{"decision loop", c.Run}
		if elect {
			leases, err := client.Leases(s.Namespace)
			if err != nil {
				return err
			}
			e := controller.Election{
				Leases: leases, Status: client.StatusStore(s.Namespace),
				Namespace: s.Namespace, Name: controller.LeaseName, Identity: identity(),
				LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
				ReleaseOnCancel: true,
			}
			if pageService != "" {
				self, err := podAddress(s.Namespace, metricsAddr)
				if err != nil {
					return usageErrorf("--page-service %s: %w", pageService, err)
				}
				eps, err := client.PageEndpoints(s.Namespace)
				if err != nil {
					return err
				}
				e.Page = &controller.PageAdvert{Endpoints: eps, Name: pageService, Self: self}
			}
			decisions = part{"decision loop", func(ctx context.Context) error { return c.RunElected(ctx, e) }}
		}
		parts := append(server, followSettings(client, s, sf, settingsConfigMap, metrics.Registry, log, c.SetSettings)...)
		return runParts(ctx, append(parts,
			part{"records informer", records.Run},
			part{"nodes informer", nodes.Run},
			decisions)...)
	}
	return cmd
}

// podAddress is where this controller's page is reached in its Pod: the
// Pod's name (POD_NAME) and IP (POD_IP), from the downward API, and the
// port of the address it serves on.
func podAddress(namespace, serving string) (kube.PageAddress, error) {
	name, ip := os.Getenv("POD_NAME"), os.Getenv("POD_IP")
	if name == "" || net.ParseIP(ip) == nil {
		return kube.PageAddress{}, fmt.Errorf("POD_NAME %q and POD_IP %q must name this Pod and its IP address (the downward API's metadata.name and status.podIP)", name, ip)
	}
	_, portText, err := net.SplitHostPort(serving)
	port, perr := strconv.ParseUint(portText, 10, 16)
	if err != nil || perr != nil || port == 0 {
		return kube.PageAddress{}, fmt.Errorf("the page is served at %q (--metrics-address), which names no port", serving)
	}
	return kube.PageAddress{Namespace: namespace, Pod: name, IP: ip, Port: int32(port)}, nil
}

// identity is this controller's identity in the Lease: its Pod's name
// (POD_NAME from the downward API), else the host name, and a random
// suffix, so that a restarted process never takes itself for the holder it
// was.
func identity() string {
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return name + "_" + hex.EncodeToString(b)
}
