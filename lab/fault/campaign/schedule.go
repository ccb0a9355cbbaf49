package campaign

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// Fleet is what a schedule needs to know of the fleet: its hosts, by role.
type Fleet struct {
	Voters, Standbys []string
	// Pinned is the pinned voter. The API server stores its objects through
	// its member, as k3s's first server's API server does through its own,
	// so no fault slows or stops it alone: a fault of the API server's
	// etcd would be a fault of the store every record passes through, not
	// of a host (it still shares the whole-fleet faults).
	Pinned string
}

// Spec is one fault as drawn: what, where, how hard, for how long, and the
// pause after the fleet has recovered from the one before.
type Spec struct {
	Kind Kind `json:"kind"`
	// Host is the host the fault is on; empty for a fault of the whole fleet.
	Host string `json:"host,omitempty"`
	// Hosts lists every host it touches (both ends of a link, both voters).
	Hosts []string `json:"hosts"`
	// Leader: the faulted voter is made etcd's leader first.
	Leader   bool     `json:"leader,omitempty"`
	Severity Severity `json:"severity"`
	Gap      Duration `json:"gap"`
	Length   Duration `json:"length"`
}

func (s Spec) String() string {
	where := s.Host
	if len(s.Hosts) > 1 {
		where = fmt.Sprint(s.Hosts)
	}
	if where == "" {
		where = "every host"
	}
	lead := ""
	if s.Leader {
		lead = " (etcd's leader)"
	}
	return fmt.Sprintf("%s on %s%s, %s, for %v", s.Kind, where, lead, s.Severity, s.Length.D().Round(time.Millisecond))
}

// Ranges derives from the settings what a schedule draws from
// (docs/campaign.md, "Severities"): every delay puts a round trip past
// etcd's round-trip limit while a connect still completes inside the probe's
// reading timeout, so that it is timed rather than failed.
type Ranges struct {
	Period time.Duration
	Bounds Bounds
	// MinDelay and MaxDelay bound a path's added delay, each way.
	MinDelay, MaxDelay time.Duration
	// Timeout is the probe's reading timeout.
	Timeout time.Duration
	// Window is the samples a window holds.
	Window int
	// MinFsync and MaxFsync bound a slow disk's added wait per fsync.
	MinFsync, MaxFsync time.Duration
	// MinLoss and MaxLoss bound a lossy path's loss rate.
	MinLoss, MaxLoss float64
	// MinCPU and MaxCPU bound a starved host's share of a core.
	MinCPU, MaxCPU float64
}

// RangesOf derives the ranges from the settings. timeout is the probe's
// reading timeout (probe.ReadingTimeout).
func RangesOf(s settings.Settings, timeout time.Duration) Ranges {
	rtt := s.RTTLimit()
	limit := time.Duration(rtt.Value * float64(time.Second))
	wal := time.Duration(s.WALFsyncLimit().Value * float64(time.Second))
	return Ranges{
		Window: s.Window,
		// Twice etcd's WAL fsync limit at least, so that the tail is over
		// it however the fsyncs fall; twenty times at most, a disk that
		// stays usable (a follower's slow fsyncs hold back only its own
		// acknowledgements).
		MinFsync: 2 * wal,
		MaxFsync: 20 * wal,
		MinLoss:  LossMin(s.Window, BoundsOf(s).Need),
		MaxLoss:  LossMax,
		MinCPU:   cpuMin,
		MaxCPU:   cpuMax,
		Period:   s.SamplePeriod,
		Bounds:   BoundsOf(s),
		// A round trip 10% past the limit at least; a connect (one round
		// trip) 10% inside the timeout at most.
		MinDelay: limit * 11 / 20,
		MaxDelay: timeout * 9 / 20,
		Timeout:  timeout,
	}
}

// residue is how long a window holds samples taken before a moment: its
// periods and one more for the sample that straddles it.
func (r Ranges) residue() time.Duration {
	return time.Duration(r.Window+1) * r.Period
}

func (r Ranges) periods(p float64) time.Duration { return time.Duration(p * float64(r.Period)) }

// between draws a duration uniformly in [lo, hi], in whole milliseconds
// (lo and hi rounded inwards), which a reader of the board can read.
func between(rng *rand.Rand, lo, hi time.Duration) Duration {
	lo = (lo + time.Millisecond - 1).Truncate(time.Millisecond)
	hi = hi.Truncate(time.Millisecond)
	if hi <= lo {
		return Duration(lo)
	}
	return Duration(lo + time.Duration(rng.Int64N(int64((hi-lo)/time.Millisecond)+1))*time.Millisecond)
}

