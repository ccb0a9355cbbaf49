package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/etcdmetrics"
)

// defaultEtcdInterval is the time between the two scrapes of `check etcd`:
// long enough for a member under any write load to fsync its WAL many
// times, and one k3s election timeout (5000 ms, docs/facts.md), so that a leader
// change in it is one the cluster really went through.
const defaultEtcdInterval = 5 * time.Second

func newCheckEtcdCommand() *cobra.Command {
	var (
		metricsURL string
		interval   time.Duration
		timeout    time.Duration
		asJSON     bool
	)
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Scrape an etcd member's metrics twice and print what it gained in between",
		Long: `Scrapes the etcd member's metrics page twice, --interval apart, each scrape
bounded by --timeout (a paused member accepts the connection and never
answers), and prints what the member gained in between: WAL fsync and backend
commit counts and p99, round trip to each peer, leader changes; and what it is
now: its ID, leader, learner, whether it sees a leader, connected and known
peers, database size and quota. A member that restarted between the scrapes
is counted from its restart, never as a negative change.

It reads the page within the probe's bounds: no redirect is followed, a page
over 1 MiB or naming more than 6 known peers is refused, and --timeout covers
the page's parse as well as its read.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := url.Parse(metricsURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usageErrorf("--metrics-url %q: want an http:// or https:// URL", metricsURL)
			}
			if interval <= 0 {
				return usageErrorf("--interval %v: want more than 0", interval)
			}
			if timeout <= 0 {
				return usageErrorf("--timeout %v: want more than 0", timeout)
			}
			r, err := readEtcd(cmd.Context(), metricsURL, interval, timeout)
			if err != nil {
				return err
			}
			return printReading(cmd.OutOrStdout(), asJSON, r, func(w io.Writer) error {
				return printEtcd(w, metricsURL, r)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&metricsURL, "metrics-url", etcdmetrics.DefaultURL, "the member's metrics page (k3s serves it here on every server)")
	f.DurationVar(&interval, "interval", defaultEtcdInterval, "time between the two scrapes")
	f.DurationVar(&timeout, "timeout", etcdmetrics.DefaultTimeout, "bound on each scrape")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// readEtcd scrapes twice, interval apart, and returns the gain.
func readEtcd(ctx context.Context, metricsURL string, interval, timeout time.Duration) (etcdmetrics.Reading, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	client := &http.Client{Timeout: timeout}
	scrape := func() (*etcdmetrics.Snapshot, error) {
		sctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return etcdmetrics.Scrape(sctx, client, metricsURL)
	}
	prev, err := scrape()
	if err != nil {
		return etcdmetrics.Reading{}, err
	}
	t := time.NewTimer(interval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return etcdmetrics.Reading{}, ctx.Err()
	case <-t.C:
	}
	cur, err := scrape()
	if err != nil {
		return etcdmetrics.Reading{}, err
	}
	return etcdmetrics.Gained(prev, cur), nil
}

func printEtcd(w io.Writer, metricsURL string, r etcdmetrics.Reading) error {
	role := "follower"
	switch {
	case r.IsLeader:
		role = "leader"
	case r.IsLearner:
		role = "learner"
	}
	leader := "sees a leader"
	if !r.HasLeader {
		leader = "sees NO leader"
	}
	bw := &etcdPrinter{w: w}
	bw.printf("etcd member %s (%s), %s, at %s\n", etcdIDText(r.MemberID), role, leader, metricsURL)
	bw.printf("  over %.1f s", r.IntervalSeconds)
	if r.Restarted {
		bw.printf(" (it restarted: counted from its start)")
	}
	bw.printf("\n")
	bw.printf("  peers:          %d connected of %d known\n", r.ConnectedPeers, r.KnownPeers)
	bw.printf("  leader changes: %d\n", r.LeaderChanges)
	bw.printf("  wal fsync:      %s\n", etcdGainText(r.WALFsync))
	bw.printf("  backend commit: %s\n", etcdGainText(r.BackendCommit))
	for _, id := range r.Peers() {
		bw.printf("  rtt to %-16s %s\n", id+":", etcdGainText(r.PeerRTT[id]))
	}
	bw.printf("  database:       %s of %s quota\n", etcdBytesText(r.DBSizeBytes), etcdBytesText(r.QuotaBytes))
	return bw.err
}

func etcdIDText(s string) string {
	if s == "" {
		return "(no ID on the page)"
	}
	return s
}

func etcdGainText(g etcdmetrics.Gain) string {
	if g.P99Seconds == nil {
		return fmt.Sprintf("%d observations", g.Count)
	}
	return fmt.Sprintf("%d observations, p99 %.3f ms", g.Count, *g.P99Seconds*1e3)
}

func etcdBytesText(n int64) string {
	v, units := float64(n), []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// etcdPrinter keeps the first write error so that a run of prints needs one check.
type etcdPrinter struct {
	w   io.Writer
	err error
}

func (e *etcdPrinter) printf(format string, a ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, a...)
	}
}
