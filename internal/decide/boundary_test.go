package decide_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// timings are the two settings every limit is held to: k3s's 500 ms/5 s and
// etcd's own 100 ms/1000 ms.
func timings(t *testing.T) map[string]settings.Settings {
	e := settings.Defaults()
	e.ElectionTimeout, e.HeartbeatInterval = time.Second, 100*time.Millisecond
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	return map[string]settings.Settings{"k3s": settings.Defaults(), "etcd": e}
}

const under = "vee" // the voter the host under test connects to

// baseWindow is a full window of healthy samples; mod changes sample i.
func baseWindow(s settings.Settings, name string, voter bool, mod func(i int, x *entry.Sample)) entry.Entry {
	e := entry.Entry{Node: name}
	for i := range s.Window {
		stall := 0.001
		x := entry.Sample{At: baseNow.Add(-time.Duration(s.Window-i) * s.SamplePeriod), Link: entry.Link{Interface: "eth0", Class: entry.ClassWired},
			Connect: map[string]entry.Connect{under: {Seconds: 0.001}}, MemTotalBytes: 16 * gib, MemAvailableBytes: 9 * gib,
			MemFullStallSeconds: &stall}
		if voter {
			x.Connect = nil
			x.Etcd = &entry.EtcdSample{MemberID: "a1", HasLeader: true, IsLeader: true,
				WALFsync: hist(walBounds, map[int]uint64{0: 100}), BackendCommit: hist(walBounds, map[int]uint64{0: 100}),
				PeerRTT: map[string]quantile.Histogram{"b2": hist(rttBounds, map[int]uint64{2: 1})}}
		}
		if mod != nil {
			mod(i, &x)
		}
		entry.Append(&e, x, s.Window)
	}
	if !voter {
		e.Fsync = &entry.FsyncReading{At: baseNow.Add(-time.Hour), Dir: "/var/lib/fr", Filesystem: "ext4", MeasuredDisk: true,
			Writes: 10000, P99Seconds: 0.002, MaxSeconds: 0.004}
	}
	return e
}

// judge decides a fleet of the voter vee and the host of e (a voter when
// voter is set, else a standby) and returns that host.
func judge(t *testing.T, s settings.Settings, e entry.Entry, voter bool, prev *status.Status) status.Host {
	t.Helper()
	raw, err := entry.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	in := decide.Input{Now: baseNow, Settings: s, Previous: prev,
		Nodes:   []k3snode.Node{{Name: under, Voter: true, Eligible: true}, {Name: e.Node, Voter: voter, Eligible: true, EligibleMarked: true}},
		Entries: map[string]string{e.Node: raw}}
	st := decide.Decide(in)
	for _, h := range st.Hosts {
		if h.Name == e.Node {
			return h
		}
	}
	t.Fatalf("host %s missing", e.Node)
	return status.Host{}
}

func reasonOf(t *testing.T, h status.Host, signal string) status.Reason {
	t.Helper()
	for _, r := range h.Reasons {
		if r.Signal == signal {
			return r
		}
	}
	t.Fatalf("%s has no %s reason: %+v", h.Name, signal, h.Reasons)
	return status.Reason{}
}

type boundary struct {
	name   string
	voter  bool
	mod    func(i int, x *entry.Sample)
	fsync  *entry.FsyncReading
	signal string
	ok     bool
}

func runBoundaries(t *testing.T, s settings.Settings, cases []boundary) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := "standby"
			if c.voter {
				name = "voter"
			}
			e := baseWindow(s, name, c.voter, c.mod)
			if c.fsync != nil {
				e.Fsync = c.fsync
			}
			h := judge(t, s, e, c.voter, nil)
			r := reasonOf(t, h, c.signal)
			if r.OK != c.ok {
				t.Fatalf("%s ok = %v, want %v: %+v (value %v, limit %v)", c.signal, r.OK, c.ok, r.Detail, deref(r.Value), deref(r.Limit))
			}
			want := status.Fit
			if !c.ok {
				want = status.Unfit
			}
			if h.Verdict != want {
				t.Fatalf("verdict %s, want %s", h.Verdict, want)
			}
		})
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// over sets the first k samples to v and the rest to base, through set.
func over(k int, v, base float64, set func(x *entry.Sample, v float64)) func(int, *entry.Sample) {
	return func(i int, x *entry.Sample) {
		if i < k {
			set(x, v)
		} else {
			set(x, base)
		}
	}
}

