package probe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// windowOf is a standby's window of n distinct samples.
func windowOf(n int) entry.Entry {
	e := entry.Entry{Node: "agent-1"}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range n {
		x := testkit.Fit(probe.Plan{Peers: []probe.Peer{{Node: "server-1"}, {Node: "server-2"}}}, i, t0.Add(time.Duration(i)*time.Second))
		x.MemAvailableBytes += uint64(i) << 10
		entry.Append(&e, x, n)
	}
	return e
}

// Fit leaves a window whole at and under its cap; over it, it leaves out
// the fewest oldest samples that make it fit (one fewer would not), and says
// how many in shrunk; with no room even for no samples it fails.
func TestFitShrinksToTheCap(t *testing.T) {
	e := windowOf(100)
	whole, err := entry.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{len(whole), len(whole) + 1} {
		text, shrunk, err := probe.Fit(e, limit)
		if err != nil || shrunk != 0 || text != whole {
			t.Fatalf("at a cap of %d (the window is %d): shrunk %d, %v", limit, len(whole), shrunk, err)
		}
	}
	for _, limit := range []int{len(whole) - 1, len(whole) / 2, len(whole) / 10} {
		text, shrunk, err := probe.Fit(e, limit)
		if err != nil {
			t.Fatalf("cap %d: %v", limit, err)
		}
		if len(text) > limit || shrunk <= 0 {
			t.Fatalf("cap %d: %d bytes, shrunk %d", limit, len(text), shrunk)
		}
		got, err := entry.Decode(text)
		if err != nil {
			t.Fatal(err)
		}
		if got.Shrunk != shrunk || len(got.Samples) != 100-shrunk || !got.Samples[0].At.Equal(e.Samples[shrunk].At) {
			t.Fatalf("cap %d: the entry holds %d samples from %v, shrunk %d; want the last %d", limit, len(got.Samples), got.Samples[0].At, got.Shrunk, 100-shrunk)
		}
		// One sample more would not have fitted: the fewest were dropped.
		less := e
		less.Samples, less.Shrunk = e.Samples[shrunk-1:], shrunk-1
		if more, _ := entry.Encode(less); len(more) <= limit {
			t.Fatalf("cap %d: dropping %d fits too (%d bytes)", limit, shrunk-1, len(more))
		}
		t.Logf("cap %d bytes (window %d bytes): left out the %d oldest samples, %d bytes", limit, len(whole), shrunk, len(text))
	}
	empty, _ := entry.Encode(entry.Entry{Node: "agent-1", Shrunk: 100})
	if _, _, err := probe.Fit(e, len(empty)-1); err == nil || !strings.Contains(err.Error(), "with no samples") {
		t.Fatalf("no room at all: %v", err)
	}
}

// recorded reads node's record from store and decodes it.
func recorded(store kube.Records, node string) (entry.Entry, error) {
	raw, err := store.Get(context.Background(), node)
	if err != nil {
		return entry.Entry{}, err
	}
	return entry.Decode(raw)
}

// refusing is a record store whose API server refuses any entry over max
// bytes, as the admission policy's size cap does.
type refusing struct {
	*kubefake.Records
	max     int
	mu      sync.Mutex
	puts    []int
	markers int
	// failMarkers is how many markers fail before one is taken, as a
	// write lost to an API server away would.
	failMarkers int
}

func (r *refusing) Put(ctx context.Context, owner record.Owner, text string) error {
	r.mu.Lock()
	r.puts = append(r.puts, len(text))
	if e, err := entry.Decode(text); err == nil && e.Refused != "" {
		r.markers++
		if r.failMarkers > 0 {
			r.failMarkers--
			r.mu.Unlock()
			return fmt.Errorf("put record %s: the API server is away", owner.Name)
		}
	}
	r.mu.Unlock()
	if len(text) > r.max {
		return fmt.Errorf("put record %s: %w: admission webhook denied: a probe record holds at most %d bytes; this entry is %d bytes",
			owner.Name, kube.ErrForbidden, r.max, len(text))
	}
	return r.Records.Put(ctx, owner, text)
}

func (r *refusing) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.puts...)
}

