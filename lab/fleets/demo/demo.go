// Package demo runs the whole fleet-role pipeline on one machine: three real
// etcd members, each its own process, and two standby hosts; the real probe
// and controller code, unchanged, writing to an in-process ConfigMap store
// (or a real API server); a fault on one voter; and the swap the controller
// would make. It needs no cluster and no root.
//
// The hosts share this machine, so what tells them apart is what the demo
// does to their paths: every member's peer listener sits behind etcd's own
// functional-test proxy (go.etcd.io/etcd/pkg/v3/proxy), and the fault delays
// one member's proxy in both directions. The proxy delays data, not the TCP
// handshake, which the kernel completes before the proxy accepts, so in the
// demo the slow path shows in etcd's own peer round-trip histogram rather
// than in the probes' connect times.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/httpserve"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/internal/statuspage"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/statuscheck"
	"github.com/fleet-role/fleet-role/lab/kit/toolcache"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
)

// Faults the demo can put on a voter.
const (
	FaultSlow  = "slow"  // delay its peer traffic in both directions
	FaultPause = "pause" // SIGSTOP its member and stop its probe: a paused host
	FaultNone  = "none"  // a clean run
)

// The fleet: three voters, the first pinned, and two standbys, all eligible.
const (
	voters   = 3
	standbys = 2
)

// Options are the demo's flags.
type Options struct {
	Fault  string
	Delay  time.Duration // added each way to the slowed voter's peer traffic
	Period time.Duration // sample period
	// ElectionTimeout is the members' and the settings' election timeout,
	// the heartbeat a tenth of it; every limit scales with it.
	ElectionTimeout time.Duration
	Keep            bool // keep the data directory
	// Kubeconfig, when set, keeps the ConfigMaps on that API server (in
	// namespace Namespace) instead of in process. The demo's hosts are its
	// own: it never reads or writes the cluster's Nodes.
	Kubeconfig string
	Namespace  string
	// Out receives the progress and the summary; Live redraws the table in
	// place (a terminal) instead of printing a line per period.
	Out  io.Writer
	Live bool
	// PhaseTimeout bounds each phase.
	PhaseTimeout time.Duration
	// Hold keeps the fleet deciding, the fault in place, for this long
	// after the fault has shown, before the demo ends.
	Hold time.Duration
	// Registries, when set, gives each probe and the controller a metrics
	// registry of its own, as the components have, and is called with each
	// (component "probe" or "controller", the host's name or "") so that a
	// caller can serve and scrape them (lab/cmd/recordseries does).
	Registries func(component, host string, reg *prometheus.Registry)
	// Listen is where the controller serves its /metrics and its status
	// page (/status), as the deployed controller does on its port; empty
	// serves nothing. The default takes a free loopback port.
	Listen string
	// Crafted, when set, adds a standby (CraftedHost) whose disk reading
	// is pointed at a directory of that name which does not exist, so that
	// the record's directory and error texts hold it: a test puts markup
	// and script there and checks the status page shows them as text. The
	// host is unknown (its disk reading fails) and is left out of the
	// baseline's "every host fit".
	Crafted string
	// Started, AtBaseline and WhileFaulted are a test's hooks: Started
	// once everything serves, before the baseline; AtBaseline once it is
	// reached and WhileFaulted once the fault has shown, each run while
	// the controller goes on deciding, the phase ending when the hook
	// returns (an error ends the demo with it).
	Started, AtBaseline, WhileFaulted func(ctx context.Context, live *Live) error
}

// CraftedHost is the standby Options.Crafted adds.
const CraftedHost = "standby-crafted"

// Live is what a hook may read of the running demo.
type Live struct {
	// ControllerURL is where the controller serves (http://host:port),
	// empty when Options.Listen is.
	ControllerURL string

	mu     sync.Mutex
	recent []*status.Status
}

