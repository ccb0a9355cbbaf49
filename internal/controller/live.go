package controller

import (
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/statuspage"
)

// pendingSettings is a change handed over by SetSettings.
type pendingSettings struct {
	settings settings.Settings
	source   settings.Source
}

// SetSettings hands the controller the settings now in force and where they
// came from (internal/livesettings calls it for every version of the
// settings ConfigMap it judges). The controller takes them between two
// decisions: the next decision is the first by them, its status says their
// source, and a changed sample period sets the decision interval anew. It
// does not block. Settings that apply only at a restart must not differ
// from those in force (settings.LiveChange refuses such a change before it
// comes here).
func (c *Controller) SetSettings(s settings.Settings, src settings.Source) {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	c.pending = &pendingSettings{settings: s, source: src}
}

// takeSettings takes a pending change, and says whether the sample period
// changed with it.
func (c *Controller) takeSettings() (periodChanged bool) {
	c.pendingMu.Lock()
	p := c.pending
	c.pending = nil
	c.pendingMu.Unlock()
	if p == nil {
		return false
	}
	src := p.source
	c.source = &src
	if keys := settings.Changed(c.cfg.Settings, p.settings); len(keys) > 0 {
		c.log.Info("settings applied", "changed", keys, "configmap", src.ConfigMap, "resource_version", src.ResourceVersion)
	}
	periodChanged = p.settings.SamplePeriod != c.cfg.Settings.SamplePeriod
	if old := c.cfg.Settings.Window; p.settings.Window < old {
		// The records hold the window before until their probes write at
		// the new one, each at its next period: read them by the window
		// before for entry_unchanged, the longest a probe that writes at
		// all goes without writing.
		if !c.cfg.Clock.Now().Before(c.readUntil) {
			c.readWindow = 0
		}
		c.readWindow = max(c.readWindow, old)
		c.readUntil = c.cfg.Clock.Now().Add(p.settings.StaleAfter().Duration())
	}
	// Ready reads the sample period from the HTTP server's goroutine.
	c.mu.Lock()
	c.cfg.Settings = p.settings
	c.mu.Unlock()
	if periodChanged {
		c.cfg.Page.SetRefresh(p.settings.SamplePeriod)
	}
	// The page remembers a window's worth of decisions.
	c.cfg.Page.SetHistorySize(statuspage.HistoryFor(p.settings, DecisionsPerPeriod))
	return periodChanged
}

// readWindowAt is the decision's Input.ReadWindow at now: the window before
// a shrink, until every probe has had entry_unchanged to write at the new
// one; else 0.
func (c *Controller) readWindowAt(now time.Time) int {
	if now.Before(c.readUntil) {
		return c.readWindow
	}
	return 0
}
