package entry

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fleet-role/fleet-role/internal/quantile"
)

// Facts and format rules the limits rest on (docs/facts.md, docs/entry.md,
// docs/limits.md).
const (
	// configMapBytes is the most data a ConfigMap holds (docs/facts.md,
	// "Kubernetes limits"): an entry is one ConfigMap value, so no entry
	// the API server stored can be longer.
	configMapBytes = 1 << 20
	// maxMembers: etcd allows no more than 7 members (docs/facts.md, "etcd
	// memory and size"); settings.Validate refuses a larger max_servers.
	maxMembers = 7
	// maxWindowAssumed is the largest window Decode, which has no settings,
	// assumes: above settings.MaxWindow (4,000), which settings.Validate
	// enforces, so that Decode reads every entry a valid setting allows;
	// the byte cap stays a ConfigMap's 1 MiB either way.
	maxWindowAssumed = 10_000
	// samplesPerWindow: an entry may hold twice the window. Lowering the
	// window (at most halving it) during a rollout leaves entries written at
	// the old window until each probe next appends; they must stay readable.
	samplesPerWindow = 2
	// MaxNodeNameBytes: a Kubernetes node name is a DNS subdomain, at most
	// 253 bytes (RFC 1123, as Kubernetes validates it).
	MaxNodeNameBytes = 253
	// MaxInterfaceBytes: Linux interface names fit IFNAMSIZ (16) with the
	// terminating NUL.
	MaxInterfaceBytes = 15
	// MaxMemberIDBytes: etcd member IDs are uint64s written as unpadded
	// lowercase hex (docs/facts.md), at most 16 digits.
	MaxMemberIDBytes = 16
	// MaxTextBytes bounds one error text (strings, fsync.err,
	// fsync.skipped, fsync.filesystem). An error text is a line for people,
	// as a Kubernetes Event's note is, and Kubernetes caps those at 1 KiB
	// (events.k8s.io/v1 Event.note). Encode cuts longer texts to this.
	MaxTextBytes = 1024
	// MaxPathBytes bounds fsync.dir: Linux's PATH_MAX, 4096 bytes.
	MaxPathBytes = 4096
	// maxDepth is the deepest nesting of the format:
	// entry > etcd > peer_rtt > column > sparse histogram.
	maxDepth = 5
	// maxStructKeys is the most fields one object of the format has: its
	// own and its columns.
	maxStructKeys = max(entryOwnFields+len(entryColumns), etcdOwnFields+len(etcdColumns))
	// entryOwnFields are the entry object's fields besides its columns: v,
	// node, n, t0, dt_ms, restart, link, connect_us, connect_fail, errors,
	// strings, etcd, fsync, shrunk, refused, withheld.
	entryOwnFields = 16
	// etcdOwnFields are the etcd object's: present, member_id, wal_fsync,
	// backend_commit, peer_rtt, err, bounds.
	etcdOwnFields = 7
	// errorsPerSample bounds the errors references of one sample: the
	// readings a sample takes besides the connects (whose failures are
	// connect_fail) are etcd, link and memory (internal/probe
	// Host.Sample), each failing at most once. A probe that takes another
	// reading must raise it.
	errorsPerSample = 3
	// etcdLayoutBounds is the widest bucket layout etcd v3.6 uses:
	// ExponentialBuckets(0.0001, 2, 16) for peer round trips (the disks use
	// 14). The worst legitimate entry is built with it.
	etcdLayoutBounds = 16
)

// MaxBounds bounds the finite bucket bounds of one histogram kind. A bound
// finer than the format's resolution (1 µs) or longer than etcd's longest
// election timeout (50 s, docs/facts.md) tells the decision nothing, and etcd
// spaces its buckets by doubling: bounds doubling from 1 µs to past 50 s are
// bits.Len(50 s / 1 µs) + 1 = 27 (TestMaxBoundsDerivation holds the
// arithmetic). etcd's own layouts have 14 and 16.
const MaxBounds = 27

