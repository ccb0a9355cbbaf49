package actuator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/settings"
)

type fakeJournal struct {
	mu sync.Mutex
	j  *acting.Journal
}

func (f *fakeJournal) Journal() (*acting.Journal, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.j.Clone(), true, nil
}
func (f *fakeJournal) Changed() <-chan struct{} { return nil }

type fakeLease struct{ term int32 }

func (f *fakeLease) Term(context.Context) (int32, bool, error) { return f.term, true, nil }

type fakeRecord struct {
	mu   sync.Mutex
	puts []acting.Report
}

func (f *fakeRecord) Get(context.Context) (*acting.Report, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.puts) == 0 {
		return nil, nil
	}
	r := f.puts[len(f.puts)-1]
	return &r, nil
}

func (f *fakeRecord) Put(_ context.Context, r acting.Report) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts = append(f.puts, r)
	return nil
}

type fakeEtcd struct {
	view  EtcdView
	views int
	// closed: nothing listens on the member's port; listenErr: whether
	// anything does cannot be told.
	closed    bool
	listenErr error
	moved     []uint64
	removed   []uint64
	err       error
}

func (f *fakeEtcd) View(context.Context) (EtcdView, error) {
	f.views++
	return f.view, nil
}

func (f *fakeEtcd) Listening(context.Context) (bool, error) {
	if f.listenErr != nil {
		return false, f.listenErr
	}
	return !f.closed, nil
}
func (f *fakeEtcd) MoveLeader(_ context.Context, to uint64) error {
	f.moved = append(f.moved, to)
	return f.err
}
func (f *fakeEtcd) RemoveMember(_ context.Context, id uint64) error {
	f.removed = append(f.removed, id)
	return f.err
}

type countRestarts struct {
	mu     sync.Mutex
	tokens []string
}

func (c *countRestarts) Restart(_ context.Context, token string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens = append(c.tokens, token)
	return nil
}
func (c *countRestarts) String() string { return "counter" }

type rig struct {
	root, stateDir string
	journal        *fakeJournal
	lease          *fakeLease
	record         *fakeRecord
	etcd           *fakeEtcd
	restarts       *countRestarts
	clock          *clocktesting.FakeClock
}

func newRig(t *testing.T) *rig {
	return &rig{root: t.TempDir(), stateDir: t.TempDir(), journal: &fakeJournal{}, lease: &fakeLease{term: leaseTerm},
		record: &fakeRecord{}, etcd: &fakeEtcd{view: *view(true)}, restarts: &countRestarts{}, clock: clocktesting.NewFakeClock(t0)}
}

