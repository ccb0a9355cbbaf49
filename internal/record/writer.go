package record

import (
	"time"

	"github.com/fleet-role/fleet-role/internal/entry"
)

// Kind is what one write of a probe's record puts.
type Kind int

const (
	// KindEntry: the record in the entry layout, data.entry the whole
	// window's text.
	KindEntry Kind = iota
	// KindWindow: the record in the tail layout, binaryData.window the
	// whole window packed: a snapshot.
	KindWindow
	// KindTail: the tail, binaryData.tail the samples since the snapshot.
	KindTail
)

func (k Kind) String() string {
	switch k {
	case KindEntry:
		return "entry"
	case KindWindow:
		return "window"
	case KindTail:
		return "tail"
	}
	return "kind(?)"
}

// Plan is one write: Text for KindEntry, Packed for the others.
type Plan struct {
	Kind   Kind
	Text   string
	Packed []byte
	// Samples is how many samples the write carries: the window's or the
	// tail's.
	Samples int
	// window is the snapshot's window, decoded, which Wrote keeps.
	window entry.Entry
}

// Writer plans a probe's writes of its record in the tail layout: the
// whole window packed now and then, and each period in between a tail of
// the samples taken since. It holds what the record holds as far as its
// own writes went; it is not safe for concurrent use.
//
// A snapshot is due when the tails written since the last one have cost as
// many packed bytes as it would: rent or buy. Each period costs one write
// of an object either way (its name, labels, owner and managed fields, and
// etcd's framing: about 850 bytes); what differs is the payload. Tails grow
// by a sample each period, so over a cycle of k periods they cost about
// a*k + b*k*k/2 bytes (a the tail's own, about 60 bytes packed; b a
// sample's, about 18 on a standby) and the snapshot S (about 1.6 KB for a
// standby's full window). Writing the snapshot once the tails' sum reaches
// S keeps the payload a period within twice its least over every k, whatever
// a, b and S are, and at the shipped settings gives k of about 10.
type Writer struct {
	// snap is the window the record's snapshot packs, decoded, and its
	// text; snapText "" when the record holds no snapshot this Writer
	// wrote. Plan appends to a copy of snap's samples slice, never to the
	// samples themselves.
	snap      entry.Entry
	snapText  string
	base      uint64
	snapBytes int
	lastAt    time.Time
	// tailBytes is what the tails since the snapshot have cost, packed.
	tailBytes int
	// dec decodes each period's window into memory it reuses: Plan keeps
	// nothing of it but a snapshot's, which it decodes afresh.
	dec *entry.Decoder
}

// Plan is the write that makes the record read as text, the window's whole
// entry as the entry layout would hold it: a tail when the record holds a
// snapshot that text extends by its newest samples alone and Merge reads
// the two as text exactly, a snapshot otherwise. A window of no samples
// (a marker) is written in the entry layout, where every release reads it.
// A probe plans every period: the snapshot is packed only when one is due,
// and the snapshot's window is decoded once, when written.
func (w *Writer) Plan(text string) Plan {
	if w.dec == nil {
		w.dec = &entry.Decoder{}
	}
	e, byVoter, err := w.dec.DecodeByVoter(text, entry.DecodeLimits())
	if err != nil || len(e.Samples) == 0 {
		return Plan{Kind: KindEntry, Text: text}
	}
	if p, ok := w.tail(text, e, byVoter); ok {
		return p
	}
	if e, err = entry.Decode(text); err != nil {
		return Plan{Kind: KindEntry, Text: text}
	}
	return Plan{Kind: KindWindow, Text: text, Packed: Pack(text), Samples: len(e.Samples), window: e}
}

// tail plans the tail that extends the snapshot to text (decoded as e, its
// connects by voter), if one may.
func (w *Writer) tail(text string, e entry.Entry, byVoter map[string]*entry.Connects) (Plan, bool) {
	if w.snapText == "" {
		return Plan{}, false
	}
	// The snapshot's newest sample, found from the newest back: the
	// samples after it are the tail, and those before its place in the
	// snapshot are gone from the window.
	i := len(e.Samples) - 1
	for i >= 0 && !e.Samples[i].At.Equal(w.lastAt) {
		i--
	}
	k, drop := len(e.Samples)-1-i, len(w.snap.Samples)-(i+1)
	if i < 0 || k == 0 || drop < 0 {
		return Plan{}, false
	}
	newest := e.Samples[i+1:]
	from := map[string]*entry.Connects{}
	for v, c := range byVoter {
		from[v] = c.Slice(i + 1)
	}
	entry.FillConnects(newest, from)
	tailText, err := entry.Encode(entry.Entry{Node: e.Node, Samples: newest})
	if err != nil {
		return Plan{}, false
	}
	packed := PackTail(w.base, drop, tailText)
	if w.tailBytes+len(packed) > w.snapBytes {
		return Plan{}, false
	}
	// What a reader reads (Merge), built from the snapshot decoded once
	// and the tail decoded as a reader decodes it, must be text exactly.
	t, err := entry.Decode(tailText)
	if err != nil {
		return Plan{}, false
	}
	m := w.snap
	m.Samples = append(make([]entry.Sample, 0, len(w.snap.Samples)-drop+len(t.Samples)), w.snap.Samples[drop:]...)
	for _, s := range t.Samples {
		if !entry.AppendKeepsOlder(&m, s) {
			return Plan{}, false // Merge would change the older samples: not on the shared ones
		}
		m.Samples = append(m.Samples, s)
	}
	if merged, err := entry.Encode(m); err != nil || merged != text {
		return Plan{}, false
	}
	return Plan{Kind: KindTail, Packed: packed, Samples: k}, true
}

// Wrote records that the API server took p.
func (w *Writer) Wrote(p Plan) {
	switch p.Kind {
	case KindWindow:
		*w = Writer{snap: p.window, snapText: p.Text, base: Base(p.Packed), snapBytes: len(p.Packed),
			lastAt: p.window.Samples[len(p.window.Samples)-1].At, dec: w.dec}
	case KindTail:
		w.tailBytes += len(p.Packed)
	default:
		w.Forget()
	}
}

// HasSnapshot says whether the record holds a snapshot this Writer wrote:
// else the next plan is a snapshot, or a marker in the entry layout.
func (w *Writer) HasSnapshot() bool { return w.snapText != "" }

// Forget makes the next plan a snapshot: the record may hold anything (a
// write failed in a way that leaves it unknown, or another took its place).
func (w *Writer) Forget() { *w = Writer{dec: w.dec} }
