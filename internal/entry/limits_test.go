package entry_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/quantile"
)

// limits are those of the default settings (window 100, max_servers 5).
var limits = entry.LimitsFor(100, 5)

// hugeN is issue 11's first crasher: make([]Sample, n) ran before n was held
// against its columns.
const hugeN = `{"v":1,"node":"n","n":1125899906842624,"dt_ms":[]}`

// edit decodes text into generic JSON (numbers kept exact), lets fn change
// it, and encodes it again.
func edit(t testing.TB, text string, fn func(m map[string]any)) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func encode(t testing.TB, e entry.Entry) string {
	t.Helper()
	text, err := entry.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// allocated runs fn once and returns the bytes it allocated.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// bigBounds is issue 11's second shape: a voter entry of 1,700 samples whose
// histograms state 30,000 bounds, under a megabyte of text, which made the
// decision allocate 440 MiB (a count per bound per histogram per sample).
func bigBounds(t testing.TB) string {
	bounds := make([]float64, 30_000)
	for i := range bounds {
		bounds[i] = float64(i+1) * 1e-6
	}
	h := quantile.Histogram{Bounds: bounds, Counts: make([]uint64, len(bounds)+1)}
	h.Counts[1] = 1
	e := entry.Entry{Node: "n"}
	for i := range 1_700 {
		e.Samples = append(e.Samples, entry.Sample{At: t0.Add(time.Duration(i) * time.Second), Link: entry.Link{Class: entry.ClassWired},
			Etcd: &entry.EtcdSample{MemberID: "a", WALFsync: h, PeerRTT: map[string]quantile.Histogram{"b": h, "c": h}}})
	}
	text := encode(t, e)
	if len(text) >= 1<<20 {
		t.Fatalf("the 30,000-bounds entry is %d bytes, not under a ConfigMap's 1 MiB", len(text))
	}
	return text
}

// voterEntry is a valid voter entry of n samples with peers peers (and as
// many connect targets).
func voterEntry(t testing.TB, n, peers int) string {
	return encode(t, worstWindow("n", voterNames(peers+1), 0, n))
}

type hostile struct {
	name, text, want string
}

// hostileShapes is every malformed shape the tests and the benchmark feed the
// decoder, each with the error it must give.
func hostileShapes(t testing.TB) []hostile {
	voter := voterEntry(t, 4, 2)
	standby := encode(t, worstWindow("n", voterNames(3), -1, 4))
	etcd := func(fn func(x map[string]any)) string {
		return edit(t, voter, func(m map[string]any) { fn(m["etcd"].(map[string]any)) })
	}
	top := func(fn func(m map[string]any)) string { return edit(t, voter, fn) }
	deep := `{"v":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`
	manyRefs := `{"v":1,"node":"n","n":1,"t0":"2026-01-01T00:00:00.000Z","dt_ms":[0],"link":[{"if":"e","class":"wired","n":1}],` +
		`"mem_total_kib":[[1,1]],"mem_available_kib":[1],"strings":["x"],"errors":[` + strings.Repeat("[0,0],", 20_000) + `[0,0]]}`
	return []hostile{
		{"huge n", hugeN, "n: 1125899906842624 samples, over the limit of 200 (2 x window 100)"},
		{"n just over", `{"v":1,"node":"n","n":201,"dt_ms":[]}`, "n: 201 samples, over the limit of 200"},
		{"negative n", `{"v":1,"node":"n","n":-1,"dt_ms":[]}`, "n: -1 is negative"},
		{"n over its columns", `{"v":1,"node":"n","n":150,"dt_ms":[0,1,2]}`, "dt_ms: 3 values for 150 samples"},
		{"n under its columns", top(func(m map[string]any) { m["n"] = 2 }), "dt_ms: 4 values for 2 samples"},
		{"n a float", `{"v":1,"node":"n","n":1.5}`, "n: 1.5 is not a whole number of 64 bits"},
		{"n a huge number", `{"v":1,"node":"n","n":1e400}`, "n: 1e400 is not a whole number of 64 bits"},
		{"n a string", `{"v":1,"node":"n","n":"5"}`, "n: want a whole number, got a string"},
		{"thirty thousand bounds", bigBounds(t), "bytes, over the limit of"},
		{"bounds just over", etcd(func(x map[string]any) {
			b := make([]any, entry.MaxBounds+1)
			for i := range b {
				b[i] = float64(i+1) * 1e-6
			}
			x["bounds"].(map[string]any)["peer_rtt"] = b
		}), "etcd.bounds.peer_rtt: more than 27 bounds, over the limit of 27"},
		{"histogram longer than its buckets", etcd(func(x map[string]any) {
			h := make([]any, 2*(entry.MaxBounds+1)+1)
			for i := range h {
				h[i] = 1
			}
			x["wal_fsync"].([]any)[0] = h
		}), "etcd.wal_fsync: more than 56 values, over the limit of 56"},
		{"column longer than the window allows", top(func(m map[string]any) {
			dt := make([]any, 201)
			for i := range dt {
				dt[i] = 0
			}
			m["dt_ms"] = dt
		}), "dt_ms: more than 200 values, over the limit of 200 (2 x window 100)"},
		{"too many voters", edit(t, standby, func(m map[string]any) {
			c := m["connect_us"].(map[string]any)
			for i := range 6 {
				c[fmt.Sprintf("extra-%d", i)] = []any{nil, nil, nil, nil}
			}
		}), "connect_us: 6 voters or more, over the limit of 5 (max_servers 5"},
		{"too many peers", etcd(func(x map[string]any) {
			p := x["peer_rtt"].(map[string]any)
			for i := range 4 {
				p[fmt.Sprintf("e%d", i)] = []any{nil, nil, nil, nil}
			}
		}), `etcd.peer_rtt: 5 peers or more, over the limit of 4 (max_servers 5 - 1`},
		{"a thousand voters", `{"connect_us":{"a":[]` + manyVoters(999) + `}}`, "connect_us: 6 voters or more, over the limit of 5"},
		{"long node name", top(func(m map[string]any) { m["node"] = strings.Repeat("a", 254) }), "node: 254 bytes, over the limit of 253 (a node name is a DNS subdomain)"},
		{"long voter name", edit(t, standby, func(m map[string]any) {
			m["connect_us"].(map[string]any)[strings.Repeat("v", 254)] = []any{nil, nil, nil, nil}
		}), "connect_us: a voter name: 254 bytes, over the limit of 253"},
		{"long interface", top(func(m map[string]any) { m["link"].([]any)[0].(map[string]any)["if"] = strings.Repeat("e", 16) }), "link[0].if: 16 bytes, over the limit of 15"},
		{"long member ID", etcd(func(x map[string]any) { x["member_id"].([]any)[0].(map[string]any)["id"] = strings.Repeat("f", 17) }), "etcd.member_id[0].id: 17 bytes, over the limit of 16"},
		{"long peer ID", etcd(func(x map[string]any) {
			x["peer_rtt"].(map[string]any)[strings.Repeat("f", 17)] = []any{nil, nil, nil, nil}
		}), "etcd.peer_rtt: a member ID: 17 bytes, over the limit of 16"},
		{"long error text", top(func(m map[string]any) { m["strings"] = []any{strings.Repeat("x", 1025)} }), "strings[0]: 1025 bytes, over the limit of 1024"},
		{"long t0", top(func(m map[string]any) { m["t0"] = strings.Repeat("2", 10_000) }), "t0: 10000 bytes, over the limit of 35"},
		{"long fsync dir", edit(t, standby, func(m map[string]any) { m["fsync"].(map[string]any)["dir"] = "/" + strings.Repeat("d", 4096) }), "fsync.dir: 4097 bytes, over the limit of 4096"},
		{"long fsync error", edit(t, standby, func(m map[string]any) { m["fsync"].(map[string]any)["err"] = strings.Repeat("e", 1025) }), "fsync.err: 1025 bytes, over the limit of 1024"},
		{"many strings", top(func(m map[string]any) {
			s := make([]any, 201)
			for i := range s {
				s[i] = "x"
			}
			m["strings"] = s
		}), "strings: more than 200 texts, over the limit of 200 (a distinct text per sample of the longest entry, 2 x window 100)"},
		// Nesting is bounded by the format's grammar: the reader reads only
		// the containers it expects, so a deeper one is the wrong type.
		{"deep nesting", deep, "v: want a whole number, got an array"},
		{"deep nesting in a column", top(func(m map[string]any) { m["dt_ms"] = []any{[]any{[]any{[]any{[]any{[]any{0}}}}}} }), "dt_ms: element 0 is not a number"},
		{"ten megabytes of whitespace", strings.Repeat(" ", 10<<20) + "{}", "10485762 bytes, over the limit of"},
		{"ten megabytes of brackets", strings.Repeat("[", 10<<20), "10485760 bytes, over the limit of"},
		{"duplicate field", `{"v":1,"v":1,"node":"n","n":0,"dt_ms":[]}`, `entry: key "v" appears twice`},
		{"duplicate nested field", `{"v":1,"node":"n","n":0,"dt_ms":[],"etcd":{"present":[],"present":[]}}`, `etcd: key "present" appears twice`},
		{"duplicate voter", `{"v":1,"node":"n","n":0,"dt_ms":[],"connect_us":{"a":[],"a":[]}}`, `connect_us: key "a" appears twice`},
		{"case-folded field", `{"v":1,"V":2,"node":"n","n":0,"dt_ms":[]}`, `entry: key "V" is not a field name`},
		{"unicode-folded field", `{"v":1,"node":"n","n":0,"dt_ms":[],"ſtrings":[]}`, `entry: key "ſtrings" is not a field name`},
		{"escaped key", `{"v":1,"node":"n","n":0,"dt_ms":[],"connect_us":{"a":[],"\u0061":[]}}`, `connect_us: key "\\u0061" has escapes`},
		// An object cannot have more keys than its fields without an unknown
		// or repeated one, refused at that key.
		{"too many keys", `{"x":1` + manyKeys(19) + `}`, `entry: unknown field "x"`},
		{"unknown field", `{"v":1,"node":"n","n":0,"dt_ms":[],"extra":1}`, `unknown field "extra"`},
		{"NaN text in a column", top(func(m map[string]any) { m["mem_available_kib"] = []any{"NaN", 1, 1, 1} }), "mem_available_kib: element 0 is not a number"},
		{"NaN text as a bound", etcd(func(x map[string]any) { x["bounds"].(map[string]any)["wal_fsync"] = []any{"NaN"} }), "etcd.bounds.wal_fsync[0]: want a number of type float64, got a string"},
		{"infinite bound", `{"v":1,"node":"n","n":0,"dt_ms":[],"etcd":{"bounds":{"wal_fsync":[1e999]}}}`, "etcd.bounds.wal_fsync[0]: 1e999 is not a number of type float64"},
		{"runs overflow", top(func(m map[string]any) {
			m["mem_total_kib"] = []any{[]any{1, json.Number("18446744073709551615")}, []any{1, 5}}
		}), "mem_total_kib: runs cover more than 4 samples"},
		{"run count past 64 bits", top(func(m map[string]any) { m["mem_total_kib"] = []any{[]any{1, json.Number("18446744073709551616")}} }), "want a whole number"},
		{"leader changes overflow when summed", etcd(func(x map[string]any) {
			x["leader_changes"] = []any{[]any{json.Number("9223372036854775808"), 4}}
		}), "etcd.leader_changes: sample 1: the window's values add up past 2^64-1"},
		{"histogram counts overflow when summed", etcd(func(x map[string]any) {
			big := json.Number("9223372036854775808")
			x["wal_fsync"] = []any{[]any{0, big}, []any{0, big}, []any{0, 1}, []any{0, 1}}
		}), "etcd.wal_fsync[1]: bucket 0: the counts of the window add up past 2^64-1"},
		{"huge dt", top(func(m map[string]any) { m["dt_ms"] = []any{0, json.Number("4611686018427387904"), 0, 0} }), "dt_ms[1]: step of 4611686018427387904 ms out of range"},
		{"negative dt", top(func(m map[string]any) { m["dt_ms"] = []any{0, json.Number("-4611686018427387904"), 0, 0} }), "dt_ms[1]: step of -4611686018427387904 ms out of range"},
		{"dt past int64", top(func(m map[string]any) { m["dt_ms"] = []any{0, json.Number("-9223372036854775809"), 0, 0} }), "dt_ms: element 1 does not fit an int64"},
		{"null link", top(func(m map[string]any) { m["link"] = nil }), "link: runs cover 0 samples, want 4"},
		{"null version", top(func(m map[string]any) { m["v"] = nil }), "v: unsupported version 0"},
		{"null node", top(func(m map[string]any) { m["node"] = nil }), "node: empty"},
		{"null column", top(func(m map[string]any) { m["mem_available_kib"] = nil }), "mem_available_kib: 0 values for 4 samples"},
		{"null in a run", top(func(m map[string]any) { m["mem_total_kib"] = []any{nil} }), "want a pair of two numbers"},
		{"null in a reference", top(func(m map[string]any) { m["errors"] = []any{[]any{nil, 0}} }), "pair element 0: want a whole number"},
		{"null etcd present", etcd(func(x map[string]any) { x["present"] = nil }), "etcd.present: runs cover 0 samples, want 4"},
		{"null fsync time", edit(t, standby, func(m map[string]any) { m["fsync"].(map[string]any)["at"] = nil }), "fsync.at:"},
		{"more restarts than samples", top(func(m map[string]any) { m["restart"] = []any{0, 1, 2, 3, 4} }), "restart: 5 runs or references for 4 samples"},
		{"more link runs than samples", top(func(m map[string]any) {
			r := map[string]any{"if": "e", "class": "wired", "n": 1}
			m["link"] = []any{r, r, r, r, r}
		}), "link: 5 runs or references for 4 samples"},
		{"link run count huge", top(func(m map[string]any) {
			m["link"] = []any{map[string]any{"if": "e", "class": "wired", "n": json.Number("9223372036854775807")}}
		}), "link: run 0 count 9223372036854775807 does not fit 4 samples"},
		{"member run count huge", etcd(func(x map[string]any) {
			x["member_id"] = []any{map[string]any{"id": "a", "n": json.Number("9223372036854775807")}}
		}), "etcd.member_id: run 0 count 9223372036854775807 does not fit"},
		{"many error references", manyRefs, "errors: more than 600 references, over the limit of 600 (3 a sample: etcd, link, memory; 2 x window 100)"},
		{"not an object", `[]`, "entry: want an object, got an array"},
		{"nothing", ``, "EOF"},
		{"trailing data", voter + ` {}`, "data after the entry object"},
	}
}

// manyVoters is n more voters' keys, each with an empty column.
func manyVoters(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `,"k%d":[]`, i)
	}
	return b.String()
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `,"k%d":1`, i)
	}
	return b.String()
}

