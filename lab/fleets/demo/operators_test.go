package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/html"

	"github.com/fleet-role/fleet-role/internal/httpserve"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/internal/statuspage"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
	"github.com/fleet-role/fleet-role/lab/run/browser"
	"github.com/fleet-role/fleet-role/lab/run/promserver"
)

// crafted is a record's text made of markup and script, with no slash (it
// is a directory's name): shown as text, it is harmless; parsed as markup,
// it would add an image whose error handler, and a script, retitle the page.
const crafted = `<img src=x onerror="document.title='owned'"><script>document.title='owned'`

// operators is what TestDemoSlowVoterNamesTheSwap checks where operators
// look, in one run of the demo's fleet: a real Prometheus scraping every
// probe and the controller with the shipped rules loaded, and the
// controller's status page in a real Chromium.
type operators struct {
	t       *testing.T
	chrome  *browser.Chromium
	promBin string
	dir     string

	mu      sync.Mutex
	targets []promserver.Target // the probes'
	servers []*httpserve.Server
	prom    *promserver.Server
	fired   []string // alerts seen firing before the fault
	stop    chan struct{}
	watched chan struct{} // closed when watch returns; nil until it starts
	stopped sync.Once
	faultAt time.Time
}

func newOperators(t *testing.T) *operators {
	o := &operators{t: t, promBin: testenv.Prometheus(t), dir: t.TempDir(), stop: make(chan struct{})}
	o.chrome = &browser.Chromium{Binary: testenv.Chromium(t), Dir: t.TempDir()}
	t.Cleanup(func() {
		// A demo that ends before its baseline never calls atBaseline:
		// the watch ends here, before the test does, as it reports
		// through t.
		o.stopWatching()
		if o.prom != nil {
			o.prom.Stop()
		}
		for _, s := range o.servers {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.Shutdown(ctx)
			cancel()
		}
	})
	return o
}

// options wires the hooks into the demo's options.
func (o *operators) options(opt *Options) {
	opt.Crafted = crafted
	opt.Registries = o.register
	opt.Started = o.started
	opt.AtBaseline = o.atBaseline
	opt.WhileFaulted = o.whileFaulted
}

// register serves each probe's registry on loopback, as its pod would on
// the node's address; the controller's the demo serves itself.
func (o *operators) register(component, host string, reg *prometheus.Registry) {
	if component != "probe" {
		return
	}
	srv, err := httpserve.Start("127.0.0.1:0", reg, httpserve.Plain(func() error { return nil }), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		o.t.Errorf("serve %s's probe: %v", host, err)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.servers = append(o.servers, srv)
	o.targets = append(o.targets, promserver.Target{Address: srv.Addr, Labels: map[string]string{"host": host, "instance": "probe/" + host}})
}

// started runs Prometheus with the shipped rules, scraping every probe and
// the controller once a period, and watches its alerts until the fault.
func (o *operators) started(ctx context.Context, live *Live) error {
	o.mu.Lock()
	probes := slices.Clone(o.targets)
	o.mu.Unlock()
	ctrl := strings.TrimPrefix(live.ControllerURL, "http://")
	p, err := promserver.Start(ctx, promserver.Config{
		Binary:    o.promBin,
		Dir:       filepath.Join(o.dir, "prometheus"),
		RuleFiles: []string{filepath.Join(testkit.RepoRoot(o.t), "deploy", "monitoring", "fleet-role.rules.yaml")},
		Jobs: []promserver.Job{
			{Name: "fleet-role", Targets: []promserver.Target{{Address: ctrl, Labels: map[string]string{"instance": "controller"}}}},
			{Name: "fleet-role-probe", Targets: probes},
		},
		ScrapeInterval: Defaults().Period,
	})
	if err != nil {
		return err
	}
	o.prom = p
	o.mu.Lock()
	o.watched = make(chan struct{})
	o.mu.Unlock()
	go o.watch()
	return nil
}

// stopWatching ends the watch, if it started, and waits until it has.
func (o *operators) stopWatching() {
	o.stopped.Do(func() { close(o.stop) })
	o.mu.Lock()
	watched := o.watched
	o.mu.Unlock()
	if watched != nil {
		<-watched
	}
}

// watch records every alert that fires until the fault.
func (o *operators) watch() {
	defer close(o.watched)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		alerts, err := o.prom.Alerts(ctx)
		cancel()
		if err != nil {
			o.t.Errorf("read alerts: %v", err)
			continue
		}
		for _, a := range alerts {
			if a.State == "firing" {
				o.mu.Lock()
				o.fired = append(o.fired, fmt.Sprintf("%v at %s", a.Labels, time.Now().Format(time.TimeOnly)))
				o.mu.Unlock()
			}
		}
	}
}

