package decide_test

import (
	"bytes"
	"cmp"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// hostileSpec is one hand-written entry (docs/entry.md, wire format v1): a
// full window whose every text is text, with every connect failing.
type hostileSpec struct {
	node   string
	voters []string // the voters it connects to (all failing)
	// member, when set, makes it a voter's entry: its etcd member ID and
	// the IDs of its peers, each with a round trip every sample.
	member string
	peers  []string
	text   string
}

// hostileEntry writes the entry's JSON by hand, so that what it holds does
// not depend on entry.Encode accepting it.
func hostileEntry(s settings.Settings, h hostileSpec) string {
	n := s.Window
	jstr := jsonString
	text := upTo(h.text, entry.MaxTextBytes)
	col := func(v string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = v
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	refs := func(str int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf("[%d,%d]", i, str)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	dt := make([]string, n)
	for i := range dt {
		dt[i] = fmt.Sprint(int64(s.SamplePeriod / time.Millisecond))
	}
	dt[0] = "0"
	var b strings.Builder
	fmt.Fprintf(&b, `{"v":1,"node":%s,"n":%d,"t0":"2026-11-29T11:35:00.000Z","dt_ms":[%s],"restart":[0],`, jstr(h.node), n, strings.Join(dt, ","))
	fmt.Fprintf(&b, `"link":[{"if":%s,"class":"wifi","n":%d}],`, jstr(upTo(h.text, entry.MaxInterfaceBytes)), n)
	var cu, cf []string
	for _, v := range h.voters {
		cu = append(cu, jstr(v)+":"+col("null"))
		cf = append(cf, jstr(v)+":"+refs(0))
	}
	fmt.Fprintf(&b, `"connect_us":{%s},"connect_fail":{%s},`, strings.Join(cu, ","), strings.Join(cf, ","))
	fmt.Fprintf(&b, `"mem_total_kib":[[16777216,%d]],"mem_available_kib":%s,"mem_full_stall_us":%s,`, n, col("1024"), col("900000"))
	fmt.Fprintf(&b, `"errors":%s,"strings":[%s,%s,%s]`, refs(1), jstr(text), jstr(upTo("link: "+h.text, entry.MaxTextBytes)), jstr(upTo("etcd: "+h.text, entry.MaxTextBytes)))
	if h.member != "" {
		disk := make([]string, 14)
		for i := range disk {
			disk[i] = fmt.Sprint(1000 << i)
		}
		rtt := make([]string, 16)
		for i := range rtt {
			rtt[i] = fmt.Sprint(100 << i)
		}
		// Bounds in seconds, etcd v3.6's layouts.
		bounds := func(start float64, k int) string {
			parts := make([]string, k)
			for i := range parts {
				parts[i] = fmt.Sprint(start * float64(int(1)<<i))
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
		var pr []string
		for _, p := range h.peers {
			pr = append(pr, jstr(p)+":"+col("[15,1]"))
		}
		errRefs := make([]string, 0, n/2)
		for i := 0; i < n; i += 2 {
			errRefs = append(errRefs, fmt.Sprintf("[%d,2]", i))
		}
		fmt.Fprintf(&b, `,"etcd":{"present":[[1,%d]],"member_id":[{"id":%s,"n":%d}],"is_leader":[[0,%d]],"is_learner":[[0,%d]],"has_leader":[[0,%d]],`,
			n, jstr(h.member), n, n, n, n)
		fmt.Fprintf(&b, `"connected_peers":[[0,%d]],"known_peers":[[%d,%d]],"leader_changes":[[9,%d]],`, n, len(h.peers), n, n)
		fmt.Fprintf(&b, `"wal_fsync":%s,"backend_commit":%s,"peer_rtt":{%s},"db_size_kib":%s,"quota_bytes":[[2147483648,%d]],"err":[%s],`,
			col("[14,9]"), col("[14,9]"), strings.Join(pr, ","), col("24576"), n, strings.Join(errRefs, ","))
		fmt.Fprintf(&b, `"bounds":{"wal_fsync":%s,"backend_commit":%s,"peer_rtt":%s}}`, bounds(0.001, 14), bounds(0.001, 14), bounds(0.0001, 16))
	} else {
		fmt.Fprintf(&b, `,"fsync":{"at":"2026-11-29T11:50:00Z","dir":%s,"filesystem":%s,"measured_disk":true,"writes":9600,"p99_us":0,"max_us":0,"err":%s}`,
			jstr(text), jstr(text), jstr(text))
	}
	b.WriteString("}")
	return b.String()
}

// jsonString quotes text as JSON does: control characters as \u escapes,
// anything else as it is.
func jsonString(x string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range x {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// hostileFleet is voters voters (each with every other as a peer) and
// standbys standbys, every entry hostile with text.
func hostileFleet(t testing.TB, voters, standbys int, text string) decide.Input {
	s := settings.Defaults()
	s.TargetVoters, s.MaxServers = 5, 7
	if voters < 5 {
		s.TargetVoters, s.MaxServers = 3, 5
	}
	in := decide.Input{Now: baseNow, Settings: s, Entries: map[string]string{}}
	var vnames, ids []string
	for i := range voters {
		vnames = append(vnames, fmt.Sprintf("voter-%d", i))
		ids = append(ids, fmt.Sprintf("%x", 0xa0000+i))
	}
	for i, v := range vnames {
		in.Nodes = append(in.Nodes, k3snode.Node{Name: v, Voter: true, Eligible: true})
		var peers []string
		for j, id := range ids {
			if j != i {
				peers = append(peers, id)
			}
		}
		var others []string
		for _, o := range vnames {
			if o != v {
				others = append(others, o)
			}
		}
		in.Entries[v] = hostileEntry(s, hostileSpec{node: v, voters: others, member: ids[i], peers: peers, text: text})
	}
	for i := range standbys {
		name := fmt.Sprintf("standby-%05d", i)
		in.Nodes = append(in.Nodes, k3snode.Node{Name: name, Eligible: true})
		in.Entries[name] = hostileEntry(s, hostileSpec{node: name, voters: vnames, text: text})
	}
	// The entries are seen changing now, so that every host is judged and
	// accuses the others.
	return in
}

// escapes is text full of what a terminal acts on: a line break and a
// forged row, an escape that clears the screen, C1 controls, DEL, bidi
// overrides, a byte that is not UTF-8.
const escapes = "ok\nforged-host  voter  fit  100  -\r\x1b[2J\x1b]0;title\x07\u0085\u009b31m\x7f\u202eevil\u2066\u2028\xff"

// checkHostile holds what Decide must give on any input: no panic, a
// document that fits a ConfigMap and reads back, every host listed and
// judged, entry texts cut, and a table with nothing a terminal acts on.
func checkHostile(t *testing.T, in decide.Input) status.Status {
	t.Helper()
	return checkHostileStatus(t, in, decide.Decide(in))
}

// checkHostileStatus checks st, the decision of in, as checkHostile does.
func checkHostileStatus(t *testing.T, in decide.Input, st status.Status) status.Status {
	t.Helper()
	if len(st.Hosts) != len(in.Nodes) {
		t.Fatalf("%d hosts listed, want %d", len(st.Hosts), len(in.Nodes))
	}
	for _, h := range st.Hosts {
		if h.Verdict != status.Fit && h.Verdict != status.Unfit && h.Verdict != status.Unknown || len(h.Reasons) == 0 {
			t.Fatalf("%s not judged: %+v", h.Name, h)
		}
		for _, r := range append(h.Reasons, st.Decision.Reasons...) {
			if len(r.Subject) > status.TextCap+len("member ") {
				t.Fatalf("%s: a subject of %d bytes", h.Name, len(r.Subject))
			}
		}
	}
	wantTypedAsWords(t, st)
	b, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > status.MaxStatusBytes || len(b) > 1<<20 {
		t.Fatalf("status of %d bytes, over %d", len(b), status.MaxStatusBytes)
	}
	back, err := status.UnmarshalStatus(b)
	if err != nil {
		t.Fatalf("the status does not read back: %v", err)
	}
	if back.Decision.Action != st.Decision.Action || back.Decision.Out != st.Decision.Out || back.Decision.In != st.Decision.In {
		t.Fatalf("decision read back %+v, made %+v", back.Decision, st.Decision)
	}
	// The deciding reasons read back as they were made: an unknown host's
	// is the reason that makes it unknown, which the words alone do not
	// tell from one that fails (a standby here is on Wi-Fi, unfit, and its
	// disk reading failed, unknown).
	if back.Form == status.FormFull {
		for i, h := range back.Hosts {
			want, _ := status.DecidingReason(st.Hosts[i])
			if got, ok := status.DecidingReason(h); !ok || got.Signal != want.Signal || got.Subject != want.Subject {
				t.Fatalf("%s: deciding reason read back %s %s, made %s %s", h.Name, got.Signal, got.Subject, want.Signal, want.Subject)
			}
		}
	}
	var table bytes.Buffer
	if err := st.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	wantPrintable(t, table.String())
	// The header, a line per host, the failure tolerance, the timing, the
	// decision and its reasons: no text of an entry adds a line.
	if lines := strings.Count(table.String(), "\n"); lines != 1+len(st.Hosts)+1+1+1+len(st.Decision.Reasons) {
		t.Fatalf("table of %d lines for %d hosts and %d decision reasons", lines, len(st.Hosts), len(st.Decision.Reasons))
	}
	t.Logf("%d hosts: status %d bytes, form %s, dropped %+v", len(st.Hosts), len(b), back.Form, back.Dropped)
	return st
}

func wantPrintable(t *testing.T, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatal("the table is not UTF-8")
	}
	for i, r := range s {
		if r == '\n' {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			t.Fatalf("the table holds %U at byte %d: %q", r, i, s[max(0, i-40):min(len(s), i+40)])
		}
	}
}

// One entry with a 186 KB error text, the issue's own case, on a voter and a
// standby of a small fleet; and texts full of terminal escapes.
func TestHostileTexts(t *testing.T) {
	huge := strings.Repeat("x", 186<<10)
	for name, text := range map[string]string{"huge": huge, "escapes": escapes, "huge escapes": strings.Repeat(escapes, 4000)} {
		t.Run(name, func(t *testing.T) {
			st := checkHostile(t, hostileFleet(t, 3, 2, text))
			for _, h := range st.Hosts {
				for _, r := range h.Reasons {
					// A detail holds at most a few entry texts, each cut.
					if len(r.Detail) > 4*status.TextCap {
						t.Fatalf("%s %s: detail of %d bytes", h.Name, r.Signal, len(r.Detail))
					}
					if len(text) > status.TextCap && strings.Contains(r.Detail, text[:status.TextCap]) {
						t.Fatalf("%s %s: an uncut text", h.Name, r.Signal)
					}
				}
			}
			if len(text) > status.TextCap && !strings.Contains(fmt.Sprint(st.Hosts), "...[cut from ") {
				t.Fatal("no cut is marked")
			}
		})
	}
}

// Worst-case fleets: seven voters, every text at its cap, every connect
// failing and every voter accused by every standby; the document fits at
// every size, in the form that size needs.
func TestHostileFleetsFit(t *testing.T) {
	atCap := strings.Repeat("e", status.TextCap)
	sizes := []int{0, 50, 200, 1000, 3000}
	if testing.Short() {
		sizes = []int{0, 200}
	}
	for _, standbys := range sizes {
		t.Run(fmt.Sprint(standbys), func(t *testing.T) {
			st := checkHostile(t, hostileFleet(t, 7, standbys, atCap))
			b, _ := st.Marshal()
			back, _ := status.UnmarshalStatus(b)
			if back.Form != status.FormFull {
				for _, h := range back.Hosts {
					if h.Role == status.RoleVoter && h.Observation == nil {
						t.Fatalf("voter %s lost its observation in form %s", h.Name, back.Form)
					}
				}
			}
		})
	}
}

// A panic while judging one host makes that host unknown, naming the panic,
// and every other host is judged as it would be without it.
func TestPanicInOneHost(t *testing.T) {
	in := hostileFleet(t, 3, 3, "connection refused")
	want := decide.Decide(in)
	long := strings.Repeat("p", 10*status.TextCap)
	for _, value := range []any{"boom", fmt.Errorf("wrapped: %w", fmt.Errorf("index out of range")), long, []int{1, 2}, nil} {
		got := checkHostileStatus(t, in, decide.DecidePanicking(in, "voter-1", value))
		for i, h := range got.Hosts {
			if h.Name != "voter-1" {
				if !reflect.DeepEqual(h, want.Hosts[i]) {
					t.Fatalf("%s judged otherwise beside a panic:\n%+v\nwant\n%+v", h.Name, h, want.Hosts[i])
				}
				continue
			}
			r := h.Reasons[0]
			if h.Verdict != status.Unknown || r.Signal != status.SignalEntry || r.OK || !strings.Contains(r.Detail, "panicked") || len(r.Detail) > 2*status.TextCap {
				t.Fatalf("panicking host: %+v", h)
			}
			s := fmt.Sprint(value)
			if value == nil {
				s = "nil" // Go turns panic(nil) into a *runtime.PanicNilError
			}
			if len(s) <= status.TextCap && !strings.Contains(r.Detail, s) {
				t.Fatalf("the reason %q does not name the panic %q", r.Detail, s)
			}
		}
	}
}

// The table escapes every control, format and non-UTF-8 character, and keeps
// other text as it is.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"alpha":             "alpha",
		"café – ü 日本":       "café – ü 日本",
		"a\nb\tc\r":         `a\nb\tc\r`,
		"\x1b[2J":           `\x1b[2J`,
		"\x00\x7f":          `\x00\x7f`,
		"\u0085\u009b":      `\u0085\u009b`,
		"\u202eevil\u2066":  `\u202eevil\u2066`,
		"\u200b\ufeff":      `\u200b\ufeff`,
		"\u2028\u2029":      `\u2028\u2029`,
		"\xff\xfe ok":       `\xff\xfe ok`,
		"\ufffd":            `\ufffd`,
		"\\x1b stays ascii": `\x1b stays ascii`,
	} {
		if got := status.Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// Texts are cut to exactly TextCap bytes with a marker, at a character
// boundary; a text of TextCap bytes is kept whole.
func TestClip(t *testing.T) {
	for _, n := range []int{status.TextCap - 1, status.TextCap, status.TextCap + 1, 186 << 10} {
		for _, unit := range []string{"x", "é", "日"} {
			s := strings.Repeat(unit, n/len(unit)+1)[:n]
			s = strings.ToValidUTF8(s, "")
			got := status.Clip(s)
			switch {
			case len(s) <= status.TextCap && got != s:
				t.Fatalf("a text of %d bytes was cut", len(s))
			case len(s) > status.TextCap && (len(got) > status.TextCap || !strings.HasSuffix(got, fmt.Sprintf("...[cut from %d bytes]", len(s)))):
				t.Fatalf("a text of %d bytes cut to %d: %q", len(s), len(got), got[max(0, len(got)-40):])
			case !utf8.ValidString(got):
				t.Fatalf("a cut of %q split a character", unit)
			}
		}
	}
}

// BenchmarkDecideHostile measures one decision and its document on the
// worst inputs built here, every connect failing and every text over its cap:
// seven voters and 3,000 standbys with 1 KiB texts, and seven voters and 100
// standbys with the 186 KiB texts. decide-heap-bytes is the most heap
// in use during Decide and Marshal, sampled, above the heap the input itself
// takes (the caller's), garbage not yet collected included; status-heap-bytes
// is what the decision holds once made (its Status).
func BenchmarkDecideHostile(b *testing.B) {
	for _, c := range []struct{ standbys, text int }{{3000, 1 << 10}, {100, 186 << 10}} {
		b.Run(fmt.Sprintf("standbys=%d/text=%d", c.standbys, c.text), func(b *testing.B) {
			in := hostileFleet(b, 7, c.standbys, strings.Repeat("x", c.text))
			var size int
			for _, raw := range in.Entries {
				size += len(raw)
			}
			var peak, base, held uint64
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				base = ms.HeapInuse
				stop := sampleHeap(&peak)
				st := decide.Decide(in)
				if _, err := st.Marshal(); err != nil {
					b.Fatal(err)
				}
				stop()
				runtime.GC()
				runtime.ReadMemStats(&ms)
				held = ms.HeapInuse - min(ms.HeapInuse, base)
				runtime.KeepAlive(st)
			}
			b.ReportMetric(float64(held), "status-heap-bytes")
			b.ReportMetric(float64(size), "entry-bytes")
			b.ReportMetric(float64(peak-min(peak, base)), "decide-heap-bytes")
		})
	}
}

// sampleHeap records the most heap in use until stop is called.
func sampleHeap(peak *uint64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var ms runtime.MemStats
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			*peak = max(*peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// Marshal's forms at their boundaries: a limit of exactly the full
// document's size gives it; a byte less gives a smaller one; every limit down
// to the bare form gives a document within it, which reads back, in forms
// that only drop more as the limit shrinks; under the bare form, an error.
func TestMarshalWithinForms(t *testing.T) {
	st := decide.Decide(hostileFleet(t, 7, 60, strings.Repeat("e", status.TextCap)))
	full, err := st.MarshalWithin(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := st.MarshalWithin(len(full)); !bytes.Equal(b, full) {
		t.Fatal("a limit of the full document's size did not give it")
	}
	b, err := st.MarshalWithin(len(full) - 1)
	if err != nil || len(b) > len(full)-1 {
		t.Fatalf("a byte under the full document: %d bytes, %v", len(b), err)
	}
	// A byte under the indented document still holds the whole decision:
	// its repeated texts written once, and read back into every reason.
	back, err := status.UnmarshalStatus(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Form != status.FormFull || len(back.Dropped) != 0 || back.Texts != nil {
		t.Fatalf("form %s, dropped %+v", back.Form, back.Dropped)
	}
	if !bytes.Contains(b, []byte(`"texts"`)) || !bytes.Contains(b, []byte(`"basis_ref"`)) {
		t.Fatal("no table of shared texts")
	}
	if again, _ := back.MarshalWithin(1 << 30); !bytes.Equal(again, full) {
		t.Fatal("the document with shared texts does not read back to the full decision")
	}

	order := map[string]int{status.FormFull: 0, status.FormFailing: 1, status.FormDeciding: 2, status.FormVerdicts: 3, status.FormSomeLinks: 4,
		status.FormSomeHosts: 5, status.FormBare: 6}
	seen := map[string]bool{}
	last, bare := 0, 0
	// Steps of 5%: the verdicts form holds for limits within 9% of each
	// other at this fleet (85 to 93 kB), which steps of 10% could pass over.
	for limit := len(full); ; limit = limit * 19 / 20 {
		b, err := st.MarshalWithin(limit)
		if err != nil {
			if bare == 0 || limit >= bare {
				t.Fatalf("limit %d: %v", limit, err)
			}
			break
		}
		if len(b) > limit {
			t.Fatalf("limit %d: %d bytes", limit, len(b))
		}
		back, err := status.UnmarshalStatus(b)
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		f, ok := order[back.Form]
		if !ok || f < last {
			t.Fatalf("limit %d: form %q after form %d", limit, back.Form, last)
		}
		if back.Decision.Action != st.Decision.Action || back.GeneratedAt != st.GeneratedAt {
			t.Fatalf("limit %d: the decision was lost", limit)
		}
		if back.Form != status.FormFull && len(back.Dropped) == 0 {
			t.Fatalf("limit %d: form %s says nothing dropped", limit, back.Form)
		}
		if back.Form == status.FormSomeHosts {
			voters := 0
			for _, h := range back.Hosts {
				if h.Role == status.RoleVoter {
					voters++
				}
			}
			if voters < 7 && len(back.Hosts) > voters {
				t.Fatalf("limit %d: a standby kept before a voter: %d voters of %d hosts", limit, voters, len(back.Hosts))
			}
		}
		wantReducedAsFull(t, limit, st, back)
		var table bytes.Buffer
		_ = back.WriteTable(&table)
		if back.Form != status.FormFull && !strings.Contains(table.String(), "form: "+back.Form) {
			t.Fatalf("limit %d: the table does not say the form", limit)
		}
		last, seen[back.Form] = f, true
		if back.Form == status.FormBare {
			bare = len(b)
		}
	}
	for form := range order {
		if !seen[form] {
			t.Errorf("no limit gave form %s", form)
		}
	}
	if _, err := st.MarshalWithin(100); err == nil || !strings.Contains(err.Error(), "over the limit of 100") {
		t.Fatalf("100 bytes held a status, or the error does not say so: %v", err)
	}
}

// wantReducedAsFull holds a reduced form's typed parts to the full
// decision's: each host kept has the deciding reason it had (through the
// deciding form), the decision the step that decides it (through the
// verdicts form), and the link matrix is whole through the verdicts form,
// the rows of the hosts kept in some_hosts, and none in bare, with what it
// left out counted.
func wantReducedAsFull(t *testing.T, limit int, full status.Status, back *status.Status) {
	t.Helper()
	byName := map[string]status.Host{}
	for _, h := range full.Hosts {
		byName[h.Name] = h
	}
	kept := map[string]bool{}
	for _, h := range back.Hosts {
		kept[h.Name] = true
		want, _ := status.DecidingReason(byName[h.Name])
		got, ok := status.DecidingReason(h)
		switch back.Form {
		case status.FormFull, status.FormFailing, status.FormDeciding:
			if !ok || got.Signal != want.Signal || got.Subject != want.Subject || got.Detail != want.Detail {
				t.Fatalf("limit %d, form %s: %s's deciding reason %v %+v, the full decision's %+v", limit, back.Form, h.Name, ok, got, want)
			}
		default:
			if ok || h.Deciding != nil {
				t.Fatalf("limit %d, form %s: %s has a deciding reason, with no reasons", limit, back.Form, h.Name)
			}
		}
	}
	want, _ := full.Decision.DecidingStep()
	got, ok := back.Decision.DecidingStep()
	if back.Form == status.FormBare {
		if ok {
			t.Fatalf("limit %d: the bare form has a deciding step", limit)
		}
	} else if !ok || got.Signal != want.Signal || got.Subject != want.Subject || got.Detail != want.Detail {
		t.Fatalf("limit %d, form %s: deciding step %v %+v, the full decision's %+v", limit, back.Form, ok, got, want)
	}
	cells := func(rows []status.LinkRow) int {
		n := 0
		for _, r := range rows {
			n += len(r.To)
		}
		return n
	}
	dropped := 0
	for _, x := range back.Dropped {
		if x.Part == status.PartLinks {
			dropped = x.Count
		}
	}
	switch back.Form {
	case status.FormSomeLinks, status.FormSomeHosts, status.FormBare:
		// Every member kept has its row, and no row is of a host left out;
		// a partial form keeps hosts and rows in order of role and name.
		rows := map[string]status.LinkRow{}
		for _, r := range back.Links {
			if !kept[r.From] {
				t.Fatalf("limit %d, form %s: the row of %s, a host left out", limit, back.Form, r.From)
			}
			rows[r.From] = r
		}
		rank := map[status.Role]int{status.RoleVoter: 0, status.RoleLearner: 1, status.RoleStandby: 2, status.RoleOther: 3}
		inOrder := slices.Clone(full.Links)
		slices.SortStableFunc(inOrder, func(a, b status.LinkRow) int {
			return cmp.Or(cmp.Compare(rank[byName[a.From].Role], rank[byName[b.From].Role]), cmp.Compare(a.From, b.From))
		})
		keptRow := true
		for _, r := range inOrder {
			h := byName[r.From]
			member := h.Role == status.RoleVoter || h.Role == status.RoleLearner
			_, has := rows[r.From]
			switch {
			case back.Form == status.FormBare:
			case kept[r.From] && member:
				if !has || !reflect.DeepEqual(rows[r.From], r) {
					t.Fatalf("limit %d, form %s: member %s kept without its row", limit, back.Form, r.From)
				}
			case back.Form == status.FormSomeHosts:
				if has {
					t.Fatalf("limit %d, form %s: the row of %s, not a member", limit, back.Form, r.From)
				}
			case has && !keptRow:
				t.Fatalf("limit %d, form %s: the row of %s kept after one left out", limit, back.Form, r.From)
			default:
				keptRow = keptRow && has
			}
		}
		if back.Form == status.FormSomeLinks && len(back.Hosts) != len(full.Hosts) {
			t.Fatalf("limit %d, form %s: %d of %d hosts", limit, back.Form, len(back.Hosts), len(full.Hosts))
		}
	default:
		if !reflect.DeepEqual(back.Links, full.Links) {
			t.Fatalf("limit %d, form %s: the link matrix is not whole", limit, back.Form)
		}
	}
	if cells(back.Links)+dropped != cells(full.Links) {
		t.Fatalf("limit %d, form %s: %d link cells and %d dropped, of %d", limit, back.Form, cells(back.Links), dropped, cells(full.Links))
	}
}

// Entries that cannot be read, whose errors quote what the entry holds: a
// huge unknown field, a huge node name, escapes in both, bytes that are not
// JSON. Each host is unknown with its error cut, and the others are judged.
func TestHostileMalformedEntries(t *testing.T) {
	in := hostileFleet(t, 3, 1, "connection refused")
	huge := strings.Repeat("A", 186<<10) + escapes
	bad := map[string]string{
		"bad-field": `{"v":1,` + jsonString(huge) + `:1}`,
		"bad-node":  `{"v":1,"node":` + jsonString(huge) + `,"n":0,"dt_ms":[],"link":[],"mem_total_kib":[],"mem_available_kib":[]}`,
		"bad-bytes": "\x1b[2J\x00" + huge,
		"bad-empty": "",
		// A Node's name is Kubernetes's; one read from a file may hold anything.
		"bad\nname\x1b[31m": `{}`,
	}
	for name, raw := range bad {
		in.Nodes = append(in.Nodes, k3snode.Node{Name: name, Eligible: true})
		in.Entries[name] = raw
	}
	st := checkHostile(t, in)
	for _, h := range st.Hosts {
		if _, ok := bad[h.Name]; !ok {
			continue
		}
		r := h.Reasons[0]
		if h.Verdict != status.Unknown || r.Signal != status.SignalEntry || r.OK || len(r.Detail) > len("record cannot be read: ")+status.TextCap {
			t.Fatalf("%q: %+v", h.Name, h)
		}
	}
}

// FuzzDecide: whatever one voter's and one standby's entries hold, Decide
// does not panic, and its document fits and reads back. Seeded with
// hand-written entries; `go test -fuzz FuzzDecide ./internal/decide` explores.
func FuzzDecide(f *testing.F) {
	in := hostileFleet(f, 3, 1, "connection refused")
	f.Add(in.Entries["voter-0"], in.Entries["standby-00000"])
	f.Add(`{"v":1,"node":"voter-0","n":0,"dt_ms":[],"link":[],"mem_total_kib":[],"mem_available_kib":[]}`, escapes)
	f.Fuzz(func(t *testing.T, voter, standby string) {
		in := hostileFleet(t, 3, 1, "connection refused")
		in.Entries["voter-0"], in.Entries["standby-00000"] = voter, standby
		st := decide.Decide(in)
		b, err := st.Marshal()
		if err != nil || len(b) > status.MaxStatusBytes {
			t.Fatalf("%d bytes, %v", len(b), err)
		}
		if _, err := status.UnmarshalStatus(b); err != nil {
			t.Fatal(err)
		}
		var table bytes.Buffer
		_ = st.WriteTable(&table)
		wantPrintable(t, table.String())
	})
}

// upTo cuts s to at most n bytes at a character boundary: the most of a
// hostile text the entry decoder admits (entry.MaxTextBytes and the other
// caps of internal/entry refuse a longer one outright, tested there).
func upTo(s string, n int) string {
	// JSON carries a byte that is not UTF-8 as U+FFFD, three bytes.
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