// start is a new actuator over the rig, as a restarted process would be:
// its local state read from the state directory, its record read.
func (r *rig) start(t *testing.T, restarter Restarter) *Actuator {
	t.Helper()
	if restarter == nil {
		restarter = r.restarts
	}
	a, err := New(Config{Node: self, HostRoot: r.root, Settings: settings.Defaults(), Journal: r.journal, Lease: r.lease,
		Record: r.record, Etcd: r.etcd, Restart: restarter, State: FileState{Dir: r.stateDir, Node: self}, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	st, err := a.cfg.State.Load()
	if err != nil {
		t.Fatal(err)
	}
	a.state = st
	if err := a.readRecord(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

func (r *rig) dropIn(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.root, acting.DropInPath))
	if err != nil {
		return ""
	}
	return string(b)
}

func (r *rig) lastReport(t *testing.T) acting.Report {
	t.Helper()
	if len(r.record.puts) == 0 {
		t.Fatal("no report written")
	}
	return r.record.puts[len(r.record.puts)-1]
}

// A command carried out once; the actuator restarted after it reports it
// done again only if the record lacks it, and never redoes it.
func TestCarriedOutOnceAcrossRestart(t *testing.T) {
	r := newRig(t)
	r.journal.j = journal(acting.PhaseRunning, cmd(acting.VerbEtcdOn, "", true))
	a := r.start(t, nil)
	a.Round(context.Background())
	if got := r.dropIn(t); got != acting.DropInVoter {
		t.Fatalf("drop-in %q, want the voter's", got)
	}
	if len(r.restarts.tokens) != 1 || r.restarts.tokens[0] != RestartToken(planID, 3, leaseTerm) {
		t.Fatalf("restarts %v", r.restarts.tokens)
	}
	want := acting.Report{PlanID: planID, Seq: 3, Term: leaseTerm, Done: true}
	if got := r.lastReport(t); got != want {
		t.Fatalf("report %+v, want %+v", got, want)
	}
	e := a.State().Find(planID, 3)
	if e == nil || e.Outcome != OutcomeDone || e.Ended == nil {
		t.Fatalf("state %+v", a.State())
	}

	// Rounds again, and a restarted actuator, do nothing more: the
	// drop-in, removed by hand, stays removed, k3s is not restarted.
	if err := os.Remove(filepath.Join(r.root, acting.DropInPath)); err != nil {
		t.Fatal(err)
	}
	a.Round(context.Background())
	a2 := r.start(t, nil)
	a2.Round(context.Background())
	if r.dropIn(t) != "" || len(r.restarts.tokens) != 1 || len(r.record.puts) != 1 {
		t.Fatalf("redone: drop-in %q, restarts %v, reports %v", r.dropIn(t), r.restarts.tokens, r.record.puts)
	}

	// The record lost (deleted by hand): the restarted actuator reports
	// the command done again, without redoing it.
	r.record.puts = nil
	a3 := r.start(t, nil)
	a3.Round(context.Background())
	if got := r.lastReport(t); got != want || r.dropIn(t) != "" || len(r.restarts.tokens) != 1 {
		t.Fatalf("after the record was lost: report %+v, drop-in %q, restarts %v", got, r.dropIn(t), r.restarts.tokens)
	}
}

// blockingRestarter blocks until its context ends: an actuator stopped
// mid-restart.
type blockingRestarter struct{ started chan struct{} }

func (b *blockingRestarter) Restart(ctx context.Context, _ string) error {
	close(b.started)
	<-ctx.Done()
	return ctx.Err()
}
func (b *blockingRestarter) String() string { return "blocking" }

// An actuator stopped while carrying a command out finds it started at its
// next start: reported failed as interrupted, not carried out again.
func TestInterruptedNotRedone(t *testing.T) {
	r := newRig(t)
	r.journal.j = journal(acting.PhaseRunning, cmd(acting.VerbEtcdOn, "", true))
	a := r.start(t, nil)
	// Stop it mid-restart: the round's context ends while the restart
	// blocks, as SIGTERM would; what the state holds is what a killed
	// process leaves (written before the restart began).
	b := &blockingRestarter{started: make(chan struct{})}
	a.cfg.Restart = b
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Round(ctx); close(done) }()
	<-b.started
	st, err := FileState{Dir: r.stateDir, Node: self}.Load()
	if err != nil {
		t.Fatal(err)
	}
	if e := st.Find(planID, 3); e == nil || e.Ended != nil {
		t.Fatalf("state while the restart runs: %+v, want the command started, not ended", st)
	}
	cancel()
	<-done
	// Put the state back as the killed process left it.
	if err := (FileState{Dir: r.stateDir, Node: self}).Save(st); err != nil {
		t.Fatal(err)
	}
	r.record.puts = nil

	a2 := r.start(t, nil)
	r.clock.Step(time.Minute)
	a2.Round(context.Background())
	got := r.lastReport(t)
	if got.Done || !strings.HasPrefix(got.Error, string(CodeInterrupted)+": ") || got.Seq != 3 {
		t.Fatalf("report %+v, want failed as interrupted", got)
	}
	if len(r.restarts.tokens) != 0 {
		t.Fatalf("restarted again: %v", r.restarts.tokens)
	}
	a2.Round(context.Background())
	if len(r.record.puts) != 1 || len(r.restarts.tokens) != 0 {
		t.Fatalf("a second round did more: reports %v restarts %v", r.record.puts, r.restarts.tokens)
	}
}

// A stale term is refused and reported; the newer term's copy, once the
// controller re-stamps it, is carried out.
func TestStaleTermThenReStamped(t *testing.T) {
	r := newRig(t)
	c := cmd(acting.VerbEtcdOff, "", false)
	r.journal.j = journal(acting.PhaseRunning, c)
	r.lease.term = leaseTerm + 1
	a := r.start(t, nil)
	a.Round(context.Background())
	got := r.lastReport(t)
	if got.Done || !strings.HasPrefix(got.Refused, string(CodeStaleTerm)+": ") || got.Term != leaseTerm {
		t.Fatalf("report %+v, want refused stale_term at term %d", got, leaseTerm)
	}
	if r.dropIn(t) != "" {
		t.Fatal("a stale command wrote the drop-in")
	}
	c2 := *c
	c2.Term = leaseTerm + 1
	r.journal.j = journal(acting.PhaseRunning, &c2)
	a.Round(context.Background())
	if got := r.lastReport(t); !got.Done || got.Term != leaseTerm+1 || r.dropIn(t) != acting.DropInStandby {
		t.Fatalf("re-stamped: report %+v, drop-in %q", got, r.dropIn(t))
	}
}

// move-leader and remove-member reach etcd as decided; etcd's own "not
// leader" and "member not found" end them done, with nothing done.
func TestEtcdVerbs(t *testing.T) {
	r := newRig(t)
	r.journal.j = journal(acting.PhaseRunning, cmd(acting.VerbMoveLeader, FormatMemberID(idB), false))
	a := r.start(t, nil)
	a.Round(context.Background())
	if len(r.etcd.moved) != 1 || r.etcd.moved[0] != idB || !r.lastReport(t).Done {
		t.Fatalf("moved %v, report %+v", r.etcd.moved, r.lastReport(t))
	}

	r.journal.j = journal(acting.PhaseAborting, &acting.Command{PlanID: planID, Seq: 4, Term: leaseTerm, Host: self, Verb: acting.VerbRemoveMember, Target: newcomer})
	r.etcd.err = ErrMemberNotFound
	a.Round(context.Background())
	if len(r.etcd.removed) != 1 || r.etcd.removed[0] != idS || !r.lastReport(t).Done || !strings.Contains(a.State().Find(planID, 4).Note, "gone") {
		t.Fatalf("removed %v, report %+v, state %+v", r.etcd.removed, r.lastReport(t), a.State().Find(planID, 4))
	}

	r.journal.j = journal(acting.PhaseRunning, &acting.Command{PlanID: planID, Seq: 5, Term: leaseTerm, Host: self, Verb: acting.VerbMoveLeader, Target: FormatMemberID(idA)})
	r.etcd.err = errors.New("etcd /v3/maintenance/transfer-leadership: 500: etcdserver: request timed out")
	a.Round(context.Background())
	if got := r.lastReport(t); got.Done || !strings.Contains(got.Error, "timed out") {
		t.Fatalf("failed move: %+v", got)
	}
}

// The file restarter's deadline comes from the actuator's clock: with no
// supervisor, the restart fails once learner_stall_time has passed on it.
func TestFileRestartDeadlineOnTheClock(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	fr := &FileRestarter{Dir: dir, Clock: r.clock}
	r.journal.j = journal(acting.PhaseRunning, cmd(acting.VerbEtcdOn, "", true))
	a := r.start(t, fr)
	done := make(chan struct{})
	go func() { a.Round(context.Background()); close(done) }()
	token := RestartToken(planID, 3, leaseTerm)
	waitFor(t, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, RequestFile))
		return err == nil && string(b) == token+"\n"
	})
	// Just under the deadline it still waits.
	waitFor(t, r.clock.HasWaiters)
	r.clock.Step(RestartTimeout(settings.Defaults()) - time.Second)
	select {
	case <-done:
		t.Fatalf("gave up before the deadline: %+v", r.record.puts)
	case <-time.After(50 * time.Millisecond):
	}
	r.clock.Step(2 * time.Second)
	<-done
	got := r.lastReport(t)
	if got.Done || !strings.Contains(got.Error, "never held token") {
		t.Fatalf("report %+v, want failed for the deadline", got)
	}
}