func TestConnectBoundary(t *testing.T) {
	for name, s := range timings(t) {
		t.Run(name, func(t *testing.T) {
			l := s.ConnectLimit().Value
			set := func(x *entry.Sample, v float64) { x.Connect[under] = entry.Connect{Seconds: v} }
			fail := func(k int) func(int, *entry.Sample) {
				return func(i int, x *entry.Sample) {
					if i < k {
						x.Connect[under] = entry.Connect{Err: "dial tcp 10.0.0.1:2380: i/o timeout"}
					}
				}
			}
			runBoundaries(t, s, []boundary{
				{name: "at", mod: over(100, l, l, set), signal: status.SignalConnect, ok: true},
				{name: "just under", mod: over(100, l-1e-6, l, set), signal: status.SignalConnect, ok: true},
				{name: "just over", mod: over(100, l+1e-6, l, set), signal: status.SignalConnect, ok: false},
				{name: "one sample of 100 over", mod: over(1, 10*l, 0.001, set), signal: status.SignalConnect, ok: true},
				{name: "two samples of 100 over", mod: over(2, 10*l, 0.001, set), signal: status.SignalConnect, ok: false},
				{name: "one failed", mod: fail(1), signal: status.SignalConnect, ok: true},
				{name: "two failed", mod: fail(2), signal: status.SignalConnect, ok: false},
			})
			h := judge(t, s, baseWindow(s, "standby", false, fail(2)), false, nil)
			if r := reasonOf(t, h, status.SignalConnect); r.Value != nil || !strings.Contains(r.Detail, "failed; 2 of 100 failed") {
				t.Fatalf("two failed connects: %+v", r)
			}
		})
	}
}

// exactBounds puts the limit l on a bucket bound, so that a p99 whose rank
// ends a bucket is exactly l: [l/2, l, 2l] and a bound just above l.
func exactBounds(l float64) []float64 { return []float64{l / 2, l, l * (1 + 1e-6), 2 * l} }

// histMod gives sample i one observation: in bucket hi for the first k
// samples, else in bucket lo; where picks the histogram.
func histMod(bounds []float64, k, lo, hi int, where func(x *entry.EtcdSample, h quantile.Histogram)) func(int, *entry.Sample) {
	return func(i int, x *entry.Sample) {
		b := lo
		if i < k {
			b = hi
		}
		where(x.Etcd, hist(bounds, map[int]uint64{b: 1}))
	}
}

func TestHistogramBoundaries(t *testing.T) {
	for name, s := range timings(t) {
		t.Run(name, func(t *testing.T) {
			for _, sig := range histogramSignals(s) {
				t.Run(sig.signal, func(t *testing.T) {
					l := sig.limit.Value
					b := exactBounds(l)
					atOK := sig.limit.Rule == settings.AtMost // "at most" takes the limit itself; "under" does not
					// The real layout: the bucket just inside the limit and one
					// well above it.
					in := bucket(sig.layout, l) - 1
					runBoundaries(t, s, []boundary{
						// 99 observations end at l, one beyond: the p99 is exactly l.
						{name: "at", voter: true, mod: histMod(b, 1, 1, 3, sig.where), signal: sig.signal, ok: atOK},
						// All 100 inside (l/2, l]: the p99 interpolates to 0.995 l.
						{name: "just under", voter: true, mod: histMod(b, 0, 1, 3, sig.where), signal: sig.signal, ok: true},
						// Two in (l, l(1+1e-6)]: the rank crosses l by a hair.
						{name: "just over", voter: true, mod: histMod(b, 2, 1, 2, sig.where), signal: sig.signal, ok: false},
						{name: "one observation of 100 over, etcd's buckets", voter: true, mod: histMod(sig.layout, 1, in, in+3, sig.where), signal: sig.signal, ok: true},
						{name: "two observations of 100 over, etcd's buckets", voter: true, mod: histMod(sig.layout, 2, in, in+3, sig.where), signal: sig.signal, ok: false},
					})
				})
			}
		})
	}
}

