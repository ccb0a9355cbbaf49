package demo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/internal/connect"
	"github.com/fleet-role/fleet-role/internal/quantile"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// The demo's hosts all share this machine, so before it starts anything the
// demo measures whether the machine can hold the limits it will judge them
// by: a machine whose loopback connects or whose wake-ups are slower than
// the limits would leave every host unfit and the baseline never reached.

// Machine is what the preflight measured on this machine.
type Machine struct {
	// Connects are loopback TCP connects, taken as the probes take them
	// (internal/connect, one to each voter at once); Failed counts those
	// that failed, which the limit counts as over it.
	Connects []time.Duration
	Failed   int
	// TimerLate is how late a short sleep woke: the scheduling latency of a
	// process waking on a timer, as etcd's heartbeat ticker and the probes'
	// period do.
	TimerLate []time.Duration
	// Wakeups run from a channel send to the goroutine blocked on it
	// running: the latency of a process woken by another, as a member
	// answering a peer is.
	Wakeups []time.Duration
}

// Check is one measurement set beside its limit.
type Check struct {
	Name    string
	Tail    time.Duration // at the settings' tail percentile; failedReading when a failed reading is in the tail
	Samples int
	Limit   settings.Limit
	OK      bool
}

// Preflight is the preflight's verdict.
type Preflight struct {
	Settings settings.Settings
	Checks   []Check
	OK       bool
	// ElectionTimeout is the least election timeout under which every
	// measured tail is within its limit, rounded up to a tenth of a
	// second; zero when the machine holds the limits in force, or when no
	// timeout would (a connect failed, or more than etcd's 50 s is needed).
	ElectionTimeout time.Duration
}

// failedReading stands for a failed connect among the readings: over any
// limit, as the settings count a failed connect.
const failedReading = time.Duration(math.MaxInt64)

// maxElectionTimeout is etcd's upper bound on the election timeout
// (docs/facts.md, "etcd timing").
const maxElectionTimeout = 50 * time.Second

// WakeupLimit is the most a process may take to wake at the tail: half the
// round-trip limit, since a peer round trip wakes at least two processes
// (the member that answers, and the one that reads the answer). With the
// round trip at a tenth of the election timeout this is a twentieth of it,
// the connect limit's figure.
func WakeupLimit(s settings.Settings) settings.Limit {
	rtt := s.RTTLimit()
	d := rtt.Duration() / 2
	return settings.Limit{Name: "wakeup", Value: d.Seconds(), Unit: "seconds", Rule: settings.AtMost,
		Basis: fmt.Sprintf("peer_rtt limit %v / 2 = %v: a round trip wakes two processes", rtt.Duration(), d),
		Derivation: "a peer round trip (at most a tenth of the election timeout, etcd tuning) wakes at least two processes, " +
			"the member that answers and the one that reads the answer, so each wake-up may take at most half of it"}
}

// Judge sets the measurements beside the limits of s, each at s's tail
// percentile, the percentile the demo's verdicts use. It is pure: the
// figures in, the verdict out.
func Judge(s settings.Settings, m Machine) Preflight {
	connects := append([]time.Duration(nil), m.Connects...)
	for range m.Failed {
		connects = append(connects, failedReading)
	}
	p := Preflight{Settings: s, OK: true}
	for _, c := range []struct {
		name  string
		v     []time.Duration
		limit settings.Limit
	}{
		{"loopback connect", connects, s.ConnectLimit()},
		{"timer wake-up lateness", m.TimerLate, WakeupLimit(s)},
		{"goroutine wake-up", m.Wakeups, WakeupLimit(s)},
	} {
		ch := Check{Name: c.name, Samples: len(c.v), Limit: c.limit}
		tail, ok := tailOf(c.v, s.TailPercentile)
		ch.Tail = tail
		ch.OK = ok && c.limit.OK(tail.Seconds())
		if !ch.OK {
			p.OK = false
		}
		p.Checks = append(p.Checks, ch)
	}
	if !p.OK {
		p.ElectionTimeout = p.needed()
	}
	return p
}

// tailOf is the nearest-rank percentile p of v; false when v is empty.
func tailOf(v []time.Duration, p float64) (time.Duration, bool) {
	f := make([]float64, len(v))
	for i, d := range v {
		f[i] = float64(d)
	}
	q, ok := quantile.High(f, p)
	if !ok {
		return 0, false
	}
	if q >= float64(failedReading) { // float64 rounds MaxInt64 up: converted back it would wrap
		return failedReading, true
	}
	return time.Duration(q), true
}