// The file restarter returns once the supervisor's done file holds its
// token, not another's.
func TestFileRestartProtocol(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	dir := t.TempDir()
	fr := &FileRestarter{Dir: dir, Clock: clk}
	if err := os.WriteFile(filepath.Join(dir, DoneFile), []byte("old/1/1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fr.Restart(context.Background(), "p/2/3") }()
	waitFor(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, RequestFile))
		return string(b) == "p/2/3\n"
	})
	waitFor(t, clk.HasWaiters)
	clk.Step(restartPoll)
	select {
	case err := <-errc:
		t.Fatalf("returned on another token's done file: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := os.WriteFile(filepath.Join(dir, DoneFile), []byte("p/2/3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, clk.HasWaiters)
	clk.Step(restartPoll)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := fr.Restart(context.Background(), "two\nlines"); err == nil {
		t.Error("a token of two lines was written")
	}
}

func TestParseRestarter(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	r, err := ParseRestarter("systemd", "/host", DefaultK3sUnit, DefaultNsenter, clk)
	if err != nil {
		t.Fatal(err)
	}
	cmd := r.(Systemd).Command(context.Background())
	if got := strings.Join(cmd.Args, " "); got != "/usr/bin/nsenter -t 1 -m -u -i -n -p -- systemctl restart k3s.service" {
		t.Errorf("command %q", got)
	}
	if cmd.SysProcAttr == nil || cmd.SysProcAttr.Chroot != "/proc/1/root" {
		t.Errorf("not chrooted into the host's root as its PID 1 sees it: %+v", cmd.SysProcAttr)
	}
	if c := (Systemd{Root: "/", Unit: "k3s.service", Nsenter: DefaultNsenter}).Command(context.Background()); c.SysProcAttr != nil {
		t.Errorf("chrooted on the host itself: %+v", c.SysProcAttr)
	}
	f, err := ParseRestarter("file:/run/fleet-role-lab", "/host", DefaultK3sUnit, DefaultNsenter, clk)
	if err != nil || f.(*FileRestarter).Dir != "/host/run/fleet-role-lab" {
		t.Errorf("file: %+v %v", f, err)
	}
	for _, c := range []struct{ v, unit, nsenter, says string }{
		{"reboot", DefaultK3sUnit, DefaultNsenter, `"reboot": want systemd`},
		{"file:run/lab", DefaultK3sUnit, DefaultNsenter, "absolute path on the host"},
		{"systemd", "k3s service", DefaultNsenter, "--k3s-unit"},
		{"systemd", DefaultK3sUnit, "nsenter", "--nsenter"},
	} {
		if _, err := ParseRestarter(c.v, "/", c.unit, c.nsenter, clk); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s %s %s: %v, want an error saying %q", c.v, c.unit, c.nsenter, err, c.says)
		}
	}
}

