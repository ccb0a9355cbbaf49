package probe

import (
	"context"
	"fmt"
	"time"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
)

// What the node's record holds (docs/records.md). The probe writes it from
// one place, putRecord, and keeps what it last wrote in one value, so that
// whether a write is due is read from that value alone.

// holds is what the node's record holds, as this probe last wrote it (or,
// at start, read it).
type holds int

const (
	// holdsUnread: the record written before this start is not read back
	// yet. Nothing is written until it is, lest a short new window
	// replace a full old one.
	holdsUnread holds = iota
	// holdsNothing: there is no record: none at start, or this node
	// stopped recording and the probe removed it.
	holdsNothing
	// holdsWindow: this probe's window, as of a count of its changes.
	holdsWindow
	// holdsRefused: a marker saying the API server refused the window.
	holdsRefused
	// holdsWithheld: a marker saying the admission policy is not in force,
	// so that no sample of this host can be trusted.
	holdsWithheld
	// holdsForeign: not what this probe wrote, or not known to be: a
	// record unreadable at start, or one any probe could rewrite while the
	// admission policy was not in force.
	holdsForeign
)

func (h holds) String() string {
	switch h {
	case holdsUnread:
		return "unread"
	case holdsNothing:
		return "nothing"
	case holdsWindow:
		return "window"
	case holdsRefused:
		return "refused"
	case holdsWithheld:
		return "withheld"
	case holdsForeign:
		return "foreign"
	}
	return fmt.Sprintf("holds(%d)", int(h))
}

// recordState is what the record holds.
type recordState struct {
	holds holds
	// changes is the count of the entry's changes the window holds
	// (holdsWindow).
	changes uint64
}

// windowDue says whether the window is to be written: the record holds
// anything but this window as it stands. Called with p.mu held.
func (p *Prober) windowDue() bool {
	switch p.rec.holds {
	case holdsUnread:
		return false
	case holdsWindow:
		return p.rec.changes != p.changes
	}
	return true
}

