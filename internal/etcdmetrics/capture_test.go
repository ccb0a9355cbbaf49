package etcdmetrics

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
)

// The pages under testdata/ are re-captured from a real cluster with
//
//	go test ./internal/etcdmetrics -run TestCapture -capture -timeout 10m
//
// after which the values the parser tests assert must be read off the new
// pages again.
var capture = flag.Bool("capture", false, "re-capture testdata/*.prom from a real three-process etcd cluster")

// captureWrites is how long the cluster takes writes before the first
// pages are taken: long enough for etcd to feed the peer round-trip
// histogram more than once (first values about 5 s after a peer appears,
// then about two every 30 s, docs/facts.md).
const captureWrites = 60 * time.Second

func TestCapture(t *testing.T) {
	if !*capture {
		t.Log("pass -capture to re-capture testdata/")
		return
	}
	ctx := context.Background()
	c, err := etcdproc.Start(ctx, etcdproc.Config{Binary: testenv.Etcd(t), Dir: t.TempDir(), Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	began := time.Now()

	// Writes at a steady pace for the whole capture, so that every page is
	// one of a cluster under load.
	lctx, stop := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for lctx.Err() == nil {
			_ = c.Put(lctx, 1)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { stop(); <-loadDone })

	time.Sleep(captureWrites)
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := c.Followers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := fs[0]
	secs := func() int { return int(time.Since(began).Seconds()) }
	role := func(m *etcdproc.Member, r string) string {
		return fmt.Sprintf("%s of 3 (%s, ID %s)", m.Name, r, m.ID)
	}
	page := func(m *etcdproc.Member) []byte {
		t.Helper()
		resp, err := http.Get(m.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	save := func(name, header string, body []byte) {
		t.Helper()
		p := filepath.Join("testdata", name)
		if err := os.WriteFile(p, append([]byte("# "+header+"\n"), body...), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", p)
	}
	how := func(m *etcdproc.Member) string {
		return fmt.Sprintf("separate processes (lab/run/etcdproc), captured with an HTTP GET of %s after %d s of writes", m.MetricsURL, secs())
	}

	save("leader.prom", "etcd v3.6.15, member "+role(leader, "leader")+", "+how(leader), page(leader))
	fp := page(f)
	save("follower.prom", "etcd v3.6.15, member "+role(f, "follower")+", "+how(f), fp)

	// The k3s follower case: a page where a peer reads 2 for
	// etcd_network_active_peers. 3.6.15 writes 0 or 1, so this one is the
	// follower's page with that one value edited.
	re := regexp.MustCompile(`(?m)^(etcd_network_active_peers\{Local="[0-9a-f]+",Remote="[0-9a-f]+"\}) 1$`)
	loc := re.FindSubmatchIndex(fp)
	if loc == nil {
		t.Fatal("follower page has no active_peers series at 1")
	}
	edited := append(append(append([]byte(nil), fp[:loc[3]]...), " 2"...), fp[loc[1]:]...)
	save("follower-active-peers-2.prom", "etcd v3.6.15, DERIVED from follower.prom by editing only the first etcd_network_active_peers value from 1 to 2 (the k3s follower case: both streams to that peer counted), member "+role(f, "follower")+", "+how(f), edited)

	// Two scrapes of one member some seconds apart under writes.
	const apart = 10 * time.Second
	save("delta-1.prom", "etcd v3.6.15, member "+role(f, "follower")+", first of two scrapes 10 s apart, "+how(f), page(f))
	time.Sleep(apart)
	save("delta-2.prom", "etcd v3.6.15, member "+role(f, "follower")+", second of two scrapes 10 s apart, "+how(f), page(f))

	// A learner's page: the k3s join flow, then enough time for the learner
	// to catch up and connect to its peers.
	l, err := c.AddLearner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	save("learner.prom", "etcd v3.6.15, member "+strings.Replace(role(l, "learner"), "of 3", "of 3 voters + 1", 1)+", added with MemberAddAsLearner 10 s before, "+how(l), page(l))
	if err := c.Remove(ctx, l); err != nil {
		t.Fatal(err)
	}

	// A counter-reset pair: one member's page before and after a real
	// restart (SIGKILL, then the same data directory).
	save("restart-before.prom", "etcd v3.6.15, member "+role(f, "follower")+", before a restart (SIGKILL and start again), "+how(f), page(f))
	if err := f.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	save("restart-after.prom", "etcd v3.6.15, member "+role(f, "follower")+", 10 s after a restart (SIGKILL and start again), "+how(f), page(f))
}