// Limits bounds every size an entry may have, so that a hostile or broken
// entry is refused before decoding allocates for it. LimitsFor derives them
// from the settings; docs/entry.md ("Limits") gives each derivation.
type Limits struct {
	// Window and MaxServers are the settings the limits were derived from;
	// refusals quote them.
	Window, MaxServers int
	// MaxBytes bounds the whole entry: the largest legitimate entry at these
	// settings (WorstCaseBytes), and never more than a ConfigMap holds.
	MaxBytes int
	// MaxSamples bounds n: 2 x window (an entry written before the window
	// was halved stays readable).
	MaxSamples int
	// MaxConnectTargets bounds the voters a host connects to (the keys of
	// connect_us and connect_fail): a standby connects to every server, at
	// most max_servers.
	MaxConnectTargets int
	// MaxPeers bounds the peers a member has round trips to (the keys of
	// etcd.peer_rtt): max_servers - 1.
	MaxPeers int
	// MaxBounds bounds each histogram kind's bucket bounds (see MaxBounds).
	MaxBounds int
	// MaxCounts bounds the bucket counts decoding allocates in all:
	// MaxSamples x (2 + MaxPeers) histograms of MaxBounds + 1 buckets.
	MaxCounts int
	// MaxStrings bounds the table of error texts: one distinct text per
	// sample (a failure whose words change every period) of the longest
	// entry, MaxSamples.
	MaxStrings int
	// MaxTextBytes, MaxNodeNameBytes, MaxInterfaceBytes, MaxMemberIDBytes
	// and MaxPathBytes bound single strings (the constants of those names).
	MaxTextBytes, MaxNodeNameBytes, MaxInterfaceBytes, MaxMemberIDBytes, MaxPathBytes int
}

// LimitsFor derives the limits of an entry at the given window and
// max_servers settings. It is cheap after the first call for a pair of
// settings.
func LimitsFor(window, maxServers int) Limits {
	// Each sample takes at least two bytes of dt_ms ("0,"), so no entry a
	// ConfigMap holds has more than configMapBytes/2 samples; a larger
	// window changes nothing, and would overflow the products below.
	window = min(max(window, 1), configMapBytes/2)
	maxServers = min(max(maxServers, 1), maxMembers)
	key := [2]int{window, maxServers}
	if l, ok := limitsCache.Load(key); ok {
		return l.(Limits)
	}
	samples := samplesPerWindow * window
	l := Limits{
		Window: window, MaxServers: maxServers,
		MaxSamples:        samples,
		MaxConnectTargets: maxServers,
		MaxPeers:          maxServers - 1,
		MaxBounds:         MaxBounds,
		MaxCounts:         samples * (2 + maxServers - 1) * (MaxBounds + 1),
		MaxStrings:        samples,
		MaxTextBytes:      MaxTextBytes, MaxNodeNameBytes: MaxNodeNameBytes, MaxInterfaceBytes: MaxInterfaceBytes,
		MaxMemberIDBytes: MaxMemberIDBytes, MaxPathBytes: MaxPathBytes,
	}
	// The worst case holds a distinct text of MaxTextBytes per sample, so
	// from configMapBytes/MaxTextBytes samples on it is past what a
	// ConfigMap holds, and building it would only say so.
	if window < configMapBytes/MaxTextBytes {
		l.MaxBytes = min(WorstCaseBytes(window, maxServers), configMapBytes)
	} else {
		l.MaxBytes = configMapBytes
	}
	limitsCache.Store(key, l)
	return l
}

var limitsCache sync.Map // [window, maxServers] -> Limits

// defaultLimits are Decode's: the largest settings can hold (window
// maxWindowAssumed, max_servers 7). Callers that know the settings should
// call DecodeLimited with LimitsFor(window, max_servers) instead, which is
// far tighter.
var defaultLimits = sync.OnceValue(func() Limits { return LimitsFor(maxWindowAssumed, maxMembers) })

// DecodeLimits are Decode's limits, for a reader of a Decoder that knows no
// settings.
func DecodeLimits() Limits { return defaultLimits() }

// WorstCaseBytes is the size of the largest legitimate entry at the given
// settings, found by building and encoding it: a voter with max_servers - 1
// peers, every sample different from the one before (no run shares a count),
// every value at the most digits a real host gives (eight-digit stalls and
// wake-up lateness), every histogram with all of etcd's widest layout (16
// bounds and +Inf) filled, every reading but the connects failing every
// sample (errorsPerSample) with a distinct error text of MaxTextBytes per
// sample, and a disk reading whose texts are as long. A per-host record can
// be capped at it.
func WorstCaseBytes(window, maxServers int) int {
	text, err := Encode(WorstCase(window, maxServers))
	if err != nil {
		panic(fmt.Sprintf("entry: the worst-case entry does not encode: %v", err)) // a bug in WorstCase
	}
	return len(text)
}