// recentDecisions is how many of the last decisions Live keeps, so that a
// hook can find the decision a page it read was rendered from.
const recentDecisions = 10

// Recent are the last decisions, oldest first.
func (l *Live) Recent() []*status.Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*status.Status(nil), l.recent...)
}

func (l *Live) add(st *status.Status) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recent = append(l.recent, st)
	if len(l.recent) > recentDecisions {
		l.recent = l.recent[1:]
	}
}

// Defaults are the demo's flag defaults.
func Defaults() Options {
	return Options{
		Fault:           FaultSlow,
		Delay:           DelayFor(etcdElectionTimeout),
		Period:          time.Second,
		ElectionTimeout: etcdElectionTimeout,
		Namespace:       "fleet-role-demo",
		PhaseTimeout:    3 * time.Minute,
		Listen:          "127.0.0.1:0",
	}
}

// etcd's own election timeout (docs/facts.md, "etcd timing"), the demo's default
// so that it is quick.
const etcdElectionTimeout = time.Second

// DelayFor is the slow fault's default delay at an election timeout: a
// quarter of it each way, so that a round trip through the slowed voter
// carries half the election timeout, five times the round-trip limit (a
// tenth of it), far enough past it that no reading noise hides it.
func DelayFor(electionTimeout time.Duration) time.Duration { return electionTimeout / 4 }

// Result is what a finished demo reports.
type Result struct {
	Status     *status.Status
	StatusPath string        // where the last status document was written
	Slowed     string        // the voter the fault was put on
	Detected   int           // periods from the fault to the verdict it was put for
	Elapsed    time.Duration // the whole run
	DataDir    string
	PIDs       []int // the member processes it started, all stopped when Run returns
}

// Settings are the demo's: etcd's own timing (heartbeat 100 ms, election
// timeout 1000 ms, docs/facts.md) so that it is quick, a one-second period, and the
// smallest window the percentile allows. The learner stall time is zero: it is
// k3s's (learnerMaxStallTime) and these members are plain etcd, which adds no
// learner, so the cooldown is one window from the start.
func Settings(period time.Duration) settings.Settings {
	return SettingsFor(period, etcdElectionTimeout)
}

// SettingsFor are the demo's settings at another election timeout, the
// heartbeat a tenth of it, as in etcd's timing and in k3s's.
func SettingsFor(period, electionTimeout time.Duration) settings.Settings {
	s := settings.Defaults()
	s.ElectionTimeout = electionTimeout
	s.HeartbeatInterval = electionTimeout / 10
	s.SamplePeriod = period
	// 0.98 with a window of 50 (= 1/(1-0.98)): etcd feeds its peer
	// round-trip histogram about twice every 30 s, so a 50 s window always
	// holds a few of its observations.
	s.TailPercentile = 0.98
	s.Window = s.MinWindow()
	s.LearnerStallTime = 0
	s.Namespace = "fleet-role-demo"
	return s
}

// Validate checks the options.
func (o Options) Validate() error {
	var errs []error
	switch o.Fault {
	case FaultSlow, FaultPause, FaultNone:
	default:
		errs = append(errs, fmt.Errorf("--fault %q: want slow, pause or none", o.Fault))
	}
	if o.Fault == FaultSlow && o.Delay <= 0 {
		errs = append(errs, fmt.Errorf("--delay %s: must be above zero for the slow fault", o.Delay))
	}
	if o.Period <= 0 {
		errs = append(errs, fmt.Errorf("--period %s: must be above zero", o.Period))
	}
	if o.PhaseTimeout <= 0 {
		errs = append(errs, fmt.Errorf("phase timeout %s: must be above zero", o.PhaseTimeout))
	}
	if o.Hold < 0 {
		errs = append(errs, fmt.Errorf("--hold %s: must be zero (no hold) or above", o.Hold))
	}
	s := o.settings()
	if err := s.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--election-timeout %s: %w", o.ElectionTimeout, err))
	} else if rtt := s.RTTLimit().Duration(); o.Fault == FaultSlow && o.Delay > 0 && 2*o.Delay <= rtt {
		errs = append(errs, fmt.Errorf("--delay %s: a round trip through the slowed voter gains 2 x %s = %s, within the round-trip limit %s (election timeout %s / 10): the fault would show nothing; give more than %s",
			o.Delay, o.Delay, 2*o.Delay, rtt, o.ElectionTimeout, rtt/2))
	}
	return errors.Join(errs...)
}