// sparseMod gives the first n samples one observation each, the first k
// of them in bucket hi and the rest in lo, and every later sample none:
// etcd feeds its peer round-trip histogram about twice every 30 s, so a
// short window holds a few round trips.
func sparseMod(bounds []float64, n, k, lo, hi int, where func(x *entry.EtcdSample, h quantile.Histogram)) func(int, *entry.Sample) {
	return func(i int, x *entry.Sample) {
		switch {
		case i < k:
			where(x.Etcd, hist(bounds, map[int]uint64{hi: 1}))
		case i < n:
			where(x.Etcd, hist(bounds, map[int]uint64{lo: 1}))
		default:
			where(x.Etcd, hist(bounds, nil))
		}
	}
}

// A histogram with fewer observations than a window holds samples forgives
// as many as the window forgives (1 at 100 and p99): its tail is taken no
// higher than the rank n - 1, and with no more than 1 observation nothing
// is judged.
func TestHistogramWithFewObservations(t *testing.T) {
	s := settings.Defaults()
	for _, sig := range histogramSignals(s) {
		t.Run(sig.signal, func(t *testing.T) {
			in := bucket(sig.layout, sig.limit.Value) - 1
			cases := []struct {
				name     string
				n, k     int
				ok       bool
				detailed string
			}{
				{"one observation, over: too few to judge", 1, 1, true, "too few to judge, the tail forgives 1 observation as the window forgives 1 sample"},
				{"two, one over: the lower one", 2, 1, true, "taken at the 1st of 2"},
				{"two, both over", 2, 2, false, "taken at the 1st of 2"},
				{"fifty, one over", 50, 1, true, "taken at the 49th of 50"},
				{"fifty, two over", 50, 2, false, "taken at the 49th of 50"},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					e := baseWindow(s, "voter", true, sparseMod(sig.layout, c.n, c.k, in, in+3, sig.where))
					h := judge(t, s, e, true, nil)
					r := reasonOf(t, h, sig.signal)
					if r.OK != c.ok || !strings.Contains(r.Detail, c.detailed) {
						t.Fatalf("%s: ok %v, %q; want ok %v and %q", sig.signal, r.OK, r.Detail, c.ok, c.detailed)
					}
					if c.n == 1 && (r.Value != nil || h.Verdict != status.Fit) {
						t.Fatalf("too few to judge, yet value %v and verdict %s", deref(r.Value), h.Verdict)
					}
				})
			}
		})
	}
}

func TestFdatasyncBoundary(t *testing.T) {
	for name, s := range timings(t) {
		t.Run(name, func(t *testing.T) {
			l := s.FdatasyncLimit().Value
			reading := func(p99 float64) *entry.FsyncReading {
				return &entry.FsyncReading{At: baseNow, Dir: "/d", Filesystem: "ext4", MeasuredDisk: true, Writes: 9600, P99Seconds: p99, MaxSeconds: 1}
			}
			runBoundaries(t, s, []boundary{
				{name: "at (under: unfit)", fsync: reading(l), signal: status.SignalFdatasync, ok: false},
				{name: "just under", fsync: reading(l - 1e-6), signal: status.SignalFdatasync, ok: true},
				{name: "just over", fsync: reading(l + 1e-6), signal: status.SignalFdatasync, ok: false},
				{name: "memory filesystem: not held against", fsync: &entry.FsyncReading{At: baseNow, Dir: "/d", Filesystem: "tmpfs", P99Seconds: 1}, signal: status.SignalFdatasync, ok: true},
				{name: "skipped: not held against", fsync: &entry.FsyncReading{At: baseNow, Skipped: "etcd data on tmpfs in this scenario"}, signal: status.SignalFdatasync, ok: true},
			})
		})
	}
}