// Every hostile shape is refused, by an error naming its field and limit,
// without a panic, and allocating little: decoding is bounded by the limits
// whatever the text.
func TestHostileEntriesAreRefused(t *testing.T) {
	shapes := hostileShapes(t)
	// The default settings' limits bound what decoding allocates; Decode's
	// own (window 10,000) allow far more.
	const budget = 4 << 20
	for _, c := range shapes {
		t.Run(c.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = entry.DecodeLimited(c.text, limits) })
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeLimited = %v, want an error containing %q", err, c.want)
			}
			if n > budget {
				t.Errorf("decoding allocated %d bytes, over %d", n, budget)
			}
			t.Logf("%d bytes of text, %d allocated: %v", len(c.text), n, err)
		})
	}
}

// The worst legitimate entry at each setting decodes at its own limits, and
// its bytes are the limit: one byte more is refused.
func TestWorstCaseIsTheByteLimit(t *testing.T) {
	for _, servers := range []int{3, 5, 7} {
		l := entry.LimitsFor(100, servers)
		if got := entry.WorstCaseBytes(100, servers); got != l.MaxBytes {
			t.Fatalf("max_servers %d: MaxBytes %d, WorstCaseBytes %d", servers, l.MaxBytes, got)
		}
		text := voterEntry(t, 100, servers-1)
		for _, pad := range []int{l.MaxBytes - len(text) - 1, l.MaxBytes - len(text)} {
			if _, err := entry.DecodeLimited(text+strings.Repeat(" ", pad), l); err != nil {
				t.Fatalf("max_servers %d, %d bytes: %v", servers, len(text)+pad, err)
			}
		}
		over := text + strings.Repeat(" ", l.MaxBytes-len(text)+1)
		want := fmt.Sprintf("%d bytes, over the limit of %d (the largest legitimate entry at window 100 and max_servers %d)", l.MaxBytes+1, l.MaxBytes, servers)
		if _, err := entry.DecodeLimited(over, l); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("max_servers %d: %v, want %q", servers, err, want)
		}
		t.Logf("window 100, max_servers %d: the worst legitimate entry is %d bytes", servers, l.MaxBytes)
	}
	// Past a ConfigMap's 1 MiB, the ConfigMap is the limit; a window past
	// what a ConfigMap can hold changes nothing, and overflows nothing.
	if l := entry.LimitsFor(10_000, 7); l.MaxBytes != 1<<20 {
		t.Fatalf("window 10,000: MaxBytes %d, want 1 MiB", l.MaxBytes)
	}
	if a, b := entry.LimitsFor(1<<19, 7), entry.LimitsFor(math.MaxInt, 7); a != b || b.MaxCounts <= 0 || b.MaxSamples != 1<<20 {
		t.Fatalf("huge windows: %+v, %+v", a, b)
	}
}

