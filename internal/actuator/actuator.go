package actuator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// JournalSource is the journal as a watch of its ConfigMap last delivered
// it.
type JournalSource interface {
	// Journal is the journal the cache holds: nil for none (no ConfigMap,
	// or no document in it); synced false until the first list arrived;
	// an error when the document cannot be read.
	Journal() (j *acting.Journal, synced bool, err error)
	// Changed receives after each change the watch delivers.
	Changed() <-chan struct{}
}

// LeaseTerm reads the controller's Lease.
type LeaseTerm interface {
	// Term is the Lease's leaseTransitions; found false when there is no
	// Lease.
	Term(ctx context.Context) (term int32, found bool, err error)
}

// ReportRecord is this host's actuator record.
type ReportRecord interface {
	// Get is the report the record holds, nil for no record.
	Get(ctx context.Context) (*acting.Report, error)
	// Put makes the record hold r, in its whole shape.
	Put(ctx context.Context, r acting.Report) error
}

// EtcdMember is what the actuator asks of the local etcd member (Etcd).
type EtcdMember interface {
	View(ctx context.Context) (EtcdView, error)
	MoveLeader(ctx context.Context, to uint64) error
	RemoveMember(ctx context.Context, id uint64) error
	// Listening reports whether anything accepts a connection on the
	// member's port, asking the member nothing.
	Listening(ctx context.Context) (bool, error)
}

// StateStore keeps the local state (FileState).
type StateStore interface {
	Load() (State, error)
	Save(State) error
}

// Config is what an Actuator is made of.
type Config struct {
	Node     string
	HostRoot string
	Settings settings.Settings
	Journal  JournalSource
	Lease    LeaseTerm
	Record   ReportRecord
	Etcd     EtcdMember
	Restart  Restarter
	State    StateStore
	Clock    clock.WithTicker
	Log      *slog.Logger
}

// Actuator carries out this host's commands, one at a time.
type Actuator struct {
	cfg       Config
	state     State
	published *acting.Report
	// last is the last idle reason logged, so that a command waiting for
	// its term, or another host's, is logged once, not every round.
	last string
}