func (o Options) settings() settings.Settings {
	s := SettingsFor(o.Period, o.ElectionTimeout)
	if o.Namespace != "" {
		s.Namespace = o.Namespace
	}
	return s
}

// host is one of the demo's hosts and what runs for it.
type host struct {
	name   string
	voter  bool
	member *etcdproc.Member
	proxy  proxy.Server // the member's peer path; nil for standbys
	fsync  string       // the standby's fdatasync directory

	mu     sync.Mutex
	cancel context.CancelFunc // stops its probe
	done   chan struct{}
}

// fleet is everything the demo started.
type fleet struct {
	opt     Options
	set     settings.Settings
	dir     string
	cluster *etcdproc.Cluster
	hosts   []*host
	store   kube.ConfigMaps
	// records and recordSource hold the probes' records: in memory, or on
	// the API server of --kubeconfig.
	records      kube.Records
	recordSource kube.RecordSource
	nodes        *kubefake.Nodes
	ctrl         *controller.Controller
	log          *slog.Logger
	logFile      *os.File
	proxyLog     *zap.Logger
	formed       time.Time // when the etcd cluster was up
	live         *Live
}

// Run runs the demo until it has shown what it set out to show, or ctx ends.
// Everything it starts is stopped before it returns.
func Run(ctx context.Context, opt Options) (res *Result, err error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	out := opt.Out
	if out == nil {
		out = io.Discard
	}
	set := opt.settings()
	m, err := MeasureMachine(ctx, set)
	if err != nil {
		return nil, err
	}
	pf := Judge(set, m)
	if !pf.OK {
		return nil, fmt.Errorf("%w:\n%s", ErrMachineTooSlow, strings.TrimSuffix(pf.Report(), "\n"))
	}
	io.WriteString(out, pf.Report())
	binary, err := toolcache.Etcd(ctx, out)
	if err != nil {
		return nil, err
	}
	f := &fleet{opt: opt, set: set, proxyLog: zap.NewNop()}
	if err := f.makeDir(); err != nil {
		return nil, err
	}
	defer func() {
		f.stop()
		if opt.Keep {
			fmt.Fprintf(out, "kept %s (etcd data, fdatasync directories, demo.log)\n", f.dir)
			return
		}
		os.RemoveAll(f.dir)
	}()
	phase(out, "starting %d etcd v%s members (heartbeat %s, election timeout %s), each its own process behind etcd's proxy",
		voters, toolcache.EtcdVersion[1:], f.set.HeartbeatInterval, f.set.ElectionTimeout)
	if err := f.startEtcd(ctx, binary); err != nil {
		return nil, err
	}
	if err := f.startStore(ctx); err != nil {
		return nil, err
	}
	f.registerNodes()
	ctrlMetrics := controller.NewMetrics()
	if opt.Registries != nil {
		opt.Registries("controller", "", ctrlMetrics.Registry)
	}
	// The demo decides once a period (until), so its page remembers a
	// window's worth of periods.
	page := statuspage.NewServer(statuspage.HistoryFor(f.set, 1), "fleet-role-demo's controller")
	if f.ctrl, err = controller.New(controller.Config{Settings: f.set, Store: f.store, Records: f.recordSource, Nodes: f.nodes, Log: f.log, Metrics: ctrlMetrics, Page: page}); err != nil {
		return nil, err
	}
	f.live = &Live{}
	if opt.Listen != "" {
		srv, err := httpserve.Start(opt.Listen, ctrlMetrics.Registry, f.ctrl.Ready, f.log, httpserve.Route{Pattern: statuspage.Path, Handler: page})
		if err != nil {
			return nil, err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		f.live.ControllerURL = "http://" + srv.Addr
		phase(out, "the controller's status page: %s%s (and its metrics: %s/metrics)", f.live.ControllerURL, statuspage.Path, f.live.ControllerURL)
	}
	for _, h := range f.hosts {
		if err := f.startProbe(ctx, h); err != nil {
			return nil, err
		}
	}
	res = &Result{DataDir: f.dir, StatusPath: filepath.Join(os.TempDir(), "fleet-role-demo-status.json"), PIDs: f.pids()}
	ui := newView(out, opt.Live, f.set)

	if opt.Started != nil {
		if err := opt.Started(ctx, f.live); err != nil {
			return res, fmt.Errorf("started: %w", err)
		}
	}
	phase(out, "baseline: every host samples once a %s until each has a full window of %d and is fit", f.set.SamplePeriod, f.set.Window)
	st, err := f.until(ctx, ui, res, func(st *status.Status) bool {
		return statuscheck.EveryFit(st, f.set.Window, CraftedHost) == nil
	})
	if err != nil {
		if st != nil {
			return res, fmt.Errorf("baseline: %w; held by:\n%s", err, heldBy(st, f.set.Window))
		}
		return res, fmt.Errorf("baseline: %w", err)
	}
	ui.table(st)
	if opt.AtBaseline != nil {
		if st, err = f.during(ctx, ui, res, opt.AtBaseline); err != nil {
			return res, fmt.Errorf("at the baseline: %w", err)
		}
	}

	target := f.hosts[1] // the first voter is pinned; the second is not
	res.Slowed = target.name
	faultAt := time.Now()
	var want func(*status.Status) bool
	switch opt.Fault {
	case FaultSlow:
		phase(out, "fault: %s's peer traffic delayed by %s each way (etcd proxy DelayTx and DelayRx); round-trip limit %s",
			target.name, opt.Delay, f.set.RTTLimit().Duration())
		target.proxy.DelayTx(opt.Delay, 0)
		target.proxy.DelayRx(opt.Delay, 0)
		want = func(st *status.Status) bool {
			return st.Decision.Action == status.ActionSwap && st.Decision.Out == target.name
		}
	case FaultPause:
		phase(out, "fault: %s paused (its etcd member stopped with SIGSTOP, its probe stopped)", target.name)
		if err := target.member.Pause(); err != nil {
			return res, err
		}
		f.stopProbe(target)
		want = func(st *status.Status) bool {
			return verdictOf(st, target.name) == status.Unknown && st.Decision.Action == status.ActionNone
		}
	case FaultNone:
		phase(out, "no fault: one more window, in which nothing should change")
		until := time.Now().Add(time.Duration(f.set.Window) * f.set.SamplePeriod)
		want = func(*status.Status) bool { return time.Now().After(until) }
	}
	st, err = f.until(ctx, ui, res, want)
	if err != nil {
		if st != nil {
			return res, fmt.Errorf("fault: %w; the last decision: %s", err, decisionLine(st.Decision))
		}
		return res, fmt.Errorf("fault: %w", err)
	}
	res.Detected = int(time.Since(faultAt)/f.set.SamplePeriod) + 1
	ui.table(st)
	if opt.WhileFaulted != nil {
		if st, err = f.during(ctx, ui, res, opt.WhileFaulted); err != nil {
			return res, fmt.Errorf("while faulted: %w", err)
		}
	}
	if opt.Hold > 0 {
		phase(out, "hold: the fault stays in place and the controller decides for %s more", opt.Hold)
		until := time.Now().Add(opt.Hold)
		if st, err = f.until(ctx, ui, res, func(*status.Status) bool { return !time.Now().Before(until) }); err != nil {
			return res, fmt.Errorf("hold: %w", err)
		}
		ui.table(st)
	}
	if opt.Fault == FaultPause {
		phase(out, "resume: %s continued (SIGCONT) and its probe restarted", target.name)
		if err := target.member.Resume(); err != nil {
			return res, err
		}
		if err := f.startProbe(ctx, target); err != nil {
			return res, err
		}
	}
	res.Status = st
	res.Elapsed = time.Since(start)
	return res, nil
}

// until runs the controller once a period, shows its status, and returns
// when done says so. The deployed controller decides
// controller.DecisionsPerPeriod times a period; the demo shows one table a
// period, and since the hysteresis waits on the records' changes rather than
// on a count of decisions, its swaps are published at most half a period
// later than the deployed controller's would be.
func (f *fleet) until(ctx context.Context, ui *view, res *Result, done func(*status.Status) bool) (*status.Status, error) {
	deadline := time.Now().Add(f.opt.PhaseTimeout)
	tick := time.NewTicker(f.set.SamplePeriod)
	defer tick.Stop()
	for {
		st, err := f.ctrl.Tick(ctx)
		if err != nil {
			return nil, err
		}
		if err := writeStatus(res.StatusPath, st); err != nil {
			return nil, err
		}
		res.Status = st
		f.live.add(st)
		ui.update(st)
		if done(st) {
			return st, nil
		}
		if time.Now().After(deadline) {
			ui.table(st)
			return st, fmt.Errorf("not reached within %s", f.opt.PhaseTimeout)
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-tick.C:
		}
	}
}

// during runs hook while the controller goes on deciding, and returns when
// it does (or the phase times out, which cancels it).
func (f *fleet) during(ctx context.Context, ui *view, res *Result, hook func(context.Context, *Live) error) (*status.Status, error) {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- hook(hctx, f.live) }()
	var herr error
	finished := false
	st, err := f.until(ctx, ui, res, func(*status.Status) bool {
		select {
		case herr = <-done:
			finished = true
		default:
		}
		return finished
	})
	if !finished {
		cancel()
		<-done
	}
	return st, errors.Join(err, herr)
}