// The worst case is what it says: a voter with every peer, a full histogram
// of 16 bounds in every slot, a distinct text of the cap per sample.
func TestWorstCaseShape(t *testing.T) {
	l := entry.LimitsFor(100, 7)
	text, err := entry.Encode(entry.WorstCase(100, 7))
	if err != nil {
		t.Fatal(err)
	}
	var e entry.Entry
	n := allocated(func() { e, err = entry.DecodeLimited(text, l) })
	if err != nil {
		t.Fatal(err)
	}
	// Reading the largest entry the limits take costs a small multiple of
	// its text (about 9x here: the 1 KiB texts are most of it).
	if n > 16*uint64(l.MaxBytes) {
		t.Errorf("decoding the worst case allocated %d bytes, over 16 x its %d", n, l.MaxBytes)
	}
	t.Logf("decoding the worst case (%d bytes) allocated %d bytes", len(text), n)
	last := e.Samples[99]
	if len(e.Samples) != 100 || len(last.Connect) != 6 || len(last.Etcd.PeerRTT) != 6 || len(last.Etcd.WALFsync.Bounds) != 16 ||
		len(last.Errors) != 3 || len(last.Errors[0]) != entry.MaxTextBytes || len(e.Node) != entry.MaxNodeNameBytes {
		t.Fatalf("worst case: %d samples, last %+v", len(e.Samples), last)
	}
	for _, c := range last.Etcd.WALFsync.Counts {
		if c == 0 {
			t.Fatal("a bucket of the worst case is empty")
		}
	}
}

