package etcdproc

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

// start starts a cluster for a test and stops it when the test ends.
func start(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	cfg.Binary = testenv.Etcd(t)
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	began := time.Now()
	c, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	t.Logf("%d members healthy with a leader after %v", len(c.Members), time.Since(began).Round(time.Millisecond))
	return c
}

// alive reports whether a process with this pid exists (and is not a zombie
// we have already reaped).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func TestStartStop(t *testing.T) {
	c := start(t, Config{Members: 3})
	if len(c.Members) != 3 {
		t.Fatalf("%d members, want 3", len(c.Members))
	}
	ids := map[string]bool{}
	ports := map[string]bool{}
	for _, m := range c.Members {
		if m.ID == "" || strings.HasPrefix(m.ID, "0") {
			t.Errorf("%s: ID %q, want unpadded hex", m.Name, m.ID)
		}
		ids[m.ID] = true
		for _, u := range []string{m.ClientURL, m.PeerURL, m.MetricsURL} {
			if ports[u] {
				t.Errorf("URL %s used twice", u)
			}
			ports[u] = true
		}
		if m.AdvertisePeerURL != m.PeerURL {
			t.Errorf("%s advertises %s, listens on %s", m.Name, m.AdvertisePeerURL, m.PeerURL)
		}
		resp, err := http.Get(m.MetricsURL)
		if err != nil {
			t.Fatalf("%s metrics: %v", m.Name, err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if !strings.Contains(b.String(), `etcd_server_id{server_id="`+m.ID+`"} 1`) {
			t.Errorf("%s metrics page does not name its own ID %s", m.Name, m.ID)
		}
	}
	if len(ids) != 3 {
		t.Errorf("IDs %v, want 3 distinct", ids)
	}
	l, err := c.Leader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fs, err := c.Followers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 2 {
		t.Fatalf("%d followers, want 2", len(fs))
	}
	for _, f := range fs {
		if f == l {
			t.Fatalf("leader %s among followers", l.Name)
		}
	}
	if err := c.Put(ctxT(t, 30*time.Second), 20); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, m := range c.Members {
		pids = append(pids, m.PID())
	}
	c.Stop()
	c.Stop() // idempotent
	for i, m := range c.Members {
		if m.Running() {
			t.Errorf("%s still running after Stop", m.Name)
		}
		if alive(pids[i]) {
			t.Errorf("%s pid %d still exists after Stop", m.Name, pids[i])
		}
	}
}

func TestPauseResumeKillRestart(t *testing.T) {
	c := start(t, Config{Members: 3})
	fs, err := c.Followers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f := fs[0]
	if err := f.Pause(); err != nil {
		t.Fatal(err)
	}
	if st, err := procState(f.PID()); err != nil || st != "T" {
		t.Errorf("paused member's state is %q (%v), want T", st, err)
	}
	// The others still make progress with one follower paused.
	if err := c.Put(ctxT(t, 30*time.Second), 5); err != nil {
		t.Fatal(err)
	}
	if err := f.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Status(context.Background()); err != nil {
		t.Fatalf("resumed member: %v", err)
	}
	old := f.PID()
	id := f.ID
	if err := f.Kill(); err != nil {
		t.Fatal(err)
	}
	if f.Running() || alive(old) {
		t.Fatalf("killed member still running")
	}
	if err := f.Pause(); err == nil {
		t.Errorf("Pause of a dead member succeeded")
	}
	if err := f.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.PID() == old || !f.Running() {
		t.Errorf("restart kept pid %d or is not running", old)
	}
	if f.ID != id {
		t.Errorf("restarted member's ID %s, want %s", f.ID, id)
	}
	if err := c.Put(ctxT(t, 30*time.Second), 5); err != nil {
		t.Fatal(err)
	}
}

func TestLearnerFlow(t *testing.T) {
	c := start(t, Config{Members: 3})
	l, err := c.AddLearner(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !st.IsLearner {
		t.Errorf("%s is not a learner after AddLearner", l.Name)
	}
	if err := c.Promote(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	// The promotion is committed when Promote returns; the learner says
	// so once it has applied it, which may be a moment later (CI saw it
	// still a learner right after).
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err = l.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !st.IsLearner {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still a learner 10 s after Promote", l.Name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	ml, err := cli.MemberList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != 4 {
		t.Fatalf("%d members, want 4", len(ml.Members))
	}
	if err := c.Remove(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if l.Running() {
		t.Errorf("removed member still running")
	}
	ml, err = cli.MemberList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != 3 {
		t.Fatalf("%d members after remove, want 3", len(ml.Members))
	}
}

func TestStartFailsWithLogTail(t *testing.T) {
	_, err := Start(context.Background(), Config{
		Binary:  testenv.Etcd(t),
		Dir:     t.TempDir(),
		Members: 1,
		// etcd refuses an election timeout under 5 x the heartbeat
		// interval (docs/facts.md, etcd timing).
		HeartbeatInterval: 100 * time.Millisecond,
		ElectionTimeout:   400 * time.Millisecond,
	})
	if err == nil {
		t.Fatal("Start succeeded with an election timeout etcd refuses")
	}
	if !strings.Contains(err.Error(), "exited while starting") || !strings.Contains(err.Error(), "election") {
		t.Errorf("error does not say the member exited and why: %v", err)
	}
}

func TestStartNeedsBinaryAndDir(t *testing.T) {
	if _, err := Start(context.Background(), Config{Dir: t.TempDir()}); err == nil {
		t.Error("Start without a binary succeeded")
	}
	if _, err := Start(context.Background(), Config{Binary: "etcd"}); err == nil {
		t.Error("Start without a directory succeeded")
	}
}

func TestLogsPrefixed(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	c := start(t, Config{Members: 1, Stdout: lockedWriter{&mu, &buf}})
	c.Stop()
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "["+c.Members[0].Name+"] ") {
		t.Errorf("log lines not prefixed with the member's name")
	}
	if c.Members[0].LogTail() == "" {
		t.Errorf("no log tail kept")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// BenchmarkStart measures how long a three-member cluster takes from the
// first process to every member healthy with a leader, and to stop.
func BenchmarkStart(b *testing.B) {
	bin := testenv.Etcd(b)
	for b.Loop() {
		c, err := Start(context.Background(), Config{Binary: bin, Dir: b.TempDir(), Members: 3})
		if err != nil {
			b.Fatal(err)
		}
		c.Stop()
	}
}