// New checks cfg and makes the actuator.
func New(cfg Config) (*Actuator, error) {
	switch {
	case cfg.Node == "":
		return nil, errors.New("actuator: no node name")
	case cfg.HostRoot == "":
		return nil, errors.New("actuator: no host root")
	case cfg.Journal == nil || cfg.Lease == nil || cfg.Record == nil || cfg.Etcd == nil || cfg.Restart == nil || cfg.State == nil:
		return nil, errors.New("actuator: an adapter is missing")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Log = cfg.Log.With("node", cfg.Node)
	return &Actuator{cfg: cfg}, nil
}

// Timing, each from a named figure of the settings.

// RetryEvery is how often the actuator decides again without a change of
// the journal: a report, Lease or etcd read that failed is tried again,
// and a command waiting for its term judged again. Twice a sample period,
// the pace at which the controller decides and reads the reports: sooner
// would be read no sooner.
func RetryEvery(s settings.Settings) time.Duration { return s.SamplePeriod / 2 }

// RestartTimeout bounds a k3s restart: learner_stall_time, the deadline
// the controller gives every step that restarts k3s (admit, settle, and the
// abort's standby-in all wait at most that long, docs/acting.md): a restart
// still under way after it has failed its step already.
func RestartTimeout(s settings.Settings) time.Duration { return s.LearnerStallTime }

// EtcdTimeout bounds one call to the local member: etcd's own request
// timeout (etcdserver's ReqTimeout: 5 s and two election timeouts), within
// which it answers a proposal or gives up; MoveLeader waits at most one
// election timeout for the transfer.
func EtcdTimeout(s settings.Settings) time.Duration { return 5*time.Second + 2*s.ElectionTimeout }

// Run carries out commands until ctx ends: it decides at every change of
// the journal and every RetryEvery. It returns an error only when its local
// state cannot be read at start: acting without it could carry a command
// out twice.
func (a *Actuator) Run(ctx context.Context) error {
	st, err := a.cfg.State.Load()
	if err != nil {
		return fmt.Errorf("actuator: %w (remove the file only once no swap is open: it is what keeps a command from being carried out twice)", err)
	}
	a.state = st
	a.cfg.Log.Info("actuator started", "restart", a.cfg.Restart.String(), "commands_remembered", len(st.Entries))
	t := a.cfg.Clock.NewTicker(RetryEvery(a.cfg.Settings))
	defer t.Stop()
	readRecord := true
	for {
		if readRecord {
			if err := a.readRecord(ctx); err != nil {
				a.cfg.Log.Warn("cannot read this host's actuator record; trying again", "err", err)
			} else {
				readRecord = false
			}
		}
		if !readRecord {
			a.Round(ctx)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.cfg.Journal.Changed():
		case <-t.C():
		}
	}
}

func (a *Actuator) readRecord(ctx context.Context) error {
	r, err := a.cfg.Record.Get(ctx)
	if err != nil {
		return err
	}
	a.published = r
	return nil
}

// State is the local state as the actuator holds it.
func (a *Actuator) State() State { return a.state }

// Round is one decision and what it asks: reads the journal from the
// watch's cache, gathers the term and the etcd view when the decision asks
// for them, and carries out what it decides.
func (a *Actuator) Round(ctx context.Context) {
	j, synced, err := a.cfg.Journal.Journal()
	if !synced {
		return
	}
	if err != nil {
		a.idle("journal unreadable", slog.String("err", err.Error()))
		return
	}
	in := Input{Node: a.cfg.Node, Journal: j, State: a.state, Published: a.published, Now: a.cfg.Clock.Now()}
	for range 3 { // at most the Lease and etcd to gather
		d := Decide(in)
		switch d.Kind {
		case KindNeedLease:
			term, found, err := a.cfg.Lease.Term(ctx)
			if err != nil {
				a.idle("cannot read the Lease; trying again", slog.String("err", err.Error()))
				return
			}
			in.LeaseAbsent = !found
			if found {
				in.Term = &term
			}
			continue
		case KindNeedEtcd:
			ectx, cancel := a.timeout(ctx, EtcdTimeout(a.cfg.Settings))
			v, err := a.cfg.Etcd.View(ectx)
			cancel()
			if err != nil {
				a.idle("cannot read the local etcd member; trying again", slog.String("command", cmdName(d.Command)), slog.String("err", err.Error()))
				return
			}
			in.Etcd = &v
			continue
		case KindNeedEtcdPort:
			ectx, cancel := a.timeout(ctx, EtcdTimeout(a.cfg.Settings))
			up, err := a.cfg.Etcd.Listening(ectx)
			cancel()
			if err != nil {
				a.idle("cannot tell whether the local etcd member listens; trying again", slog.String("command", cmdName(d.Command)), slog.String("err", err.Error()))
				return
			}
			in.EtcdListening = &up
			continue
		}
		a.carry(ctx, d)
		return
	}
}

func (a *Actuator) carry(ctx context.Context, d Decision) {
	log := a.cfg.Log
	if d.Kind != KindIdle {
		a.last = ""
	}
	switch d.Kind {
	case KindIdle:
		if d.Code != "" {
			a.idle(d.Detail, slog.String("code", string(d.Code)), slog.String("command", cmdName(d.Command)))
		}
	case KindPublish:
		a.publish(ctx, d.Report)
	case KindArm:
		if err := a.record(d.Entry); err != nil {
			log.Error("cannot write the local state; the command waits", "command", cmdName(d.Command), "err", err)
			return
		}
		log.Info("command armed: k3s restarts once the local member is out of etcd", "command", cmdName(d.Command), "verb", d.Command.Verb)
		a.publish(ctx, d.Report)
	case KindRefuse, KindInterrupted:
		if err := a.record(d.Entry); err != nil {
			log.Error("cannot write the local state; the command waits", "command", cmdName(d.Command), "err", err)
			return
		}
		log.Warn("command refused", "command", cmdName(d.Command), "verb", d.Command.Verb, "code", d.Code, "detail", d.Detail)
		a.publish(ctx, d.Report)
	case KindAct:
		// Written before it starts: an actuator that stops from here on
		// finds it started and never carries it out again.
		if err := a.record(d.Entry); err != nil {
			log.Error("cannot write the local state; the command waits", "command", cmdName(d.Command), "err", err)
			return
		}
		log.Info("carrying out command", "command", cmdName(d.Command), "verb", d.Command.Verb, "action", d.Action.Kind, "target", d.Command.Target, "restart", d.Action.Restart)
		began := a.cfg.Clock.Now()
		e := d.Entry
		note, err := a.do(ctx, d.Command, d.Action)
		t := a.cfg.Clock.Now()
		e.Ended, e.Note = &t, note
		if err != nil {
			e.Outcome, e.Error = OutcomeFailed, err.Error()
			log.Error("command failed", "command", cmdName(d.Command), "verb", d.Command.Verb, "err", err, "seconds", t.Sub(began).Seconds())
		} else {
			e.Outcome = OutcomeDone
			log.Info("command done", "command", cmdName(d.Command), "verb", d.Command.Verb, "note", note, "seconds", t.Sub(began).Seconds())
		}
		if err := a.record(e); err != nil {
			// The report still goes out; the next start finds the command
			// started and reports it interrupted, never redoes it.
			log.Error("cannot write the command's end to the local state", "command", cmdName(d.Command), "err", err)
		}
		a.publish(ctx, e.Report())
	}
}

// do carries out action; the note says why there was nothing to do.
func (a *Actuator) do(ctx context.Context, c acting.Command, act Action) (string, error) {
	s := a.cfg.Settings
	switch act.Kind {
	case ActNothing:
		return act.Note, nil
	case ActWriteDropIn:
		if err := WriteDropIn(a.cfg.HostRoot, acting.DropInPath, act.DropIn); err != nil {
			return "", err
		}
		if !act.Restart {
			return "", nil
		}
		return "", a.restart(ctx, c)
	case ActRestart:
		return "", a.restart(ctx, c)
	case ActMoveLeader:
		ectx, cancel := a.timeout(ctx, EtcdTimeout(s))
		defer cancel()
		err := a.cfg.Etcd.MoveLeader(ectx, act.To)
		if errors.Is(err, ErrNotLeader) {
			return "the local member stopped leading before the call: nothing to move", nil
		}
		return "", err
	case ActRemoveMember:
		ectx, cancel := a.timeout(ctx, EtcdTimeout(s))
		defer cancel()
		err := a.cfg.Etcd.RemoveMember(ectx, act.Member)
		if errors.Is(err, ErrMemberNotFound) {
			return "member " + FormatMemberID(act.Member) + " was gone before the call", nil
		}
		return "", err
	}
	return "", fmt.Errorf("action %q unknown", act.Kind)
}

func (a *Actuator) restart(ctx context.Context, c acting.Command) error {
	rctx, cancel := a.timeout(ctx, RestartTimeout(a.cfg.Settings))
	defer cancel()
	return a.cfg.Restart.Restart(rctx, RestartToken(c.PlanID, c.Seq, c.Term))
}

// timeout is ctx ended after d by the actuator's clock.
func (a *Actuator) timeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	t := a.cfg.Clock.NewTimer(d)
	go func() {
		select {
		case <-t.C():
			cancel(fmt.Errorf("deadline of %v passed", d))
		case <-cctx.Done():
			t.Stop()
		}
	}()
	return cctx, func() { cancel(context.Canceled) }
}

func (a *Actuator) record(e Entry) error {
	next := a.state.With(e)
	next.Node = a.cfg.Node
	if err := a.cfg.State.Save(next); err != nil {
		return err
	}
	a.state = next
	return nil
}

func (a *Actuator) publish(ctx context.Context, r acting.Report) {
	if err := a.cfg.Record.Put(ctx, r); err != nil {
		a.cfg.Log.Warn("cannot write the report; trying again", "plan", r.PlanID, "seq", r.Seq, "err", err)
		return
	}
	a.published = &r
	a.cfg.Log.Info("reported", "plan", r.PlanID, "seq", r.Seq, "term", r.Term, "done", r.Done, "refused", r.Refused, "error", r.Error)
}

func (a *Actuator) idle(msg string, attrs ...slog.Attr) {
	key := msg
	for _, at := range attrs {
		key += "|" + at.String()
	}
	if key == a.last {
		return
	}
	a.last = key
	a.cfg.Log.LogAttrs(context.Background(), slog.LevelInfo, msg, attrs...)
}

func cmdName(c acting.Command) string {
	if c.PlanID == "" {
		return ""
	}
	return fmt.Sprintf("%s/%d@%d", c.PlanID, c.Seq, c.Term)
}