func TestDropInWrittenWhole(t *testing.T) {
	root := t.TempDir()
	for _, text := range []string{acting.DropInVoter, acting.DropInStandby} {
		if err := WriteDropIn(root, acting.DropInPath, text); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, acting.DropInPath)
		b, err := os.ReadFile(p)
		if err != nil || string(b) != text {
			t.Fatalf("%q %v", b, err)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 {
			t.Errorf("mode %v", fi.Mode())
		}
	}
	left, _ := filepath.Glob(filepath.Join(root, filepath.Dir(acting.DropInPath), ".*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// flakyLease fails its first read, as an API server away for a moment.
type flakyLease struct {
	mu    sync.Mutex
	reads int
}

func (f *flakyLease) Term(context.Context) (int32, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.reads == 1 {
		return 0, false, errors.New("connection refused")
	}
	return leaseTerm, true, nil
}

// Run decides again every RetryEvery on the actuator's clock: a Lease read
// that failed is tried again half a sample period later, not before.
func TestRunRetriesOnTheClock(t *testing.T) {
	r := newRig(t)
	r.journal.j = journal(acting.PhaseRunning, cmd(acting.VerbEtcdOff, "", false))
	lease := &flakyLease{}
	a, err := New(Config{Node: self, HostRoot: r.root, Settings: settings.Defaults(), Journal: r.journal, Lease: lease,
		Record: r.record, Etcd: r.etcd, Restart: r.restarts, State: FileState{Dir: r.stateDir, Node: self}, Clock: r.clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	reads := func() int { lease.mu.Lock(); defer lease.mu.Unlock(); return lease.reads }
	waitFor(t, func() bool { return reads() == 1 && r.clock.HasWaiters() })
	r.clock.Step(RetryEvery(settings.Defaults()) - time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	if reads() != 1 || r.dropIn(t) != "" {
		t.Fatalf("tried again before RetryEvery: %d reads, drop-in %q", reads(), r.dropIn(t))
	}
	r.clock.Step(time.Millisecond)
	waitFor(t, func() bool {
		r.record.mu.Lock()
		defer r.record.mu.Unlock()
		return len(r.record.puts) == 1
	})
	if reads() != 2 || r.dropIn(t) != acting.DropInStandby {
		t.Fatalf("after RetryEvery: %d reads, drop-in %q", reads(), r.dropIn(t))
	}
}

// downLease is the Lease of a host whose API server stopped: every read
// fails.
type downLease struct{}

func (downLease) Term(context.Context) (int32, bool, error) {
	return 0, false, errors.New("the host's API server serves no more")
}

// A settle on the real state file: armed and reported; an actuator started
// again meanwhile waits on; once the local etcd's port refuses connections
// (a removed member's etcd closes) k3s is restarted once, with no Lease
// read (the host's API server stopped with its member) and nothing asked
// of the member, and reported done.
func TestSettleRestartsOnceTheMemberIsGone(t *testing.T) {
	r := newRig(t)
	r.journal.j = journal(acting.PhaseRunning, cmd(acting.VerbSettle, "", true))
	a := r.start(t, nil)
	a.Round(context.Background())
	if got := r.lastReport(t); !got.Armed || got.Done || len(r.restarts.tokens) != 0 {
		t.Fatalf("after the first round: report %+v, restarts %v; want armed, none", got, r.restarts.tokens)
	}
	a = r.start(t, nil)
	a.cfg.Lease = downLease{}
	r.clock.Step(time.Second)
	a.Round(context.Background())
	if len(r.restarts.tokens) != 0 {
		t.Fatalf("restarted while the member is still in: %v", r.restarts.tokens)
	}
	r.etcd.closed = true
	a.Round(context.Background())
	a.Round(context.Background())
	if got := r.lastReport(t); !got.Done || got.Armed || len(r.restarts.tokens) != 1 || r.etcd.views != 0 {
		t.Fatalf("once the member is gone: report %+v, restarts %v, views of the member %d; want done, one restart, none", got, r.restarts.tokens, r.etcd.views)
	}
	// A port that cannot be told open or closed is waited out, not taken
	// for a removal.
	r2 := newRig(t)
	r2.etcd.listenErr = context.DeadlineExceeded
	r2.journal.j = journal(acting.PhaseRunning, cmd(acting.VerbSettle, "", true))
	a2 := r2.start(t, nil)
	a2.Round(context.Background())
	a2.Round(context.Background())
	if len(r2.restarts.tokens) != 0 {
		t.Errorf("restarted on an etcd port that timed out: %v", r2.restarts.tokens)
	}
}
