// Package controller is the loop the fleet-role Deployment runs: each
// interval it reads the probes' records (from an informer's cache) and the
// Nodes, decides with the pure core in internal/decide, and publishes the
// decision as status.json of the fleet-role-status ConfigMap. With acting
// guided or auto it also carries out the swap it publishes (acting.go); by
// default it changes nothing.
package controller

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/nodeevents"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/internal/statuspage"
)

// Config is everything the loop needs.
type Config struct {
	Settings settings.Settings
	// Store holds the status ConfigMap.
	Store kube.ConfigMaps
	// Records lists the probes' records.
	Records kube.RecordSource
	Nodes   kube.Nodes
	Log     *slog.Logger
	Metrics *Metrics // optional
	// Clock is what the controller reads time from: its decisions' now,
	// its ticker, its readiness and its run for the Lease. Nil is the real
	// clock; tests step a fake one.
	Clock clock.WithTicker
	// Page, when set, is given every decision, for the status page the
	// controller serves (internal/statuspage).
	Page *statuspage.Server
	// Events, when set, records an Event on a host's Node when its verdict
	// changes and when the swap is advised or held by another step
	// (internal/nodeevents).
	Events *nodeevents.Recorder
	// Policy, when set, is how the controller reads the admission policy
	// that holds each probe to its own record, once every entry_unchanged
	// (protection.go); without it the records' own markers alone say
	// whether they are protected.
	Policy kube.PolicyReader
	// Swap is where a controller that acts (acting guided or auto) keeps
	// its journal and reads the approval and the actuators' reports;
	// required then, unused otherwise.
	Swap kube.SwapStore
}

// Controller holds what one decision passes to the next.
type Controller struct {
	cfg Config
	log *slog.Logger
	// assembler reads the records, and keeps what it assembled of a
	// record in the tail layout until the record or its tail changes.
	assembler record.Assembler

	previous *status.Status // the last decision, in memory; read from the ConfigMap once at start
	// previousAt is previous's generation by this process's clock when
	// another writer's clock wrote it (leader.go, previousAt); zero once
	// this process has decided.
	previousAt  time.Time
	loaded      bool
	lastWritten [sha256.Size]byte // the fingerprint of the last decision written (status.Status.Fingerprint): the document itself is a ConfigMap's worth at a large fleet
	lastWriteAt time.Time         // when it was written
	lastOutcome string            // its decision and verdicts (outcomeOf)

	// term is the spell of leading the Lease that the decisions run in,
	// nil without leader election (leader.go).
	term *term

	mu          sync.Mutex
	lastSuccess time.Time
	lastErr     error
	elector     *elector // set by RunElected, read by Ready

	// source is where the settings in force came from, for the status;
	// nil while no watch follows the settings ConfigMap (live.go).
	source *settings.Source
	// pending is a change of the settings handed over by SetSettings,
	// taken at the next decision (live.go).
	pendingMu sync.Mutex
	pending   *pendingSettings
	// readWindow is the window records are read by until readUntil, after
	// the settings shrank the window (live.go, readWindowAt).
	readWindow int
	readUntil  time.Time

	// guard is the controller's own knowledge of the records' protection
	// (protection.go), read and carried by tick alone.
	guard guard

	// steady is since when the same swap has been published (acting.go).
	steady steady
}

