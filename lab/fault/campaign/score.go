package campaign

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Fault is one injected fault as it happened, with its truth and score.
type Fault struct {
	Spec
	// Start and End are when it was injected and undone; Recovered when the
	// first status generated after End found every host fit again (zero if
	// the fleet never did within the campaign's wait).
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Recovered time.Time `json:"recovered"`
	Truth     Truth     `json:"truth"`
	// Bound is the periods from Start within which a swap-worthy fault's
	// swap must be published.
	Bound float64 `json:"bound_periods,omitempty"`
	// Load is the machine's load average over the minute before the fault
	// started (/proc/loadavg): every host shares this machine's cores, and
	// a busy machine is a fault of every host that no schedule drew.
	Load float64 `json:"load1"`
	// Held lists, by voter, the spans in which a gate of docs/limits.md held
	// every swap because of that voter, by the fleet's own state read
	// beside the probes: etcd itself reported it without a leader or
	// without one of its peers (and the window its last such sample stays
	// in), or its record went unwritten past the freshness limit. A swap not
	// published, or withdrawn, in one is the gates' due, not a miss or a
	// flap.
	Held map[string][]Interval `json:"held,omitempty"`
	// Unwritten is the longest a voter's record went unwritten during the
	// fault (counted from its start, and to its end), as the campaign saw
	// the writes through the API server.
	Unwritten Unwritten `json:"unwritten"`
	// Throttled is a voter-cpu fault's cgroup cpu.stat as it ended: how
	// many of its CFS periods held the starved host off the CPU. Kept for
	// the reader; the outcome does not depend on it.
	Throttled *Throttled `json:"throttled,omitempty"`

	// Outcome is one of: caught, late (published after its bound), missed
	// (never published), held (no swap, as the truth says), gated (a
	// swap-worthy fault whose swap a gate held from before its bound, by
	// the fleet's own state: Held), wrong-swap, flap, unseen
	// (a host the truth calls unfit was never reported so), unrecovered.
	Outcome string `json:"outcome"`
	// Publication is what became of a swap-worthy fault's swap alone:
	// caught, late, missed or gated, as the totals count it, whatever else
	// the fault then did (a wrong swap after it, a flap); "" for the others.
	Publication string `json:"publication,omitempty"`
	// PeriodsToPublish is the periods from Start to the first status that
	// published the right swap; nil when none did.
	PeriodsToPublish *float64 `json:"periods_to_publish"`
	WrongSwaps       int      `json:"wrong_swaps"`
	Flaps            int      `json:"flaps"`
	// LeaderChanges counts etcd's leader changes from Start until the
	// fleet recovered (or the next fault), as the member that saw the most
	// of them counts (etcd_server_leader_changes_seen_total).
	LeaderChanges int  `json:"leader_changes"`
	OK            bool `json:"ok"`
	// Notes say what went wrong, with times, for the reader of the board.
	Notes []string `json:"notes,omitempty"`
}

// Decision is one status the controller published, as decisions.jsonl
// holds it: enough to score the campaign again.
type Decision struct {
	Time   time.Time `json:"time"`
	Action string    `json:"action"`
	Out    string    `json:"out,omitempty"`
	In     string    `json:"in,omitempty"`
	// Hosts maps every host to its verdict.
	Hosts map[string]string `json:"hosts"`
	// UnfitBy maps each unfit host to the signals it is unfit by.
	UnfitBy map[string][]string `json:"unfit_by,omitempty"`
	// Why is the first decision reason that is not ok, in words (what held
	// a swap back), or the swap's.
	Why string `json:"why,omitempty"`
}

// Totals sum a campaign's score.
type Totals struct {
	Faults     int `json:"faults"`
	SwapWorthy int `json:"swap_worthy"`
	Caught     int `json:"caught"`
	Missed     int `json:"missed"`
	// Gated counts the swap-worthy faults whose swap a gate held from
	// before the bound, by the fleet's own state (Fault.Held).
	Gated          int `json:"gated"`
	WrongSwaps     int `json:"wrong_swaps"`
	Flaps          int `json:"flaps"`
	CleanDecisions int `json:"clean_decisions"`
	Decisions      int `json:"decisions"`
	// LeaderChanges counts etcd's leader changes during the faults, and
	// Clean lists those between them (from the baseline to the first
	// fault, and from each recovery to the next fault), to trace each to a
	// cause: fleet-role must cause none.
	LeaderChanges int           `json:"leader_changes"`
	Clean         []CleanChange `json:"clean_changes,omitempty"`
	// OwnMoves counts the campaign's own moves of leadership, left out of
	// both (withoutOwnMoves).
	OwnMoves    int      `json:"own_leader_moves"`
	Unrecovered int      `json:"unrecovered"`
	Kinds       []string `json:"kinds"`
}

