//go:build linux

package campaign

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/fault/cpulimit"
	"github.com/fleet-role/fleet-role/lab/fault/slowdisk"
	"github.com/fleet-role/fleet-role/lab/fleets/fleet"
	"github.com/fleet-role/fleet-role/lab/kit/statuscheck"
)

// Settings is the campaign's settings file: k3s's etcd timing (heartbeat
// 500 ms, election timeout 5 s: its limits are k3s's), a 2 s period and the
// smallest window the p90 allows (window >= 1/(1-p): 10), so that a fault
// shows within a few periods and rolls out of the window 20 s after it
// ends. learner_stall_time is 10 s rather than k3s's 5 minutes: no learner
// is ever added, and the cooldown (the stall time and a window) runs from
// the controller's first decision. Legal product settings, validated as the
// product validates them.
const Settings = `# fleet-role's settings for the fault campaign (lab/fault/campaign).
election_timeout: 5s        # k3s sets etcd's --election-timeout=5000
heartbeat_interval: 500ms   # k3s sets etcd's --heartbeat-interval=500
tail_percentile: 0.9
window: 10                  # 1/(1-0.9): the fewest samples that give the p90 a sample of its own
sample_period: 2s
learner_stall_time: 10s     # no learner is ever added in the campaign
target_voters: %d
max_servers: %d
`

// SettingsFor is the settings file for a fleet of that many voters: the
// target is the fleet's, with room for one learner above it.
func SettingsFor(voters int) string {
	return fmt.Sprintf(Settings, voters, voters+1)
}

// Config says what campaign to run.
type Config struct {
	Seed   uint64
	Faults int
	// Voters and Standbys size the fleet (3 and 2 by default).
	Voters, Standbys int
	// Out is where the board, the decisions, the picture and the logs go.
	Out string
	// The binaries, as lab/fleets/fleet takes them.
	Binary, EtcdBinary, APIServerBinary, Kubectl, Manifest string
	// Progress receives a line per step; nil is silent.
	Progress io.Writer
	// RecoverTimeout bounds the wait for every host to be fit again after
	// a fault (default 3 minutes, several windows).
	RecoverTimeout time.Duration
	// Prefix names the lab's namespaces and cgroups ("campaign" by default).
	Prefix string
	// Only, when set, makes every fault of that kind (ScheduleOnly), and
	// Leader every voter-delay one of etcd's leader.
	Only   Kind
	Leader bool
}

// Result is a finished campaign.
type Result struct {
	Seed     uint64            `json:"seed"`
	Settings settings.Settings `json:"settings"`
	Fleet    Fleet             `json:"fleet"`
	Ranges   Ranges            `json:"ranges"`
	Started  time.Time         `json:"started"`
	// Baseline is when the fleet was first all fit with the cooldown
	// passed, before the first fault.
	Baseline  time.Time `json:"baseline"`
	Ended     time.Time `json:"ended"`
	Faults    []Fault   `json:"faults"`
	Totals    Totals    `json:"totals"`
	OK        bool      `json:"ok"`
	decisions []Decision
	// Aborted says why the campaign stopped before its last fault, if it did.
	Aborted string `json:"aborted,omitempty"`
}

type runner struct {
	cfg    Config
	fl     *fleet.Fleet
	obs    *observer
	ranges Ranges
	logf   func(format string, args ...any)
	// moves are the campaign's own moves of leadership, each from its
	// request to its return: not elections (CountLeaderChanges).
	moves []Interval
}

// moveLeader makes name etcd's leader, within a minute, and keeps the move
// apart from the elections the campaign counts.
func (r *runner) moveLeader(ctx context.Context, name, why string) error {
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	from := time.Now()
	err := r.fl.MoveLeader(lctx, name)
	r.moves = append(r.moves, Interval{From: from, To: time.Now(), Why: why})
	return err
}