func TestMaxBoundsDerivation(t *testing.T) {
	// Doubling from 1 µs to past 50 s (etcd's longest election timeout).
	if got := bits.Len64(uint64(50*time.Second/time.Microsecond)) + 1; got != entry.MaxBounds {
		t.Fatalf("MaxBounds %d, derivation gives %d", entry.MaxBounds, got)
	}
}

// histEntry is a voter entry whose histograms have b bounds.
func histEntry(t testing.TB, b int) string {
	bounds := make([]float64, b)
	for i := range bounds {
		bounds[i] = float64(i+1) * 1e-4
	}
	h := quantile.Histogram{Bounds: bounds, Counts: make([]uint64, b+1)}
	h.Counts[b] = 3
	e := entry.Entry{Node: "n", Samples: []entry.Sample{{At: t0, Link: entry.Link{Class: entry.ClassWired},
		Etcd: &entry.EtcdSample{MemberID: "a", WALFsync: h, BackendCommit: h, PeerRTT: map[string]quantile.Histogram{"b": h}}}}}
	return encode(t, e)
}

// Each limit at, just under and just over.
func TestLimitBoundaries(t *testing.T) {
	l := limits
	for _, c := range []struct {
		name  string
		text  func(k int) string
		limit int
		want  string
	}{
		{"samples", func(k int) string { return voterEntry(t, k, 2) }, l.MaxSamples, "dt_ms: more than 200 values, over the limit of 200 (2 x window 100)"},
		{"voters", func(k int) string { return encode(t, worstWindow("n", voterNames(k), -1, 3)) }, l.MaxConnectTargets,
			"connect_us: 6 voters or more, over the limit of 5"},
		{"peers", func(k int) string { return voterEntry(t, 3, k) }, l.MaxPeers, "etcd.peer_rtt: 5 peers or more, over the limit of 4"},
		{"bounds", func(k int) string { return histEntry(t, k) }, l.MaxBounds, "etcd.bounds.wal_fsync: more than 27 bounds, over the limit of 27"},
		{"strings", func(k int) string {
			e := worstWindow("n", voterNames(3), -1, 100)
			for i := range e.Samples {
				e.Samples[i].Errors = nil
				for v, c := range e.Samples[i].Connect {
					e.Samples[i].Connect[v] = entry.Connect{Seconds: c.Seconds}
				}
			}
			for i := range k {
				s := &e.Samples[i%100]
				s.Errors = append(s.Errors, fmt.Sprintf("error %d", i))
			}
			return encode(t, e)
		}, l.MaxStrings, "strings: more than 200 texts, over the limit of 200"},
		{"text bytes", func(k int) string {
			return edit(t, voterEntry(t, 4, 2), func(m map[string]any) { m["strings"] = []any{strings.Repeat("é", k/2) + strings.Repeat("x", k%2)} })
		}, l.MaxTextBytes, "strings[0]: 1025 bytes, over the limit of 1024"},
		{"node name bytes", func(k int) string {
			return edit(t, voterEntry(t, 4, 2), func(m map[string]any) { m["node"] = strings.Repeat("n", k) })
		}, l.MaxNodeNameBytes, "node: 254 bytes, over the limit of 253"},
		{"interface bytes", func(k int) string {
			return edit(t, voterEntry(t, 4, 2), func(m map[string]any) { m["link"].([]any)[0].(map[string]any)["if"] = strings.Repeat("e", k) })
		}, l.MaxInterfaceBytes, "link[0].if: 16 bytes, over the limit of 15"},
		{"member ID bytes", func(k int) string {
			return edit(t, voterEntry(t, 4, 2), func(m map[string]any) {
				m["etcd"].(map[string]any)["member_id"].([]any)[0].(map[string]any)["id"] = strings.Repeat("f", k)
			})
		}, l.MaxMemberIDBytes, "etcd.member_id[0].id: 17 bytes, over the limit of 16"},
		{"fsync dir bytes", func(k int) string {
			return edit(t, encode(t, worstWindow("n", voterNames(3), -1, 4)), func(m map[string]any) { m["fsync"].(map[string]any)["dir"] = strings.Repeat("d", k) })
		}, l.MaxPathBytes, "fsync.dir: 4097 bytes, over the limit of 4096"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, k := range []int{c.limit - 1, c.limit} {
				if _, err := entry.DecodeLimited(c.text(k), l); err != nil {
					t.Fatalf("at %d (limit %d): %v", k, c.limit, err)
				}
			}
			if _, err := entry.DecodeLimited(c.text(c.limit+1), l); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("at %d: %v, want an error containing %q", c.limit+1, err, c.want)
			}
		})
	}
}