// putRecord makes the node's record hold next: text written (a window or a
// marker), or the record removed (holdsNothing). It is the one place the
// record is written, and what the probe knows it holds changes only once
// the API server has taken the write.
func (p *Prober) putRecord(ctx context.Context, next recordState, text string) error {
	var err error
	if next.holds == holdsNothing {
		err = p.cfg.Records.Delete(ctx, p.cfg.Node)
	} else {
		err = p.cfg.Records.Put(ctx, p.ownerNow(), text)
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.rec = next
	p.mu.Unlock()
	return nil
}

// write sends the whole window when the record holds anything else. A
// window whose encoding passes the record's cap is shrunk (the oldest
// samples first) rather than refused; a write the API server refuses is
// replaced, once, by a marker that says so, so that the status can tell a
// refused host from one that stopped reporting. It reports whether it
// wrote the window.
func (p *Prober) write(ctx context.Context) bool {
	if !p.policyAllows(ctx) {
		return false
	}
	p.mu.Lock()
	if !p.windowDue() || p.owner.Name == "" {
		p.mu.Unlock()
		return false
	}
	limit := record.CapBytes(p.cfg.Settings.Window, p.cfg.Settings.MaxServers)
	text, shrunk, err := Fit(p.entry, limit)
	n, changes := len(p.entry.Samples)-shrunk, p.changes
	p.mu.Unlock()
	if err != nil {
		p.log.Error("encode entry", "err", err)
		p.cfg.Metrics.writeFailed("error")
		return false
	}
	if shrunk > 0 {
		p.log.Warn("record full: the oldest samples are left out so that it fits its cap",
			"dropped", shrunk, "samples", n, "cap_bytes", limit)
	}
	if err := p.putRecord(ctx, recordState{holds: holdsWindow, changes: changes}, text); err != nil {
		if kube.IsRefused(err) {
			p.refused(ctx, err)
			return false
		}
		p.log.Warn("write record failed; the window is kept and sent again next period", "samples", n, "err", err)
		p.cfg.Metrics.writeFailed("error")
		return false
	}
	p.cfg.Metrics.written(len(text), limit, shrunk)
	return true
}

// writeBeside writes the window beside the loop, and waits for the write
// until the next period is due (until) at the latest: the loop's samples
// stay a period apart however long a write takes.
//
// Why: every write of a record is a write to etcd, which crosses the path
// to etcd's leader four times (docs/limits.md, "A slow leader"). Written
// in the loop, a write of 2 to 3 s (a leader 300 to 450 ms each way) held
// back every probe's next sample: its ticker dropped the periods it
// missed, the records changed every 4 s and, with one write a little
// slower, went unwritten for 6 s, past entry_unchanged, on hosts that were
// not slow at all. The
// gate meant for a paused or cut-off voter then held the slow leader's
// swap. Beside the loop, one write follows another as soon as the window
// has changed, so a record changes once a write's time, and a record late
// past entry_unchanged is again a host or probe that stopped, or a path to
// the API server that did.
//
// One write runs at a time: a sample taken while one is in flight is sent
// by it, once it has ended, in the next write it makes. A write that fails
// ends the run; the next period tries again, as before.
func (p *Prober) writeBeside(ctx context.Context, until time.Time) {
	p.mu.Lock()
	running := p.writer != nil
	if !running {
		p.writer = make(chan struct{})
	}
	done := p.writer
	p.mu.Unlock()
	if !running {
		go func() {
			for {
				wrote := p.write(ctx)
				p.mu.Lock()
				again := wrote && ctx.Err() == nil && p.windowDue()
				if !again {
					// Decided under the lock the loop appends under: a
					// sample appended after this finds no writer and
					// starts one.
					p.writer = nil
				}
				p.mu.Unlock()
				if !again {
					close(done)
					return
				}
			}
		}()
	}
	p.awaitWrite(ctx, done, until)
}

// awaitWrite waits for the writes done closes after, and then for a check
// of the policy they started beside them (recheckBeside), until the loop's
// clock reads until (zero: no bound) or ctx is done.
func (p *Prober) awaitWrite(ctx context.Context, done <-chan struct{}, until time.Time) {
	var expired <-chan time.Time
	if !until.IsZero() {
		t := p.cfg.Clock.NewTimer(until.Sub(p.cfg.Clock.Now()))
		defer t.Stop()
		expired = t.C()
	}
	wait := func(ch <-chan struct{}) bool {
		if ch == nil {
			return true
		}
		select {
		case <-ch:
			return true
		case <-ctx.Done():
		case <-expired:
		}
		return false
	}
	if !wait(done) {
		return
	}
	p.mu.Lock()
	check := p.pol.rechecking
	p.mu.Unlock()
	wait(check)
}

// settle waits for the writes in flight, and a check of the policy beside
// them, for as long as ctx allows: before
// the loop removes the record, reads it back, or writes it a last time,
// none of which a write landing after must undo.
func (p *Prober) settle(ctx context.Context) {
	p.mu.Lock()
	done := p.writer
	p.mu.Unlock()
	p.awaitWrite(ctx, done, time.Time{})
}

// ownerNow is the record's owner as the loop last read it from the Nodes.
func (p *Prober) ownerNow() record.Owner {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owner
}

// markerTextBytes bounds the reason a marker carries (a refusal, a
// withheld record): the admission policy's and the API server's messages
// are a few hundred bytes; more is not needed to say why, and the decoder
// caps texts anyway (entry.MaxTextBytes).
const markerTextBytes = 512

func markerText(err error) string {
	msg := err.Error()
	if len(msg) > markerTextBytes {
		msg = msg[:markerTextBytes]
	}
	return msg
}

// refused handles a write the API server refused: it writes a record
// holding no samples and the refusal's text, which is small and plain
// enough to pass where the window did not (a window past the policy's size
// cap, say), once while the record holds it: the refusal's text changes
// with the window's size, which grows every period. The window is kept and
// offered again each period.
func (p *Prober) refused(ctx context.Context, err error) {
	p.cfg.Metrics.writeFailed("refused")
	p.mu.Lock()
	marked := p.rec.holds == holdsRefused
	p.mu.Unlock()
	if marked {
		return
	}
	p.log.Warn("write record refused by the API server; writing a marker that says so, and trying the window again next period", "err", err)
	text, encErr := entry.Encode(entry.Entry{Node: p.cfg.Node, Refused: markerText(err)})
	if encErr != nil {
		return
	}
	if err := p.putRecord(ctx, recordState{holds: holdsRefused}, text); err != nil {
		p.log.Warn("write refusal marker failed; will try again at the next refusal", "err", err)
	}
}

// writeWithheld replaces the record by a marker that holds no samples and
// says why: the samples it held are not to be trusted while any probe could
// have written them, and the controller names the reason.
func (p *Prober) writeWithheld(ctx context.Context, why error) {
	text, err := entry.Encode(entry.Entry{Node: p.cfg.Node, Withheld: markerText(why)})
	if err == nil {
		err = p.putRecord(ctx, recordState{holds: holdsWithheld}, text)
	}
	if err != nil {
		p.log.Warn("write the withheld marker failed; will try again at the next check", "err", err)
	}
}

// stopRecording removes the record of a node that no longer records.
func (p *Prober) stopRecording(ctx context.Context) {
	p.settle(ctx)
	p.mu.Lock()
	unread := p.rec.holds == holdsUnread
	p.mu.Unlock()
	if !p.recording || unread {
		return
	}
	if err := p.putRecord(ctx, recordState{holds: holdsNothing}, ""); err != nil {
		p.log.Warn("remove record failed; will try again next period", "err", err)
		p.cfg.Metrics.writeFailed("error")
		return
	}
	p.log.Info("node is neither a voter nor eligible; record removed")
	p.mu.Lock()
	p.entry = entry.Entry{Node: p.cfg.Node}
	p.mu.Unlock()
	p.recording = false
}

func (p *Prober) flush(ctx context.Context) {
	p.settle(ctx)
	if p.recording {
		p.write(ctx)
	}
}

// Fit encodes e within limit bytes: whole when it fits, else without as
// few of its oldest samples as make it fit (found by halving, since the
// size grows with the samples kept), with Shrunk saying how many were left
// out. It fails only when even no samples would not fit.
func Fit(e entry.Entry, limit int) (text string, shrunk int, err error) {
	text, err = entry.Encode(e)
	if err != nil || len(text) <= limit {
		return text, 0, err
	}
	all := e.Samples
	encode := func(drop int) (string, error) {
		e.Samples, e.Shrunk = all[drop:], drop
		return entry.Encode(e)
	}
	// lo drops too few to fit; hi drops enough.
	lo, hi := 0, len(all)
	best, err := encode(hi)
	if err != nil {
		return "", 0, err
	}
	if len(best) > limit {
		return "", 0, fmt.Errorf("entry of %s is %d bytes with no samples, over the record cap of %d", e.Node, len(best), limit)
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		t, err := encode(mid)
		if err != nil {
			return "", 0, err
		}
		if len(t) <= limit {
			hi, best = mid, t
		} else {
			lo = mid
		}
	}
	return best, hi, nil
}