// WorstCase builds the entry WorstCaseBytes measures, for tests that need
// the largest legitimate entry (a record at its size cap).
func WorstCase(window, maxServers int) Entry {
	window, maxServers = max(window, 1), min(max(maxServers, 1), maxMembers)
	name := func(i int) string {
		// Node names at their longest: a DNS subdomain of 253 bytes.
		s := fmt.Sprintf("server-%d.", i)
		return s + strings.Repeat("a", MaxNodeNameBytes-len(s))
	}
	id := func(i int) string { return fmt.Sprintf("%016x", uint64(0xf000000000000000)+uint64(i)) }
	bounds := make([]float64, etcdLayoutBounds)
	for i := range bounds {
		bounds[i] = 0.0001 * float64(uint64(1)<<i)
	}
	full := func(base uint64) quantile.Histogram {
		h := quantile.Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
		for b := range h.Counts {
			h.Counts[b] = base + uint64(b)
		}
		return h
	}
	// A realistic error text, repeated to the cap.
	const errText = "scrape http://127.0.0.1:2381/metrics: Get \"http://127.0.0.1:2381/metrics\": context deadline exceeded; "
	linkText := ("link: " + strings.Repeat(errText, MaxTextBytes/len(errText)+1))[:MaxTextBytes]
	memText := ("memory: " + strings.Repeat(errText, MaxTextBytes/len(errText)+1))[:MaxTextBytes]
	e := Entry{Node: name(0)}
	t := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i := range window {
		// Steps of nearly a minute (five digits of ms), never equal.
		t = t.Add(time.Duration(59_000+i%997) * time.Millisecond)
		stall := float64(14_000_000+i) * 1e-6 // eight digits of µs
		// Eight digits too: a wake-up more than the worst case's steps of
		// nearly a minute late (a process stopped past its next sample).
		late := float64(15_000_000+i) * 1e-6
		text := fmt.Sprintf("%06d %s", i, strings.Repeat(errText, MaxTextBytes/len(errText)+1))[:MaxTextBytes]
		s := Sample{
			At: t, Restart: true,
			// Two interfaces taking turns: a run per sample.
			Link:                Link{Interface: fmt.Sprintf("enp%02ds0f%07d", i%2, i%2)[:MaxInterfaceBytes], Class: ClassWired},
			Connect:             map[string]Connect{},
			MemTotalBytes:       uint64(1_000_000_000+i) * 1024, // ten digits of KiB: a TiB host
			MemAvailableBytes:   uint64(1_000_000_000+i) * 1024,
			MemFullStallSeconds: &stall,
			WakeupLateSeconds:   &late,
			// Every reading but the connects failing: a new text each
			// sample, and two that repeat.
			Errors: []string{text, linkText, memText},
			Etcd: &EtcdSample{MemberID: id(0), IsLeader: i%2 == 0, IsLearner: i%2 == 1, HasLeader: i%2 == 0,
				ConnectedPeers: i % maxServers, KnownPeers: (i + 1) % maxServers, LeaderChanges: uint64(i%2 + 1),
				WALFsync: full(1_000_000 + uint64(i)), BackendCommit: full(1_000_000 + uint64(i)),
				PeerRTT:     map[string]quantile.Histogram{},
				DBSizeBytes: (8_000_000_000 + uint64(i)) * 1024, QuotaBytes: 8<<30 + uint64(i%2)},
		}
		for j := 1; j < maxServers; j++ {
			s.Connect[name(j)] = Connect{Seconds: float64(4_000_000+i) * 1e-6} // seven digits of µs
			s.Etcd.PeerRTT[id(j)] = full(100 + uint64(i))
		}
		e.Samples = append(e.Samples, s)
	}
	e.Fsync = &FsyncReading{At: t, Dir: "/var/lib/rancher/k3s/server/db/fleet-role-fsync", Filesystem: "ext4",
		MeasuredDisk: true, Writes: 1_000_000, P99Seconds: 4, MaxSeconds: 4,
		Err: strings.Repeat("x", MaxTextBytes), Skipped: strings.Repeat("y", MaxTextBytes)}
	return e
}

const boundsBasis = "doubling from 1 µs, the format's resolution, to past 50 s, etcd's longest election timeout; etcd uses 14 and 16"

// maxTimeBytes bounds t0 and fsync.at: the longest RFC 3339 time Go writes.
const maxTimeBytes = len(time.RFC3339Nano)

func (l Limits) bytesBasis() string {
	if l.MaxBytes >= configMapBytes {
		return "a ConfigMap holds at most 1 MiB"
	}
	return fmt.Sprintf("the largest legitimate entry at window %d and max_servers %d", l.Window, l.MaxServers)
}

func (l Limits) samplesBasis() string {
	return fmt.Sprintf("%d x window %d", samplesPerWindow, l.Window)
}