// New checks the configuration and returns a controller ready to Run.
func New(cfg Config) (*Controller, error) {
	if cfg.Store == nil || cfg.Records == nil || cfg.Nodes == nil {
		return nil, errors.New("controller needs a status store, a record source and a node lister")
	}
	if cfg.Settings.Acts() && cfg.Swap == nil {
		return nil, fmt.Errorf("acting is %s: the controller needs a swap store for its journal", cfg.Settings.Acting)
	}
	if !cfg.Settings.DryRun && !cfg.Settings.Acts() {
		return nil, fmt.Errorf("dry_run is false with acting %s: only acting guided or auto changes the cluster", cfg.Settings.Acting)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Controller{cfg: cfg, log: cfg.Log, guard: guard{read: cfg.Policy}}, nil
}

// DecisionsPerPeriod is how often the controller decides per sample period.
// Twice, so that a record written just after a decision is judged half a
// period later rather than a whole one: the hysteresis publishes a swap at
// the first decision after every voter has written again (docs/limits.md,
// "No flapping"), and each probe writes at its own phase. Writes of the
// status stay at most one a period unless the decision or a verdict changed
// (tick).
const DecisionsPerPeriod = 2

// Run decides DecisionsPerPeriod times a sample period until ctx is
// cancelled.
func (c *Controller) Run(ctx context.Context) error {
	c.takeSettings()
	interval := c.cfg.Settings.SamplePeriod / DecisionsPerPeriod
	c.log.Info("controller started", "interval", interval, "dry_run", c.cfg.Settings.DryRun, "acting", c.cfg.Settings.Acting)
	ticker := c.cfg.Clock.NewTicker(interval)
	defer func() { ticker.Stop() }()
	for {
		if _, err := c.Tick(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("decision loop failed; trying again next interval", "err", err)
		}
		select {
		case <-ctx.Done():
			c.log.Info("controller stopped")
			return nil
		case <-ticker.C():
		}
		// A change of the settings is taken here, between two decisions:
		// the next decision is the first by the new figures, and a new
		// period sets the interval from now.
		if c.takeSettings() {
			ticker.Stop()
			interval = c.cfg.Settings.SamplePeriod / DecisionsPerPeriod
			ticker = c.cfg.Clock.NewTicker(interval)
		}
	}
}

// Tick is one decision: read, decide, publish when the document changed.
func (c *Controller) Tick(ctx context.Context) (*status.Status, error) {
	start := c.cfg.Clock.Now()
	st, err := c.tick(ctx)
	c.cfg.Metrics.observeLoop(c.cfg.Clock.Since(start), err)
	c.mu.Lock()
	c.lastErr = err
	if err == nil {
		c.lastSuccess = c.cfg.Clock.Now()
	}
	c.mu.Unlock()
	return st, err
}

func (c *Controller) tick(ctx context.Context) (*status.Status, error) {
	s := c.cfg.Settings
	if !c.loaded {
		c.loadPrevious(ctx)
	}
	records, err := c.cfg.Records.List(ctx)
	if err != nil {
		return nil, err
	}
	c.assembler.Limit = record.CapBytes(s.Window, s.MaxServers)
	entries, unreadable := c.assembler.ReadAll(records)
	kubeNodes, err := c.cfg.Nodes.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	now := c.cfg.Clock.Now()
	st := decide.Decide(decide.Input{
		Now:        now,
		Settings:   s,
		Nodes:      kube.NodesFromKube(kubeNodes, s),
		Entries:    entries,
		Unreadable: unreadable,
		Previous:   c.previous,
		PreviousAt: c.previousAt,
		ReadWindow: c.readWindowAt(now),
		Protection: c.protection(ctx, now),
		Unheld:     unheldOf(c.cfg.Records),
	})
	c.withActing(ctx, &st, kubeNodes, now)
	if c.source != nil {
		src := *c.source
		st.Settings.Source = &src
	}
	if c.term != nil {
		st.Writer = c.term.writer
	}
	c.cfg.Metrics.observeStatus(&st)
	c.cfg.Page.Observe(&st)
	c.cfg.Events.Observe(c.previous, &st, kubeNodes)
	c.logChange(&st)

	// Write when the decision changed, and at least once a window so that
	// a reader can tell the controller is alive. A change of figures alone
	// waits until most of a period has passed since the last write (three
	// quarters, so that a late tick does not skip a whole one), keeping the
	// status's writes to the etcd it judges at one a period at most; a
	// changed decision or verdict is written at once. Whether it changed is
	// its fingerprint, which leaves out the ages that change every round;
	// it and the document, a ConfigMap's worth at a large fleet, are
	// encoded only when a write may be due.
	window := time.Duration(s.Window) * s.SamplePeriod
	outcome := outcomeOf(&st)
	since := now.Sub(c.lastWriteAt)
	overdue := c.lastWriteAt.IsZero() || since >= window
	due := since >= s.SamplePeriod*3/4 || outcome != c.lastOutcome
	if overdue || due {
		fingerprint, err := st.Fingerprint()
		if err != nil {
			return nil, err
		}
		if overdue || fingerprint != c.lastWritten {
			// The page's history, this decision the newest, rides with the
			// status so that a restart or a failover keeps it.
			st.History = c.cfg.Page.ExportHistory()
			doc, err := st.Marshal()
			if err != nil {
				return nil, fmt.Errorf("encode status: %w", err)
			}
			text := string(doc)
			write := func() error { return c.cfg.Store.PatchKey(ctx, s.StatusConfigMap, status.StatusKey, &text) }
			if c.term != nil {
				write = func() error { return c.term.publish(ctx, text) }
			}
			if err := write(); err != nil {
				// The decision stands for the next round even when it could not
				// be published, so the memory it carries is not lost.
				c.previous, c.previousAt = remembered(&st), time.Time{}
				return &st, fmt.Errorf("write configmap %s: %w", s.StatusConfigMap, err)
			}
			c.lastWritten = fingerprint
			c.lastWriteAt = now
			c.lastOutcome = outcome
			c.cfg.Metrics.written()
		}
	}
	c.previous, c.previousAt = remembered(&st), time.Time{}
	return &st, nil
}

// remembered is what the next decision reads of this one: decide.Input's
// Previous reads each host's name, verdict and observation, the decision
// and the memory; logChange reads the decision and its reasons. The hosts'
// reasons, most of a Status at a large fleet (a few MB at 500 hosts), and
// the link matrix are left out, so that they are not held between periods and live beside the
// next decision's own while it is made: the collector lets the heap grow
// to twice what is live when it runs, so every byte held raises the peak
// twice over (docs/performance.md).
func remembered(st *status.Status) *status.Status {
	p := &status.Status{Schema: st.Schema, Form: st.Form, GeneratedAt: st.GeneratedAt, DryRun: st.DryRun,
		Decision: st.Decision, Memory: st.Memory, Records: st.Records}
	p.Hosts = make([]status.Host, len(st.Hosts))
	for i, h := range st.Hosts {
		h.Reasons, h.Deciding = nil, nil
		p.Hosts[i] = h
	}
	return p
}

// outcomeOf is what a reader acts on: the decision, every host's verdict,
// and the swap under way's phase and step.
func outcomeOf(st *status.Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", st.Decision.Action, st.Decision.Out, st.Decision.In)
	if a := st.Acting; a != nil && a.Journal != nil {
		fmt.Fprintf(&b, "; swap %s %s", a.Journal.PlanID, a.Journal.Phase)
		if s := a.Journal.Current(); s != nil {
			fmt.Fprintf(&b, " %s %s", s.Name, s.State)
		}
		if a.Journal.Abort != nil {
			fmt.Fprintf(&b, " undo %v", a.Journal.Abort.Undo)
		}
	}
	for _, h := range st.Hosts {
		fmt.Fprintf(&b, "; %s %s", h.Name, h.Verdict)
	}
	return b.String()
}

// loadPrevious reads the status written before this start, once, so that the
// cooldown and the observations of each entry survive a restart.
func (c *Controller) loadPrevious(ctx context.Context) {
	s := c.cfg.Settings
	data, err := c.cfg.Store.Get(ctx, s.StatusConfigMap)
	if err != nil {
		c.log.Warn("read previous status failed; will try again", "configmap", s.StatusConfigMap, "err", err)
		return
	}
	c.loaded = true
	c.takePrevious(data)
}

// takePrevious takes the previous decision from the status ConfigMap's
// data, when it holds a readable one, and returns its writer (nil for
// none, or a controller that ran for no Lease).
func (c *Controller) takePrevious(data map[string]string) *status.Writer {
	raw, ok := data[status.StatusKey]
	if !ok || raw == "" {
		return nil
	}
	prev, err := status.UnmarshalStatus([]byte(raw))
	if err != nil {
		c.log.Warn("previous status unreadable; starting without it", "err", err)
		return nil
	}
	c.previous = remembered(prev)
	// The page's history goes on from the one the status carried: the
	// verdicts of the decisions before this start or term, with their times
	// (a status in a reduced form, or of an older version, carries none).
	if prev.History != nil {
		if err := c.cfg.Page.RestoreHistory(prev.History); err != nil {
			c.log.Warn("the previous status's history is unreadable; the page's starts empty", "err", err)
		}
	}
	return prev.Writer
}

// logChange logs one structured line when the decision changes: the action,
// out, in, and the reasons that made it. A change is one of the action, out,
// in, or which reasons made it; their figures (a window filling up, a
// cooldown running down) change every round and are not a change.
func (c *Controller) logChange(st *status.Status) {
	d := st.Decision
	why := keyReasons(d)
	if c.previous != nil {
		p := c.previous.Decision
		if p.Action == d.Action && p.Out == d.Out && p.In == d.In &&
			slices.EqualFunc(keyReasons(p), why, func(a, b status.Reason) bool { return a.Code == b.Code && a.Subject == b.Subject }) {
			return
		}
	}
	summaries := make([]string, len(why))
	for i, r := range why {
		summaries[i] = status.Summary(r)
	}
	c.log.Info("decision", "action", d.Action, "out", d.Out, "in", d.In, "reasons", summaries, "dry_run", c.cfg.Settings.DryRun)
}

// keyReasons are the reasons that made a decision: for a swap, why the voter
// leaves and why the standby comes in; for none, the first steps and gates
// that failed. The passing steps before them (etcd present, enough eligible
// hosts) say nothing about this decision.
func keyReasons(d status.Decision) []status.Reason {
	const most = 3
	var out []status.Reason
	for _, r := range d.Reasons {
		var key bool
		if d.Action == status.ActionSwap {
			key = r.Code.Leaving() || r.Code == status.CodeCandidateChosen
		} else {
			key = !r.OK
		}
		if key && len(out) < most {
			out = append(out, r)
		}
	}
	return out
}

// Ready reports whether a decision succeeded within the last three sample
// periods: six decisions at DecisionsPerPeriod, so that one or two failed
// rounds (an API server restarting) do not take the controller out of its
// Service, and a controller that stopped deciding is not ready for long.
//
// note says, when the controller is ready, what a reader of /readyz should
// know beside it: a follower says who leads.
func (c *Controller) Ready() (note string, err error) {
	if handled, note, err := c.readyElected(); handled {
		return note, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := 3 * c.cfg.Settings.SamplePeriod
	if c.lastSuccess.IsZero() {
		if c.lastErr != nil {
			return "", fmt.Errorf("no decision yet: %w", c.lastErr)
		}
		return "", errors.New("no decision yet")
	}
	if age := c.cfg.Clock.Now().Sub(c.lastSuccess); age > limit {
		return "", fmt.Errorf("last successful decision %s ago, over three sample periods (%s): %v", age.Round(10*time.Millisecond), limit, c.lastErr)
	}
	return "", nil
}
