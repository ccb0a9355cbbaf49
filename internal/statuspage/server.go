package statuspage

import (
	"bytes"
	"net/http"
	"sync"
	"time"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// Path is where the controller serves the page, on its metrics port.
const Path = "/status"

// maxRenders bounds the pages rendered at once: each holds the page's bytes
// (under 1 MiB at 500 hosts) until it is written, and an operator's
// browser asks for one at a time. More are answered 503 at once, as
// /metrics answers a gather over its own bound.
const maxRenders = 2

// Server keeps the last decision's Model and the verdicts of the decisions
// before it, and serves the page. The controller calls Observe after each
// decision; requests render from a copy, so that a slow reader never holds
// a decision back.
type Server struct {
	source string
	sem    chan struct{}

	mu      sync.Mutex
	model   *Model
	history *History
	refresh time.Duration
	// standing, when set, says whether this process leads, and when it
	// does not, who does: a replica that does not lead serves no page of
	// its own (its last decision, were it kept, would read as current).
	standing func() (leading bool, note string)
}

// HistoryFor is how many decisions the controller's page remembers at
// settings s when it decides perPeriod times a period: a window's worth,
// the span each verdict is judged over.
func HistoryFor(s settings.Settings, perPeriod int) int { return perPeriod * s.Window }

// NewServer remembers the verdicts of the last historySize decisions.
func NewServer(historySize int, source string) *Server {
	return &Server{source: source, sem: make(chan struct{}, maxRenders), history: NewHistory(historySize)}
}

// Observe takes a decision. A nil Server observes nothing.
func (s *Server) Observe(st *status.Status) {
	if s == nil {
		return
	}
	m := ModelOf(st) // outside the lock: the fleet's size of work
	s.mu.Lock()
	defer s.mu.Unlock()
	s.model = m
	s.history.Add(st)
}

// SetHistorySize has the page remember the last n decisions from now on
// (History.Resize): the controller sets it anew when a change of the
// settings changes the window. A nil Server ignores it.
func (s *Server) SetHistorySize(n int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.history.Resize(n)
}

// ExportHistory is the page's history as the status carries it; nil for a
// nil Server or no decision yet.
func (s *Server) ExportHistory() *status.History {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.history.Export()
}

// RestoreHistory replaces the page's history by dh, the one the status it
// starts from carried (ImportHistory), keeping its size. A nil Server
// ignores it.
func (s *Server) RestoreHistory(dh *status.History) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := ImportHistory(s.history.size, dh)
	if err != nil {
		return err
	}
	s.history = h
	return nil
}

// SetRefresh has the served page load itself again every d: the
// controller decides twice a period, so a period keeps an open page as
// current as the decisions. A nil Server ignores it.
func (s *Server) SetRefresh(d time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh = d
}

// SetStanding makes the page ask standing, at each request, whether this
// process leads: while it does not, the page answers 503 with the note
// (who leads). A nil Server ignores it.
func (s *Server) SetStanding(standing func() (leading bool, note string)) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.standing = standing
}

// Forget drops the last decision: a replica that stopped leading serves
// its next term's page from that term's first decision, never the one it
// made before (the history keeps the decisions it made, with their times).
// A nil Server ignores it.
func (s *Server) Forget() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.model = nil
}

// Page is the page as it would be served now; ok is false before the first
// decision.
func (s *Server) Page() (Page, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.model == nil {
		return Page{}, false
	}
	// The model is replaced, never changed, by Observe; the history is.
	// The refresh is a period, and so is the gap: the controller decides
	// twice a period, so decisions more than a period apart missed one.
	return Page{Model: s.model, History: s.history.Clone(), Source: s.source, Refresh: s.refresh, Gap: s.refresh}, true
}

// ServeHTTP answers GET and HEAD with the page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only page: GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	default:
		http.Error(w, "busy rendering other requests for this page; try again", http.StatusServiceUnavailable)
		return
	}
	s.mu.Lock()
	standing := s.standing
	s.mu.Unlock()
	if standing != nil {
		if leading, note := standing(); !leading {
			http.Error(w, "this controller does not lead, so it serves no decision: "+note, http.StatusServiceUnavailable)
			return
		}
	}
	p, ok := s.Page()
	if !ok {
		http.Error(w, "no decision yet", http.StatusServiceUnavailable)
		return
	}
	// Whole before the first byte: an error becomes a 500, not half a page.
	var b bytes.Buffer
	if err := Render(&b, p); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b.Bytes())
}
