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
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/fleets/demo"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/statuscheck"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
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
	// SwapDecisions counts decisions that published a swap; Swaps counts the
	// times a swap was published after a decision that published none.
	SwapDecisions, Swaps int
	// Flaps counts a swap published at one decision and not at the next,
	// as this run saw them; MemoryFlaps and VerdictChanges are what the
	// status memory's running counts (flaps, verdict_changes) added over
	// the counted decisions; VerdictChanges is this run's own count.
	Flaps, MemoryFlaps                   int
	VerdictChanges, MemoryVerdictChanges int
	// NamedDecisions counts decisions whose memory named a voter to leave;
	// LongestNamed is the longest run of the memory's named_decisions.
	NamedDecisions, LongestNamed int
	// Stalls is how many whole-fleet stalls were injected, StallPeriods
	// each; ShortestStall and LongestStall are their measured lengths, from
	// the whole fleet stopped to its continuing.
	Stalls, StallPeriods        int
	MembersOnly                 bool
	ShortestStall, LongestStall time.Duration
	Changes                     []string // each change: when, host, from, to, the failing reason
}

// CleanConfig sizes a clean run.
type CleanConfig struct {
	Windows int
	// Period is the sample period; the demo's 1 s when zero.
	Period time.Duration
	// StallPeriods, when above zero, stops the whole fleet (every etcd
	// member and every probe; the controller runs on) for that many periods
	// once in each counted window, from its middle decision.
	StallPeriods int
	// MembersOnly stalls the etcd members alone, the probes sampling on:
	// a harsher stall for the decision core than the whole fleet's, since
	// stopped probes take no sample during it while running ones read the
	// stopped members' every period.
	MembersOnly bool
}

