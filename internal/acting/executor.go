package acting

import (
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// Outcome is what one round of the executor asks the controller to do, in
// this order: write Journal (nil when nothing changed), with the journal's
// resourceVersion as the precondition; then, only if that write succeeded,
// set the remove annotation (and RemoveRequestedAnnotation) on the Node
// Annotate. A controller stopped between the two finds the journal saying
// remove is under way and no request on the Node, and makes it then.
type Outcome struct {
	Journal  *Journal
	Annotate string
}

// WithPast fills in w's cooldown and daily count from the swaps the journal
// recalls.
func WithPast(w World, j *Journal) World {
	if j == nil {
		return w
	}
	w.SwapsDay = 0
	past := j.Past
	if j.Phase.Open() {
		// The open swap counts as begun.
		past = append(past[:len(past):len(past)], Past{PlanID: j.PlanID, Started: j.Started})
	}
	for _, p := range past {
		if !p.Ended.IsZero() && p.Ended.After(w.LastSwapEnded) {
			w.LastSwapEnded = p.Ended
		}
		if w.Now.Sub(p.Started) < swapsWindow {
			w.SwapsDay++
		}
	}
	return w
}

// Next is one round of the executor: from the journal as last written (nil
// for none), the world as observed now, the acting mode and the controller's
// Lease term, what to write and do. It re-derives where the swap stands from
// the world at every round, so that a controller that starts over a journal
// another wrote (or that it wrote before it was stopped) finishes a step
// found done, asks again for one found undone (every command is carried out
// at most once, by its sequence number), and fails a step past its deadline;
// it never takes a step the journal holds done.
func Next(j *Journal, w World, mode string, term int32) Outcome {
	w = WithPast(w, j)
	if j == nil || !j.Phase.Open() {
		if mode != settings.ActingGuided && mode != settings.ActingAuto {
			return Outcome{}
		}
		p := Draft(w, mode)
		if p == nil || !p.Ready || !p.Steps[0].Guards[0].OK {
			return Outcome{}
		}
		return Outcome{Journal: open(j, p, &w, mode, term)}
	}
	nj := j.Clone()
	r := round{j: nj, w: &w, now: w.Now}
	if nj.Term != term {
		nj.Term = term
		if nj.Command != nil {
			// The command is the same; the new term lets the actuator tell
			// it from a deposed controller's.
			nj.Command.Term = term
		}
		r.event("term", string(nj.Phase), "")
	}
	switch nj.Phase {
	case PhaseRunning:
		r.run()
	case PhaseAborting:
		r.undo()
	}
	if !r.changed {
		return Outcome{Annotate: r.annotate}
	}
	return Outcome{Journal: nj, Annotate: r.annotate}
}

// open starts the swap p: the journal with admit under way and its command.
func open(prev *Journal, p *Plan, w *World, mode string, term int32) *Journal {
	now := w.Now
	j := &Journal{Schema: JournalSchema, Kind: p.Kind, PlanID: p.ID, Out: p.Out, In: p.In, Phase: PhaseRunning,
		Tolerance0: startTolerance(w, p.Out.Node, p.In.Node), ApprovedBy: approvedBy(mode), Started: now, Term: term,
		LeaderTo: leaderTarget(w, p), History: []Event{}}
	if prev != nil {
		j.Past = recent(prev.Past, now)
	}
	for _, n := range Steps {
		st := JournalStep{Name: n, State: StatePending}
		if p.Kind == KindMoveLeader && n != StepMoveLeader && n != StepDone {
			// A leadership move changes no membership: its one step.
			st.State = StateSkipped
		}
		j.Steps = append(j.Steps, st)
	}
	r := round{j: j, w: w, now: now}
	r.event("open", string(PhaseRunning), "")
	if x := w.host(p.Out.Node); x != nil && x.Leader {
		// Leadership first: while the leaving voter leads, every write,
		// the newcomer's catch-up and its k3s's start wait on it (the worst
		// fault there is), so its leadership is moved before anything else
		// changes, membership untouched.
		r.reach(j.step(StepMoveLeader))
	} else {
		r.reach(j.step(StepAdmit))
	}
	r.run()
	return j
}

func approvedBy(mode string) string {
	if mode == settings.ActingAuto {
		return "auto"
	}
	return "operator"
}

// recent keeps the swaps the cooldown and the daily cap still need: those
// begun in the last 24 hours, and the last to end.
func recent(past []Past, now time.Time) []Past {
	var keep []Past
	for i, p := range past {
		if now.Sub(p.Started) < swapsWindow || i == len(past)-1 {
			keep = append(keep, p)
		}
	}
	return keep
}

// round is one pass of the executor over a journal it may change.
type round struct {
	j        *Journal
	w        *World
	now      time.Time
	changed  bool
	annotate string
}

func (r *round) event(step, state, cause string) {
	r.j.History = append(r.j.History, Event{At: r.now, Step: step, State: state, Term: r.j.Term, Cause: cause})
	r.changed = true
}

func (r *round) host(name string) *Host {
	if h := r.w.host(name); h != nil {
		return h
	}
	return &Host{Name: name}
}

// reach starts step s: its deadline counts from now.
func (r *round) reach(s *JournalStep) {
	t := r.now
	d := t.Add(time.Duration(deadline(r.w.Settings, s.Name).Seconds * float64(time.Second)))
	s.Started, s.Deadline, s.State = &t, &d, StatePending
	r.event(string(s.Name), string(StatePending), "")
}

func (r *round) end(s *JournalStep, st State, cause string) {
	t := r.now
	s.State, s.Ended, s.Held = st, &t, ""
	// The removal's command is X's settle, which outlives it.
	if r.j.Command != nil && r.j.Command.Seq == s.Seq && !(s.Name == StepRemove && st == StateDone) {
		r.j.Command = nil
	}
	r.event(string(s.Name), string(st), cause)
}

// plan is the journal's swap as a Plan, for the guards.
func (r *round) plan() *Plan {
	return &Plan{ID: r.j.PlanID, Out: r.j.Out, In: r.j.In}
}

// run carries the running swap as far as the world allows this round: each
// step found done ends and the next is reached, until one is under way,
// held, or failed.
func (r *round) run() {
	if !r.leadFirst() {
		return
	}
	for range Steps {
		s := r.j.Current()
		if s == nil {
			return
		}
		if s.Name == StepDone {
			r.end(s, StateDone, "")
			r.finish(PhaseDone)
			return
		}
		if r.done(s) {
			r.end(s, StateDone, "")
			next := r.j.Current()
			r.reach(next)
			if next.Name == StepMoveLeader && !r.host(r.j.Out.Node).Leader {
				r.end(next, StateSkipped, "")
				r.reach(r.j.Current())
			}
			continue
		}
		if r.now.After(*s.Deadline) {
			r.fail(s, CauseDeadline)
			return
		}
		if s.State == StateRunning {
			r.watch(s)
			return
		}
		gs := guards(r.w, s.Name, r.plan(), r.j.Tolerance0, "")
		if s.Name == StepAdmit {
			// The approval was the opening's; the rest hold again here.
			gs = gs[1:]
		}
		if code := firstFailed(gs); code != "" {
			if s.State != StateHeld || s.Held != code {
				s.State, s.Held = StateHeld, code
				r.event(string(s.Name), string(StateHeld), string(code))
			}
			return
		}
		r.issue(s)
		return
	}
}

// leadFirst carries the leadership move the swap opened with, before
// admit (open): it reports whether the swap may go on to its steps in
// order this round. A move past its deadline aborts the swap with nothing
// to undo.
func (r *round) leadFirst() bool {
	ml := r.j.step(StepMoveLeader)
	if ml.Started == nil || ml.State == StateDone || ml.State == StateSkipped || ml.State == StateFailed || r.j.step(StepAdmit).Started != nil {
		return true
	}
	switch {
	case r.done(ml):
		r.end(ml, StateDone, "")
		if r.j.Kind == KindMoveLeader {
			// The move was the whole plan.
			r.reach(r.j.step(StepDone))
		} else {
			r.reach(r.j.step(StepAdmit))
		}
		return true
	case r.now.After(*ml.Deadline):
		r.fail(ml, CauseDeadline)
		return false
	case ml.State == StateRunning:
		r.watch(ml)
		return false
	}
	if code := firstFailed(guards(r.w, StepMoveLeader, r.plan(), r.j.Tolerance0, "")); code != "" {
		if ml.State != StateHeld || ml.Held != code {
			ml.State, ml.Held = StateHeld, code
			r.event(string(ml.Name), string(StateHeld), string(code))
		}
		return false
	}
	r.issue(ml)
	return false
}

// done reports whether step s is found done in the world.
func (r *round) done(s *JournalStep) bool {
	x, in := r.host(r.j.Out.Node), r.host(r.j.In.Node)
	switch s.Name {
	case StepAdmit:
		// S joined: its Node shows it a member, or etcd knows a member no
		// Node shows yet (a learner's Node is labelled only once promoted),
		// which can be S's alone: admit began with none (its learners
		// guard) and no other change is made meanwhile. Its actuator's
		// report is not waited for: S may be cut off once it has joined.
		return s.State == StateRunning && (in.Voter || in.Learner || r.w.unlabelled() > 0)
	case StepPromote:
		return in.Voter
	case StepStabilise:
		if !(in.Voter && in.Alive && in.fitBut(r.j.Out.Node)) {
			if r.j.StableSince != nil {
				r.j.StableSince = nil
				r.changed = true
			}
			return false
		}
		if r.j.StableSince == nil {
			t := r.now
			r.j.StableSince = &t
			r.changed = true
		}
		return r.now.Sub(*r.j.StableSince) >= stableFor(r.w.Settings)
	case StepPrewrite:
		return r.reported(x, s.Seq)
	case StepMoveLeader:
		// Moved: X's actuator says so (etcd's MoveLeader returns once the
		// target leads), or another voter's record says it leads, or X's
		// own does not. X is the slow host: its own word and its record
		// reach the controller last.
		return s.State == StateRunning && (r.reported(x, s.Seq) || r.otherLeads() || !x.Leader)
	case StepRemove:
		return !x.Voter && !x.Learner
	case StepSettle:
		return r.reported(x, s.Seq) && x.Ready && !x.EtcdLabel
	}
	return false
}

// otherLeads: a voter other than the leaving one leads, by its record.
func (r *round) otherLeads() bool {
	for i := range r.w.Hosts {
		if h := &r.w.Hosts[i]; h.Leader && h.Voter && h.Name != r.j.Out.Node {
			return true
		}
	}
	return false
}

// armed: h's actuator took up command seq of this plan (it waits for its
// condition), or carried it out.
func (r *round) armed(h *Host, seq int) bool {
	return seq > 0 && h.Report != nil && h.Report.PlanID == r.j.PlanID && h.Report.Seq == seq && (h.Report.Armed || h.Report.Done)
}

// reported: h's actuator carried out command seq of this plan.
func (r *round) reported(h *Host, seq int) bool {
	return seq > 0 && h.Report != nil && h.Report.PlanID == r.j.PlanID && h.Report.Seq == seq && h.Report.Done
}

// failedReport is why h's actuator did not carry out command seq, "" when
// it did or has not said.
func (r *round) failedReport(h *Host, seq int) string {
	if seq == 0 || h.Report == nil || h.Report.PlanID != r.j.PlanID || h.Report.Seq != seq {
		return ""
	}
	switch {
	case h.Report.Refused != "" && h.Report.Term < r.j.Term:
		// Refused as a deposed controller's: this term's copy of the same
		// command is still to be carried out.
		return ""
	case h.Report.Refused != "":
		return CauseRefused
	case h.Report.Error != "":
		return CauseFailed
	}
	return ""
}

// watch looks after a step under way: an actuator that failed it fails
// it; a removal k3s refused halts the swap; a removal never asked for (the
// controller stopped between the journal and the Node) is asked for again.
func (r *round) watch(s *JournalStep) {
	x := r.host(r.j.Out.Node)
	if r.j.Command != nil && r.j.Command.Seq == s.Seq {
		if cause := r.failedReport(r.host(r.j.Command.Host), s.Seq); cause != "" {
			r.fail(s, cause)
			return
		}
	}
	if s.Name == StepRemove && !x.RemoveAnnotation {
		if x.RemoveRequested == r.j.PlanID {
			// k3s's member controller deleted its annotation and not ours,
			// and the member stays: etcd refused the removal.
			r.fail(s, CauseRefused)
			return
		}
		// The removal is asked for only once X's actuator holds the
		// settle command: past the removal, X's API server serves no more,
		// and the actuator could read no command from the journal.
		if r.armed(x, s.Seq) {
			r.annotate = x.Name
		}
	}
}

// issue makes step s's change: the command for its host's actuator in the
// journal, or the remove annotation once the journal is written.
func (r *round) issue(s *JournalStep) {
	s.State, s.Held = StateRunning, ""
	x, in := r.j.Out.Node, r.j.In.Node
	switch s.Name {
	case StepAdmit:
		s.Seq = r.command(in, VerbEtcdOn, "", true)
	case StepPrewrite:
		s.Seq = r.command(x, VerbEtcdOff, "", false)
	case StepMoveLeader:
		to := r.j.LeaderTo
		if h := r.memberHost(to); h == nil || !h.Voter || !h.Alive {
			to = leaderTarget(r.w, r.plan())
			r.j.LeaderTo = to
		}
		s.Seq = r.command(x, VerbMoveLeader, to, false)
	case StepRemove:
		// X's settle goes out with the removal: the annotation follows
		// once X's actuator reports it armed (watch).
		s.Seq = r.command(x, VerbSettle, "", true)
	case StepSettle:
		if rm := r.j.step(StepRemove); rm.Seq > 0 && r.j.Command != nil && r.j.Command.Seq == rm.Seq {
			// The settle command the removal went out with carries on.
			s.Seq = rm.Seq
		} else {
			// X left etcd before the removal was asked for (an unplanned
			// restart once the standby drop-in was written): settle now.
			s.Seq = r.command(x, VerbSettle, "", true)
		}
	}
	r.event(string(s.Name), string(StateRunning), "")
}

// removalAsked: k3s was asked to remove X (the Node carries the request,
// or k3s's annotation), or X is already no voter. Until then a remove step
// that fails (X's actuator never armed its settle) has changed nothing.
func (r *round) removalAsked() bool {
	x := r.host(r.j.Out.Node)
	return x.RemoveRequested == r.j.PlanID || x.RemoveAnnotation || !x.Voter
}

func (r *round) memberHost(id string) *Host { return r.w.memberHost(id) }

func (r *round) command(host string, v Verb, target string, restart bool) int {
	r.j.Seq++
	r.j.Command = &Command{PlanID: r.j.PlanID, Seq: r.j.Seq, Term: r.j.Term, Host: host, Verb: v, Target: target, Restart: restart}
	return r.j.Seq
}

// fail ends step s as failed: before the leaving voter's removal is asked
// for the swap aborts, undoing what was done; from then on it halts, since
// the only way back would re-add the unfit voter.
func (r *round) fail(s *JournalStep, cause string) {
	r.end(s, StateFailed, cause)
	r.j.Command = nil
	if stepIndex(s.Name) > stepIndex(StepRemove) || (s.Name == StepRemove && r.removalAsked()) {
		r.j.Phase, r.j.Halt = PhaseHalted, cause
		r.event("halt", string(PhaseHalted), cause)
		return
	}
	a := &Abort{Step: s.Name, Cause: cause, At: r.now}
	if p := r.j.step(StepPrewrite); p.Seq > 0 {
		a.Undo = append(a.Undo, UndoRestoreOut)
	}
	if r.j.step(StepAdmit).Seq > 0 {
		if r.host(r.j.In.Node).Voter {
			// A voter's k3s serves its API from its own member: removed
			// from under it, its host serves no API, and its actuator
			// could read no standby-in. So the newcomer goes first as
			// k3s has a server leave etcd: its drop-in a standby's, its
			// k3s restarted, which removes its member itself (RemoveSelf);
			// remove-in then finds it gone.
			a.Undo = append(a.Undo, UndoStandbyIn, UndoRemoveIn)
		} else {
			// A learner's API server never served (its host reaches the
			// API through the others'): removed from the voters' side
			// first, which needs nothing of it (it may be cut off).
			a.Undo = append(a.Undo, UndoRemoveIn, UndoStandbyIn)
		}
	}
	r.j.Phase, r.j.Abort = PhaseAborting, a
	r.event("abort", string(PhaseAborting), cause)
	r.undo()
}

// undo carries the abort as far as the world allows this round.
func (r *round) undo() {
	a := r.j.Abort
	x, in := r.host(r.j.Out.Node), r.host(r.j.In.Node)
	for len(a.Undo) > 0 {
		u := a.Undo[0]
		var done bool
		switch u {
		case UndoRestoreOut:
			done = r.reported(x, a.Seq)
		case UndoRemoveIn:
			// Gone, or removed by the voter's actuator and back already: a
			// newcomer's k3s that cannot join exits, and its service
			// manager starts it again, which adds its member once more
			// (test/acting saw it exit about every 26 s, and its learner
			// back 1.25 s after a removal) until standby-in has made
			// it a standby. Waiting here for it to stay gone would wait
			// for ever; the check below removes it once more at the end.
			done = r.inGone(in) || (r.j.Command != nil && r.reported(r.host(r.j.Command.Host), a.Seq))
		case UndoStandbyIn:
			done = r.reported(in, a.Seq)
		}
		if done {
			a.Undo, a.Seq, r.j.Command = a.Undo[1:], 0, nil
			r.event(string(u), string(StateDone), "")
			if len(a.Undo) == 0 && !r.inGone(in) {
				// The newcomer joined again after its member was removed
				// (its k3s was mid-join): remove it once more.
				a.Undo = []Undo{UndoRemoveIn}
			}
			continue
		}
		if a.Seq == 0 || r.j.Command == nil {
			switch u {
			case UndoRestoreOut:
				a.Seq = r.command(x.Name, VerbEtcdOn, "", false)
			case UndoRemoveIn:
				from := r.removeFrom()
				if from == "" {
					return // no voter host alive to remove it from: wait
				}
				a.Seq = r.command(from, VerbRemoveMember, r.j.In.PeerURL, false)
			case UndoStandbyIn:
				a.Seq = r.command(in.Name, VerbEtcdOff, "", true)
			}
			r.event(string(u), string(StateRunning), "")
		}
		return
	}
	r.finish(PhaseAborted)
}

// inGone reports whether the newcomer's member is gone from etcd: its Node
// shows no member and etcd knows none that no Node shows; or, its Node
// still labelled (a member removed by MemberRemove keeps its label until
// k3s restarts there), etcd's voters know fewer members than the Nodes
// show. Before the leaving voter's removal, which an abort never reaches,
// the newcomer is the only member that can be missing.
func (r *round) inGone(in *Host) bool {
	if !in.Voter && !in.Learner {
		return r.w.unlabelled() == 0
	}
	return r.w.EtcdMembers > 0 && r.w.EtcdMembers < r.w.labelled()
}

// removeFrom is the voter host whose actuator removes the newcomer: an
// alive voter that is neither party (the newcomer may be cut off, and the
// leaving voter is the unfit one), else the leaving voter.
func (r *round) removeFrom() string {
	for i := range r.w.Hosts {
		h := &r.w.Hosts[i]
		if h.Voter && h.Alive && h.Name != r.j.In.Node && h.Name != r.j.Out.Node {
			return h.Name
		}
	}
	if x := r.host(r.j.Out.Node); x.Voter && x.Alive {
		return x.Name
	}
	return ""
}

func (r *round) finish(p Phase) {
	t := r.now
	r.j.Phase, r.j.Ended, r.j.Command = p, &t, nil
	r.j.Past = append(recent(r.j.Past, r.now), Past{PlanID: r.j.PlanID, Started: r.j.Started, Ended: t, Phase: p})
	r.event("swap", string(p), "")
}
