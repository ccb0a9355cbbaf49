package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/demo"
	"github.com/fleet-role/fleet-role/internal/etcdproc"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
)

// Detection runs the demo with its slow fault and returns the periods from
// the fault's start to the swap being named.
func Detection(ctx context.Context, log io.Writer) (int, error) {
	opt := demo.Defaults()
	opt.Out = log
	res, err := demo.Run(ctx, opt)
	if err != nil {
		return 0, fmt.Errorf("demo: %w", err)
	}
	return res.Detected, nil
}

// Clean is what a clean run of the demo's fleet showed.
type Clean struct {
	Windows, Decisions int
	// SwapDecisions counts decisions that named a swap; Swaps counts the
	// times a swap was named after a decision that named none.
	SwapDecisions, Swaps int
	VerdictChanges       int
	Changes              []string // each change: when, host, from, to, the failing reason
}

// CleanRun runs the demo's fleet (three etcd members, each its own process,
// two standbys, the demo's settings: a 1 s period and a window of 50) with no
// fault. Once every host is fit with a full window, it decides once a period
// for windows windows and counts the swaps named and the verdicts that
// changed. Unlike the demo, the peer paths have no proxy in them: a clean
// fleet's members talk directly.
func CleanRun(ctx context.Context, etcdBinary string, windows int, log io.Writer) (Clean, error) {
	s := demo.Settings(time.Second)
	const voters, standbys = 3, 2
	dir, err := os.MkdirTemp(shmOrTemp(), "fleet-role-bench-clean-")
	if err != nil {
		return Clean{}, err
	}
	defer os.RemoveAll(dir)
	cluster, err := etcdproc.Start(ctx, etcdproc.Config{
		Binary: etcdBinary, Dir: dir, Members: voters, Name: VoterName,
		HeartbeatInterval: s.HeartbeatInterval, ElectionTimeout: s.ElectionTimeout,
	})
	if err != nil {
		return Clean{}, err
	}
	defer cluster.Stop()
	store := kube.NewMemConfigMaps()
	if err := store.Create(s.StatusConfigMap, nil); err != nil {
		return Clean{}, err
	}
	records := kube.NewMemRecords(s.Namespace)
	nodes := &kube.MemNodes{}
	nodes.Set(FleetNodes(s, voters, standbys, func(i int) string { return hostPort(cluster.Members[i].PeerURL) })...)
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))

	pctx, stopProbes := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopProbes(); wg.Wait() }()
	for i := range voters + standbys {
		h := probe.NewHost(s, "/", "", "")
		name := StandbyName(i - voters)
		if i < voters {
			name, h.MetricsURL = VoterName(i), cluster.Members[i].MetricsURL
		} else {
			// The standbys' disk reading goes on this machine's disk, as
			// in the demo.
			if h.FsyncDir, err = os.MkdirTemp("", "fleet-role-bench-fsync-"); err != nil {
				return Clean{}, err
			}
			defer os.RemoveAll(h.FsyncDir)
		}
		p, err := probe.New(probe.Config{Node: name, Settings: s, Records: records, Nodes: nodes, Sampler: h, Log: logger.With("probe", name)})
		if err != nil {
			return Clean{}, err
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.Run(pctx) }()
	}
	ctrl, err := controller.New(controller.Config{Settings: s, Store: store, Records: records, Nodes: nodes, Log: logger})
	if err != nil {
		return Clean{}, err
	}

	tick := time.NewTicker(s.SamplePeriod)
	defer tick.Stop()
	baseline := time.Now().Add(3 * time.Duration(s.Window) * s.SamplePeriod)
	var (
		c      = Clean{Windows: windows}
		prev   *decide.Status
		end    time.Time
		window = time.Duration(s.Window) * s.SamplePeriod
	)
	for {
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-tick.C:
		}
		st, err := ctrl.Tick(ctx)
		if err != nil {
			return c, err
		}
		if end.IsZero() {
			if allFit(st, s.Window) {
				end = time.Now().Add(time.Duration(windows) * window)
				fmt.Fprintf(log, "clean run: every host fit with a full window; counting for %d windows (%s)\n", windows, time.Duration(windows)*window)
				prev = st
			} else if time.Now().After(baseline) {
				return c, fmt.Errorf("clean run: not every host fit within %s: %s", 3*window, verdicts(st))
			}
			continue
		}
		c.Decisions++
		if st.Decision.Action == decide.ActionSwap {
			c.SwapDecisions++
			if prev.Decision.Action != decide.ActionSwap {
				c.Swaps++
				c.Changes = append(c.Changes, fmt.Sprintf("decision %d: swap %s for %s", c.Decisions, st.Decision.Out, st.Decision.In))
			}
		}
		c.VerdictChanges += verdictChanges(prev, st, c.Decisions, &c.Changes)
		prev = st
		if time.Now().After(end) {
			return c, nil
		}
	}
}

func verdictChanges(prev, st *decide.Status, at int, log *[]string) int {
	was := map[string]decide.Verdict{}
	for _, h := range prev.Hosts {
		was[h.Name] = h.Verdict
	}
	n := 0
	for _, h := range st.Hosts {
		if v, ok := was[h.Name]; ok && v != h.Verdict {
			n++
			why := ""
			for _, r := range h.Reasons {
				if !r.OK {
					why = decide.Summary(r)
					break
				}
			}
			*log = append(*log, fmt.Sprintf("decision %d: %s %s -> %s %s", at, h.Name, v, h.Verdict, why))
		}
	}
	return n
}

func allFit(st *decide.Status, window int) bool {
	for _, h := range st.Hosts {
		if h.Verdict != decide.Fit || h.Samples < window {
			return false
		}
	}
	return len(st.Hosts) > 0 && st.Decision.Action == decide.ActionNone
}

func verdicts(st *decide.Status) string {
	var out []string
	for _, h := range st.Hosts {
		out = append(out, fmt.Sprintf("%s %s (%d samples)", h.Name, h.Verdict, h.Samples))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func shmOrTemp() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}