func TestMemoryBoundary(t *testing.T) {
	for name, s := range timings(t) {
		t.Run(name, func(t *testing.T) {
			q := float64(s.StorageQuotaBytes)
			set := func(x *entry.Sample, v float64) { x.MemAvailableBytes = uint64(v) }
			runBoundaries(t, s, []boundary{
				{name: "at", mod: over(100, q, q, set), signal: status.SignalMemory, ok: true},
				{name: "just under", mod: over(100, q-1024, q, set), signal: status.SignalMemory, ok: false},
				{name: "just over", mod: over(100, q+1024, q, set), signal: status.SignalMemory, ok: true},
				{name: "one sample of 100 below", mod: over(1, q/2, 2*q, set), signal: status.SignalMemory, ok: true},
				{name: "two samples of 100 below", mod: over(2, q/2, 2*q, set), signal: status.SignalMemory, ok: false},
			})
			// A voter is held to the quota its etcd reports.
			quota := func(i int, x *entry.Sample) { x.Etcd.QuotaBytes = 8 * gib; x.MemAvailableBytes = 8*gib - 1024 }
			h := judge(t, s, baseWindow(s, "voter", true, quota), true, nil)
			if r := reasonOf(t, h, status.SignalMemory); r.OK || *r.Limit != float64(8*gib) {
				t.Fatalf("voter below its etcd quota: %+v", r)
			}
		})
	}
}

func TestStallBoundary(t *testing.T) {
	for name, s := range timings(t) {
		t.Run(name, func(t *testing.T) {
			l := s.StallLimit().Value
			set := func(x *entry.Sample, v float64) { x.MemFullStallSeconds = &v }
			runBoundaries(t, s, []boundary{
				{name: "at (under: unfit)", mod: over(100, l, l, set), signal: status.SignalStall, ok: false},
				{name: "just under", mod: over(100, l-1e-6, l, set), signal: status.SignalStall, ok: true},
				{name: "just over", mod: over(100, l+1e-6, l, set), signal: status.SignalStall, ok: false},
				{name: "one period of 100 over", mod: over(1, 10*l, 0, set), signal: status.SignalStall, ok: true},
				{name: "two periods of 100 over", mod: over(2, 10*l, 0, set), signal: status.SignalStall, ok: false},
				{name: "no PSI: not held against", mod: func(_ int, x *entry.Sample) { x.MemFullStallSeconds = nil }, signal: status.SignalStall, ok: true},
			})
		})
	}
}

// The wake-up lateness is judged on every recording host, voter and
// standby alike: a standby that starves would be as bad a voter.
func TestWakeupBoundary(t *testing.T) {
	for name, s := range timings(t) {
		t.Run(name, func(t *testing.T) {
			l := s.WakeupLimit().Value
			set := func(x *entry.Sample, v float64) { x.WakeupLateSeconds = &v }
			for _, voter := range []bool{false, true} {
				role := map[bool]string{false: "standby: ", true: "voter: "}[voter]
				runBoundaries(t, s, []boundary{
					{name: role + "at (under: unfit)", voter: voter, mod: over(100, l, l, set), signal: status.SignalWakeup, ok: false},
					{name: role + "just under", voter: voter, mod: over(100, l-1e-6, l, set), signal: status.SignalWakeup, ok: true},
					{name: role + "just over", voter: voter, mod: over(100, l+1e-6, l, set), signal: status.SignalWakeup, ok: false},
					{name: role + "one period of 100 over", voter: voter, mod: over(1, 2*l, 0.005, set), signal: status.SignalWakeup, ok: true},
					{name: role + "two periods of 100 over", voter: voter, mod: over(2, 2*l, 0.005, set), signal: status.SignalWakeup, ok: false},
					{name: role + "not measured: not held against", voter: voter, mod: func(_ int, x *entry.Sample) { x.WakeupLateSeconds = nil }, signal: status.SignalWakeup, ok: true},
				})
			}
			// The detail states the figures: the tail, the timer's
			// interval, the limit, and how many periods were over.
			h := judge(t, s, baseWindow(s, "standby", false, over(2, 2*l, 0.005, set)), false, nil)
			r := reasonOf(t, h, status.SignalWakeup)
			hb := status.FormatValue(s.HeartbeatInterval.Seconds(), "seconds")
			want := "p99 of 100 periods' largest lateness of a timer due every heartbeat interval (" + hb + "): " +
				status.FormatValue(2*l, "seconds") + " late, must be under " + hb + "; 2 of 100 over"
			if r.Detail != want || *r.Value != 2*l || *r.Limit != l || r.Rule != settings.Under {
				t.Fatalf("two periods over: %+v\nwant detail %q", r, want)
			}
			// Samples without a reading are left out of the tail, which
			// still forgives as many samples as the full window's does (a
			// stall's first sample after it takes no reading; the next one
			// counts the late wake-up): among 50, one over is forgiven and
			// two are not, as in a full window.
			half := func(overs int) func(int, *entry.Sample) {
				return func(i int, x *entry.Sample) {
					if i%2 == 0 {
						x.WakeupLateSeconds = nil
						return
					}
					v := 0.005
					if i < 2*overs {
						v = 2 * l
					}
					x.WakeupLateSeconds = &v
				}
			}
			h = judge(t, s, baseWindow(s, "standby", false, half(1)), false, nil)
			r = reasonOf(t, h, status.SignalWakeup)
			if want := "the 49th of 50 periods' largest lateness of a timer due every heartbeat interval (" + hb + ") (forgiving 1 sample as the window does): "; !r.OK || !strings.HasPrefix(r.Detail, want) {
				t.Fatalf("one of 50 measured over: %+v\nwant ok, detail from %q", r, want)
			}
			h = judge(t, s, baseWindow(s, "standby", false, half(2)), false, nil)
			if r := reasonOf(t, h, status.SignalWakeup); r.OK || *r.Value != 2*l {
				t.Fatalf("two of 50 measured over: %+v", r)
			}
			h = judge(t, s, baseWindow(s, "standby", false, func(_ int, x *entry.Sample) { x.WakeupLateSeconds = nil }), false, nil)
			if r := reasonOf(t, h, status.SignalWakeup); !r.OK || r.Value != nil || r.Limit != nil || r.Basis != s.WakeupLimit().Basis ||
				r.Detail != "no wake-up readings in the window (a probe that does not take them): reported, not held against the host" {
				t.Fatalf("no readings: %+v", r)
			}
		})
	}
}

