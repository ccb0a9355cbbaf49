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

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/wakeup"
)

// wakeupReading is what check wakeup prints.
type wakeupReading struct {
	IntervalSeconds float64 `json:"interval_seconds"`
	ForSeconds      float64 `json:"for_seconds"`
	Wakes           int     `json:"wakes"`
	// LateMaxSeconds is the largest lateness of the wake-ups; the limit is
	// the interval (wakeup_late, docs/limits.md), under which is fit.
	LateMaxSeconds float64 `json:"late_max_seconds"`
	LimitSeconds   float64 `json:"limit_seconds"`
	Under          bool    `json:"under_limit"`
	// Judged holds the largest lateness to wakeup_late at a heartbeat
	// interval of --interval.
	Judged checkVerdict `json:"judged"`
}

func newCheckWakeupCommand() *cobra.Command {
	var (
		interval, span time.Duration
		asJSON         bool
	)
	cmd := &cobra.Command{
		Use:   "wakeup",
		Short: "Time how late this host wakes a timer due once a heartbeat interval",
		Long: `Keeps a timer due once every --interval (k3s's heartbeat, 500ms, by default),
on a fixed schedule as etcd's raft ticker is, for --for, and prints how many
times it woke and the largest lateness: how long after it was due this
process ran. It is the probe's wakeup_late reading, taken once: a host starved
of CPU runs etcd's ticker as late, and a tick a heartbeat late makes a
heartbeat gap etcd counts as late, so the limit is the interval itself
(docs/limits.md). The reading's figure is its largest lateness; the probe
judges the tail of one such figure per sample over its window.

The exit code is 0 whenever the reading was taken, late or not, 1 when it was
interrupted, 2 for a usage error.`,
		Example: `  fleet-role check wakeup
  fleet-role check wakeup --interval 100ms --for 1m --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// etcd takes its heartbeat interval in whole milliseconds.
			if interval < time.Millisecond {
				return usageErrorf("--interval %s: must be at least 1ms, as etcd's heartbeat interval is", interval)
			}
			if span < interval {
				return usageErrorf("--for %s: must be at least --interval %s, so that the timer falls due", span, interval)
			}
			ctx, stop := signal.NotifyContext(commandContext(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.ErrOrStderr(), "timing a %s timer for %s...\n", interval, span)
			m := wakeup.New(interval)
			m.Start(ctx)
			select {
			case <-ctx.Done():
			case <-wall.After(span):
			}
			m.Stop()
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("wakeup reading interrupted: %w", context.Cause(ctx))
			}
			got, _ := m.Take()
			r := wakeupReading{IntervalSeconds: interval.Seconds(), ForSeconds: span.Seconds(), Wakes: got.Wakes,
				LateMaxSeconds: got.Late.Seconds(), LimitSeconds: interval.Seconds(), Under: got.Late < interval}
			r.Judged = judge(settings.Settings{HeartbeatInterval: interval}.WakeupLimit(), "wakeup_late max", got.Late.Seconds())
			return printJudged(cmd.OutOrStdout(), asJSON, r, r.Judged, func(w io.Writer) error {
				return writeWakeup(w, r)
			})
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", settings.Defaults().HeartbeatInterval, "how often the timer is due (default: k3s's heartbeat interval)")
	cmd.Flags().DurationVar(&span, "for", 10*time.Second, "how long to keep the timer")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func writeWakeup(w io.Writer, r wakeupReading) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "timer\tdue every %s for %s: %d wake-ups\n", secs(r.IntervalSeconds), secs(r.ForSeconds), r.Wakes)
	verdict := "under the limit"
	if !r.Under {
		verdict = "OVER the limit"
	}
	fmt.Fprintf(tw, "late_max\t%.3f ms (%s of %s, the interval)\n", r.LateMaxSeconds*1e3, verdict, secs(r.LimitSeconds))
	r.Judged.write(tw)
	return tw.Flush()
}

func secs(s float64) string { return time.Duration(s * float64(time.Second)).String() }