// The bucket counts decoding may allocate, at, under and over a limit set
// to this entry's need: three histograms of 17 buckets a sample.
func TestMaxCountsBoundary(t *testing.T) {
	text := encode(t, worstWindow("n", voterNames(2), 0, 4))
	need := 4 * (2*(len(walBounds)+1) + (len(rttBounds) + 1))
	// Sample 90 of worstWindow is a failed scrape; at 4 samples none is.
	for _, k := range []int{need, need + 1} {
		l := limits
		l.MaxCounts = k
		if _, err := entry.DecodeLimited(text, l); err != nil {
			t.Fatalf("MaxCounts %d: %v", k, err)
		}
	}
	l := limits
	l.MaxCounts = need - 1
	want := fmt.Sprintf("%d bucket counts, over the limit of %d", need, need-1)
	if _, err := entry.DecodeLimited(text, l); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("MaxCounts %d: %v, want %q", need-1, err, want)
	}
}

// Histogram counts and leader changes that add up to exactly 2^64-1 over
// the window are read; one more is refused.
func TestSumsAtSixtyFourBits(t *testing.T) {
	voter := voterEntry(t, 2, 1)
	max := uint64(math.MaxUint64)
	for _, c := range []struct {
		name string
		set  func(x map[string]any, last uint64)
		want string
	}{
		{"wal_fsync", func(x map[string]any, last uint64) {
			x["wal_fsync"] = []any{[]any{0, json.Number(fmt.Sprint(max - 5))}, []any{0, json.Number(fmt.Sprint(last))}}
		}, "etcd.wal_fsync[1]: bucket 0: the counts of the window add up past 2^64-1"},
		{"leader_changes", func(x map[string]any, last uint64) {
			x["leader_changes"] = []any{[]any{json.Number(fmt.Sprint(max - 5)), 1}, []any{json.Number(fmt.Sprint(last)), 1}}
		}, "etcd.leader_changes: sample 1: the window's values add up past 2^64-1"},
	} {
		for _, last := range []uint64{4, 5, 6} {
			text := edit(t, voter, func(m map[string]any) { c.set(m["etcd"].(map[string]any), last) })
			_, err := entry.DecodeLimited(text, limits)
			if last <= 5 && err != nil {
				t.Fatalf("%s summing to %d below 2^64-1: %v", c.name, 5-last, err)
			}
			if last == 6 && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("%s past 2^64-1: %v, want %q", c.name, err, c.want)
			}
		}
	}
}

