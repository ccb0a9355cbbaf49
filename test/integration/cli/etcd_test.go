package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
)

// mainEtcd runs fleet-role check etcd through Main.
func mainEtcd(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(append([]string{"check", "etcd"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// etcdVerdict is a verdict of check etcd's JSON, as its readers take it.
type etcdVerdict struct {
	Verdict string   `json:"verdict"`
	Value   *float64 `json:"value"`
	Why     string   `json:"why"`
}

// etcdReport is the part of check etcd's JSON the test judges: the
// member's verdict and each latency's.
type etcdReport struct {
	Signals []struct {
		Signal string      `json:"signal"`
		Judged etcdVerdict `json:"judged"`
	} `json:"signals"`
	Judged etcdVerdict `json:"judged"`
}

func TestCheckEtcdLive(t *testing.T) {
	c, err := etcdproc.Start(context.Background(), etcdproc.Config{Binary: testenv.Etcd(t), Dir: t.TempDir(), Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	l, err := c.Leader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Writes during the interval, so that the member gains WAL fsyncs.
	done := make(chan error, 1)
	go func() { done <- c.Put(context.Background(), 30) }()
	code, out, errOut := mainEtcd("--metrics-url", l.MetricsURL, "--interval", "1s", "--timeout", "2s", "--json")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", out)
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exit %d, not one JSON object: %v\n%s%s", code, err, out, errOut)
	}
	// This machine's disk judges the member: on a busy machine its WAL
	// fsync p99 may pass etcd's 10 ms. Whatever the verdict, the exit
	// code and the figure must agree with it.
	var rep etcdReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	switch {
	case rep.Judged.Verdict == "unfit" && code == cli.ExitUnfit, rep.Judged.Verdict != "unfit" && code == cli.ExitOK:
	default:
		t.Fatalf("verdict %s (%s) and exit %d: %s", rep.Judged.Verdict, rep.Judged.Why, code, errOut)
	}
	if len(rep.Signals) < 2 || rep.Signals[0].Signal != "wal_fsync" || rep.Signals[1].Signal != "backend_commit" {
		t.Fatalf("signals %+v, want wal_fsync and backend_commit first", rep.Signals)
	}
	if wal := rep.Signals[0].Judged; wal.Value == nil || (wal.Verdict == "fit") != (*wal.Value < 0.010) {
		t.Errorf("wal_fsync judged %+v: fit must be a p99 under 10 ms", wal)
	}
	for _, k := range []string{"member_id", "is_leader", "is_learner", "has_leader", "connected_peers", "known_peers", "leader_changes", "wal_fsync", "backend_commit", "peer_rtt", "db_size_bytes", "quota_bytes", "interval_seconds", "signals", "judged"} {
		if _, ok := r[k]; !ok {
			t.Errorf("JSON lacks %s", k)
		}
	}
	if r["member_id"] != l.ID || r["is_leader"] != true || r["connected_peers"] != float64(2) {
		t.Errorf("member %v leader %v connected %v, want %s true 2", r["member_id"], r["is_leader"], r["connected_peers"], l.ID)
	}
	wal, _ := r["wal_fsync"].(map[string]any)
	if n, _ := wal["count"].(float64); n < 1 {
		t.Errorf("wal_fsync %v, want a count above 0", wal)
	}
	if _, ok := wal["p99_seconds"]; !ok {
		t.Errorf("wal_fsync lacks p99_seconds: %v", wal)
	}
	if s, _ := r["interval_seconds"].(float64); s < 1 {
		t.Errorf("interval_seconds %v, want at least 1", r["interval_seconds"])
	}

	// Nothing written in 100 ms: nothing judged, exit 0.
	code, out, errOut = mainEtcd("--metrics-url", l.MetricsURL, "--interval", "100ms")
	if code != cli.ExitOK {
		t.Fatalf("human: exit %d: %s", code, errOut)
	}
	t.Logf("%s", out)
	for _, want := range []string{"etcd member " + l.ID + " (leader), sees a leader", "2 connected of 2 known", "wal fsync:", "backend commit:", "of 2.0 GiB quota", "wal_fsync ", "verdict: "} {
		if !strings.Contains(out, want) {
			t.Errorf("human output lacks %q:\n%s", want, out)
		}
	}
}