// OK reports whether the campaign passes: no wrong swap, no flap, no
// swap-worthy fault missed, every fault recovered from, every unfit host
// the truth names reported so, and no leader change between faults: with
// no fault on, an election is one fleet-role caused.
func (t Totals) OK(faults []Fault) bool {
	if t.WrongSwaps > 0 || t.Flaps > 0 || t.Missed > 0 || t.Unrecovered > 0 || len(t.Clean) > 0 {
		return false
	}
	for _, f := range faults {
		if !f.OK {
			return false
		}
	}
	return true
}

// Score scores every fault against the published decisions, and the
// decisions between faults against a clean fleet's truth: nothing to swap.
// It is pure: faults and decisions in, the same faults scored and the
// totals out.
func Score(faults []Fault, decisions []Decision, period time.Duration, standbys []string) ([]Fault, Totals) {
	ds := slices.SortedFunc(slices.Values(decisions), func(a, b Decision) int { return a.Time.Compare(b.Time) })
	out := slices.Clone(faults)
	for i := range out {
		// A board read back is scored afresh: nothing of an earlier score
		// stays.
		f := &out[i]
		f.Outcome, f.Publication, f.PeriodsToPublish, f.WrongSwaps, f.Flaps, f.Notes, f.OK = "", "", nil, 0, 0, nil, false
	}
	var t Totals
	kinds := map[string]bool{}
	// owner returns the fault whose truth holds at time x: from its start
	// until the fleet recovered from it (its samples stay in the windows
	// until they roll out), or until the next fault's start if it never
	// did; -1 for a clean moment.
	owner := func(x time.Time) int {
		for i := range out {
			f := &out[i]
			until := f.Recovered
			if until.IsZero() {
				until = time.Unix(1<<40, 0)
				if i+1 < len(out) {
					until = out[i+1].Start
				}
			}
			if !x.Before(f.Start) && !x.After(until) {
				return i
			}
		}
		return -1
	}
	caughtAt := make([]time.Time, len(out))
	seenUnfit := make([]bool, len(out))
	for k, d := range ds {
		t.Decisions++
		i := owner(d.Time)
		if i < 0 {
			t.CleanDecisions++
			if d.Action == "swap" {
				t.WrongSwaps++
			}
			continue
		}
		f := &out[i]
		for _, h := range f.Truth.Unfit {
			if slices.Contains(d.UnfitBy[h], f.Truth.Signal) {
				seenUnfit[i] = true
			}
		}
		if d.Action == "swap" {
			if f.Truth.RightOut(d.Out) && slices.Contains(standbys, d.In) {
				if caughtAt[i].IsZero() {
					caughtAt[i] = d.Time
				}
			} else {
				f.WrongSwaps++
				t.WrongSwaps++
				f.Notes = append(f.Notes, d.Time.Format(time.RFC3339Nano)+": wrong swap "+d.Out+" -> "+d.In+" ("+d.Why+")")
			}
		}
		// A published swap withdrawn, or turned to another voter, at the
		// next decision while the fault still lasts: a flap (the voter set
		// never changes in dry run), unless etcd itself had just lost a
		// voter's leader or peer, which the gates hold for.
		if k > 0 {
			p := ds[k-1]
			if p.Action == "swap" && owner(p.Time) == i && !d.Time.After(f.End) && (d.Action != "swap" || d.Out != p.Out) && !f.heldAt(d.Time) {
				f.Flaps++
				t.Flaps++
				f.Notes = append(f.Notes, d.Time.Format(time.RFC3339Nano)+": flap: swap "+p.Out+" -> "+p.In+" withdrawn ("+d.Action+" "+d.Out+"; "+d.Why+")")
			}
		}
	}
	for i := range out {
		f := &out[i]
		kinds[string(f.Kind)] = true
		t.Faults++
		f.PeriodsToPublish = nil
		if !caughtAt[i].IsZero() {
			p := float64(caughtAt[i].Sub(f.Start)) / float64(period)
			f.PeriodsToPublish = &p
		}
		switch {
		case f.Truth.SwapWorthy():
			t.SwapWorthy++
			switch {
			case f.PeriodsToPublish == nil && f.gatedBy(period) != "":
				f.Publication = "gated"
				f.Notes = append(f.Notes, f.gatedBy(period))
				t.Gated++
			case f.PeriodsToPublish == nil:
				f.Publication = "missed"
				t.Missed++
			case *f.PeriodsToPublish > f.Bound:
				if why := f.gatedThen(caughtAt[i], period); why != "" {
					f.Publication = "gated"
					f.Notes = append(f.Notes, why)
					t.Gated++
					break
				}
				f.Publication = "late"
				t.Missed++
			default:
				f.Publication = "caught"
				t.Caught++
			}
			f.Outcome = f.Publication
		default:
			f.Outcome = "held"
		}
		if len(f.Truth.Unfit) > 0 && !seenUnfit[i] {
			f.Outcome = "unseen"
			f.Notes = append(f.Notes, "never reported unfit by "+f.Truth.Signal+": "+strings.Join(f.Truth.Unfit, ", "))
		}
		if f.Flaps > 0 {
			f.Outcome = "flap"
		}
		if f.WrongSwaps > 0 {
			f.Outcome = "wrong-swap"
		}
		if f.Recovered.IsZero() {
			t.Unrecovered++
			f.Outcome = "unrecovered"
		}
		f.OK = f.Outcome == "caught" || f.Outcome == "held" || f.Outcome == "gated"
	}
	t.Kinds = slices.Sorted(func(yield func(string) bool) {
		for k := range kinds {
			if !yield(k) {
				return
			}
		}
	})
	return out, t
}