func (f *fleet) makeDir() error {
	// etcd's data goes on memory where there is a tmpfs, so that this
	// machine's disk does not decide the voters' verdict: the demo is
	// about the path. The standbys' fdatasync reading uses the real disk.
	base := os.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "fleet-role-demo-")
	if err != nil {
		return fmt.Errorf("make data directory: %w", err)
	}
	f.dir = dir
	f.logFile, err = os.Create(filepath.Join(dir, "demo.log"))
	if err != nil {
		return fmt.Errorf("create demo log: %w", err)
	}
	f.log = slog.New(slog.NewJSONHandler(f.logFile, nil))
	return nil
}

func (f *fleet) startEtcd(ctx context.Context, binary string) error {
	for i := 0; i < voters; i++ {
		f.hosts = append(f.hosts, &host{name: fmt.Sprintf("voter-%d", i+1), voter: true})
	}
	for i := 0; i < standbys; i++ {
		f.hosts = append(f.hosts, &host{name: fmt.Sprintf("standby-%d", i+1)})
	}
	if f.opt.Crafted != "" {
		f.hosts = append(f.hosts, &host{name: CraftedHost})
	}
	var proxyErr error
	c, err := etcdproc.Start(ctx, etcdproc.Config{
		Binary:            binary,
		Dir:               f.dir,
		Members:           voters,
		HeartbeatInterval: f.set.HeartbeatInterval,
		ElectionTimeout:   f.set.ElectionTimeout,
		Name:              func(i int) string { return f.hosts[i].name },
		Stdout:            f.logFile,
		// Each member advertises its proxy, so that every peer reaches it
		// through the path the fault will slow.
		AdvertisePeerURL: func(i int, listen string) string {
			p, from, err := f.startProxy(listen)
			if err != nil {
				proxyErr = err
				return listen
			}
			f.hosts[i].proxy = p
			return from
		},
	})
	if proxyErr != nil {
		if c != nil {
			c.Stop()
		}
		return proxyErr
	}
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	f.cluster = c
	f.formed = time.Now()
	for i, m := range c.Members {
		f.hosts[i].member = m
	}
	return nil
}

