package campaign

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// Kind names a kind of fault of the catalogue (docs/campaign.md gives each
// one's truth and its derivation).
type Kind string

// The catalogue.
const (
	VoterDelay     Kind = "voter-delay"     // one voter's path delayed past the round-trip limit
	LinkDelay      Kind = "link-delay"      // one link between two voters delayed
	VoterLoss      Kind = "voter-loss"      // packet loss on one voter's path
	VoterPartition Kind = "voter-partition" // one voter cut off from the other voters, process running
	VoterDisk      Kind = "voter-disk"      // a slow disk under one voter's etcd data directory
	StandbyDisk    Kind = "standby-disk"    // a slow disk under one standby's fsync directory
	VoterCPU       Kind = "voter-cpu"       // one voter's etcd and probe starved of CPU
	VoterPause     Kind = "voter-pause"     // one voter's etcd and probe stopped
	FleetDelay     Kind = "fleet-delay"     // every path delayed alike
	MachineStall   Kind = "machine-stall"   // every etcd member and probe stopped at once
	Flap           Kind = "flap"            // one voter's delay switched on and off
	StandbyDelay   Kind = "standby-delay"   // one standby's path delayed
	TwoVoters      Kind = "two-voters"      // two voters delayed at once
	Blip           Kind = "blip"            // a voter delayed for less than the tail forgives
)

// Kinds is the catalogue in the order a campaign's first round injects it.
var Kinds = []Kind{VoterDelay, LinkDelay, VoterLoss, VoterPartition, VoterDisk, StandbyDisk, VoterCPU,
	VoterPause, FleetDelay, MachineStall, Flap, StandbyDelay, TwoVoters, Blip}

// Truth is what a fault calls for, derived from etcd's behaviour and
// docs/limits.md before the tool is asked (docs/campaign.md).
type Truth struct {
	// Action is "swap" or "none".
	Action string `json:"action"`
	// Out is the voter a swap must take out; OutAny, when set instead,
	// lists the voters of which any one is right.
	Out    string   `json:"out,omitempty"`
	OutAny []string `json:"out_any,omitempty"`
	// Unfit lists hosts that must be reported unfit while the fault lasts,
	// by Signal (a signal of the decision core, as its reasons name them).
	Unfit  []string `json:"unfit,omitempty"`
	Signal string   `json:"signal,omitempty"`
	// Why is the derivation in a line.
	Why string `json:"why"`
}

// SwapWorthy reports whether the truth calls for a swap.
func (t Truth) SwapWorthy() bool { return t.Action == "swap" }

// RightOut reports whether out is a voter the truth would take out.
func (t Truth) RightOut(out string) bool {
	return t.Action == "swap" && (out == t.Out || slices.Contains(t.OutAny, out))
}

// Bounds are the periods the scoring holds the product to, derived from
// the settings (docs/campaign.md, "Bounds").
type Bounds struct {
	// Need is the slow samples that turn a host's tail slow: window -
	// rank(p) + 1, the first sample the tail does not forgive.
	Need int
	// Publish is the periods from a swap-worthy fault's start within which
	// its swap must be published: Need samples (the first possibly
	// straddling the start), half a period for the record to be written
	// and half for the controller's next decision (it decides twice a
	// period), and the hysteresis, at most one period for every voter to
	// write again and half a period for the decision after. Need + 2.5,
	// rounded up to whole periods for the write that carries it.
	Publish float64
	// Forgiven is the slow samples a window forgives: Need - 1.
	Forgiven int
}

// BoundsOf derives the bounds from the settings.
func BoundsOf(s settings.Settings) Bounds {
	need := s.Window - quantile.Rank(s.TailPercentile, s.Window) + 1
	return Bounds{Need: need, Publish: math.Ceil(float64(need) + 2.5), Forgiven: need - 1}
}

// Severity is how hard a fault hits; which fields apply depends on the kind.
type Severity struct {
	// Delay is added to every packet, each way, on the faulted path.
	Delay Duration `json:"delay,omitempty"`
	// Loss is the share of packets dropped to and from the faulted host.
	Loss float64 `json:"loss,omitempty"`
	// FsyncDelay is what each fsync of the faulted disk waits.
	FsyncDelay Duration `json:"fsync_delay,omitempty"`
	// CPU is the share of one core the faulted host's processes may use.
	CPU float64 `json:"cpu,omitempty"`
	// Toggle is how long each on and off phase of a flap lasts.
	Toggles []Duration `json:"toggles,omitempty"`
}