// heldAt reports whether a gate held every swap at t (Held).
func (f *Fault) heldAt(t time.Time) bool {
	for _, is := range f.Held {
		for _, i := range is {
			if !t.Before(i.From) && !t.After(i.To) {
				return true
			}
		}
	}
	return false
}

// gatedBy says which voter a gate held for before the fault's bound ran
// out, and why, or "".
func (f *Fault) gatedBy(period time.Duration) string {
	by := f.Start.Add(time.Duration(f.Bound * float64(period)))
	for _, v := range slices.Sorted(maps.Keys(f.Held)) {
		for _, i := range f.Held[v] {
			if i.From.Before(by) {
				return "from " + i.From.Format(time.RFC3339Nano) + ", before the bound, " + v + ": " + i.Why + ": the gates hold every swap (docs/limits.md)"
			}
		}
	}
	return ""
}

// gatedThen says how a swap published after the fault's bound was the
// gates' due, or "": a gate held every swap from before the bound ran out
// (gatedBy), and the swap came within the bound counted again from when the
// gates last held before it. While a gate holds, nothing may be swapped
// (docs/limits.md, "Gates"); once it lifts, the fault is as good as new, its
// samples already in the windows, and must be published within its bound
// as any other. A swap published inside a held span (the controller read
// the gate lift a moment before the campaign's own reading did) counts from
// the publication: 0 periods.
func (f *Fault) gatedThen(published time.Time, period time.Duration) string {
	before := f.gatedBy(period)
	if before == "" {
		return ""
	}
	var lifted time.Time
	for _, is := range f.Held {
		for _, i := range is {
			if !i.From.Before(published) {
				continue
			}
			lifted = latestOf(lifted, earliestOf(i.To, published))
		}
	}
	p := float64(published.Sub(lifted)) / float64(period)
	if p > f.Bound {
		return ""
	}
	return fmt.Sprintf("held %s; published %.1f periods after the gates last held (%s), within the bound of %g counted from then",
		before, p, lifted.Format(time.RFC3339Nano), f.Bound)
}

func latestOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earliestOf(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// KindRow is one row of the table a campaign prints: one kind's faults.
// voter-delay has two: a follower's, and etcd's leader's (Leader), so that
// a slow leader's catch is read beside a slow follower's.
type KindRow struct {
	Kind                  Kind
	Leader                bool
	Injected, SwapWorthy  int
	Caught, Missed, Gated int
	WrongSwaps, Flaps     int
	LeaderChanges         int
	Failed                int // faults not ok, whatever the reason
	MedianPeriods, MaxPer float64
	Published             int // faults whose right swap was published
}

// ByKind sums the scored faults per kind, in the catalogue's order.
func ByKind(faults []Fault) []KindRow {
	type key struct {
		kind   Kind
		leader bool
	}
	rows := map[key]*KindRow{}
	per := map[key][]float64{}
	for _, f := range faults {
		k := key{f.Kind, f.Leader}
		r := rows[k]
		if r == nil {
			r = &KindRow{Kind: f.Kind, Leader: f.Leader}
			rows[k] = r
		}
		r.Injected++
		r.WrongSwaps += f.WrongSwaps
		r.Flaps += f.Flaps
		r.LeaderChanges += f.LeaderChanges
		if !f.OK {
			r.Failed++
		}
		if f.Truth.SwapWorthy() {
			r.SwapWorthy++
			// By the publication alone, as the totals count: a fault
			// caught and then swapped wrongly is caught, and not ok.
			switch f.Publication {
			case "caught":
				r.Caught++
			case "gated":
				r.Gated++
			default:
				r.Missed++
			}
		}
		if f.PeriodsToPublish != nil {
			per[k] = append(per[k], *f.PeriodsToPublish)
		}
	}
	var out []KindRow
	for _, kind := range Kinds {
		for _, leader := range []bool{false, true} {
			k := key{kind, leader}
			r := rows[k]
			if r == nil {
				continue
			}
			if ps := per[k]; len(ps) > 0 {
				slices.Sort(ps)
				r.Published = len(ps)
				r.MedianPeriods = median(ps)
				r.MaxPer = ps[len(ps)-1]
			}
			out = append(out, *r)
		}
	}
	return out
}

// Name is the row's name in the table: the kind, and "(leader)" for a
// delay of etcd's leader.
func (r KindRow) Name() string {
	if r.Leader {
		return string(r.Kind) + " (leader)"
	}
	return string(r.Kind)
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// ownMoveSeen is how long after the campaign's own move of leadership
// returns a member's metrics may first show it: a poll's interval and the
// poll's own timeout (etcdWatch).
const ownMoveSeen = 2 * etcdWatchEvery

// withoutOwnMoves is changes less, for each of the campaign's own moves of
// leadership (MoveLeader, to make a voter-delay's voter etcd's leader and to
// give leadership back to the pinned voter after it), the one change each
// member saw of it: its first from the move's start to ownMoveSeen after it
// returned. Those are the campaign's, not an election fleet-role or a fault
// caused. It also says how many moves some member was seen to make.
func withoutOwnMoves(changes map[string][]time.Time, moves []Interval) (map[string][]time.Time, int) {
	out := make(map[string][]time.Time, len(changes))
	seen := make([]bool, len(moves))
	for v, ts := range changes {
		ts = slices.Clone(ts)
		for i, m := range moves {
			if j := slices.IndexFunc(ts, func(t time.Time) bool { return !t.Before(m.From) && !t.After(m.To.Add(ownMoveSeen)) }); j >= 0 {
				ts = slices.Delete(ts, j, j+1)
				seen[i] = true
			}
		}
		out[v] = ts
	}
	n := 0
	for _, b := range seen {
		if b {
			n++
		}
	}
	return out, n
}

// CountLeaderChanges sets each fault's LeaderChanges from changes (by
// voter, when its member saw the leader change) and returns their total,
// and each change between the faults, from baseline (when the campaign's
// fleet was first all fit) to ended, and how many of the campaign's own
// moves of leadership (moves) it left out (withoutOwnMoves). A fault's span
// runs from its Start to its recovery, or to the next fault's start (or
// ended) when it never recovered; the clean spans are the rest. In each
// span the member that saw the most changes counts: one election is seen by
// every member that has a leader, and a member cut off may see none of it.
func CountLeaderChanges(faults []Fault, changes map[string][]time.Time, moves []Interval, baseline, ended time.Time) (during int, clean []CleanChange, own int) {
	changes, own = withoutOwnMoves(changes, moves)
	// in is the changes in [from, to) of the member that saw the most.
	in := func(from, to time.Time) []time.Time {
		var most []time.Time
		for _, ts := range changes {
			var seen []time.Time
			for _, t := range ts {
				if !t.Before(from) && t.Before(to) {
					seen = append(seen, t)
				}
			}
			if len(seen) > len(most) {
				most = seen
			}
		}
		return most
	}
	between := func(after int, from, to time.Time) {
		for _, t := range in(from, to) {
			clean = append(clean, CleanChange{At: t, After: after, Since: Duration(t.Sub(from))})
		}
	}
	cleanFrom := baseline
	for i := range faults {
		f := &faults[i]
		until := ended
		if i+1 < len(faults) {
			until = faults[i+1].Start
		}
		end := until
		if !f.Recovered.IsZero() && f.Recovered.Before(until) {
			end = f.Recovered
		}
		if !cleanFrom.IsZero() && cleanFrom.Before(f.Start) {
			between(i, cleanFrom, f.Start)
		}
		f.LeaderChanges = len(in(f.Start, end))
		during += f.LeaderChanges
		cleanFrom = end
	}
	if !cleanFrom.IsZero() && cleanFrom.Before(ended) {
		between(len(faults), cleanFrom, ended)
	}
	return during, clean, own
}

// CleanChange is one leader change seen between faults: when, after how
// many faults (0: before the first), and how long after the clean span
// began (the previous fault's recovery, or the baseline).
type CleanChange struct {
	At    time.Time `json:"at"`
	After int       `json:"after_faults"`
	Since Duration  `json:"since"`
}

// Throttled is a starved host's cgroup cpu.stat (lab/fault/cpulimit.Stat).
type Throttled struct {
	Periods   uint64   `json:"periods"`
	Throttled uint64   `json:"throttled"`
	For       Duration `json:"for"`
}