// startProxy puts etcd's proxy in front of a member's peer listener.
func (f *fleet) startProxy(listen string) (proxy.Server, string, error) {
	to, err := url.Parse(listen)
	if err != nil {
		return nil, "", fmt.Errorf("peer url %q: %w", listen, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("find a port for the proxy: %w", err)
	}
	addr := l.Addr().String()
	l.Close()
	p := proxy.NewServer(proxy.ServerConfig{
		Logger: f.proxyLog,
		From:   url.URL{Scheme: "tcp", Host: addr},
		To:     url.URL{Scheme: "tcp", Host: to.Host},
	})
	select {
	case <-p.Ready():
	case err := <-p.Error():
		return nil, "", fmt.Errorf("start proxy to %s: %w", listen, err)
	}
	// The proxy reports every closed connection on its error channel,
	// which must be drained or it blocks.
	go func() {
		for {
			select {
			case <-p.Done():
				return
			case <-p.Error():
			}
		}
	}()
	return p, "http://" + addr, nil
}

func (f *fleet) startStore(ctx context.Context) error {
	if f.opt.Kubeconfig == "" {
		mem := kubefake.NewConfigMaps()
		if err := mem.Create(f.set.StatusConfigMap, nil); err != nil {
			return err
		}
		f.store = mem
		records := kubefake.NewRecords(f.set.RecordsNamespace())
		f.records, f.recordSource = records, records
		return nil
	}
	client, err := kube.NewClient(f.opt.Kubeconfig)
	if err != nil {
		return err
	}
	if err := ensureConfigMaps(ctx, client, f.set); err != nil {
		return err
	}
	f.store = client.ConfigMaps(f.set.Namespace)
	f.records = client.Records(f.set.RecordsNamespace())
	inf := client.NewRecordInformer(f.set.RecordsNamespace())
	go inf.Run(ctx) // it stops with ctx, the run's
	if err := inf.WaitForSync(ctx); err != nil {
		return err
	}
	f.recordSource = inf
	return nil
}

// registerNodes makes the Node objects k3s would have for the demo's hosts.
func (f *fleet) registerNodes() {
	f.nodes = &kubefake.Nodes{}
	var nodes []corev1.Node
	for i, h := range f.hosts {
		n := corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: h.name,
				Labels: map[string]string{
					f.set.EligibleLabel: "true",
					f.set.PinnedLabel:   fmt.Sprint(i == 0),
				},
				Annotations: map[string]string{},
			},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}},
		}
		if h.voter {
			n.Labels[k3snode.EtcdRoleLabel] = "true"
			n.Annotations[k3snode.NodeAddressAnnotation] = "127.0.0.1"
			// Peers reach the member through its proxy, on a port of its
			// own: all the demo's hosts share one address.
			n.Annotations[probe.PeerAddressAnnotation] = hostPort(h.member.AdvertisePeerURL)
			// k3s dates the condition from when the member became a
			// voter: here, when the cluster formed.
			n.Status.Conditions = []corev1.NodeCondition{{
				Type: k3snode.EtcdIsVoterCondition, Status: corev1.ConditionTrue, Reason: "MemberNotLearner",
				LastTransitionTime: metav1.NewTime(f.formed),
			}}
		}
		nodes = append(nodes, n)
	}
	f.nodes.Set(nodes...)
}