func (s Severity) String() string {
	switch {
	case s.FsyncDelay > 0:
		return "fsync +" + s.FsyncDelay.String()
	case s.CPU > 0:
		return fmt.Sprintf("%.1f%% of a core", s.CPU*100)
	case s.Loss > 0:
		return fmt.Sprintf("%.0f%% loss", s.Loss*100)
	case s.Delay > 0:
		return "+" + s.Delay.String() + " each way"
	}
	return "-"
}

// A starved host's share of a core, and the period its quota is enforced
// over (lab/cmd/votercpu measured them, docs/campaign.md): an etcd member at a
// small control plane's load needs about 3.2 to 3.7% of a core, and at 2%
// and below it falls behind (slow applies, commits of hundreds of ms); with
// the quota given back once a second, the member and its probe are held off
// the CPU for most of each second, so a timer of one heartbeat interval
// fires up to a second late and a leader's heartbeats are late past twice
// the interval, as etcd itself counts them. At a 100 ms period the same
// share reached few timers past the limit and almost no late heartbeats:
// not the fault this kind is. Under 1% the probe's own scrapes of its
// member time out in most samples.
const (
	cpuMin, cpuMax = 0.01, 0.02
	cpuPeriod      = time.Second
)

// starvedWaits are the waits of a starved probe's sample that end with the
// probe needing the CPU again: its ticker's wake-up, its member's reply to
// the scrape of its metrics (the member in the same starved cgroup must run
// to write it), the probe's own read of that reply, and the API server's
// reply to the write of its record. Each may find the cgroup's quota spent
// and wait for the next CFS period.
const starvedWaits = 4

// policyWaits are the waits a starved probe's sample adds when its check of
// the admission policy is due: one server-side dry run (kube.PolicyCheck),
// a reply the probe must run to read. (Two until the status moved out of
// the probes' reach: the check patched it too.)
const policyWaits = 1

// StarvedSample is how much later than an unstarved one a starved probe's
// sample can reach its record when its policy check is not due: each of its
// starvedWaits waits up to a CFS period (cpuPeriod) for the quota, so a
// sample can take starvedWaits x cpuPeriod, and its ticker's next tick, due
// a period after the last, comes that much later (4 s against a 2 s period:
// one period a sample).
func StarvedSample(period time.Duration) time.Duration {
	return max(0, starvedWaits*cpuPeriod-period)
}

// StarvedLate is how much later than unstarved ones need starved samples in
// a row can reach the record: StarvedSample each, and policyWaits more for
// each that checks the policy. The probe checks it once every
// entry_unchanged (three periods) by its own clock, counted from the end of
// the last check; from there to the next sample's check are the write that
// ends the checking sample and the ticker's wake-up, the scrape's two waits
// of the next: starvedWaits waits, and starvedWaits more a sample between.
// So of any CheckSpan samples in a row at most one checks, and of need in a
// row at most ceil(need / CheckSpan). The campaign's round measured 7.3 and
// 7.8 periods from a starved voter's start to its swap (seed 20, 1.1% of a
// core) against the 7 a bound without the checks gave (docs/campaign.md,
// Bounds).
func StarvedLate(need int, period time.Duration) time.Duration {
	checks := (need + CheckSpan(period) - 1) / CheckSpan(period)
	checked := max(0, (starvedWaits+policyWaits)*cpuPeriod-period)
	return time.Duration(need-checks)*StarvedSample(period) + time.Duration(checks)*checked
}

// CheckSpan is the fewest starved samples in a row of which two can check
// the policy: the first j with j x starvedWaits x cpuPeriod at least
// entry_unchanged (2 at the campaign's 2 s period: 8 s against 6 s).
func CheckSpan(period time.Duration) int {
	stale := settings.Settings{SamplePeriod: period}.StaleAfter().Duration()
	sample := starvedWaits * cpuPeriod
	return max(1, int((stale+sample-1)/sample))
}