// CleanRun runs the demo's fleet (three etcd members, each its own process,
// two standbys, the demo's settings: a 1 s period and a window of 50) with no
// fault. Once every host is fit with a full window, it decides as the
// controller does (controller.DecisionsPerPeriod a period) for cfg.Windows windows and counts the swaps published, the flaps, the
// voters named and the verdicts that changed; with cfg.StallPeriods it stalls
// the whole fleet once a window. Unlike the demo, the peer paths have no
// proxy in them: a clean fleet's members talk directly.
func CleanRun(ctx context.Context, etcdBinary string, cfg CleanConfig, log io.Writer) (Clean, error) {
	if cfg.Period <= 0 {
		cfg.Period = time.Second
	}
	s := demo.Settings(cfg.Period)
	windows := cfg.Windows
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
	store := kubefake.NewConfigMaps()
	if err := store.Create(s.StatusConfigMap, nil); err != nil {
		return Clean{}, err
	}
	records := kubefake.NewRecords(s.RecordsNamespace())
	nodes := &kubefake.Nodes{}
	nodes.Set(FleetNodes(s, voters, standbys, func(i int) string { return hostPort(cluster.Members[i].PeerURL) })...)
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	stall := fleetStall{members: cluster.Members, g: newGate(), membersOnly: cfg.MembersOnly}
	// Continued before the members are stopped for good (a stopped process
	// never sees SIGTERM) and the probes are cancelled.
	defer func() { _ = stall.resume() }()

	pctx, stopProbes := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopProbes(); stall.g.release(); wg.Wait() }()
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
		p, err := probe.New(probe.Config{Node: name, Settings: s,
			Records: gatedRecords{records, stall.g}, Nodes: gatedNodes{nodes, stall.g}, Sampler: gatedSampler{h, stall.g},
			Log: logger.With("probe", name)})
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

	// The controller's own cadence (controller.Run).
	tick := time.NewTicker(s.SamplePeriod / controller.DecisionsPerPeriod)
	defer tick.Stop()
	perWindow := s.Window * controller.DecisionsPerPeriod
	baseline := time.Now().Add(3 * time.Duration(s.Window) * s.SamplePeriod)
	var (
		c      = Clean{Windows: windows, StallPeriods: cfg.StallPeriods, MembersOnly: cfg.MembersOnly}
		prev   *status.Status
		first  status.Memory
		end    time.Time
		window = time.Duration(s.Window) * s.SamplePeriod
		// The stall under way: resumeC fires when it is to end; stopped
		// is when its last member stopped.
		resumeC <-chan time.Time
		stopped time.Time
	)
	for {
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-resumeC:
			took := time.Since(stopped)
			if err := stall.resume(); err != nil {
				return c, fmt.Errorf("clean run: continue the fleet after stall %d: %w", c.Stalls, err)
			}
			resumeC = nil
			if c.ShortestStall == 0 || took < c.ShortestStall {
				c.ShortestStall = took
			}
			c.LongestStall = max(c.LongestStall, took)
			fmt.Fprintf(log, "clean run: stall %d over after %s\n", c.Stalls, took.Round(time.Millisecond))
			continue
		case <-tick.C:
		}
		st, err := ctrl.Tick(ctx)
		if err != nil {
			return c, err
		}
		if end.IsZero() {
			held := statuscheck.EveryFit(st, s.Window)
			if held == nil {
				end = time.Now().Add(time.Duration(windows) * window)
				fmt.Fprintf(log, "clean run: every host fit with a full window; counting for %d windows (%s)\n", windows, time.Duration(windows)*window)
				prev, first = st, st.Memory
			} else if time.Now().After(baseline) {
				return c, fmt.Errorf("clean run: not every host fit within %s (%s): %w", 3*window, verdicts(st), held)
			}
			continue
		}
		c.Decisions++
		if st.Decision.Action == status.ActionSwap {
			c.SwapDecisions++
			if prev.Decision.Action != status.ActionSwap {
				c.Swaps++
				c.Changes = append(c.Changes, fmt.Sprintf("decision %d: swap %s for %s; %s", c.Decisions, st.Decision.Out, st.Decision.In, steps(st)))
			}
		} else if prev.Decision.Action == status.ActionSwap {
			c.Flaps++
			c.Changes = append(c.Changes, fmt.Sprintf("decision %d: the swap of %s published at the previous decision is gone; %s", c.Decisions, prev.Decision.Out, steps(st)))
		}
		if st.Memory.Named != "" {
			c.NamedDecisions++
			c.LongestNamed = max(c.LongestNamed, st.Memory.NamedDecisions)
			c.Changes = append(c.Changes, fmt.Sprintf("decision %d: %s named to leave (%d consecutive); %s", c.Decisions, st.Memory.Named, st.Memory.NamedDecisions, steps(st)))
		}
		c.VerdictChanges += verdictChanges(prev, st, c.Decisions, &c.Changes)
		c.MemoryFlaps = st.Memory.Flaps - first.Flaps
		c.MemoryVerdictChanges = st.Memory.VerdictChanges - first.VerdictChanges
		prev = st
		if time.Now().After(end) {
			return c, nil
		}
		// The stall starts after the middle decision of each window: the
		// run's first decisions and its last are stall-free.
		if cfg.StallPeriods > 0 && resumeC == nil && c.Decisions%perWindow == perWindow/2 {
			if err := stall.stop(); err != nil {
				return c, fmt.Errorf("clean run: stop the fleet for stall %d: %w", c.Stalls+1, err)
			}
			stopped = time.Now()
			c.Stalls++
			resumeC = time.After(time.Duration(cfg.StallPeriods) * s.SamplePeriod)
			fmt.Fprintf(log, "clean run: stall %d: %s stopped at decision %d for %d periods\n", c.Stalls, stall, c.Decisions, cfg.StallPeriods)
		}
	}
}

// steps is what the decision's fleet_wide, attribution and steady steps said.
func steps(st *status.Status) string {
	var out []string
	for _, r := range st.Decision.Reasons {
		switch r.Signal {
		case status.StepFleetWide, status.StepAttribution, status.StepSteady:
			out = append(out, fmt.Sprintf("%s %s ok=%t: %s", r.Signal, r.Subject, r.OK, r.Detail))
		}
	}
	if len(out) == 0 {
		return "no fleet_wide, attribution or steady step"
	}
	return strings.Join(out, "; ")
}

func verdictChanges(prev, st *status.Status, at int, log *[]string) int {
	was := map[string]status.Verdict{}
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
					why = status.Summary(r)
					break
				}
			}
			*log = append(*log, fmt.Sprintf("decision %d: %s %s -> %s %s", at, h.Name, v, h.Verdict, why))
		}
	}
	return n
}

func verdicts(st *status.Status) string {
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