func TestLinkClasses(t *testing.T) {
	s := settings.Defaults()
	link := func(class string) func(int, *entry.Sample) {
		return func(_ int, x *entry.Sample) { x.Link = entry.Link{Interface: "x0", Class: class} }
	}
	runBoundaries(t, s, []boundary{
		{name: "wired", mod: link(entry.ClassWired), signal: status.SignalLink, ok: true},
		{name: "wifi", mod: link(entry.ClassWifi), signal: status.SignalLink, ok: false},
		{name: "unknown: not held against", mod: link(entry.ClassUnknown), signal: status.SignalLink, ok: true},
	})
}

func TestSamplesBoundary(t *testing.T) {
	for name, s := range timings(t) {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				n    int
				want status.Verdict
			}{{s.Window - 1, status.Unknown}, {s.Window, status.Fit}, {s.Window + 1, status.Fit}} {
				big := s
				big.Window = c.n
				e := baseWindow(big, "standby", false, nil)
				h := judge(t, s, e, false, nil)
				if h.Verdict != c.want {
					t.Fatalf("%d samples: %s, want %s", c.n, h.Verdict, c.want)
				}
				if want := min(c.n, s.Window); h.Samples != want {
					t.Fatalf("%d samples: judged %d, want %d", c.n, h.Samples, want)
				}
			}
		})
	}
}

func TestStaleBoundary(t *testing.T) {
	for name, s := range timings(t) {
		t.Run(name, func(t *testing.T) {
			e := baseWindow(s, "standby", false, nil)
			raw, err := entry.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			limit := 3 * s.SamplePeriod
			for _, c := range []struct {
				age  time.Duration
				want status.Verdict
			}{{limit - time.Millisecond, status.Fit}, {limit, status.Fit}, {limit + time.Millisecond, status.Unknown}} {
				prev := &status.Status{Schema: status.Schema, Hosts: []status.Host{{Name: e.Node,
					Observation: &status.Observation{Digest: decide.Digest(raw), ChangedAt: baseNow.Add(-c.age)}}}}
				if h := judge(t, s, e, false, prev); h.Verdict != c.want {
					t.Fatalf("unchanged for %v: %s, want %s", c.age, h.Verdict, c.want)
				}
			}
			// A changed entry is fresh whatever the probe's clock says.
			prev := &status.Status{Schema: status.Schema, Hosts: []status.Host{{Name: e.Node,
				Observation: &status.Observation{Digest: "another", ChangedAt: baseNow.Add(-time.Hour)}}}}
			h := judge(t, s, e, false, prev)
			if h.Verdict != status.Fit || !h.Observation.ChangedAt.Equal(baseNow) {
				t.Fatalf("changed entry: %s, observed %v", h.Verdict, h.Observation)
			}
		})
	}
}