// Run runs a campaign and writes its outputs to cfg.Out. It returns an
// error only when the campaign could not run; a campaign that ran and
// failed its score returns a Result whose OK is false. Everything it made is
// removed before it returns, also when ctx is cancelled.
func Run(ctx context.Context, cfg Config) (res *Result, err error) {
	if cfg.Voters == 0 {
		cfg.Voters = 3
	}
	if cfg.Standbys == 0 {
		cfg.Standbys = 2
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "campaign"
	}
	logf := progress(cfg.Progress)
	work, err := os.MkdirTemp("", "fleet-role-campaign-")
	if err != nil {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	defer func() {
		// Logs stay with the outputs; the fleet's data goes.
		copyLogs(work, filepath.Join(cfg.Out, "logs"))
		if rerr := os.RemoveAll(work); rerr != nil {
			err = errors.Join(err, fmt.Errorf("campaign: remove %s: %w", work, rerr))
		}
	}()

	setup, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	logf("starting a fleet of %d voters and %d standbys in %s", cfg.Voters, cfg.Standbys, work)
	fl, err := fleet.Start(setup, fleet.Config{
		Dir: work, Binary: cfg.Binary, EtcdBinary: cfg.EtcdBinary, APIServerBinary: cfg.APIServerBinary,
		Kubectl: cfg.Kubectl, Manifest: cfg.Manifest,
		Voters: cfg.Voters, Standbys: cfg.Standbys, Settings: SettingsFor(cfg.Voters), Prefix: cfg.Prefix,
		MountDisk: MountSlowDisk,
		LabNice:   LabNice,
		Logf:      logf,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := fl.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if err := fl.StartComponents(setup); err != nil {
		return nil, err
	}
	return RunOn(ctx, fl, cfg)
}

// LabNice is the priority the lab's network and disks run at
// (fleet.Config.LabNice): at nice -10 a thread weighs 9548 against a
// default one's 1024 (the kernel's sched_prio_to_weight), so the packets a
// fault holds are released on time and a FUSE fsync is answered at once,
// however busy the hosts' processes keep the machine.
const LabNice = -10

// MountSlowDisk mounts a slow disk (lab/fault/slowdisk) over dir, backed by a
// directory beside it: fleet.Config.MountDisk for a campaign's fleet, whose
// voter-disk and standby-disk faults slow them.
func MountSlowDisk(dir string) (fleet.Disk, error) {
	backing := dir + ".backing"
	if err := os.MkdirAll(backing, 0o755); err != nil {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	return slowdisk.Mount(slowdisk.Config{Backing: backing, Mountpoint: dir})
}

// RunOn runs a campaign on a fleet whose components run, with slow disks
// under its voters' etcd and its standbys' fsync directories
// (MountSlowDisk), and writes its outputs to cfg.Out. The fleet stays up.
func RunOn(ctx context.Context, fl *fleet.Fleet, cfg Config) (*Result, error) {
	if cfg.RecoverTimeout == 0 {
		cfg.RecoverTimeout = 3 * time.Minute
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "campaign"
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("campaign: %w", err)
	}
	r := &runner{cfg: cfg, fl: fl, logf: progress(cfg.Progress)}
	s := fl.Settings
	r.ranges = RangesOf(s, probe.ReadingTimeout(s))
	flt := Fleet{Voters: fl.Voters, Standbys: fl.Standbys, Pinned: fl.Pinned}
	specs := Schedule(cfg.Seed, cfg.Faults, flt, r.ranges)
	if cfg.Only != "" {
		var err error
		if specs, err = ScheduleOnly(cfg.Seed, cfg.Faults, flt, r.ranges, cfg.Only, cfg.Leader); err != nil {
			return nil, fmt.Errorf("campaign: %w", err)
		}
	}
	res := &Result{Seed: cfg.Seed, Settings: s, Fleet: flt, Ranges: r.ranges, Started: time.Now().UTC()}

	octx, stopObserving := context.WithCancel(context.Background())
	r.obs = newObserver(fl.Admin, s.Namespace, s.StatusConfigMap)
	observed := make(chan struct{})
	go func() { defer close(observed); r.obs.run(octx) }()
	defer func() { stopObserving(); <-observed }()

	watched := watchEtcd(octx, fl.Lab, fl.Voters)
	writes := watchRecords(octx, fl.Admin, s.RecordsNamespace(), fl.Voters, time.Duration(s.StaleAfter().Value*float64(time.Second)))

	r.logf("waiting for every host fit with a full window (%d samples of %v) and the cooldown passed", s.Window, s.SamplePeriod)
	if _, err := r.waitFor(ctx, "every host fit and the cooldown passed", cfg.RecoverTimeout+2*time.Minute, time.Time{}, r.baseline); err != nil {
		return nil, err
	}
	res.Baseline = time.Now().UTC()
	for i, sp := range specs {
		if ctx.Err() != nil {
			res.Aborted = "interrupted"
			break
		}
		f, err := r.inject(ctx, i, len(specs), sp)
		if f != nil {
			res.Faults = append(res.Faults, *f)
		}
		if err != nil {
			res.Aborted = err.Error()
			r.logf("campaign stopped: %v", err)
			break
		}
	}
	res.Ended = time.Now().UTC()
	res.decisions = r.obs.all()
	// etcd's gates hold for a window after their last such sample, the
	// reported gate only while the record is stale, and a period more for
	// the decision that sees either gone.
	heldSpans(res.Faults, watched.intervals(res.Ended), "etcd reported it without a leader or a peer", r.ranges.residue())
	heldSpans(res.Faults, writes.intervals(res.Ended), "its record went unwritten past the freshness limit", s.SamplePeriod)
	writes.longestUnwritten(res.Faults)
	res.Faults, res.Totals = Score(res.Faults, res.decisions, s.SamplePeriod, fl.Standbys)
	res.Totals.LeaderChanges, res.Totals.Clean, res.Totals.OwnMoves = CountLeaderChanges(res.Faults, watched.leaderChanges(), r.moves, res.Baseline, res.Ended)
	res.OK = res.Aborted == "" && res.Totals.OK(res.Faults)
	if err := res.Write(cfg.Out); err != nil {
		return res, err
	}
	return res, nil
}

func progress(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
		}
	}
}

// heldSpans gives each fault the spans in which a gate held every swap
// because of a voter (why says what) while the fault's truth held, each
// extended by extend.
func heldSpans(faults []Fault, held map[string][]Interval, why string, extend time.Duration) {
	for i := range faults {
		f := &faults[i]
		until := f.Recovered
		if until.IsZero() && i+1 < len(faults) {
			until = faults[i+1].Start
		}
		for v, is := range held {
			for _, in := range is {
				if in.To.Before(f.Start) || (!until.IsZero() && in.From.After(until)) {
					continue
				}
				if f.Held == nil {
					f.Held = map[string][]Interval{}
				}
				f.Held[v] = append(f.Held[v], Interval{From: in.From, To: in.To.Add(extend), Why: why})
			}
		}
	}
}

// allFit holds when every host is fit on a full window and nothing is
// swapped.
func (r *runner) allFit(st *status.Status) error {
	return statuscheck.EveryFit(st, r.fl.Settings.Window)
}

// baseline holds when every host is fit with a full window, nothing is
// swapped and the cooldown has passed: a swap must not be held back by the
// cooldown, or a fault would time the cooldown rather than the detection.
func (r *runner) baseline(st *status.Status) error {
	if err := r.allFit(st); err != nil {
		return err
	}
	for _, r := range st.Decision.Reasons {
		if r.Signal == status.GateCooldown && !r.OK {
			return errors.New("the cooldown has not passed yet")
		}
	}
	return nil
}

// waitFor waits for a status generated after since that cond accepts, and
// fails after timeout with the last reason, or at once when a fleet-role
// process has exited.
func (r *runner) waitFor(ctx context.Context, what string, timeout time.Duration, since time.Time, cond func(*status.Status) error) (*status.Status, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var why error = errors.New("no status yet")
	for {
		if err := r.fl.Exited(); err != nil {
			return nil, fmt.Errorf("waiting for %s: %w", what, err)
		}
		st, changed, rerr := r.obs.latest()
		if st != nil && st.GeneratedAt.After(since) {
			if why = cond(st); why == nil {
				return st, nil
			}
		} else if rerr != nil {
			why = rerr
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, fmt.Errorf("no %s within %v: %v", what, timeout, why)
		case <-changed:
		case <-tick.C: // a process may have exited with no status to show it
		}
	}
}

// sleep waits d or until ctx ends. It holds a fault for its drawn length:
// the length is the fault, not a stand-in for a condition.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// inject runs one fault: the gap, the fault for its length, its undoing,
// and the wait until every host is fit again.
func (r *runner) inject(ctx context.Context, i, n int, sp Spec) (*Fault, error) {
	if err := sleep(ctx, sp.Gap.D()); err != nil {
		return nil, err
	}
	f := &Fault{Spec: sp, Truth: TruthOf(sp, Fleet{Voters: r.fl.Voters, Standbys: r.fl.Standbys, Pinned: r.fl.Pinned}),
		Bound: BoundOf(sp, r.ranges, len(r.fl.Voters))}
	if sp.Leader {
		if err := r.moveLeader(ctx, sp.Host, fmt.Sprintf("fault %d: %s made etcd's leader", i+1, sp.Host)); err != nil {
			return nil, fmt.Errorf("fault %d: %w", i+1, err)
		}
	}
	f.Load = load1()
	r.logf("fault %d/%d: %s; truth: %s; load %.1f", i+1, n, sp, truthLine(f.Truth), f.Load)
	undo, err := r.start(sp, f)
	f.Start = time.Now()
	if err == nil {
		err = r.hold(ctx, sp)
	}
	// Undone whatever happened: a fault left on would be the next one's.
	if uerr := undo(); uerr != nil {
		err = errors.Join(err, fmt.Errorf("undo %s: %w", sp.Kind, uerr))
	}
	f.End = time.Now()
	if err != nil {
		return f, fmt.Errorf("fault %d (%s): %w", i+1, sp.Kind, err)
	}
	// Every host fit again on a status decided a period after the fault's
	// end at least: by then every probe has written a sample taken after
	// it, so that what the fault left in the windows has been seen.
	st, err := r.waitFor(ctx, "every host fit again", r.cfg.RecoverTimeout, f.End.Add(r.ranges.Period), r.allFit)
	if err != nil {
		return f, fmt.Errorf("fault %d (%s): %w", i+1, sp.Kind, err)
	}
	f.Recovered = st.GeneratedAt
	r.logf("  undone after %.1f s; every host fit again %.1f s later", f.End.Sub(f.Start).Seconds(), f.Recovered.Sub(f.End).Seconds())
	// Fit is not clean: a window may still hold the slow samples its tail
	// forgives, and the next fault's first would then turn a host unfit
	// with the residue of this one (a swap named a period into the next
	// fault, for this one's voter). The next fault waits until every
	// window holds only samples taken after this one ended: a window's
	// periods and one more for the sample straddling the end.
	if err := sleep(ctx, time.Until(f.End.Add(r.ranges.residue()))); err != nil {
		return f, err
	}
	if sp.Leader {
		if err := r.moveLeader(ctx, r.fl.Pinned, fmt.Sprintf("fault %d: leadership back to %s", i+1, r.fl.Pinned)); err != nil {
			return f, fmt.Errorf("fault %d: leadership back to %s: %w", i+1, r.fl.Pinned, err)
		}
	}
	return f, nil
}

func truthLine(t Truth) string {
	switch {
	case t.Out != "":
		return "swap " + t.Out + " out"
	case len(t.OutAny) > 0:
		return "swap one of " + strings.Join(t.OutAny, ", ") + " out"
	case len(t.Unfit) > 0:
		return "none; " + strings.Join(t.Unfit, ", ") + " unfit by " + t.Signal
	}
	return "none"
}

// start injects a fault and returns its undoing, which records in f what
// the fault did where the lab can read it (a starved host's throttling).
func (r *runner) start(sp Spec, f *Fault) (undo func() error, err error) {
	lab := r.fl.Lab
	nothing := func() error { return nil }
	switch sp.Kind {
	case VoterDelay, StandbyDelay, TwoVoters, FleetDelay, Blip, Flap:
		for _, h := range sp.Hosts {
			if err := lab.SetDelay(h, sp.Severity.Delay.D()); err != nil {
				return lab.Clear, err
			}
		}
		return lab.Clear, nil
	case LinkDelay:
		return lab.Clear, lab.SetLinkDelay(sp.Hosts[0], sp.Hosts[1], sp.Severity.Delay.D())
	case VoterLoss:
		return lab.Clear, lab.SetLoss(sp.Host, sp.Severity.Loss)
	case VoterPartition:
		for _, v := range r.fl.Voters {
			if v == sp.Host {
				continue
			}
			if err := lab.CutLink(sp.Host, v); err != nil {
				return lab.Clear, err
			}
		}
		return lab.Clear, nil
	case VoterDisk, StandbyDisk:
		d := r.fl.Disks[sp.Host]
		if d == nil {
			return nothing, fmt.Errorf("%s has no slow disk", sp.Host)
		}
		d.SetDelay(sp.Severity.FsyncDelay.D())
		return func() error { d.SetDelay(0); return nil }, nil
	case VoterCPU:
		return r.starve(sp, f)
	case VoterPause, MachineStall:
		return r.pause(sp.Hosts)
	}
	return nothing, fmt.Errorf("unknown kind %q", sp.Kind)
}

// hold keeps a fault on for its length; a flap toggles its delay and a blip
// is its length alone.
func (r *runner) hold(ctx context.Context, sp Spec) error {
	if sp.Kind != Flap {
		return sleep(ctx, sp.Length.D())
	}
	for i, d := range sp.Severity.Toggles {
		on := time.Duration(0)
		if i%2 == 0 {
			on = sp.Severity.Delay.D()
		}
		if err := r.fl.Lab.SetDelay(sp.Host, on); err != nil {
			return err
		}
		if err := sleep(ctx, d.D()); err != nil {
			return err
		}
	}
	return nil
}

// pause stops the etcd member and the probe of every host given
// (SIGSTOP), and returns their continuing.
func (r *runner) pause(hosts []string) (func() error, error) {
	type pausable interface {
		Pause() error
		Resume() error
	}
	var paused []pausable
	resume := func() error {
		var errs []error
		for _, p := range paused {
			errs = append(errs, p.Resume())
		}
		return errors.Join(errs...)
	}
	for _, h := range hosts {
		var ps []pausable
		if m := r.fl.Member(h); m != nil {
			ps = append(ps, m)
		}
		if p := r.fl.Probes[h]; p != nil {
			ps = append(ps, p)
		}
		for _, p := range ps {
			if err := p.Pause(); err != nil {
				return resume, err
			}
			paused = append(paused, p)
		}
	}
	return resume, nil
}

// starve puts the host's etcd member and probe into a cgroup limited to the
// drawn share of a core, and returns their release.
func (r *runner) starve(sp Spec, f *Fault) (func() error, error) {
	g, err := cpulimit.New(cpulimit.Config{Prefix: r.cfg.Prefix})
	if err != nil {
		return func() error { return nil }, err
	}
	// The group's own count of the periods it was held off the CPU, read
	// as the fault ends and kept on the board (the scorer does not use
	// it): a starved host that was seldom throttled is a fault that did
	// not take, which its reader can then tell from a miss of fleet-role's.
	release := func() error {
		if st, err := g.Stat(); err == nil {
			f.Throttled = &Throttled{Periods: st.Periods, Throttled: st.Throttled, For: Duration(st.ThrottledFor)}
		}
		return g.Remove()
	}
	var pids []int
	if m := r.fl.Member(sp.Host); m != nil {
		pids = append(pids, m.PID())
	}
	if p := r.fl.Probes[sp.Host]; p != nil {
		pids = append(pids, p.PID())
	}
	for _, pid := range pids {
		if err := g.Add(pid); err != nil {
			return release, err
		}
	}
	return release, g.SetQuota(sp.Severity.CPU, cpuPeriod)
}

// copyLogs copies the fleet's logs to dir, for the reader of the board.
func copyLogs(from, to string) {
	matches, _ := filepath.Glob(filepath.Join(from, "*.log"))
	if api := filepath.Join(from, "apiserver", "kube-apiserver.log"); fileExists(api) {
		matches = append(matches, api)
	}
	if len(matches) == 0 {
		return
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return
	}
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		_ = os.WriteFile(filepath.Join(to, filepath.Base(m)), b, 0o644)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// load1 is the machine's one-minute load average, or -1 when
// /proc/loadavg cannot be read.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b) + " x")[0], 64)
	if err != nil {
		return -1
	}
	return f
}