func hostPort(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Host
}

func (f *fleet) startProbe(ctx context.Context, h *host) error {
	sampler := probe.NewHost(f.set, "/", "", "")
	if h.voter {
		sampler.MetricsURL = h.member.MetricsURL
	} else if h.name == CraftedHost {
		// A directory that does not exist: the reading fails, and its
		// error quotes the directory.
		sampler.FsyncDir = filepath.Join(f.dir, "absent", f.opt.Crafted)
	} else {
		dir, err := os.MkdirTemp("", "fleet-role-demo-fsync-")
		if err != nil {
			return fmt.Errorf("make fdatasync directory: %w", err)
		}
		h.fsync = dir
		sampler.FsyncDir = dir
	}
	var metrics *probe.Metrics
	if f.opt.Registries != nil {
		// A restarted probe starts a new registry, as a restarted pod does.
		metrics = probe.NewMetrics()
		f.opt.Registries("probe", h.name, metrics.Registry)
	}
	p, err := probe.New(probe.Config{
		Node: h.name, Settings: f.set, Records: f.records, Nodes: f.nodes, Sampler: sampler,
		Log: f.log.With("component", "probe"), Metrics: metrics,
	})
	if err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	h.mu.Lock()
	h.cancel, h.done = cancel, done
	h.mu.Unlock()
	go func() {
		defer close(done)
		_ = p.Run(pctx)
	}()
	return nil
}

