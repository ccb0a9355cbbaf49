package demo

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/cli"
)

// Main runs the demo's command line (cmd/fleet-role-demo) and returns the
// process's exit code: 0 when the demo showed what it set out to, 1 when it
// could not (the machine too slow for its limits, a phase that timed out),
// 2 for a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	return cli.Execute(NewCommand(), args, stdout, stderr)
}

// NewCommand is the demo's command. It lives apart from fleet-role's own
// commands so that the product binary links nothing that starts etcd or
// builds tools.
func NewCommand() *cobra.Command {
	opt := Defaults()
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fleet-role-demo",
		Short: "Run the whole fleet-role pipeline on this machine: real etcd members, a fault, and the swap it would make",
		Long: `Starts a small fleet on loopback: three etcd v3.6.15 members, each its own
process behind etcd's own proxy, and two standby hosts, with etcd's own timing
(heartbeat 100 ms, election timeout 1000 ms) unless --election-timeout. The real probe and controller
code runs for every host, writing to an in-process ConfigMap store (or, with
--kubeconfig, to a real API server). It waits until every host has a full
window and is fit, puts the fault on a voter, and shows the verdict turn and the
swap the controller would make. Nothing needs root; etcd is built once from the
Go module proxy when it is not built yet.

Before anything starts it measures this machine's loopback connects and
wake-ups against the limits the hosts will be judged by; a machine too busy to
hold them is told so, with the figures and the election timeout that would do,
and the demo exits 1.

Ctrl-C stops every process it started and removes its data unless --keep.`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&opt.Fault, "fault", opt.Fault, "the fault to put on a voter: slow (delay its peer traffic), pause (SIGSTOP it and its probe) or none")
	f.DurationVar(&opt.Delay, "delay", opt.Delay, "with --fault=slow, the delay added to the voter's peer traffic in each direction; unless given, a quarter of --election-timeout")
	f.DurationVar(&opt.Period, "period", opt.Period, "the sample period")
	f.DurationVar(&opt.ElectionTimeout, "election-timeout", opt.ElectionTimeout, "the members' election timeout (the heartbeat a tenth of it); every limit scales with it, so a busy machine that cannot hold etcd's own 1s can run with a longer one")
	f.BoolVar(&opt.Keep, "keep", false, "keep the data directory (etcd data, the demo's log)")
	f.BoolVar(&asJSON, "json", false, "print the last status document as JSON on standard output (progress goes to standard error)")
	f.StringVar(&opt.Kubeconfig, "kubeconfig", "", "keep the ConfigMaps on this API server instead of in process (the demo's hosts stay its own)")
	f.StringVar(&opt.Namespace, "namespace", opt.Namespace, "with --kubeconfig, the namespace of the demo's status (its records go in NAMESPACE-records)")
	f.DurationVar(&opt.Hold, "hold", 0, "once the fault has shown, keep the fleet deciding with the fault in place for this long before the demo ends: time to look at the status page, /status")
	f.StringVar(&opt.Listen, "listen", opt.Listen, "where the controller serves its /metrics and its status page, /status, as the deployed controller does (default: a free loopback port, printed; empty: nowhere)")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !f.Changed("delay") {
			opt.Delay = DelayFor(opt.ElectionTimeout)
		}
		if err := opt.Validate(); err != nil {
			return cli.UsageError(err)
		}
		progress := cmd.OutOrStdout()
		if asJSON {
			progress = cmd.ErrOrStderr()
		}
		opt.Out = progress
		opt.Live = isTerminal(progress)
		// SIGPIPE too: progress piped into a reader that stops (head)
		// would otherwise kill the demo before it stops its members.
		ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGPIPE)
		defer cancel()
		res, err := Run(ctx, opt)
		if err != nil {
			return err
		}
		res.WriteSummary(progress, opt)
		if asJSON {
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(res.Status)
		}
		return nil
	}
	return cmd
}

// isTerminal says whether w is a terminal, where a table can be redrawn.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
