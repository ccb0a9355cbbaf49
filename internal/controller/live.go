package controller

import (
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
