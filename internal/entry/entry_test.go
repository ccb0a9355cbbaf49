package entry_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// The bucket layouts of real etcd v3.6 (prometheus.ExponentialBuckets).
var (
	walBounds = exponential(0.001, 2, 14)
	rttBounds = exponential(0.0001, 2, 16)
	t0        = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

func exponential(start, factor float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = start
		start *= factor
	}
	return out
}

func voterNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("k3s-server-%02d.fleet.example.internal", i))
	}
	return out
}

func memberID(i int) string {
	return strconv.FormatUint(0x8e9e05c52164694d+uint64(i)*0x1f2e3d4c5b6a7988, 16)
}

// sparseHist spreads count observations over k buckets starting at first.
func sparseHist(bounds []float64, rng *rand.Rand, first, k, max int) quantile.Histogram {
	h := quantile.Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
	for b := first; b < first+k && b < len(h.Counts); b++ {
		h.Counts[b] = uint64(1 + rng.IntN(max))
	}
	return h
}

// worstWindow is a full window of a host connecting to voters, with the
// worst values a real host gives: six-digit connect times, a voter down for
// ten samples, eight-digit memory figures, six-digit stalls and wake-up
// lateness (a starved host wakes up to a second late), an etcd busy
// enough for five-digit fsync counts over six buckets, a round trip or two
// per peer per sample, a database growing every sample, reading errors.
func worstWindow(node string, voters []string, self int, window int) entry.Entry {
	rng := rand.New(rand.NewPCG(uint64(len(voters)), uint64(self+2)))
	// The wake-up lateness draws from a source of its own, so that the
	// other columns are those of the entries before it had one.
	lateRng := rand.New(rand.NewPCG(uint64(len(voters)), uint64(self+3)))
	e := entry.Entry{Node: node}
	for i := range window {
		stall := float64(rng.IntN(499999)) * 1e-6
		late := float64(lateRng.IntN(999999)) * 1e-6
		s := entry.Sample{
			At:      t0.Add(time.Duration(i)*15*time.Second + time.Duration(rng.IntN(999))*time.Millisecond),
			Restart: i == 0 || i == 57,
			Link:    entry.Link{Interface: "enp3s0f1", Class: entry.ClassWired},
			Connect: map[string]entry.Connect{},
			// A 64 GiB host.
			MemTotalBytes:       64 << 30,
			MemAvailableBytes:   uint64(10_000_000+rng.IntN(50_000_000)) * 1024,
			MemFullStallSeconds: &stall,
			WakeupLateSeconds:   &late,
		}
		if i == 0 || i == 57 {
			// The first sample after a start: no baseline, and no timer
			// has fallen due yet.
			s.MemFullStallSeconds, s.WakeupLateSeconds = nil, nil
		}
		for j, v := range voters {
			if j == self {
				continue
			}
			if j == 0 && i >= 40 && i < 50 {
				s.Connect[v] = entry.Connect{Err: "dial tcp 10.23.45.67:2380: connect: connection refused"}
				continue
			}
			s.Connect[v] = entry.Connect{Seconds: float64(100000+rng.IntN(149999)) * 1e-6}
		}
		if i%17 == 3 {
			s.Errors = []string{"memory: read /proc/pressure/memory: resource temporarily unavailable"}
		}
		if self >= 0 {
			x := &entry.EtcdSample{MemberID: memberID(self), IsLeader: i < 30 || i > 70, HasLeader: true,
				ConnectedPeers: len(voters) - 1, KnownPeers: len(voters) - 1, DBSizeBytes: uint64(1<<30) + uint64(i)*uint64(rng.IntN(1<<20)),
				QuotaBytes: 8 << 30, PeerRTT: map[string]quantile.Histogram{}}
			if i%25 == 0 {
				x.LeaderChanges = 1
			}
			x.WALFsync = sparseHist(walBounds, rng, 0, 6, 99999)
			x.BackendCommit = sparseHist(walBounds, rng, 1, 5, 9999)
			for j := range voters {
				if j != self {
					x.PeerRTT[memberID(j)] = sparseHist(rttBounds, rng, 8+rng.IntN(4), 1+rng.IntN(2), 2)
				}
			}
			if i == 90 {
				x = &entry.EtcdSample{Err: "scrape http://127.0.0.1:2381/metrics: context deadline exceeded"}
			}
			s.Etcd = x
		}
		// Appended as entry.Append would (every histogram has the same
		// bounds, and no sample is cut), without its check of every older
		// sample's bounds, which makes a window of thousands slow to build.
		e.Samples = append(e.Samples, s)
	}
	if self < 0 {
		e.Fsync = &entry.FsyncReading{At: t0.Add(time.Minute), Dir: "/var/lib/rancher/k3s/server/db/fleet-role-fsync", Filesystem: "ext4",
			MeasuredDisk: true, Writes: 9600, P99Seconds: 0.012345, MaxSeconds: 0.987654}
	}
	return e
}