func TestCooldownBoundary(t *testing.T) {
	for name, s := range timings(t) {
		t.Run(name, func(t *testing.T) {
			f := standardFleet(s)
			f.host("alpha").slowWAL = true
			cool := s.Cooldown().Duration()
			for _, c := range []struct {
				ago  time.Duration
				swap bool
			}{{cool - time.Millisecond, false}, {cool, true}, {cool + time.Millisecond, true}} {
				st := decideSteady(f.input(t, settled(f, c.ago)))
				if got := st.Decision.Action == status.ActionSwap; got != c.swap {
					t.Fatalf("voter set changed %v ago (cooldown %v): swap %v, want %v: %+v", c.ago, cool, got, c.swap, st.Decision.Reasons)
				}
			}
			// Without a previous status the voter set counts as formed now.
			st := decide.Decide(f.input(t, nil))
			if st.Decision.Action != status.ActionNone || !st.Memory.VotersChangedAt.Equal(f.now) {
				t.Fatalf("no previous: %+v", st.Decision)
			}
			// A changed voter set restarts the cooldown.
			prev := settled(f, 2*time.Hour)
			prev.Memory.Voters = []string{"alpha", "bravo", "zulu"}
			if st := decide.Decide(f.input(t, prev)); st.Decision.Action != status.ActionNone || !st.Memory.VotersChangedAt.Equal(f.now) {
				t.Fatalf("changed voter set: %+v", st.Memory)
			}
		})
	}
}

// An unknown host's measurements do not count against the host at the other
// end: a stale standby that once measured a voter slow leaves it fit.
func TestUnknownHostDoesNotAccuse(t *testing.T) {
	s := settings.Defaults()
	f := standardFleet(s)
	f.host("delta").connect = 2 // delta measures every voter slow
	f.host("delta").samples = 50
	st := decide.Decide(f.input(t, settled(f, 2*time.Hour)))
	wantVerdict(t, st, "delta", status.Unknown)
	for _, n := range []string{"alpha", "bravo", "charlie"} {
		wantVerdict(t, st, n, status.Fit)
	}
	f.host("delta").samples = 0
	st = decide.Decide(f.input(t, settled(f, 2*time.Hour)))
	// Judged, delta's poor path is held against delta alone: the voters'
	// paths to each other are fine, so none of them is the one to replace.
	wantVerdict(t, st, "delta", status.Unfit)
	for _, n := range []string{"alpha", "bravo", "charlie"} {
		wantVerdict(t, st, n, status.Fit)
	}
	if st.Decision.Action != status.ActionNone {
		t.Fatalf("a standby's poor path made a swap: %+v", st.Decision)
	}
	wantLinkNamed(t, st, "delta", "alpha")
	named := false
	for _, h := range st.Hosts {
		for _, r := range h.Reasons {
			if h.Name == "alpha" && r.Subject == "delta" && r.OK && strings.Contains(r.Detail, "held against delta") {
				named = true
			}
		}
	}
	if !named {
		t.Fatal("alpha does not name delta's slow link to it as held against delta")
	}
}

// Same inputs, same bytes: whatever order the Nodes come in.
func TestDeterministic(t *testing.T) {
	f := standardFleet(settings.Defaults())
	f.slow[pairOf("alpha", "bravo")] = 0.4
	in := f.input(t, settled(f, 2*time.Hour))
	want, err := decide.Decide(in).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		rng.Shuffle(len(in.Nodes), func(a, b int) { in.Nodes[a], in.Nodes[b] = in.Nodes[b], in.Nodes[a] })
		got, err := decide.Decide(in).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("shuffle %d changed the status", i)
		}
	}
	// The status reads back as itself.
	back, err := status.UnmarshalStatus(want)
	if err != nil {
		t.Fatal(err)
	}
	again, err := back.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, want) {
		t.Fatal("status does not survive a round trip")
	}
	if _, err := status.UnmarshalStatus([]byte(`{"schema":"fleet-role.io/status/v0"}`)); err == nil {
		t.Fatal("another schema was read")
	}
}

