package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/testenv"
)

// startEnv brings the fleet up for a benchmark and stops it afterwards.
func startEnv(b *testing.B) *Env {
	b.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		b.Fatal(err)
	}
	tools := Tools{Etcd: testenv.Etcd(b), KubeAPIServer: testenv.KubeAPIServer(b), Kubectl: testenv.Kubectl(b)}
	e, err := Start(context.Background(), root, b.TempDir(), tools)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Stop)
	return e
}

// BenchmarkProbeSample is one probe period without the fsync reading, with a
// full window, against live etcd members and a real API server. Profile it
// with -cpuprofile or -memprofile; cpu-ns/op is the process's user+sys.
func BenchmarkProbeSample(b *testing.B) {
	e := startEnv(b)
	p, err := e.NewProber()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ProbeSamples(ctx, p, e.Settings.Window)
	b.ReportAllocs()
	b.ResetTimer()
	c := ProbeSamples(ctx, p, b.N)
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
BenchmarkDecide/hosts=5-2         	     213	   5470123 ns/op	     51200 entry-bytes/op	 2030592 B/op	   25362 allocs/op
BenchmarkDecide/hosts=50          	      68	  17500456 ns/op	    254976 entry-bytes/op	 7827456 B/op	   81953 allocs/op
PASS
`)
	runs, err := ParseDecideBench(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0] != (DecideRun{Hosts: 5, NsPerOp: 5470123, AllocsPerOp: 25362, BytesPerOp: 2030592, EntryBytes: 51200}) || runs[1].Hosts != 50 {
		t.Fatalf("parsed %+v", runs)
	}
	if _, err := ParseDecideBench([]byte("FAIL\n")); err == nil {
		t.Fatal("no benchmark lines parsed without an error")
	}
}

func TestParseFootprint(t *testing.T) {
	out := []byte(`    entry_test.go:150: standby, 3 voters: 5141 bytes (budget 10240)
    entry_test.go:150: standby, 5 voters: 6606 bytes (budget 10240)
    entry_test.go:150: voter, 3 voters: 16247 bytes (budget 32768)
    entry_test.go:150: voter, 5 voters: 19434 bytes (budget 32768)
`)
	f, err := ParseFootprint(out)
	if err != nil {
		t.Fatal(err)
	}
	if f.Bytes["voter, 5 voters"] != 19434 || f.Bytes["standby, 3 voters"] != 5141 {
		t.Fatalf("parsed %v", f.Bytes)
	}
	if _, err := ParseFootprint(out[:100]); err == nil {
		t.Fatal("a missing size parsed without an error")
	}
}

// Hosts in one ConfigMap: at, just under and just over the room for one
// more standby.
func TestHostsPerConfigMap(t *testing.T) {
	const voter, standby = 20000, 6000
	room := ConfigMapLimit - 5*(voter+KeyBytes)
	per := standby + KeyBytes
	if got, want := HostsPerConfigMap(5, voter, standby), 5+room/per; got != want {
		t.Fatalf("got %d, want %d", got, want)
	}
	// A standby exactly one byte larger than fits the last place loses it.
	exact := room/(room/per) - KeyBytes
	if HostsPerConfigMap(5, voter, exact) != 5+room/per || HostsPerConfigMap(5, voter, exact+1) != 5+room/per-1 {
		t.Fatalf("boundary at %d bytes a standby: %d, %d", exact, HostsPerConfigMap(5, voter, exact), HostsPerConfigMap(5, voter, exact+1))
	}
	if HostsPerConfigMap(5, ConfigMapLimit, 1) != 0 {
		t.Fatal("voters over the limit leave room for hosts")
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
