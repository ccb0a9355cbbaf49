package probe

import (
	"context"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/wakeup"
)

// SettingsTaker is a Sampler whose readings derive from the settings (Host:
// its timeouts and its wake-up timer's interval); the loop hands it each
// change it takes, between two samples.
type SettingsTaker interface {
	TakeSettings(settings.Settings)
}

// SetSettings hands the probe the settings now in force (internal/livesettings
// calls it for every version of the settings ConfigMap it judges). The probe
// takes them at its next period boundary: the sample after it is the first
// by them, its window is trimmed to a smaller window at once, and a changed
// sample period starts the ticker anew. It does not block. Settings that
// apply only at a restart must not differ from those in force
// (settings.LiveChange refuses such a change before it comes here).
func (p *Prober) SetSettings(s settings.Settings) {
	p.pendingMu.Lock()
	defer p.pendingMu.Unlock()
	p.pending = &s
}

// takeSettings takes a pending change, in the loop, and says whether the
// sample period changed with it. A changed heartbeat interval restarts the
// sampler's reading beside the loop (the wake-up timer is due once a
// heartbeat interval), through *stopBeside, which it replaces.
func (p *Prober) takeSettings(ctx context.Context, stopBeside *func()) (periodChanged bool) {
	p.pendingMu.Lock()
	next := p.pending
	p.pending = nil
	p.pendingMu.Unlock()
	if next == nil {
		return false
	}
	old := p.cfg.Settings
	keys := settings.Changed(old, *next)
	if len(keys) == 0 {
		return false
	}
	p.mu.Lock()
	p.cfg.Settings = *next
	p.mu.Unlock()
	if t, ok := p.cfg.Sampler.(SettingsTaker); ok {
		if stopBeside != nil && next.HeartbeatInterval != old.HeartbeatInterval {
			(*stopBeside)()
			t.TakeSettings(*next)
			*stopBeside = p.startBeside(ctx)
		} else {
			t.TakeSettings(*next)
		}
	}
	p.log.Info("settings applied", "changed", keys, "period", next.SamplePeriod, "window", next.Window)
	return next.SamplePeriod != old.SamplePeriod
}

// TakeSettings implements SettingsTaker: the connect and scrape timeouts
// follow the election timeout and the period, the wake-up timer the
// heartbeat interval. The loop calls it between two samples, with the
// reading beside it stopped when the heartbeat interval changed.
func (h *Host) TakeSettings(s settings.Settings) {
	h.ConnectTimeout = ReadingTimeout(s)
	h.ScrapeTimeout = ReadingTimeout(s)
	if h.Wakeup != nil && h.Wakeup.Interval() != s.HeartbeatInterval {
		h.Wakeup = wakeup.New(s.HeartbeatInterval)
	}
}