func ExampleSummary() {
	v, l := 0.812, 0.25
	fmt.Println(status.Summary(status.Reason{Signal: status.SignalConnect, Subject: "bravo", Value: &v, Limit: &l, Unit: "seconds", Rule: settings.AtMost}))
	// Output: connect bravo: 812ms, must be at most 250ms
}

// A controller with no previous status dates the voter set from k3s's
// EtcdIsVoter conditions when every voter has one, each by its age at k3s's
// last heartbeat of it: at, just under and just over the cooldown since the
// youngest of them. One voter without it: now.
func TestCooldownFromVoterConditions(t *testing.T) {
	s := settings.Defaults()
	f := standardFleet(s)
	f.host("alpha").slowWAL = true
	cool := s.Cooldown().Duration()
	for _, c := range []struct {
		ago  time.Duration
		swap bool
	}{{cool - time.Millisecond, false}, {cool, true}, {cool + time.Millisecond, true}} {
		in := f.input(t, nil)
		for i := range in.Nodes {
			if in.Nodes[i].Voter {
				// The youngest decides; older ones do not.
				in.Nodes[i].VoterFor, in.Nodes[i].VoterForKnown = c.ago+time.Duration(i)*time.Hour, true
			}
		}
		latest := f.now.Add(-c.ago - time.Duration(firstVoter(in.Nodes))*time.Hour)
		st := decideSteady(in)
		if got := st.Decision.Action == status.ActionSwap; got != c.swap || !st.Memory.VotersChangedAt.Equal(latest) {
			t.Fatalf("voters were voters %v at k3s's last heartbeat (cooldown %v): swap %v (want %v), changed at %v (want %v): %+v",
				c.ago, cool, got, c.swap, st.Memory.VotersChangedAt, latest, st.Decision.Reasons)
		}
	}
	in := f.input(t, nil)
	for i := range in.Nodes {
		if in.Nodes[i].Voter && i != firstVoter(in.Nodes) {
			in.Nodes[i].VoterFor, in.Nodes[i].VoterForKnown = 2*cool, true
		}
	}
	if st := decide.Decide(in); !st.Memory.VotersChangedAt.Equal(f.now) || st.Decision.Action != status.ActionNone {
		t.Fatalf("a voter without a transition time: changed at %v, want now; decision %+v", st.Memory.VotersChangedAt, st.Decision)
	}
}

// firstVoter is the index of the voter whose transition is the latest.
func firstVoter(nodes []k3snode.Node) int {
	for i, n := range nodes {
		if n.Voter {
			return i
		}
	}
	return -1
}

// A standby on a poor path to one healthy voter: the standby is unfit, the
// voter is not, and no swap sends that voter out for that standby.
func TestStandbyPoorPathDoesNotSwapAHealthyVoter(t *testing.T) {
	f := standardFleet(settings.Defaults())
	f.slow[pairOf("alpha", "delta")] = 0.4
	st := decide.Decide(f.input(t, settled(f, 2*time.Hour)))
	wantVerdict(t, st, "delta", status.Unfit)
	for _, n := range []string{"alpha", "bravo", "charlie"} {
		wantVerdict(t, st, n, status.Fit)
	}
	if st.Decision.Action != status.ActionNone {
		t.Fatalf("decision %+v, want none", st.Decision)
	}
}