// checkSizes holds what the reader read against l, before anything is
// built from it: counts of runs and references against n (each covers at
// least one sample), n against the window, strings against their limits.
func (in *wire) checkSizes(l Limits) error {
	n := max(in.N, 0)
	if in.N > l.MaxSamples {
		return fmt.Errorf("n: %d samples, over the limit of %d (%s)", in.N, l.MaxSamples, l.samplesBasis())
	}
	if err := textLimit("node", in.Node, l.MaxNodeNameBytes, "a node name is a DNS subdomain"); err != nil {
		return err
	}
	if err := textLimit("t0", in.T0, maxTimeBytes, "an RFC 3339 time"); err != nil {
		return err
	}
	for _, c := range []struct {
		field string
		got   int
	}{{"restart", len(in.Restart)}, {"link", len(in.Link)}} {
		if err := perSample(c.field, c.got, n); err != nil {
			return err
		}
	}
	if err := columnSizes(entryColumns[:], in.cols[:], n); err != nil {
		return err
	}
	for i, r := range in.Link {
		if len(r.If) > l.MaxInterfaceBytes {
			return textLimit(fmt.Sprintf("link[%d].if", i), r.If, l.MaxInterfaceBytes, "Linux's IFNAMSIZ 16 with its NUL")
		}
	}
	for k := range in.ConnectUs {
		if err := textLimit("connect_us: a voter name", k, l.MaxNodeNameBytes, "a node name is a DNS subdomain"); err != nil {
			return err
		}
	}
	for k, ps := range in.ConnectFail {
		if err := textLimit("connect_fail: a voter name", k, l.MaxNodeNameBytes, "a node name is a DNS subdomain"); err != nil {
			return err
		}
		if len(ps) > n {
			return perSample(fmt.Sprintf("connect_fail[%q]", k), len(ps), n)
		}
	}
	if len(in.Errors) > n*errorsPerSample {
		return fmt.Errorf("errors: %d references for %d samples, over the limit of %d a sample (the readings besides connects: etcd, link, memory)",
			len(in.Errors), n, errorsPerSample)
	}
	// The number of strings, of bounds and of values in any list the reader
	// has held already, as it read them.
	for i, s := range in.Strings {
		if len(s) > l.MaxTextBytes {
			return textLimit(fmt.Sprintf("strings[%d]", i), s, l.MaxTextBytes, "an error text is a line for people, capped as a Kubernetes Event's note is")
		}
	}
	if f := in.Fsync; f != nil {
		for _, c := range []struct {
			field, v string
			max      int
			why      string
		}{
			{"fsync.at", f.At, maxTimeBytes, "an RFC 3339 time"},
			{"fsync.dir", f.Dir, l.MaxPathBytes, "Linux's PATH_MAX"},
			{"fsync.filesystem", f.Filesystem, l.MaxTextBytes, "a text for people"},
			{"fsync.err", f.Err, l.MaxTextBytes, "a text for people"},
			{"fsync.skipped", f.Skipped, l.MaxTextBytes, "a text for people"},
		} {
			if err := textLimit(c.field, c.v, c.max, c.why); err != nil {
				return err
			}
		}
	}
	if x := in.Etcd; x != nil {
		if err := x.checkSizes(l, n); err != nil {
			return fmt.Errorf("etcd.%w", err)
		}
	}
	return nil
}

func (x *wireEtcd) checkSizes(l Limits, n int) error {
	for _, c := range []struct {
		field string
		got   int
	}{{"present", len(x.Present)}, {"member_id", len(x.MemberID)}, {"err", len(x.Err)}} {
		if err := perSample(c.field, c.got, n); err != nil {
			return err
		}
	}
	if err := columnSizes(etcdColumns[:], x.cols[:], n); err != nil {
		return err
	}
	for i, r := range x.MemberID {
		if len(r.ID) > l.MaxMemberIDBytes {
			return textLimit(fmt.Sprintf("member_id[%d].id", i), r.ID, l.MaxMemberIDBytes, "a uint64 in hex")
		}
	}
	for k := range x.PeerRTT {
		if err := textLimit("peer_rtt: a member ID", k, l.MaxMemberIDBytes, "a uint64 in hex"); err != nil {
			return err
		}
	}
	return nil
}

// perSample refuses more runs or references than samples: each covers at
// least one sample.
func perSample(field string, got, n int) error {
	if got > n {
		return fmt.Errorf("%s: %d runs or references for %d samples", field, got, n)
	}
	return nil
}

func textLimit(field, v string, limit int, why string) error {
	if len(v) > limit {
		return fmt.Errorf("%s: %d bytes, over the limit of %d (%s)", field, len(v), limit, why)
	}
	return nil
}
