package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/connect"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// defaultConnectTimeout is k3s's election timeout (docs/facts.md, k3s): a peer
// that takes longer than that to accept a connection is as good as absent to
// etcd, so waiting longer would tell nothing more.
const defaultConnectTimeout = 5 * time.Second

// connectReading is what check connect prints.
type connectReading struct {
	Peers          []connect.Result `json:"peers"`
	TimeoutSeconds float64          `json:"timeout_seconds"`
	// Judged holds the slowest connect to the decision's connect limit at
	// the settings' election timeout; a failed one counts as over it.
	Judged checkVerdict `json:"judged"`
}

// connectVerdict judges the slowest of the connects against l, a failed
// one first, as the decision counts a failed connect over the limit.
func connectVerdict(l settings.Limit, peers []connect.Result) checkVerdict {
	worst := -1
	for i, p := range peers {
		if !p.OK {
			v := checkVerdict{Verdict: checkUnfit, Limit: &l, Basis: l.Basis, Why: fmt.Sprintf("the connect to %s failed (%s): a failed connect counts as over the limit", p.Peer, p.Err)}
			return v
		}
		if worst < 0 || p.Seconds > peers[worst].Seconds {
			worst = i
		}
	}
	if worst < 0 {
		return notJudged(l, "no peer")
	}
	v := judge(l, "connect "+peers[worst].Peer, peers[worst].Seconds)
	if len(peers) > 1 {
		v.Why += fmt.Sprintf(" (the slowest of %d)", len(peers))
	}
	return v
}

func newCheckConnectCommand() *cobra.Command {
	var (
		peers   []string
		timeout time.Duration
		asJSON  bool
		sf      *settings.Flags
	)
	cmd := &cobra.Command{
		Use:   "connect --peer HOST:PORT [--peer HOST:PORT ...]",
		Short: "Time a TCP connect to each peer (an etcd member's peer port, 2380 on k3s)",
		Long: `Connects once to every --peer at the same time and prints how long each
connect took: the TCP handshake alone, nothing is sent and the connection is
closed at once. A connect that is refused or does not complete within --timeout
is a failure with its error, never a time.

The slowest connect is judged against the decision's connect limit, a
twentieth of the election timeout (--election-timeout, k3s's 5s by
default: 250ms), a failed connect counting as over it, as the decision
counts it. Exit 0 when the reading is fit, 3 when it is unfit, 1 when it
was interrupted, 2 for a usage error.`,
		Example: `  fleet-role check connect --peer 10.0.0.11:2380 --peer 10.0.0.12:2380
  fleet-role check connect --peer [fd7a::2]:2380 --timeout 2s --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(peers) == 0 {
				return usageErrorf("connect needs at least one --peer HOST:PORT")
			}
			for _, p := range peers {
				if _, _, err := connect.ParsePeer(p); err != nil {
					return usageError(fmt.Errorf("--peer: %w", err))
				}
			}
			if timeout <= 0 {
				return usageErrorf("--timeout %s: must be above zero", timeout)
			}
			ctx, stop := signal.NotifyContext(commandContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			results := connect.Measure(ctx, peers, timeout)
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("connect reading interrupted: %w", context.Cause(ctx))
			}
			set, err := sf.Load(os.LookupEnv)
			if err != nil {
				return usageError(err)
			}
			r := connectReading{Peers: results, TimeoutSeconds: timeout.Seconds(), Judged: connectVerdict(set.ConnectLimit(), results)}
			return printJudged(cmd.OutOrStdout(), asJSON, r, r.Judged, func(w io.Writer) error {
				return writeConnect(w, r)
			})
		},
	}
	cmd.Flags().StringArrayVar(&peers, "peer", nil, "peer address `HOST:PORT` to connect to (repeatable, at least one; an IPv6 host in brackets)")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultConnectTimeout, "how long each connect may take before it counts as failed (default: k3s's election timeout)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	// The connect limit is a twentieth of the cluster's election timeout.
	sf = settings.AddFlagsOf(cmd.Flags(), "election_timeout")
	return cmd
}

func writeConnect(w io.Writer, r connectReading) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "PEER\tCONNECT\n")
	for _, p := range r.Peers {
		if p.OK {
			fmt.Fprintf(tw, "%s\t%.3f ms\n", p.Peer, p.Seconds*1e3)
		} else {
			fmt.Fprintf(tw, "%s\tfailed: %s\n", p.Peer, p.Err)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	r.Judged.write(tw)
	return tw.Flush()
}

// commandContext is the command's context, or Background when it was run
// without one.
func commandContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