// needed is the least election timeout, to a tenth of a second, under which
// every check would be within its limit: each limit is a fixed share of the
// election timeout, so the timeout scales by the worst tail's ratio to its
// limit. Zero when none would do.
func (p Preflight) needed() time.Duration {
	var need time.Duration
	for _, c := range p.Checks {
		if c.Samples == 0 || c.Tail == failedReading || c.Limit.Value <= 0 {
			return 0
		}
		share := c.Limit.Value / p.Settings.ElectionTimeout.Seconds() // the limit's share of the election timeout
		need = max(need, time.Duration(math.Ceil(float64(c.Tail)/share)))
	}
	// A tenth of a second: the election timeout is set in whole
	// milliseconds, and a figure a reader can type is worth the rounding.
	const step = 100 * time.Millisecond
	need = (need + step - 1) / step * step
	if need > maxElectionTimeout {
		return 0
	}
	return need
}

// Report says the verdict in words, with every figure and, when the machine
// cannot hold the limits, what to do.
func (p Preflight) Report() string {
	var b strings.Builder
	pct := settings.PercentileName(p.Settings.TailPercentile)
	fmt.Fprintf(&b, "preflight: this machine against the demo's limits (election timeout %s, p%s of each):\n", p.Settings.ElectionTimeout, pct)
	for _, c := range p.Checks {
		mark := "ok"
		if !c.OK {
			mark = "TOO SLOW"
		}
		tail := "no readings"
		switch {
		case c.Tail == failedReading:
			tail = "a failed connect"
		case c.Samples > 0:
			tail = fmtDuration(c.Tail)
		}
		fmt.Fprintf(&b, "  %-4s %s: p%s %s over %d readings, must be at most %s  [%s]\n",
			mark, c.Name, pct, tail, c.Samples, fmtDuration(c.Limit.Duration()), c.Limit.Basis)
	}
	if p.OK {
		return b.String()
	}
	b.WriteString("The demo's hosts all share this machine and are judged by these limits, so with these figures every host would read unfit and the baseline would never be reached.\n")
	switch {
	case p.ElectionTimeout > 0:
		fmt.Fprintf(&b, "Run it when the machine is quieter, or with a longer election timeout, which every limit scales with: --election-timeout=%s (connects and wake-ups then at most %s; the heartbeat is a tenth of it, as etcd's own timing is). The demo's own three members add load of their own.\n",
			p.ElectionTimeout, fmtDuration(p.ElectionTimeout/20))
	default:
		fmt.Fprintf(&b, "No election timeout up to etcd's %s would hold them (a loopback connect failed, or the tail is too long): run it on a machine that is not this busy.\n", maxElectionTimeout)
	}
	return b.String()
}

func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// ErrMachineTooSlow is returned when the preflight finds that this machine
// cannot hold the demo's limits.
var ErrMachineTooSlow = errors.New("this machine cannot hold the demo's limits")

// preflightRounds is how many rounds of readings the preflight takes: four
// windows' worth at the demo's percentile, so that its tail forgives as
// many outliers per reading as a host's window does, and four times over.
func preflightRounds(s settings.Settings) int { return 4 * s.MinWindow() }

// preflightGap is the sleep between rounds, the timer whose lateness is
// read: a tenth of the heartbeat, short enough that the rounds take about a
// window's tenth and long enough that the process truly sleeps.
func preflightGap(s settings.Settings) time.Duration { return s.HeartbeatInterval / 10 }

// MeasureMachine takes the preflight's readings: per round, one sleep, one
// loopback connect to each voter's stand-in at once, and one goroutine
// wake-up.
func MeasureMachine(ctx context.Context, s settings.Settings) (Machine, error) {
	var m Machine
	var peers []string
	for range voters {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return m, fmt.Errorf("preflight: listen on loopback: %w", err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		peers = append(peers, l.Addr().String())
	}
	// The woken goroutine has an OS thread of its own, so that waking it
	// wakes a thread, as one process answering another does, rather than
	// running it next on the sender's.
	sent := make(chan time.Time)
	woke := make(chan time.Duration)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for t := range sent {
			woke <- time.Since(t)
		}
	}()
	defer close(sent)
	gap := preflightGap(s)
	timeout := s.ConnectLimit().Duration() * 2 // past the limit is all a reading needs to show
	for range preflightRounds(s) {
		if err := ctx.Err(); err != nil {
			return m, err
		}
		t0 := time.Now()
		time.Sleep(gap)
		m.TimerLate = append(m.TimerLate, time.Since(t0)-gap)
		for _, r := range connect.Measure(ctx, peers, timeout) {
			if !r.OK {
				m.Failed++
				continue
			}
			m.Connects = append(m.Connects, time.Duration(r.Seconds*float64(time.Second)))
		}
		sent <- time.Now()
		m.Wakeups = append(m.Wakeups, <-woke)
	}
	return m, nil
}
