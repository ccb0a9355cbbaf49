package bench

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

// startEnv brings the fleet up for a benchmark or test and stops it
// afterwards.
func startEnv(t testing.TB) *Env {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tools := Tools{Etcd: testenv.Etcd(t), KubeAPIServer: testenv.KubeAPIServer(t), Kubectl: testenv.Kubectl(t)}
	e, err := Start(context.Background(), root, t.TempDir(), tools)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

// buildFleetRole builds the fleet-role binary from the checkout.
func buildFleetRole(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fleet-role")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/fleet-role")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fleet-role: %v\n%s", err, out)
	}
	return bin
}

// The etcd WAL bytes per sample written by real `fleet-role probe`
// processes, each with a token bound to a Pod on its own Node and a record
// of its own, through the real kube-apiserver, at 3 and at 6 hosts: the
// bench's 10 and 50 scaled down so that every run of the tests takes the
// same path. Doubling the hosts must leave the bytes per sample within
// MaxWALGrowth, and a sample must cost at most MaxWALToRecord times its
// record: with one shared ConfigMap the first doubled with the hosts.
func TestWALPerSample(t *testing.T) {
	e := startEnv(t)
	bin := buildFleetRole(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Eight periods: enough writes (24 and 48, about 1 KB each) that the
	// API server's own writes meanwhile (its leases, a few small objects)
	// add a few % at most to the bytes counted.
	const periods = 8
	small, err := e.WALPerSample(ctx, bin, 3, periods)
	if err != nil {
		t.Fatal(err)
	}
	large, err := e.WALPerSample(ctx, bin, 6, periods)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []WALRun{small, large} {
		t.Logf("%d hosts: %d writes (%d windows, %d tails, %.0f bytes each as stored), %d other revisions, %.0f WAL bytes per sample, record %.0f bytes stored (entry %.0f), measured over %s, run %s",
			r.Hosts, r.Writes, r.Windows, r.Tails, r.WrittenBytes, r.Other, r.PerSample(), r.RecordBytes, r.EntryBytes, r.Measured.Round(time.Millisecond), r.Elapsed.Round(time.Second))
		if r.Writes < r.Hosts*periods {
			t.Errorf("%d hosts: %d writes counted, want at least %d", r.Hosts, r.Writes, r.Hosts*periods)
		}
		// The Lease says the controller reads the tail layout: the
		// probes write tails most periods (a window about every ten).
		if r.Tails <= r.Windows {
			t.Errorf("%d hosts: %d tails and %d windows written, want mostly tails (the tail layout)", r.Hosts, r.Tails, r.Windows)
		}
	}
	growth, toRecord, problems := WALVerdict(small, large)
	t.Logf("growth %.3f (at most %.2f), WAL per sample / object written %.3f (at most %.0f), WAL per sample at most %d", growth, MaxWALGrowth, toRecord, MaxWALToRecord, MaxWALPerSample)
	for _, p := range problems {
		t.Error(p)
	}
}

// The verdict's bounds, at, just under and just over each.
func TestWALVerdict(t *testing.T) {
	run := func(hosts int, perSample, written float64) WALRun {
		return WALRun{Hosts: hosts, Writes: 1000, WALBytes: perSample * 1000, WrittenBytes: written}
	}
	const small, rec = 1000.0, 800.0
	for _, c := range []struct {
		name     string
		large    WALRun
		problems int
	}{
		{"flat", run(50, small, rec), 0},
		{"growth at the bound", run(50, small*MaxWALGrowth, small*MaxWALGrowth/MaxWALToRecord), 0},
		{"growth just over", run(50, small*MaxWALGrowth+1, rec), 1},
		{"record ratio at the bound", run(50, small, small/MaxWALToRecord), 0},
		{"record ratio just over", run(50, small, small/MaxWALToRecord-1), 1},
		{"both over", run(50, 1.4*small, 0.6*small), 2},
		{"a heartbeat's at the bound", run(50, MaxWALPerSample, MaxWALPerSample/MaxWALToRecord), 0},
		{"a heartbeat's just under", run(50, MaxWALPerSample-1, MaxWALPerSample/MaxWALToRecord), 0},
		{"a heartbeat's just over", run(50, MaxWALPerSample+1, MaxWALPerSample/MaxWALToRecord+1), 2},
	} {
		// The heartbeat's cases from a small run of the same bytes, so
		// that they pass no other bound.
		from := run(10, small, rec)
		if c.large.PerSample() >= MaxWALPerSample-1 {
			from = run(10, c.large.PerSample(), rec)
		}
		_, _, problems := WALVerdict(from, c.large)
		if len(problems) != c.problems {
			t.Errorf("%s: %d problems %q, want %d", c.name, len(problems), problems, c.problems)
		}
	}
	if _, _, p := WALVerdict(WALRun{Hosts: 10}, run(50, small, rec)); len(p) != 1 {
		t.Errorf("no writes at 10 hosts gave %q", p)
	}
}

// BenchmarkProbeSample is one probe period without the fsync reading, with a
// full window, against live etcd members and a real API server. Profile it
// with -cpuprofile or -memprofile; cpu-ns/op is the process's user+sys.
func BenchmarkProbeSample(b *testing.B) {
	e := startEnv(b)
	ctx := context.Background()
	p, err := e.NewProber(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if _, err := ProbeSamples(ctx, p, e.Settings.Window); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	c, err := ProbeSamples(ctx, p, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(c.CPU.Nanoseconds()), "cpu-ns/op")
	b.StopTimer()
	if err := e.CheckProbeEntry(ctx, e.Settings.Window); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkShellRoute is the same sample the original shell probe's way:
// kubectl, curl, jq and kubectl patch; cpu-ns/op is the children's.
func BenchmarkShellRoute(b *testing.B) {
	e := startEnv(b)
	ctx := context.Background()
	if _, err := e.ShellSamples(ctx, 2); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	c, err := e.ShellSamples(ctx, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(c.CPU.Nanoseconds()), "cpu-ns/op")
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestParseDecideBench(t *testing.T) {
	out := []byte(`goos: linux
BenchmarkDecide/hosts=5-2         	     213	   5470123 ns/op	   4100000 cpu-ns/op	     51200 entry-bytes/op	 2030592 B/op	   25362 allocs/op
BenchmarkDecide/hosts=50          	      68	  17500456 ns/op	    254976 entry-bytes/op	 7827456 B/op	   81953 allocs/op
PASS
`)
	runs, err := ParseDecideBench(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0] != (DecideRun{Hosts: 5, NsPerOp: 5470123, CPUNsPerOp: 4100000, AllocsPerOp: 25362, BytesPerOp: 2030592, EntryBytes: 51200}) || runs[1].Hosts != 50 {
		t.Fatalf("parsed %+v", runs)
	}
	if _, err := ParseDecideBench([]byte("FAIL\n")); err == nil {
		t.Fatal("no benchmark lines parsed without an error")
	}
}

func TestParseFootprint(t *testing.T) {
	out := []byte(`    entry_test.go:150: standby, 3 voters: 5141 bytes (record cap 212107)
    entry_test.go:150: standby, 5 voters: 6606 bytes (record cap 212107)
    entry_test.go:150: voter, 3 voters: 16247 bytes (record cap 212107)
    entry_test.go:150: voter, 5 voters: 19434 bytes (record cap 212107)
`)
	f, err := ParseFootprint(out)
	if err != nil {
		t.Fatal(err)
	}
	if f.Bytes["voter, 5 voters"] != 19434 || f.Bytes["standby, 3 voters"] != 5141 || f.Cap != 212107 {
		t.Fatalf("parsed %v, cap %d", f.Bytes, f.Cap)
	}
	if name, b := f.Largest(); name != "voter, 5 voters" || b != 19434 {
		t.Fatalf("largest %s, %d bytes", name, b)
	}
	if _, err := ParseFootprint(out[:100]); err == nil {
		t.Fatal("a missing size parsed without an error")
	}
}

func TestWriteSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "performance.md")
	doc := "# title\n\n" + BeginMarker + "\nold\n" + EndMarker + "\n\nafter\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, "new table\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := "# title\n\n" + BeginMarker + "\nnew table\n" + EndMarker + "\n\nafter\n"
	if string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if err := os.WriteFile(path, []byte("no markers"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSection(path, "x"); err == nil || !strings.Contains(err.Error(), "no bench markers") {
		t.Fatalf("err %v", err)
	}
}

// The gate holds every waiter while shut, lets them all on when released,
// and gives a waiter up when its context ends.
func TestGate(t *testing.T) {
	g := newGate()
	if err := g.wait(context.Background()); err != nil {
		t.Fatalf("open gate: %v", err)
	}
	g.shut()
	g.shut() // shutting twice is one shut
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- g.wait(context.Background()) }()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("shut gate, context cancelled: %v, want context.Canceled", err)
	}
	select {
	case err := <-done:
		t.Fatalf("a waiter passed the shut gate (%v)", err)
	default:
	}
	g.release()
	g.release() // releasing twice is one release
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter was still held 10s after the gate opened")
		}
	}
}
