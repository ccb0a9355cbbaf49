package controller

import (
	"context"
	"log/slog"
	"time"

	"github.com/fleet-role/fleet-role/internal/status"
	"k8s.io/utils/clock"
)

// Remembered is remembered, for the tests of package controller_test.
func Remembered(st *status.Status) *status.Status { return remembered(st) }

// Elector is one run for the Lease, driven one try at a time by the tests
// of package controller_test on a clock they step.
type Elector struct{ el *elector }

// NewElector is the elector RunElected makes, on clk, logging to log.
func NewElector(e Election, clk clock.Clock, log *slog.Logger, status string) (*Elector, error) {
	if err := e.validate(); err != nil {
		return nil, err
	}
	return &Elector{el: &elector{e: e, clock: clk, log: log, status: status}}, nil
}

// Attempt names how one try ended.
type Attempt string

// Try is one try for the Lease, as acquire and renew make it.
func (x *Elector) Try(ctx context.Context) (Attempt, error) {
	a, err := x.el.try(ctx)
	return [...]Attempt{attemptLeads: "leads", attemptHeld: "held", attemptGone: "gone", attemptFailed: "failed"}[a], err
}

// Leading is whether the elector leads now, by its clock.
func (x *Elector) Leading() bool { return x.el.leading() }

// Release gives the Lease up, as RunElected does on a stop.
func (x *Elector) Release(ctx context.Context) error { return x.el.release(ctx) }

// StepDown ends its term, as renew does on seeing another holder.
func (x *Elector) StepDown() { x.el.stepDown() }

// Term is the term of the Lease as it last saw or wrote it.
func (x *Elector) Term() int32 {
	x.el.mu.Lock()
	defer x.el.mu.Unlock()
	return x.el.observed.Transitions
}

// ClockOf is how far holder's clock reads ahead of the elector's, as its
// renewals told it.
func (x *Elector) ClockOf(holder string) (time.Duration, bool) { return x.el.clockOf(holder) }

// PreviousAt is previousAt, for the tests of package controller_test.
var PreviousAt = previousAt

// TakeSettings takes a change handed over by SetSettings, as Run does
// between two decisions, for the tests that call Tick themselves.
func (c *Controller) TakeSettings() bool { return c.takeSettings() }