func (f *fleet) stopProbe(h *host) {
	h.mu.Lock()
	cancel, done := h.cancel, h.done
	h.cancel, h.done = nil, nil
	h.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	if h.fsync != "" {
		os.RemoveAll(h.fsync)
		h.fsync = ""
	}
}

// stop ends every probe, member and proxy the demo started.
func (f *fleet) stop() {
	for _, h := range f.hosts {
		f.stopProbe(h)
		if h.member != nil {
			_ = h.member.Resume() // a paused member cannot be stopped gently
		}
	}
	if f.cluster != nil {
		f.cluster.Stop()
	}
	for _, h := range f.hosts {
		if h.proxy != nil {
			h.proxy.Close()
		}
	}
	if f.logFile != nil {
		f.logFile.Close()
	}
}

// PIDs are the member processes the demo started, for a test that checks
// none outlives it.
func (f *fleet) pids() []int {
	var out []int
	for _, h := range f.hosts {
		if h.member != nil {
			out = append(out, h.member.PID())
		}
	}
	return out
}

// heldBy names each host that kept the baseline from being reached, and
// why: a window not yet full, or a verdict other than fit with its deciding
// reason; or, when every host is fit, the decision that was not none. The
// crafted host is unknown by design (its disk reading fails) and holds
// nothing.
func heldBy(st *status.Status, window int) string {
	var lines []string
	for _, h := range statuscheck.HeldHosts(st, window, CraftedHost) {
		lines = append(lines, fmt.Sprintf("  %s (%s): %s", h.Host.Name, h.Host.Role, strings.Join(h.Why, "; ")))
	}
	if len(st.Hosts) == 0 {
		lines = append(lines, "  no host has reported")
	}
	if len(lines) == 0 && st.Decision.Action != status.ActionNone {
		lines = append(lines, "  every host is fit, but the decision is "+decisionLine(st.Decision))
	}
	return strings.Join(lines, "\n")
}

func verdictOf(st *status.Status, name string) status.Verdict {
	for _, h := range st.Hosts {
		if h.Name == name {
			return h.Verdict
		}
	}
	return ""
}

func writeStatus(path string, st *status.Status) error {
	b, err := st.Marshal()
	if err != nil {
		return err
	}
	// A temporary file of its own beside the path, renamed over it: a
	// reader never sees half a document, and two demos at once (tests on
	// one machine) never rename each other's file away.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write status %s: %w", path, err)
	}
	return nil
}

func phase(w io.Writer, format string, a ...any) {
	fmt.Fprintf(w, "== "+format+"\n", a...)
}