// LossMax is the most loss a voter's path is given: its probe must still
// write its record within the freshness limit (3 periods, 6 s), or the gate
// would rightly hold every swap for a voter that cannot report. A lost
// segment of the write is sent again after Linux's retransmission timeout,
// at least 200 ms and doubling each time, so only five losses of it in a
// row (0.2 + 0.4 + 0.8 + 1.6 + 3.2 s) hold a write past 6 s: at 0.4 that is
// 0.4^5, 1% of writes.
const LossMax = 0.4

// LossMin is the least loss the tail cannot forgive: at it, a connect
// fails with q = 1-(1-loss)^2 (a lost SYN or SYN-ACK is sent again after
// the 1 s initial retransmission timeout, past the probe's reading timeout),
// and once the fault has filled the window each link of the voter has need
// failed connects of window at one of its two ends with probability 0.999 at
// least (see minLoss).
func LossMin(window, need int) float64 { return minLoss(window, need) }

func minLoss(window, need int) float64 {
	for loss := 0.01; loss < LossMax; loss += 0.01 {
		q := 1 - (1-loss)*(1-loss)
		end := binomialAtLeast(window, need, q)
		if 1-(1-end)*(1-end) >= 0.999 {
			return math.Round(loss*100) / 100
		}
	}
	return LossMax
}

// TruthOf is what a fault calls for (docs/campaign.md, "The catalogue and
// its truth"), from etcd's behaviour and docs/limits.md alone.
func TruthOf(s Spec, f Fleet) Truth {
	none := func(why string) Truth { return Truth{Action: "none", Why: why} }
	swap := func(out, why string) Truth { return Truth{Action: "swap", Out: out, Why: why} }
	unpinned := func(hs []string) []string {
		return slices.DeleteFunc(slices.Clone(hs), func(h string) bool { return h == f.Pinned })
	}
	switch s.Kind {
	case VoterDelay:
		return swap(s.Host, "its round trips to every other voter are past the limit: the slow links share one voter, a minority, and the other links are fit (limits.md, attribution)")
	case LinkDelay:
		return Truth{Action: "swap", OutAny: unpinned(s.Hosts),
			Why: "one slow link between two voters: either end explains it, and an unpinned one goes first (limits.md, attribution and the voter to replace)"}
	case VoterLoss:
		return swap(s.Host, "a lost SYN or SYN-ACK costs a connect the retransmission timeout, past the limit, more often than the tail forgives, on every link of that voter")
	case VoterPartition:
		return none("a voter cut off from the others is disconnected and loses its leader: the gates hold every swap while a voter is not connected to every other or has no leader (limits.md, gates)")
	case VoterDisk:
		t := swap(s.Host, "etcd's own WAL fsync p-tail on that voter is past 10 ms (etcd FAQ): unfit by its own readings, and no link is slow")
		t.Unfit, t.Signal = []string{s.Host}, "wal_fsync"
		return t
	case StandbyDisk:
		t := none("a standby's fdatasync past 10 ms makes it unfit to take a vote; no voter is unfit, so nothing is replaced")
		t.Unfit, t.Signal = []string{s.Host}, "fdatasync"
		return t
	case VoterCPU:
		return swap(s.Host, "a member given 1 to 2% of a core, under the 3 to 4% it needs, falls behind: its timers fire up to a second late, past a heartbeat interval, and its applies and commits lag: unfit by its own readings")
	case VoterPause:
		return none("a stopped voter's last sample still looks healthy: its record goes stale and the gate holds every swap until it reports (limits.md, gates)")
	case FleetDelay:
		return none("every link slow alike: the smallest set of voters touching them is not a minority, so no host explains them (limits.md, attribution)")
	case MachineStall:
		return none("every record stops changing at once: the gate holds every swap until each voter reports again, and the stall left the same slow samples in every window")
	case Flap:
		return swap(s.Host, "the delay is on for about half of the samples, more than the tail forgives: the voter is unfit for as long as it flaps, and a swap once published is never withdrawn while it does")
	case StandbyDelay:
		t := none("a standby's slow path makes it unfit, and is not held against the voters (limits.md, links): no voter is unfit")
		t.Unfit, t.Signal = []string{s.Host}, "connect"
		return t
	case TwoVoters:
		if minority := (len(f.Voters) - 1) / 2; minority < 2 {
			return none(fmt.Sprintf("two of %d voters on slow paths: the smallest set of voters touching every slow link has 2, more than a minority (%d): no host explains them", len(f.Voters), minority))
		}
		return Truth{Action: "swap", OutAny: unpinned(s.Hosts),
			Why: fmt.Sprintf("two of %d voters on slow paths: they are the smallest set touching every slow link, a minority, and the links among the others are fit: one of the two goes", len(f.Voters))}
	case Blip:
		return none("shorter than the tail forgives: no probe takes more slow samples of it than the window forgives")
	}
	return none("unknown kind")
}

