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
	// what Wrote keeps of a snapshot
	lastAt time.Time
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
	// snap is the text the record's snapshot packs; "" when the record
	// holds no snapshot this Writer wrote.
	snap      string
	base      uint64
	snapBytes int
	snapN     int
	lastAt    time.Time
	// tailBytes is what the tails since the snapshot have cost, packed.
	tailBytes int
}

// Plan is the write that makes the record read as text, the window's whole
// entry as the entry layout would hold it: a tail when the record holds a
// snapshot that text extends by its newest samples alone and Merge reads
// the two as text exactly, a snapshot otherwise. A window of no samples
// (a marker) is written in the entry layout, where every release reads it.
func (w *Writer) Plan(text string) Plan {
	e, err := entry.Decode(text)
	if err != nil || len(e.Samples) == 0 {
		return Plan{Kind: KindEntry, Text: text}
	}
	snapshot := Plan{Kind: KindWindow, Text: text, Packed: Pack(text), Samples: len(e.Samples), lastAt: e.Samples[len(e.Samples)-1].At}
	if w.snap == "" {
		return snapshot
	}
	// The snapshot's newest sample, found from the newest back: the
	// samples after it are the tail, and those before its place in the
	// snapshot are gone from the window.
	i := len(e.Samples) - 1
	for i >= 0 && !e.Samples[i].At.Equal(w.lastAt) {
		i--
	}
	k, drop := len(e.Samples)-1-i, w.snapN-(i+1)
	if i < 0 || k == 0 || drop < 0 {
		return snapshot
	}
	tailText, err := entry.Encode(entry.Entry{Node: e.Node, Samples: e.Samples[i+1:]})
	if err != nil {
		return snapshot
	}
	if merged, err := Merge(w.snap, drop, tailText); err != nil || merged != text {
		return snapshot
	}
	packed := PackTail(w.base, drop, tailText)
	if w.tailBytes+len(packed) > w.snapBytes || len(packed) >= len(snapshot.Packed) {
		return snapshot
	}
	return Plan{Kind: KindTail, Packed: packed, Samples: k}
}

// Wrote records that the API server took p.
func (w *Writer) Wrote(p Plan) {
	switch p.Kind {
	case KindWindow:
		*w = Writer{snap: p.Text, base: Base(p.Packed), snapBytes: len(p.Packed), snapN: p.Samples, lastAt: p.lastAt}
	case KindTail:
		w.tailBytes += len(p.Packed)
	default:
		w.Forget()
	}
}

// Forget makes the next plan a snapshot: the record may hold anything (a
// write failed in a way that leaves it unknown, or another took its place).
func (w *Writer) Forget() { *w = Writer{} }