// Encode cuts a text over MaxTextBytes (at a character) and makes it valid
// UTF-8, so that what it writes reads back; a text within both is kept.
func TestEncodeCutsLongTexts(t *testing.T) {
	for _, c := range []struct {
		name, text string
		same       bool
	}{
		{"at the limit", strings.Repeat("x", entry.MaxTextBytes), true},
		{"just over", strings.Repeat("x", entry.MaxTextBytes+1), false},
		{"multibyte over", strings.Repeat("é", entry.MaxTextBytes), false},
		{"invalid UTF-8", strings.Repeat("\xff", entry.MaxTextBytes), false},
	} {
		e := worstWindow("n", voterNames(3), -1, 2)
		e.Samples[1].Errors = []string{c.text}
		e.Fsync.Err = c.text
		// Names and paths Linux allows but UTF-8 does not stay within
		// their limits too.
		e.Samples[1].Link.Interface = strings.Repeat("\xfe", entry.MaxInterfaceBytes)
		e.Fsync.Dir = "/" + strings.Repeat("\xfe", entry.MaxPathBytes-1)
		back, err := entry.DecodeLimited(encode(t, e), limits)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := back.Samples[1].Errors[0]
		if (got == c.text) != c.same || len(got) > entry.MaxTextBytes || back.Fsync.Err != got {
			t.Fatalf("%s: read back %d bytes (same %v), fsync.err %d bytes", c.name, len(got), got == c.text, len(back.Fsync.Err))
		}
	}
}

// Decode, which has no settings, still refuses the crashers, and bounds
// what a megabyte of hostile text makes it allocate.
func TestDecodeWithoutSettings(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{hugeN, "n: 1125899906842624 samples, over the limit of 20000 (2 x window 10000)"},
		{bigBounds(t), "etcd.bounds.wal_fsync: more than 27 bounds, over the limit of 27"},
	} {
		var err error
		n := allocated(func() { _, err = entry.Decode(c.text) })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("Decode = %v, want %q", err, c.want)
		}
		if n > 16<<20 {
			t.Errorf("%v: allocated %d bytes", err, n)
		}
		t.Logf("%d bytes allocated: %v", n, err)
	}
}

// BenchmarkDecodeHostile: each hostile shape is refused in little time and
// memory (see allocs/op and B/op).
func BenchmarkDecodeHostile(b *testing.B) {
	for _, c := range hostileShapes(b) {
		if c.want == "" {
			continue
		}
		b.Run(strings.ReplaceAll(c.name, " ", "_"), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.text)))
			for b.Loop() {
				if _, err := entry.DecodeLimited(c.text, limits); err == nil {
					b.Fatal("decoded")
				}
			}
		})
	}
}