// A full window at the worst values a real host gives stays under its
// record's cap at the shipped settings (window 100, max_servers 5), so that
// no real host's record is ever shrunk: the cap is the largest legitimate
// entry, every field at its worst at once (WorstCaseBytes). The sizes it
// logs are what the bench reports as the entry's footprint: each probe
// rewrites its whole record every period, so they are what one host's
// sample costs the etcd it judges (docs/entry.md, "Sizes").
func TestWindowFitsBudget(t *testing.T) {
	s := settings.Defaults()
	budget := entry.WorstCaseBytes(s.Window, s.MaxServers)
	for _, c := range []struct {
		name   string
		voters int
		voter  bool
	}{
		{"standby, 3 voters", 3, false},
		{"standby, 5 voters", 5, false},
		{"voter, 3 voters", 3, true},
		{"voter, 5 voters", 5, true},
	} {
		self := -1
		if c.voter {
			self = 1
		}
		e := worstWindow("k3s-node-99.fleet.example.internal", voterNames(c.voters), self, s.Window)
		text, err := entry.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if len(text) > budget {
			t.Errorf("%s: %d bytes, over the record cap of %d (window %d, max_servers %d)", c.name, len(text), budget, s.Window, s.MaxServers)
		}
		t.Logf("%s: %d bytes (record cap %d)", c.name, len(text), budget)
		if _, err := entry.Decode(text); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
}

// settings.MaxTextBytes bounds fsync_skip_reason, which every entry carries
// as fsync.skipped: no more than the entry keeps of one text, so that no
// record cuts it.
func TestSkipReasonFitsAText(t *testing.T) {
	if settings.MaxTextBytes > entry.MaxTextBytes {
		t.Fatalf("settings.MaxTextBytes %d is over entry.MaxTextBytes %d: a skip reason that validates would be cut in every record",
			settings.MaxTextBytes, entry.MaxTextBytes)
	}
}

// settings.MaxWindow rests on this: the worst realistic entry of a voter in
// etcd's largest cluster (7 members, six peers), with worstWindow's values,
// at MaxWindow samples fits one ConfigMap with a tenth of it spare, for the
// disk reading (its texts at their caps take about 7 KiB), the key and more
// error texts than worstWindow's. At that window a record's cap is the
// ConfigMap's whole limit (LimitsFor), and the entry reads back under it.
// It logs the figures settings.MaxWindow and docs/limits.md state.
func TestMaxWindowFitsAConfigMap(t *testing.T) {
	const configMap = 1 << 20
	e := worstWindow("k3s-node-99.fleet.example.internal", voterNames(7), 1, settings.MaxWindow)
	text, err := entry.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	per := float64(len(text)) / settings.MaxWindow
	figures := fmt.Sprintf("%d samples of a voter among 7: %d bytes, %.1f a sample; %.1f%% of the %d-byte ConfigMap spare; %d samples would be the most that fit",
		settings.MaxWindow, len(text), per, 100*float64(configMap-len(text))/configMap, configMap, int(configMap/per))
	t.Log(figures)
	if len(text) > configMap*9/10 {
		t.Errorf("over nine tenths of a ConfigMap: %s", figures)
	}
	if l := entry.LimitsFor(settings.MaxWindow, 7); l.MaxBytes != configMap {
		t.Fatalf("LimitsFor(%d, 7).MaxBytes = %d, want the ConfigMap's %d", settings.MaxWindow, l.MaxBytes, configMap)
	}
	if _, err := entry.DecodeLimited(text, entry.LimitsFor(settings.MaxWindow, 7)); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	for _, self := range []int{-1, 2} {
		e := worstWindow("node-a", voterNames(5), self, 100)
		text, err := entry.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := entry.Decode(text)
		if err != nil {
			t.Fatal(err)
		}
		again, err := entry.Encode(back)
		if err != nil {
			t.Fatal(err)
		}
		if again != text {
			t.Fatal("decode then encode changed the entry")
		}
		if len(back.Samples) != 100 || back.Node != "node-a" {
			t.Fatalf("decoded %d samples of %q", len(back.Samples), back.Node)
		}
		for i, s := range back.Samples {
			o := e.Samples[i]
			if !s.At.Equal(o.At.Truncate(time.Millisecond)) || s.Restart != o.Restart || s.Link != o.Link ||
				s.MemAvailableBytes != o.MemAvailableBytes/1024*1024 || s.MemTotalBytes != o.MemTotalBytes ||
				strings.Join(s.Errors, "|") != strings.Join(o.Errors, "|") {
				t.Fatalf("sample %d: %+v, want %+v", i, s, o)
			}
			for _, f := range []struct {
				name      string
				got, want *float64
			}{{"stall", s.MemFullStallSeconds, o.MemFullStallSeconds}, {"wake-up lateness", s.WakeupLateSeconds, o.WakeupLateSeconds}} {
				if (f.got == nil) != (f.want == nil) || f.got != nil && math.Abs(*f.got-*f.want) > 5e-7 {
					t.Fatalf("sample %d %s: %v, want %v", i, f.name, f.got, f.want)
				}
			}
			if len(s.Connect) != len(o.Connect) {
				t.Fatalf("sample %d connects %d, want %d", i, len(s.Connect), len(o.Connect))
			}
			for v, c := range o.Connect {
				if s.Connect[v].Err != c.Err || math.Abs(s.Connect[v].Seconds-c.Seconds) > 5e-7 {
					t.Fatalf("sample %d connect %s: %+v, want %+v", i, v, s.Connect[v], c)
				}
			}
			if (s.Etcd == nil) != (o.Etcd == nil) {
				t.Fatalf("sample %d etcd presence", i)
			}
			if x, ox := s.Etcd, o.Etcd; x != nil {
				if x.Err != ox.Err || x.MemberID != ox.MemberID || x.IsLeader != ox.IsLeader || x.HasLeader != ox.HasLeader ||
					x.LeaderChanges != ox.LeaderChanges || x.QuotaBytes != ox.QuotaBytes || x.DBSizeBytes != ox.DBSizeBytes/1024*1024 {
					t.Fatalf("sample %d etcd: %+v, want %+v", i, x, ox)
				}
				if ox.Err == "" && (x.WALFsync.Count() != ox.WALFsync.Count() || x.BackendCommit.Count() != ox.BackendCommit.Count() || len(x.PeerRTT) != len(ox.PeerRTT)) {
					t.Fatalf("sample %d histograms", i)
				}
				for id, h := range ox.PeerRTT {
					for b, c := range h.Counts {
						if x.PeerRTT[id].Counts[b] != c {
							t.Fatalf("sample %d peer %s bucket %d", i, id, b)
						}
					}
				}
			}
		}
		if self < 0 && (back.Fsync == nil || back.Fsync.P99Seconds != 0.012345 || back.Fsync.Writes != 9600 || !back.Fsync.MeasuredDisk) {
			t.Fatalf("fsync %+v", back.Fsync)
		}
	}
	empty, err := entry.Encode(entry.Entry{Node: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := entry.Decode(empty); err != nil || len(e.Samples) != 0 {
		t.Fatalf("empty entry %s: %v", empty, err)
	}
}

func TestAppendKeepsTheWindow(t *testing.T) {
	var e entry.Entry
	for i := range 150 {
		entry.Append(&e, entry.Sample{At: t0.Add(time.Duration(i) * time.Second), Link: entry.Link{Class: entry.ClassUnknown}}, 100)
	}
	if len(e.Samples) != 100 || !e.Samples[0].At.Equal(t0.Add(50*time.Second)) {
		t.Fatalf("kept %d samples from %v", len(e.Samples), e.Samples[0].At)
	}
	// A sample with other bucket bounds drops the older histograms.
	old := entry.Sample{Link: entry.Link{Class: entry.ClassWired}, Etcd: &entry.EtcdSample{WALFsync: quantile.Histogram{Bounds: []float64{1}, Counts: []uint64{1, 0}},
		PeerRTT: map[string]quantile.Histogram{"a": {Bounds: []float64{1}, Counts: []uint64{1, 0}}}}}
	e = entry.Entry{Node: "n"}
	entry.Append(&e, old, 100)
	entry.Append(&e, entry.Sample{Link: entry.Link{Class: entry.ClassWired}, Etcd: &entry.EtcdSample{WALFsync: quantile.Histogram{Bounds: []float64{2}, Counts: []uint64{1, 0}},
		PeerRTT: map[string]quantile.Histogram{"a": {Bounds: []float64{2}, Counts: []uint64{1, 0}}}}}, 100)
	if e.Samples[0].Etcd.WALFsync.Count() != 0 || e.Samples[0].Etcd.PeerRTT["a"].Count() != 0 {
		t.Fatal("old histograms kept beside new bounds")
	}
	if _, err := entry.Encode(e); err != nil {
		t.Fatal(err)
	}
}

func TestEncodeRefuses(t *testing.T) {
	nan, minus := math.NaN(), -0.5
	overInt32 := int64(math.MaxInt32) + 1 // not a constant: it would not compile for 32-bit hosts
	for name, e := range map[string]entry.Entry{
		"no node":          {},
		"negative connect": {Node: "n", Samples: []entry.Sample{{Link: entry.Link{Class: "wired"}, Connect: map[string]entry.Connect{"v": {Seconds: -1}}}}},
		"NaN stall":        {Node: "n", Samples: []entry.Sample{{Link: entry.Link{Class: "wired"}, MemFullStallSeconds: &nan}}},
		"negative wake-up": {Node: "n", Samples: []entry.Sample{{Link: entry.Link{Class: "wired"}, WakeupLateSeconds: &minus}}},
		"bad class":        {Node: "n", Samples: []entry.Sample{{Link: entry.Link{Class: "ethernet"}}}},
		"mixed bounds": {Node: "n", Samples: []entry.Sample{
			{Link: entry.Link{Class: "wired"}, Etcd: &entry.EtcdSample{WALFsync: quantile.Histogram{Bounds: []float64{1}, Counts: []uint64{1, 0}}}},
			{Link: entry.Link{Class: "wired"}, Etcd: &entry.EtcdSample{WALFsync: quantile.Histogram{Bounds: []float64{2}, Counts: []uint64{1, 0}}}}}},
		"negative fsync": {Node: "n", Fsync: &entry.FsyncReading{P99Seconds: -0.1}},
		"negative peers": {Node: "n", Samples: []entry.Sample{{Link: entry.Link{Class: "wired"}, Etcd: &entry.EtcdSample{ConnectedPeers: -1}}}},
		// What no 32-bit host reads back (max_servers is at most 7).
		"peers past an int32": {Node: "n", Samples: []entry.Sample{{Link: entry.Link{Class: "wired"}, Etcd: &entry.EtcdSample{KnownPeers: int(overInt32)}}}},
	} {
		if _, err := entry.Encode(e); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

// Strict decoding: each malformed entry is refused with an error naming the
// field.
func TestDecodeIsStrict(t *testing.T) {
	good, err := entry.Encode(worstWindow("n", voterNames(3), 1, 4))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"unknown version", func(m map[string]any) { m["v"] = 2 }, "v: unsupported version 2"},
		{"unknown field", func(m map[string]any) { m["extra"] = 1 }, `unknown field "extra"`},
		{"unknown nested field", func(m map[string]any) { m["etcd"].(map[string]any)["extra"] = 1 }, `unknown field "extra"`},
		{"no node", func(m map[string]any) { m["node"] = "" }, "node: empty"},
		{"short dt_ms", func(m map[string]any) { m["dt_ms"] = []any{0, 1} }, "dt_ms: 2 values for 4 samples"},
		{"first dt not 0", func(m map[string]any) { m["dt_ms"].([]any)[0] = 5 }, "dt_ms: first value 5"},
		{"bad t0", func(m map[string]any) { m["t0"] = "yesterday" }, "t0:"},
		{"link runs short", func(m map[string]any) { m["link"] = []any{map[string]any{"if": "e", "class": "wired", "n": 3}} }, "link: runs cover 3 samples, want 4"},
		{"link class", func(m map[string]any) { m["link"] = []any{map[string]any{"if": "e", "class": "fibre", "n": 4}} }, `class "fibre"`},
		{"negative connect", func(m map[string]any) {
			m["connect_us"].(map[string]any)[voterNames(3)[0]].([]any)[1] = -5
		}, "connect_us[\"" + voterNames(3)[0] + "\"][1]: -5 is negative"},
		{"fractional connect", func(m map[string]any) { m["connect_us"].(map[string]any)[voterNames(3)[0]].([]any)[1] = 1.5 }, "connect_us"},
		{"connect column length", func(m map[string]any) { m["connect_us"].(map[string]any)[voterNames(3)[0]] = []any{1} }, "1 values for 4 samples"},
		{"connect failure without a column", func(m map[string]any) {
			m["connect_fail"] = map[string]any{"ghost": []any{[]any{0, 0}}}
			m["strings"] = []any{"x"}
		}, `connect_fail["ghost"]: voter has no connect_us column`},
		{"pair of three", func(m map[string]any) { m["mem_total_kib"] = []any{[]any{1, 4, 0}} }, "want a pair of two numbers, got 3"},
		{"mem runs", func(m map[string]any) { m["mem_total_kib"] = []any{[]any{1, 5}} }, "mem_total_kib: runs cover more than 4 samples"},
		{"negative memory", func(m map[string]any) { m["mem_available_kib"].([]any)[0] = -1 }, "mem_available_kib"},
		{"negative stall", func(m map[string]any) { m["mem_full_stall_us"] = []any{nil, -3, nil, nil} }, "mem_full_stall_us[1]: -3 is negative"},
		{"negative wake-up", func(m map[string]any) { m["wakeup_late_us"] = []any{nil, 4, -3, nil} }, "wakeup_late_us[2]: -3 is negative"},
		{"wake-up column length", func(m map[string]any) { m["wakeup_late_us"] = []any{nil, 4} }, "wakeup_late_us: 2 values for 4 samples"},
		{"fractional wake-up", func(m map[string]any) { m["wakeup_late_us"] = []any{nil, 4.5, 1, 1} }, "wakeup_late_us"},
		{"error index", func(m map[string]any) { m["errors"] = []any{[]any{9, 0}} }, "errors: sample index 9 out of range"},
		{"string index", func(m map[string]any) { m["errors"] = []any{[]any{0, 99}} }, "errors: string index 99 out of range"},
		{"etcd present runs", func(m map[string]any) { m["etcd"].(map[string]any)["present"] = []any{[]any{1, 3}} }, "etcd.present: runs cover 3 samples, want 4"},
		{"etcd bool", func(m map[string]any) { m["etcd"].(map[string]any)["is_leader"] = []any{[]any{2, 4}} }, "etcd.is_leader: sample 0: 2 is not from 0 to 1 (a flag is 0 or 1)"},
		{"wal length", func(m map[string]any) { m["etcd"].(map[string]any)["wal_fsync"] = []any{nil} }, "etcd.wal_fsync: 1 values for 4 samples"},
		{"wal odd", func(m map[string]any) { m["etcd"].(map[string]any)["wal_fsync"].([]any)[0] = []any{1} }, "etcd.wal_fsync[0]: 1 numbers, want [bucket, count] pairs"},
		{"wal bucket range", func(m map[string]any) { m["etcd"].(map[string]any)["wal_fsync"].([]any)[0] = []any{15, 1} }, "etcd.wal_fsync[0]: bucket 15 out of range"},
		{"wal zero count", func(m map[string]any) { m["etcd"].(map[string]any)["wal_fsync"].([]any)[0] = []any{1, 0} }, "bucket 1 has count 0"},
		{"wal not ascending", func(m map[string]any) { m["etcd"].(map[string]any)["wal_fsync"].([]any)[0] = []any{3, 1, 2, 1} }, "buckets not ascending"},
		{"bounds", func(m map[string]any) {
			m["etcd"].(map[string]any)["bounds"].(map[string]any)["wal_fsync"] = []any{0.002, 0.001}
		}, "etcd.bounds.wal_fsync: bounds not ascending"},
		{"negative bound", func(m map[string]any) { m["etcd"].(map[string]any)["bounds"].(map[string]any)["peer_rtt"] = []any{-1} }, "etcd.bounds.peer_rtt: bound 0 is -1"},
		{"fsync writes", func(m map[string]any) { m["fsync"] = map[string]any{"at": "2026-01-01T00:00:00Z", "writes": -1} }, "fsync"},
		{"trailing data", nil, "data after the entry object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var text string
			if c.edit == nil {
				text = good + " {}"
			} else {
				var m map[string]any
				if err := json.Unmarshal([]byte(good), &m); err != nil {
					t.Fatal(err)
				}
				c.edit(m)
				b, err := json.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				text = string(b)
			}
			_, err := entry.Decode(text)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Decode = %v, want an error containing %q", err, c.want)
			}
		})
	}
	if _, err := entry.Decode(good); err != nil {
		t.Fatalf("the unedited entry: %v", err)
	}
}

// FuzzDecode: any text is refused or read into an entry that encodes, and
// whose encoding reads back to the same encoding.
func FuzzDecode(f *testing.F) {
	for _, e := range []entry.Entry{worstWindow("n", voterNames(3), 1, 5), worstWindow("n", voterNames(2), -1, 3), {Node: "n"}} {
		text, err := entry.Encode(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(text)
	}
	f.Add(`{"v":1,"node":"n","n":1,"t0":"2026-01-01T00:00:00.000Z","dt_ms":[0],"link":[{"if":"","class":"unknown","n":1}],"mem_total_kib":[[0,1]],"mem_available_kib":[0]}`)
	f.Add(`{"v":1}`)
	f.Add(`[]`)
	// Issue 11's crashers and shapes near the limits (testdata/fuzz/FuzzDecode
	// holds more).
	f.Add(hugeN)
	f.Add(`{"v":1,"node":"n","n":0,"dt_ms":[],"connect_us":{"a":[],"a":[]},"etcd":{"bounds":{"wal_fsync":[1,2,3]}}}`)
	f.Add(`{"v":1,"node":"n","n":2,"t0":"2026-01-01T00:00:00.000Z","dt_ms":[0,1],"link":[{"if":"e","class":"wired","n":2}],` +
		`"mem_total_kib":[[1,2]],"mem_available_kib":[1,1],"etcd":{"present":[[1,2]],"member_id":[{"id":"a","n":2}],` +
		`"is_leader":[[0,2]],"is_learner":[[0,2]],"has_leader":[[1,2]],"connected_peers":[[1,2]],"known_peers":[[1,2]],` +
		`"leader_changes":[[9223372036854775808,2]],"wal_fsync":[[0,18446744073709551615],[1,1]],"backend_commit":[null,null],` +
		`"db_size_kib":[1,1],"quota_bytes":[[0,2]],"bounds":{"wal_fsync":[0.001]}}}`)
	f.Fuzz(func(t *testing.T, text string) {
		// The default settings' limits are tighter than Decode's: what they
		// take, Decode takes.
		_, limitedErr := entry.DecodeLimited(text, limits)
		e, err := entry.Decode(text)
		if err != nil {
			if limitedErr == nil {
				t.Fatalf("DecodeLimited took what Decode refuses (%v)\n%s", err, text)
			}
			return
		}
		enc, err := entry.Encode(e)
		if err != nil {
			t.Fatalf("a decoded entry does not encode: %v\n%s", err, text)
		}
		back, err := entry.Decode(enc)
		if err != nil {
			t.Fatalf("an encoded entry does not decode: %v\n%s", err, enc)
		}
		again, err := entry.Encode(back)
		if err != nil || again != enc {
			t.Fatalf("encoding is not stable: %v\n%s\n%s", err, enc, again)
		}
	})
}

// The example in docs/entry.md is an entry this package reads.
func TestDocExampleDecodes(t *testing.T) {
	doc, err := os.ReadFile("../../docs/entry.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Example")
	if !ok {
		t.Fatal("docs/entry.md has no example")
	}
	_, rest, _ = strings.Cut(rest, "```json\n")
	example, _, _ := strings.Cut(rest, "```")
	e, err := entry.Decode(example)
	if err != nil {
		t.Fatalf("the documented example: %v", err)
	}
	if e.Node != "delta" || len(e.Samples) != 2 || e.Samples[0].Connect["bravo"].Err == "" || e.Fsync == nil {
		t.Fatalf("decoded %+v", e)
	}
}

// BenchmarkDecode reads a voter's and a standby's full worst-case window, as
// the controller does for every recording host each period.
func BenchmarkDecode(b *testing.B) {
	voters := voterNames(5)
	for _, c := range []struct {
		name string
		self int
	}{{"voter", 0}, {"standby", -1}} {
		node := "standby"
		if c.self >= 0 {
			node = voters[c.self]
		}
		raw, err := entry.Encode(worstWindow(node, voters, c.self, 100))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := entry.Decode(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
