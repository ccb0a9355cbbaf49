package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleet-role/fleet-role/internal/etcdmetrics"
	"github.com/fleet-role/fleet-role/internal/settings"
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
		sf         *settings.Flags
	)
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Scrape an etcd member's metrics twice, print what it gained in between, and judge it",
		Long: `Scrapes the etcd member's metrics page twice, --interval apart, each scrape
bounded by --timeout (a paused member accepts the connection and never
answers), and prints what the member gained in between: WAL fsync and backend
commit counts and p99, round trip to each peer, leader changes; and what it is
now: its ID, leader, learner, whether it sees a leader, connected and known
peers, database size and quota. A member that restarted between the scrapes
is counted from its restart, never as a negative change.

Each latency the member gained is judged at its p99, the percentile of
etcd's own facts, against the limit the decision holds the same signal to:

  wal_fsync       under 10ms (etcd's FAQ)
  backend_commit  under 25ms (etcd's FAQ)
  peer_rtt        to each peer, at most a tenth of the election timeout
                  (--election-timeout, k3s's 5s by default: 500ms)

A latency etcd observed nothing of in the interval (a member that wrote
nothing, a peer round trip etcd feeds about twice every 30 s) is not judged.
The verdict is unfit when any judged latency is, fit when every judged one
is within its limit, and not judged when there was nothing to judge. The
decision holds the same signals over a window of a voter's samples at the
settings' tail percentile; this is one interval, by hand.

It reads the page within the probe's bounds: no redirect is followed, a page
over 1 MiB or naming more than 6 known peers is refused, and --timeout covers
the page's parse as well as its read.

Exit 0 when the member is fit or nothing was judged, 3 when it is unfit, 1
when the page could not be read, 2 for a usage error.`,
		Example: `  fleet-role check etcd                     # k3s's member on this server
  fleet-role check etcd --interval 30s --json`,
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
			set, err := sf.Load(os.LookupEnv)
			if err != nil {
				return usageError(err)
			}
			r, err := readEtcd(cmd.Context(), metricsURL, interval, timeout)
			if err != nil {
				return err
			}
			rep := judgeEtcd(set, r)
			return printJudged(cmd.OutOrStdout(), asJSON, rep, rep.Judged, func(w io.Writer) error {
				return printEtcd(w, metricsURL, rep)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&metricsURL, "metrics-url", etcdmetrics.DefaultURL, "the member's metrics page (k3s serves it here on every server)")
	f.DurationVar(&interval, "interval", defaultEtcdInterval, "time between the two scrapes")
	f.DurationVar(&timeout, "timeout", etcdmetrics.DefaultTimeout, "bound on each scrape")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	sf = settings.AddFlagsOf(f, "election_timeout")
	return cmd
}

// etcdReport is what check etcd prints: the member's reading (its fields at
// the top level of the JSON, as before the check judged), each latency
// judged, and one verdict.
type etcdReport struct {
	etcdmetrics.Reading
	// Signals are the judged latencies: wal_fsync, backend_commit, then
	// peer_rtt to each peer by member ID.
	Signals []etcdSignal `json:"signals"`
	// Judged is the member's verdict: the first unfit signal's, else fit
	// when any was judged, else not judged.
	Judged checkVerdict `json:"judged"`
}

// etcdSignal is one latency of the reading, judged.
type etcdSignal struct {
	Signal string `json:"signal"`
	// Peer is the peer's member ID, for peer_rtt.
	Peer   string       `json:"peer,omitempty"`
	Judged checkVerdict `json:"judged"`
}

// judgeEtcd holds each latency r gained to the decision's limit for that
// signal, at the p99 (the percentile etcd's facts are stated at).
func judgeEtcd(s settings.Settings, r etcdmetrics.Reading) etcdReport {
	rep := etcdReport{Reading: r}
	gain := func(signal, peer string, l settings.Limit, g etcdmetrics.Gain) {
		name := signal + " p99"
		if peer != "" {
			name = signal + " to " + peer + " p99"
		}
		v := notJudged(l, fmt.Sprintf("etcd observed no %s in the %.1f s", signal, r.IntervalSeconds))
		if g.Count > 0 && g.P99Seconds != nil {
			v = judge(l, name, *g.P99Seconds)
			v.Why += fmt.Sprintf(" (%d observations)", g.Count)
		}
		rep.Signals = append(rep.Signals, etcdSignal{Signal: signal, Peer: peer, Judged: v})
	}
	gain("wal_fsync", "", s.WALFsyncLimit(), r.WALFsync)
	gain("backend_commit", "", s.BackendCommitLimit(), r.BackendCommit)
	for _, id := range r.Peers() {
		gain("peer_rtt", id, s.RTTLimit(), r.PeerRTT[id])
	}
	rep.Judged = etcdVerdict(rep.Signals, r)
	return rep
}

// etcdVerdict is one verdict of the signals: unfit when any is (its why,
// and how many more), fit when every judged one is within its limit, not
// judged when none was.
func etcdVerdict(signals []etcdSignal, r etcdmetrics.Reading) checkVerdict {
	var unfit, fit []checkVerdict
	for _, s := range signals {
		switch s.Judged.Verdict {
		case checkUnfit:
			unfit = append(unfit, s.Judged)
		case checkFit:
			fit = append(fit, s.Judged)
		}
	}
	const basis = "each latency against the decision's limit for its signal (above)"
	switch {
	case len(unfit) > 0:
		v := unfit[0]
		v.Basis = basis
		if len(unfit) > 1 {
			v.Why += fmt.Sprintf("; and %d more over their limits", len(unfit)-1)
		}
		return v
	case len(fit) > 0:
		return checkVerdict{Verdict: checkFit, Basis: basis,
			Why: fmt.Sprintf("every latency etcd observed is within its limit (%d of %d judged)", len(fit), len(signals))}
	}
	why := "etcd observed none of the judged latencies in the interval: write to the cluster, or lengthen --interval"
	if !r.HasLeader {
		why = "the member sees no leader, so it wrote nothing and judged nothing: its cluster has no quorum, or it cannot reach it"
	}
	return checkVerdict{Verdict: checkNotJudged, Basis: basis, Why: why}
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
	t := wall.NewTimer(interval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return etcdmetrics.Reading{}, ctx.Err()
	case <-t.C():
	}
	cur, err := scrape()
	if err != nil {
		return etcdmetrics.Reading{}, err
	}
	return etcdmetrics.Gained(prev, cur), nil
}

func printEtcd(w io.Writer, metricsURL string, rep etcdReport) error {
	r := rep.Reading
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
	for _, s := range rep.Signals {
		name := s.Signal
		if s.Peer != "" {
			name += " " + s.Peer
		}
		bw.printf("  %-32s %s: %s\n", name, s.Judged.Verdict, s.Judged.Why)
		if s.Judged.Limit != nil {
			bw.printf("  %-32s [%s]\n", "", s.Judged.Basis)
		}
	}
	bw.printf("verdict: %s: %s\n", rep.Judged.Verdict, strings.TrimSpace(rep.Judged.Why))
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