// atBaseline waits until Prometheus has scraped every target and
// evaluated the rules since, and then holds that no alert fired before the
// fault nor is pending for the two the fault must bring.
func (o *operators) atBaseline(ctx context.Context, _ *Live) error {
	var upAt time.Time
	err := poll(ctx, 90*time.Second, func() error {
		ts, err := o.prom.Targets(ctx)
		if err != nil {
			return err
		}
		var last time.Time
		for _, x := range ts {
			if x.Health != "up" {
				return fmt.Errorf("target %v is %s: %s", x.Labels, x.Health, x.LastError)
			}
			if x.LastScrape.After(last) {
				last = x.LastScrape
			}
		}
		if len(ts) != 1+len(o.targets) {
			return fmt.Errorf("%d targets, want the controller and %d probes", len(ts), len(o.targets))
		}
		if upAt.IsZero() {
			upAt = last
		}
		evals, err := o.prom.LastEvaluations(ctx)
		if err != nil {
			return err
		}
		if at := evals["fleet-role"]; !at.After(upAt) {
			return fmt.Errorf("the rules were last evaluated at %s, not since every target was up at %s", at, upAt)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("prometheus before the fault: %w", err)
	}
	o.stopWatching()
	alerts, err := o.prom.Alerts(ctx)
	if err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.fired) > 0 {
		return fmt.Errorf("alerts fired before the fault: %s", strings.Join(o.fired, "; "))
	}
	for _, a := range alerts {
		if n := a.Labels["alertname"]; n == "FleetRoleVoterUnfit" || n == "FleetRoleSwapAdvised" || n == "FleetRoleFailureToleranceZero" {
			return fmt.Errorf("before the fault, %s is %s: %v", n, a.State, a.Labels)
		}
	}
	o.faultAt = time.Now()
	o.t.Logf("before the fault: every target up, the rules evaluated since, no alert fired (%d pending: %v)", len(alerts), alerts)
	return nil
}

// whileFaulted waits for the alerts, then checks the page in Chromium.
// In that order: each Chromium start takes seconds of both cores, which
// the demo's hosts, all on this machine, read as their own timers waking
// late (wakeup_late); on most of them at once that is the fleet-wide CPU
// gate, which withdraws the swap and starts its alert's for again.
func (o *operators) whileFaulted(ctx context.Context, live *Live) error {
	if err := o.alerts(ctx); err != nil {
		return err
	}
	if err := o.page(ctx, live); err != nil {
		return fmt.Errorf("the status page: %w", err)
	}
	return nil
}

// alerts waits for the voter-unfit and swap-advised alerts to fire for the
// slowed voter.
func (o *operators) alerts(ctx context.Context) error {
	want := map[string]string{"FleetRoleVoterUnfit": "host", "FleetRoleSwapAdvised": "out"}
	var firing []promserver.Alert
	// The rules' own times are 30 s (for) and 15 s (evaluation): 45 s on a
	// quiet machine. On a busy one a standby's connects can pass their limit
	// for a while, which withdraws the swap and starts its alert's for
	// again (a run beside other builds took 1m30s); the phase's own bound
	// (the test's PhaseTimeout) is the one that matters.
	err := poll(ctx, 4*time.Minute, func() error {
		alerts, err := o.prom.Alerts(ctx)
		if err != nil {
			return err
		}
		firing = firing[:0]
		missing := []string{}
		for name, label := range want {
			found := false
			for _, a := range alerts {
				if a.Labels["alertname"] == name && a.State == "firing" {
					if a.Labels[label] == "voter-2" {
						found = true
						firing = append(firing, a)
					}
				}
			}
			if !found {
				missing = append(missing, name+"{"+label+"=voter-2}")
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not firing yet: %s (alerts: %v)", strings.Join(missing, ", "), alerts)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, a := range firing {
		o.t.Logf("firing %s after the fault: %v: %s", time.Since(o.faultAt).Round(time.Second), a.Labels, a.Annotations["description"])
	}
	return nil
}

// page loads the controller's status page in Chromium and holds it to the
// decision it was rendered from: the slowed voter's links marked, every
// cell's numbers the status's, the tolerance the status's, and the crafted
// record text shown as text. A screenshot is kept.
func (o *operators) page(ctx context.Context, live *Live) error {
	url := live.ControllerURL + statuspage.Path
	var doc *html.Node
	var st *status.Status
	err := poll(ctx, time.Minute, func() error {
		dom, err := o.chrome.DumpDOM(ctx, url)
		if err != nil {
			return err
		}
		if doc, err = html.Parse(strings.NewReader(dom)); err != nil {
			return err
		}
		at := browser.Text(browser.ByID(doc, "generated-at"))
		for _, x := range live.Recent() {
			if x.GeneratedAt.UTC().Format(statuspage.TimeLayout) == at {
				st = x
				return nil
			}
		}
		return fmt.Errorf("the page's decision at %q is not among the last ones", at)
	})
	if err != nil {
		return err
	}
	var errs []string
	fail := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }

	// The tolerance.
	// The attributed figure first, every unfit voter counted beside it.
	if got, want := browser.Text(browser.ByID(doc, "tolerance-value")), strconv.Itoa(st.FailureTolerance.Attributed); got != want {
		fail("tolerance %q, the status's attributed %s", got, want)
	}
	if got, want := browser.Text(browser.ByID(doc, "tolerance-strict")), strconv.Itoa(st.FailureTolerance.Tolerance); got != want {
		fail("tolerance counting every unfit voter %q, the status's %s", got, want)
	}
	// The timing advice, as the status holds it.
	if got := browser.Text(browser.ByID(doc, "timing-verdict")); !strings.HasSuffix(got, " "+string(st.Timing.Verdict)) {
		fail("timing verdict %q, the status's %s", got, st.Timing.Verdict)
	}
	// The matrix, cell by cell, against the status's link matrix.
	table := browser.ByID(doc, "link-matrix")
	if table == nil {
		return fmt.Errorf("no link matrix on the page")
	}
	var peers []string
	cells, marked := 0, 0
	for _, tr := range browser.Children(table, "tr") {
		ths, tds := browser.Children(tr, "th"), browser.Children(tr, "td")
		if len(tds) == 0 {
			for _, th := range ths[1:] {
				peers = append(peers, browser.Text(th))
			}
			continue
		}
		// A row's header is its host's name and its verdict's mark.
		row, _, _ := strings.Cut(browser.Text(ths[0]), " ")
		h := hostOf(st, row)
		if h == nil {
			fail("row %q is no host of the status", row)
			continue
		}
		if len(tds) != len(peers) {
			if h.Name != CraftedHost && len(tds) == 1 {
				fail("row %s has no readings: %q", row, browser.Text(tds[0]))
			}
			continue
		}
		for i, td := range tds {
			peer := peers[i]
			want := "self"
			if peer != row {
				want = expectCell(st, h, peer)
				if why := linkAsReason(st, h, peer); why != "" {
					fail("%s", why)
				}
			}
			if got := browser.Text(td); got != want {
				fail("cell %s to %s reads %q, the status says %q", row, peer, got, want)
			}
			cells++
			// The other voters' readings of their links to the slowed
			// voter: etcd's round trip through its delayed peer path. (Its
			// own readings of the others go through their paths, which are
			// not delayed, and read fit until etcd's histogram takes a slow
			// round trip.)
			if peer == "voter-2" && row != peer && strings.HasPrefix(row, "voter-") {
				class, _ := browser.Attr(td, "class")
				if !strings.Contains(class, "bad") || !strings.Contains(browser.Text(td), "✗") {
					fail("the slowed voter's link %s to %s is not marked: class %q, %q", row, peer, class, browser.Text(td))
				}
				marked++
			}
		}
	}
	if cells == 0 || marked != 2 || !slices.Contains(peers, "voter-2") {
		fail("%d cells compared, %d of the 2 other voters' links to the slowed voter marked, peers %q", cells, marked, peers)
	}
	// The crafted text: shown, and nothing of it parsed.
	shown := false
	browser.Walk(doc, func(n *html.Node) {
		if n.Type == html.ElementNode && (n.Data == "img" || n.Data == "script") {
			fail("the page has an <%s> element: %v", n.Data, n.Attr)
		}
		if n.Type == html.ElementNode && n.Data == "td" && strings.Contains(browser.Text(n), crafted) {
			shown = true
		}
	})
	if !shown {
		fail("the crafted record text is shown in no cell as text")
	}
	if title := browser.Text(browser.Find(doc, func(n *html.Node) bool { return n.Data == "title" })); strings.Contains(title, "owned") || !strings.Contains(title, "fleet-role") {
		fail("the page's title is %q: a crafted script ran", title)
	}
	// The screenshot, kept as the test's artefact.
	dir := os.Getenv("FLEET_ROLE_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "fleet-role-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	shot := filepath.Join(dir, "status-page.png")
	if err := o.chrome.Screenshot(ctx, url, shot, 1280, 2000); err != nil {
		return err
	}
	version, _ := o.chrome.Version(ctx)
	o.t.Logf("%s: the page of the decision at %s, %d link cells equal to the status, %d links to the slowed voter marked; screenshot %s",
		version, st.GeneratedAt.Format(statuspage.TimeLayout), cells, marked, shot)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// expectCell is what the status says the cell from h to peer reads: the
// status's link matrix (links) for that pair, each reading its number and
// mark, the failed connects counted, and etcd's round trip where measured.
func expectCell(st *status.Status, h *status.Host, peer string) string {
	reading := func(x *status.LinkReading) string {
		var s string
		switch {
		case x == nil || x.Count == 0 && x.Seconds == nil && x.Unmerged == 0:
			return "· none"
		case x.Unmerged > 0:
			s = "? not judged"
		case x.Seconds == nil:
			s = "✗ failed"
		case x.OK:
			s = status.FormatValue(*x.Seconds, "seconds") + " ✓"
		default:
			s = status.FormatValue(*x.Seconds, "seconds") + " ✗"
		}
		if x.Failed > 0 {
			s += fmt.Sprintf(", %d of %d failed", x.Failed, x.Count)
		}
		return s
	}
	var cell status.LinkCell
	for _, r := range st.Links {
		if r.From != h.Name {
			continue
		}
		for _, c := range r.To {
			if c.Peer == peer {
				cell = c
			}
		}
	}
	s := reading(cell.Connect)
	if cell.RTT != nil {
		s += "rtt " + reading(cell.RTT)
	}
	return s
}

// linkAsReason holds the status's link from h to peer to h's own connect
// reason about peer (a copy from the other end starts "measured by"): the
// same tail and ok, on a real fleet's decision. It says how they differ.
func linkAsReason(st *status.Status, h *status.Host, peer string) string {
	var link *status.LinkReading
	for _, r := range st.Links {
		for _, c := range r.To {
			if r.From == h.Name && c.Peer == peer {
				link = c.Connect
			}
		}
	}
	for _, r := range h.Reasons {
		if r.Signal != status.SignalConnect || r.Subject != peer || r.Code == status.CodeMeasuredByOther || r.Code == status.CodeHeldAgainstBy {
			continue
		}
		if link == nil || (link.Seconds == nil) != (r.Value == nil) || link.Seconds != nil && *link.Seconds != *r.Value || link.OK != r.OK {
			return fmt.Sprintf("%s to %s: the status's link %+v, its reason %+v", h.Name, peer, link, r)
		}
		return ""
	}
	if link != nil {
		return fmt.Sprintf("%s to %s: a link and no reason", h.Name, peer)
	}
	return ""
}

func hostOf(st *status.Status, name string) *status.Host {
	for i := range st.Hosts {
		if st.Hosts[i].Name == name {
			return &st.Hosts[i]
		}
	}
	return nil
}

// poll calls cond every half second until it returns nil, and returns its
// last error when within passes or ctx ends.
func poll(ctx context.Context, within time.Duration, cond func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", within, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