// One slow link between a pinned and an unpinned voter: both are on one slow
// link, either taken out takes it out, so the unpinned one is named rather
// than the pinned one holding every swap back. A pinned voter unfit on its own
// (its disk), with no other voter unfit, is passed over and nothing is
// swapped.
func TestTiedSlowLinkNamesTheUnpinnedVoter(t *testing.T) {
	f := standardFleet(settings.Defaults())
	yes := true
	f.host("alpha").pinned = &yes
	f.slow[pairOf("alpha", "bravo")] = 0.4
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	if st.Decision.Action != status.ActionSwap || st.Decision.Out != "bravo" {
		t.Fatalf("decision %+v, want bravo swapped out", st.Decision)
	}

	f = standardFleet(settings.Defaults())
	f.host("alpha").pinned = &yes
	f.host("alpha").slowWAL = true
	st = decideSteady(f.input(t, settled(f, 2*time.Hour)))
	if st.Decision.Action != status.ActionNone {
		t.Fatalf("decision %+v, want none: the only unfit voter is pinned", st.Decision)
	}
	if r := decisionReason(t, st, status.StepPinned, "alpha"); !r.OK || !strings.Contains(r.Detail, "passed over") {
		t.Fatalf("pinned alpha: %+v", r)
	}
	if r := decisionReason(t, st, status.StepReplace, ""); r.OK || !strings.Contains(r.Detail, "every unfit voter is pinned (alpha)") {
		t.Fatalf("replace: %+v", r)
	}
}

// A host over a limit is unfit even when another of its readings failed:
// the failed one cannot vouch for it. A host whose record cannot be judged
// (too few samples, stale) is unknown whatever its samples say.
func TestOverALimitBeatsAFailedReading(t *testing.T) {
	s := settings.Defaults()
	wifi := func(x *entry.Sample) { x.Link = entry.Link{Interface: "wlan0", Class: entry.ClassWifi} }
	t.Run("a voter whose etcd could not be scraped, on Wi-Fi", func(t *testing.T) {
		e := baseWindow(s, "voter", true, func(i int, x *entry.Sample) {
			x.Etcd = &entry.EtcdSample{Err: "scrape http://127.0.0.1:2381/metrics: context deadline exceeded"}
			wifi(x)
		})
		h := judge(t, s, e, true, nil)
		if r := reasonOf(t, h, status.SignalEtcd); r.OK {
			t.Fatalf("etcd reason ok with every scrape failed: %+v", r)
		}
		if h.Verdict != status.Unfit {
			t.Fatalf("verdict %s, want unfit: its link is over its limit", h.Verdict)
		}
	})
	t.Run("the same voter, its etcd read", func(t *testing.T) {
		h := judge(t, s, baseWindow(s, "voter", true, func(i int, x *entry.Sample) { wifi(x) }), true, nil)
		if h.Verdict != status.Unfit {
			t.Fatalf("verdict %s, want unfit", h.Verdict)
		}
	})
	t.Run("a voter whose etcd could not be scraped, nothing over", func(t *testing.T) {
		e := baseWindow(s, "voter", true, func(i int, x *entry.Sample) {
			x.Etcd = &entry.EtcdSample{Err: "scrape: context deadline exceeded"}
		})
		if h := judge(t, s, e, true, nil); h.Verdict != status.Unknown {
			t.Fatalf("verdict %s, want unknown", h.Verdict)
		}
	})
	t.Run("a window one sample short, on Wi-Fi", func(t *testing.T) {
		e := baseWindow(s, "standby", false, func(i int, x *entry.Sample) { wifi(x) })
		e.Samples = e.Samples[1:]
		if h := judge(t, s, e, false, nil); h.Verdict != status.Unknown {
			t.Fatalf("verdict %s, want unknown: the record cannot be judged", h.Verdict)
		}
	})
}

// histogramSignal is one of etcd's histograms the decision judges: its
// signal, its limit, where a sample holds it, and real etcd's bucket layout.
type histogramSignal struct {
	signal string
	limit  settings.Limit
	where  func(x *entry.EtcdSample, h quantile.Histogram)
	layout []float64
}

func histogramSignals(s settings.Settings) []histogramSignal {
	return []histogramSignal{
		{status.SignalPeerRTT, s.RTTLimit(), func(x *entry.EtcdSample, h quantile.Histogram) { x.PeerRTT["b2"] = h }, rttBounds},
		{status.SignalWALFsync, s.WALFsyncLimit(), func(x *entry.EtcdSample, h quantile.Histogram) { x.WALFsync = h }, walBounds},
		{status.SignalBackendCommit, s.BackendCommitLimit(), func(x *entry.EtcdSample, h quantile.Histogram) { x.BackendCommit = h }, walBounds},
	}
}