// Schedule draws n faults from seed. The first len(Kinds) faults inject
// every kind once, in an order drawn from the seed, and voter-delay twice
// more: as a follower and as etcd's leader; later faults draw their kind at
// random. A kind that needs more hosts than the fleet has (two-voters with
// fewer than three unpinned voters) is left out.
func Schedule(seed uint64, n int, f Fleet, r Ranges) []Spec {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	kinds := slices.Clone(Kinds)
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	first := []Spec{}
	for _, k := range kinds {
		if k == VoterDelay {
			first = append(first, Spec{Kind: k}, Spec{Kind: k, Leader: true})
			continue
		}
		first = append(first, Spec{Kind: k})
	}
	var out []Spec
	for i := 0; len(out) < n; i++ {
		var s Spec
		if i < len(first) {
			s = first[i]
		} else {
			s = Spec{Kind: Kinds[rng.IntN(len(Kinds))]}
			s.Leader = s.Kind == VoterDelay && rng.IntN(3) == 0
		}
		if !draw(rng, &s, f, r) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// ScheduleOnly draws n faults of one kind from seed, for reproducing one
// kind's faults many times (hack/campaign.sh --only). leader makes every
// voter-delay a delay of etcd's leader; it is refused with any other kind.
func ScheduleOnly(seed uint64, n int, f Fleet, r Ranges, kind Kind, leader bool) ([]Spec, error) {
	if !slices.Contains(Kinds, kind) {
		return nil, fmt.Errorf("kind %q: not in the catalogue (%v)", kind, Kinds)
	}
	if leader && kind != VoterDelay {
		return nil, fmt.Errorf("leader with kind %q: only %s is made on etcd's leader", kind, VoterDelay)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out []Spec
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("kind %q: the fleet cannot hold it", kind)
		}
		s := Spec{Kind: kind, Leader: leader}
		if draw(rng, &s, f, r) {
			out = append(out, s)
		}
	}
	return out, nil
}

// draw fills in a spec's hosts, severity and times. It reports false when
// the fleet cannot hold the kind.
func draw(rng *rand.Rand, s *Spec, f Fleet, r Ranges) bool {
	unpinned := slices.DeleteFunc(slices.Clone(f.Voters), func(v string) bool { return v == f.Pinned })
	if len(unpinned) == 0 {
		return false
	}
	pick := func(hs []string) string { return hs[rng.IntN(len(hs))] }
	delay := func() Duration { return between(rng, r.MinDelay, r.MaxDelay) }
	b := r.Bounds
	// A swap-worthy fault lasts past its publication bound and a few
	// periods more, so that a flap would show; the others as long.
	length := func() Duration { return between(rng, r.periods(b.Publish+2), r.periods(b.Publish+8)) }
	s.Gap = between(rng, 0, r.Period*2)
	switch s.Kind {
	case VoterDelay, VoterLoss, VoterPartition, VoterDisk, VoterCPU, VoterPause, Flap, Blip:
		s.Host = pick(unpinned)
		s.Hosts = []string{s.Host}
	case StandbyDisk, StandbyDelay:
		if len(f.Standbys) == 0 {
			return false
		}
		s.Host = pick(f.Standbys)
		s.Hosts = []string{s.Host}
	case LinkDelay:
		// Any link between two voters, the pinned one's too: a link delay
		// slows neither end's path to the API server.
		a := pick(f.Voters)
		others := slices.DeleteFunc(slices.Clone(f.Voters), func(v string) bool { return v == a })
		if len(others) == 0 {
			return false
		}
		s.Hosts = []string{a, pick(others)}
		slices.Sort(s.Hosts)
	case TwoVoters:
		if len(unpinned) < 2 {
			return false
		}
		i := rng.IntN(len(unpinned))
		j := rng.IntN(len(unpinned) - 1)
		if j >= i {
			j++
		}
		s.Hosts = []string{unpinned[i], unpinned[j]}
		slices.Sort(s.Hosts)
	case FleetDelay, MachineStall:
		s.Hosts = slices.Concat(f.Voters, f.Standbys)
	}
	s.Length = length()
	switch s.Kind {
	case VoterDelay, LinkDelay, StandbyDelay, TwoVoters:
		s.Severity.Delay = delay()
	case FleetDelay:
		// Every host delayed: a packet between two hosts is held for both
		// ends' delays, so connects take four times it and fail at the
		// probe's timeout; it is on every path alike all the same.
		s.Severity.Delay = delay()
	case VoterLoss:
		s.Severity.Loss = math.Round((r.MinLoss+rng.Float64()*(r.MaxLoss-r.MinLoss))*100) / 100
		// It lasts past its own bound, longer than a steady delay's.
		bound := BoundOf(*s, r, len(f.Voters))
		s.Length = between(rng, r.periods(bound+2), r.periods(bound+8))
	case VoterDisk:
		s.Severity.FsyncDelay = between(rng, r.MinFsync, r.MaxFsync)
	case StandbyDisk:
		s.Severity.FsyncDelay = between(rng, r.MinFsync, r.MaxFsync)
		// The probe reads a standby's disk once a window, and a reading on
		// a slow disk takes up to a window (its bound): the fault lasts two
		// windows and a few periods, so that a whole reading falls inside.
		w := r.periods(float64(2 * r.Window))
		s.Length = between(rng, w+r.periods(2), w+r.periods(6))
	case VoterCPU:
		s.Severity.CPU = r.MinCPU + rng.Float64()*(r.MaxCPU-r.MinCPU)
		// It too lasts past its own bound: its probe samples late.
		bound := BoundOf(*s, r, len(f.Voters))
		s.Length = between(rng, r.periods(bound+2), r.periods(bound+8))
	case VoterPause:
		// Stopped past the freshness limit (3 periods), so that its record
		// is judged stale, and a few periods more.
		s.Length = between(rng, r.periods(5), r.periods(9))
	case MachineStall:
		s.Length = between(rng, r.periods(3), r.periods(6))
	case Flap:
		s.Severity.Delay = delay()
		// On and off by turns, each phase one or two periods, starting on,
		// for at least the drawn length.
		want := s.Length
		s.Length = 0
		for s.Length < want {
			d := Duration(r.periods(float64(1 + rng.IntN(2))))
			s.Severity.Toggles = append(s.Severity.Toggles, d)
			s.Length += d
		}
	case Blip:
		s.Severity.Delay = delay()
		// Shorter than the tail forgives: a probe starts one connect to
		// each voter a period, and a connect is slow when its SYN or SYN-
		// ACK crosses while the delay is on; two connects a period apart
		// both see a delay that lasts b only if b + 2 x delay reaches the
		// period. So b < Forgiven x period - 2 x delay leaves every probe
		// at most the forgiven count of slow samples of it.
		hi := r.periods(float64(b.Forgiven)) - 2*s.Severity.Delay.D() - r.Period/10
		s.Length = between(rng, r.Period/10, hi)
	}
	return true
}