// BoundOf is the periods from a fault's start within which its swap must be
// published: Bounds.Publish, the tail's samples and the hysteresis. Two
// kinds take their tail's samples otherwise than one a period:
//   - a flap is on only by turns: its tail's samples are in once its
//     on-phases have held Need periods of delay;
//   - on a lossy path a connect fails only when its SYN or SYN-ACK is lost,
//     with probability q = 1-(1-loss)^2 each: its tail's samples are in once
//     every link of the voter has Need failed connects measured by one of its
//     two ends, which happens within LossPeriods(q) periods in 99 of 100
//     faults.
//
// The rest of the bound (Publish - Need) counts from then. A delay on etcd's
// leader holds back every write by LeaderCommit, and its bound grows by the
// leaderWrites its publication waits for. A starved voter's probe takes its
// samples late, and its bound grows by StarvedLate of Need samples.
func BoundOf(s Spec, r Ranges, voters int) float64 {
	b := r.Bounds
	rest := b.Publish - float64(b.Need)
	switch s.Kind {
	case Flap:
		need := r.periods(float64(b.Need))
		var on, at time.Duration
		for i, t := range s.Severity.Toggles {
			d := t.D()
			if i%2 == 0 {
				if on+d >= need {
					at += need - on
					return float64(at)/float64(r.Period) + rest
				}
				on += d
			}
			at += d
		}
		return b.Publish + float64(s.Length)/float64(r.Period)
	case VoterLoss:
		q := 1 - (1-s.Severity.Loss)*(1-s.Severity.Loss)
		return float64(LossPeriods(q, voters-1, b.Need)) + rest
	case VoterCPU:
		return b.Publish + float64(StarvedLate(b.Need, r.Period))/float64(r.Period)
	case VoterDelay:
		if s.Leader {
			return b.Publish + leaderWrites*float64(LeaderCommit(s.Severity.Delay.D()))/float64(r.Period)
		}
	}
	return b.Publish
}

// leaderWrites is the writes to etcd, one after another, between a slow
// sample and the swap's publication: the record carrying the tail's last
// slow sample, the records by which every voter has written again since
// the naming (the hysteresis), and the status.
const leaderWrites = 3

// LeaderCommit is how much longer every write to etcd takes while etcd's
// leader is delayed by d each way: the proposal crosses to the leader from
// the member the API server writes through, the leader's append to a
// follower and its acknowledgement cross the leader's path again, and the
// commit reaches that member on the next append: four crossings of the
// delayed path (etcd's raft: a write is applied once a quorum has
// acknowledged it to the leader). A slow leader so holds back every write of
// the fleet, its records and its status with them, and the bound of a
// voter-delay on the leader grows by leaderWrites of them.
func LeaderCommit(d time.Duration) time.Duration { return 4 * d }

// LossPeriods is the fewest periods n within which, with probability at
// least 0.99, each of links links has at least need failed connects of n
// measured by one of its two ends, each connect failing with probability q
// on its own.
func LossPeriods(q float64, links, need int) int {
	for n := need; n < 1000; n++ {
		end := binomialAtLeast(n, need, q)
		link := 1 - (1-end)*(1-end)
		if math.Pow(link, float64(links)) >= 0.99 {
			return n
		}
	}
	return 1000
}

// binomialAtLeast is P(X >= k) for X ~ Binomial(n, q).
func binomialAtLeast(n, k int, q float64) float64 {
	below := 0.0
	c := 1.0 // C(n, i)
	for i := 0; i < k; i++ {
		below += c * math.Pow(q, float64(i)) * math.Pow(1-q, float64(n-i))
		c = c * float64(n-i) / float64(i+1)
	}
	return 1 - below
}