// A write the API server refuses is followed, once, by a small marker that
// says so; the window is kept and offered again each period; the controller
// then reads the host as refused, with the refusal's words, not as a host
// that stopped reporting. Once the refusal ends, the whole window is written.
func TestRefusedWriteLeavesAMarker(t *testing.T) {
	s := testkit.Settings(t, 50*time.Millisecond)
	store := &refusing{Records: kubefake.NewRecords(s.RecordsNamespace()), max: 600}
	nodes := &kubefake.Nodes{}
	nodes.Set(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", UID: "uid-agent-1", Labels: map[string]string{s.EligibleLabel: "true"}}})
	clk := testkit.NewClocked(s.SamplePeriod)
	r := testkit.StartProbeWith(t, clk, s, "agent-1", &testkit.Sampler{}, store, nodes)

	var e entry.Entry
	clk.Await(t, time.Minute, func() error {
		var err error
		if e, err = recorded(store, "agent-1"); err != nil {
			return err
		}
		if e.Refused == "" {
			return errors.New("no refusal marker yet")
		}
		if n := len(r.Sampler.Taken()); n < 5 {
			return fmt.Errorf("%d samples taken", n)
		}
		return nil
	})
	if len(e.Samples) != 0 || !strings.Contains(e.Refused, "holds at most 600 bytes") {
		t.Fatalf("the marker holds %d samples and %q", len(e.Samples), e.Refused)
	}
	store.mu.Lock()
	markers := store.markers
	store.mu.Unlock()
	if markers != 1 {
		t.Errorf("%d markers written for one refusal, want 1 (puts %v)", markers, store.sizes())
	}
	if n := len(r.Prober.Window().Samples); n < 5 {
		t.Errorf("the probe holds %d samples after the refusals; it must keep its window", n)
	}
	if recs := r.Log.Records("write record refused by the API server; writing a marker that says so, and trying the window again next period"); len(recs) != 1 {
		t.Errorf("the refusal logged %d times, want once", len(recs))
	}

	// The controller's view of that record.
	raw, _ := store.Get(context.Background(), "agent-1")
	st := decide.Decide(decide.Input{Now: time.Now(), Settings: s, Entries: map[string]string{"agent-1": raw},
		Nodes: []k3snode.Node{{Name: "agent-1", Eligible: true}, {Name: "server-1", Voter: true}}})
	var h *status.Host
	for i := range st.Hosts {
		if st.Hosts[i].Name == "agent-1" {
			h = &st.Hosts[i]
		}
	}
	if h == nil || h.Verdict != status.Unknown {
		t.Fatalf("agent-1 in the status: %+v", h)
	}
	dr, _ := status.DecidingReason(*h)
	if dr.Signal != status.SignalRecord || dr.Code != status.CodeWriteRefused || !strings.Contains(dr.Detail, "holds at most 600 bytes") {
		t.Errorf("deciding reason %+v, want the record refused with the API server's words", dr)
	}

	// The refusal ends: the whole window goes in.
	store.mu.Lock()
	store.max = 1 << 20
	store.mu.Unlock()
	clk.Await(t, time.Minute, func() error {
		raw, _ := store.Get(context.Background(), "agent-1")
		e, err := entry.Decode(raw)
		if err != nil {
			return err
		}
		if e.Refused != "" || len(e.Samples) < 5 {
			return fmt.Errorf("record holds %d samples, refused %q", len(e.Samples), e.Refused)
		}
		return nil
	})
}

// A marker the API server did not take is written at the next refusal: the
// probe knows what its record holds only from writes that were taken, so the
// record, which still holds the last window, is not read as marked.
func TestRefusalMarkerLostIsWrittenAgain(t *testing.T) {
	s := testkit.Settings(t, 50*time.Millisecond)
	store := &refusing{Records: kubefake.NewRecords(s.RecordsNamespace()), max: 600, failMarkers: 1}
	nodes := &kubefake.Nodes{}
	nodes.Set(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", UID: "uid-agent-1", Labels: map[string]string{s.EligibleLabel: "true"}}})
	clk := testkit.NewClocked(s.SamplePeriod)
	r := testkit.StartProbeWith(t, clk, s, "agent-1", &testkit.Sampler{}, store, nodes)
	clk.Await(t, time.Minute, func() error {
		e, err := recorded(store, "agent-1")
		if err != nil {
			return err
		}
		if e.Refused == "" {
			return errors.New("no refusal marker yet")
		}
		return nil
	})
	store.mu.Lock()
	markers := store.markers
	store.mu.Unlock()
	if markers != 2 {
		t.Errorf("%d markers tried, want 2: the lost one and the one taken at the next refusal (puts %v)", markers, store.sizes())
	}
	if recs := r.Log.Records("write refusal marker failed; will try again at the next refusal"); len(recs) != 1 {
		t.Errorf("the lost marker logged %d times, want once", len(recs))
	}
}

// A record the probe had to shrink reads as full: the host is unknown for
// that reason, with the record's bytes against the cap, rather than for
// too few samples alone.
func TestShrunkRecordReadsFull(t *testing.T) {
	s := testkit.Settings(t, time.Second)
	e := windowOf(s.Window)
	whole, _ := entry.Encode(e)
	text, shrunk, err := probe.Fit(e, len(whole)*3/4)
	if err != nil || shrunk == 0 {
		t.Fatalf("shrunk %d, %v", shrunk, err)
	}
	st := decide.Decide(decide.Input{Now: time.Now(), Settings: s, Entries: map[string]string{"agent-1": text},
		Nodes: []k3snode.Node{{Name: "agent-1", Eligible: true}, {Name: "server-1", Voter: true}}})
	for _, h := range st.Hosts {
		if h.Name != "agent-1" {
			continue
		}
		dr, _ := status.DecidingReason(h)
		// The count left out is data the reason quotes; the words around it
		// are the Code's to say.
		left := fmt.Sprintf(" %d oldest samples ", shrunk)
		if h.Verdict != status.Unknown || dr.Signal != status.SignalRecord || dr.Code != status.CodeRecordFull || !strings.Contains(dr.Detail, left) ||
			dr.Value == nil || *dr.Value != float64(len(text)) || dr.Limit == nil || *dr.Limit != float64(record.CapBytes(s.Window, s.MaxServers)) {
			t.Fatalf("agent-1 %s, deciding reason %+v; want %s naming the%soutside it, with the record's %d bytes", h.Verdict, dr, status.CodeRecordFull, left, len(text))
		}
		if h.RecordBytes != len(text) || st.Records.Count != 1 || st.Records.LargestBytes != len(text) || st.Records.Largest != "agent-1" {
			t.Errorf("record bytes %d, records %+v", h.RecordBytes, st.Records)
		}
		return
	}
	t.Fatal("agent-1 is not in the status")
}
