package probe_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/fsync"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// diskSampler takes the real disk reading (probe.Host's, on a real
// directory) and fakes the rest.
type diskSampler struct {
	*testkit.Sampler
	host *probe.Host
}

func (d diskSampler) RemoveStale() ([]string, error) { return d.host.RemoveStale() }

func newDiskSampler(dir string) diskSampler {
	h := &probe.Host{FsyncDir: dir}
	return diskSampler{Sampler: &testkit.Sampler{FsyncReading: h.Fsync}, host: h}
}

// diskDir is a fresh directory under fsync.DefaultDir, which must be on a
// disk here: a reading on tmpfs would not show what a disk reading leaves.
func diskDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(fsync.DefaultDir, "fleet-role-probe-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if fs, err := fsync.FilesystemAt(dir); err != nil || fs.Memory {
		t.Fatalf("%s is on %s (%v): these tests need %s on a disk", dir, fs.Name, err, fsync.DefaultDir)
	}
	return dir
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// eligibleAgent is a store and a Node list in memory with one eligible
// non-voter, agent-1, whose entry holds seed when seed is not nil.
func eligibleAgent(t *testing.T, s settings.Settings, seed *entry.Entry) (*kubefake.Records, *kubefake.Nodes) {
	t.Helper()
	store := kubefake.NewRecords(s.RecordsNamespace())
	if seed != nil {
		text, err := entry.Encode(*seed)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(context.Background(), record.Owner{Name: seed.Node}, text); err != nil {
			t.Fatal(err)
		}
	}
	nodes := &kubefake.Nodes{}
	nodes.Set(corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", Labels: map[string]string{s.EligibleLabel: "true"}}})
	return store, nodes
}

// runProbe runs agent-1's probe on clk's clock.
func runProbe(t *testing.T, clk *testkit.Clocked, s settings.Settings, sampler probe.Sampler, store kube.Records, nodes kube.Nodes, log *testkit.Log) *testkit.Loop {
	t.Helper()
	periods := clk.Watch(nodes)
	p, err := probe.New(clk.Config(probe.Config{Node: "agent-1", Settings: s, Records: store, Sampler: sampler, Log: log.Logger}, periods))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(periods.Stop)
	return testkit.Go(t, "probe agent-1", p.Run)
}

// poll steps clk until cond holds, and fails the test when it has not
// within a real deadline.
func poll(t *testing.T, clk *testkit.Clocked, within time.Duration, what string, cond func() bool) {
	t.Helper()
	clk.Await(t, within, func() error {
		if cond() {
			return nil
		}
		return errors.New(what + ": not yet")
	})
}

// SIGTERM during the disk reading: Run returns only once the reading has
// stopped and removed its 22 MiB file. The real reading, on a real disk.
func TestStopDuringDiskReadingLeavesNoFile(t *testing.T) {
	s := testkit.Settings(t, 100*time.Millisecond)
	dir := diskDir(t)
	store, nodes := eligibleAgent(t, s, nil)
	ds := newDiskSampler(dir)
	log := testkit.NewLog()
	clk := testkit.NewClocked(s.SamplePeriod)
	loop := runProbe(t, clk, s, ds, store, nodes, log)

	// The first sample of a host with no reading starts one at once.
	poll(t, clk, time.Minute, "a disk reading's file appears in "+dir, func() bool {
		for _, n := range dirNames(t, dir) {
			if strings.HasPrefix(n, fsync.FilePrefix) {
				return true
			}
		}
		return false
	})
	loop.Stop(t)
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("after the probe stopped, %s holds %v; want nothing left", dir, names)
	}
	if recs := log.Records("disk reading still running at exit; its file is removed at the next start"); len(recs) != 0 {
		t.Errorf("the stop did not wait for the reading: %v", recs)
	}
	if ds.Fsyncs() != 1 {
		t.Errorf("%d readings, want the one stopped", ds.Fsyncs())
	}
}

// A reading's file left by a killed probe is removed when the next starts;
// files of any other name, and a reading in use, are not.
func TestStartRemovesStaleReadingFiles(t *testing.T) {
	s := testkit.Settings(t, 100*time.Millisecond)
	s.FsyncSkipReason = "no reading in this test: only the start's clean-up is under test"
	dir := diskDir(t)
	stale := filepath.Join(dir, fsync.FilePrefix+"1234567")
	foreign := []string{filepath.Join(dir, "member.wal"), filepath.Join(dir, fsync.FilePrefix+"notdigits"), filepath.Join(dir, "fleet-role-fsync-123")}
	for _, p := range append([]string{stale}, foreign...) {
		if err := os.WriteFile(p, make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	store, nodes := eligibleAgent(t, s, nil)
	log := testkit.NewLog()
	host := &probe.Host{FsyncDir: dir, FsyncSkipReason: s.FsyncSkipReason}
	ds := diskSampler{Sampler: &testkit.Sampler{FsyncReading: host.Fsync}, host: host}
	clk := testkit.NewClocked(s.SamplePeriod)
	loop := runProbe(t, clk, s, ds, store, nodes, log)
	poll(t, clk, time.Minute, "the start's clean-up is logged", func() bool {
		return len(log.Records("removed a disk reading's file left by an earlier start")) > 0
	})
	loop.Stop(t)
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("stale %s: %v, want it removed", stale, err)
	}
	for _, p := range foreign {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s, not a reading's file, was touched: %v", p, err)
		}
	}
	if recs := log.Records("removed a disk reading's file left by an earlier start"); len(recs) != 1 || recs[0]["file"] != stale {
		t.Errorf("logged %v, want the one stale file", recs)
	}
	// A directory that does not exist holds nothing stale.
	if removed, err := (&probe.Host{FsyncDir: filepath.Join(dir, "absent")}).RemoveStale(); err != nil || removed != nil {
		t.Errorf("missing dir: %v, %v", removed, err)
	}
}

// The probe judges a reading's age by its own clock (the real one's
// monotonic readings; here a fake one, stepped a period at a time). A
// resumed reading stamped in the future (a clock ahead, or a hostile write)
// does not stop new readings: it is replaced one window after the start, as
// is any resumed reading, and a host with none takes one with its first
// sample.
func TestResumedReadingAgeIsTheProbes(t *testing.T) {
	s := testkit.Settings(t, 100*time.Millisecond)
	window := time.Duration(s.Window) * s.SamplePeriod
	for _, tc := range []struct {
		name string
		age  *time.Duration // the resumed reading's age by its stamp; nil: none
	}{
		{"none", nil},
		{"future", ptr(-200 * 365 * 24 * time.Hour)},
		{"just now", ptr(time.Duration(0))},
		{"a year ago", ptr(365 * 24 * time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seed *entry.Entry
			if tc.age != nil {
				f := testkit.FitFsync(time.Now().Add(-*tc.age))
				seed = &entry.Entry{Node: "agent-1", Fsync: &f}
			}
			store, nodes := eligibleAgent(t, s, seed)
			clk := testkit.NewClocked(s.SamplePeriod)
			var firstReading time.Time
			sampler := &testkit.Sampler{Clock: clk.Clock}
			sampler.FsyncReading = func(context.Context) entry.FsyncReading {
				if firstReading.IsZero() {
					firstReading = clk.Clock.Now()
				}
				return testkit.FitFsync(clk.Clock.Now())
			}
			t0 := clk.Clock.Now()
			loop := runProbe(t, clk, s, sampler, store, nodes, testkit.NewLog())
			poll(t, clk, time.Minute, "a disk reading is taken", func() bool { return sampler.Fsyncs() > 0 })
			loop.Stop(t)
			plans := sampler.Plans()
			if tc.age == nil {
				if !plans[0].Fsync {
					t.Errorf("no resumed reading: the first sample's plan %+v takes none", plans[0])
				}
				return
			}
			if plans[0].Fsync {
				t.Error("a resumed reading was replaced at once, not one window after the start")
			}
			// By the probe's clock, the first period at or after one window.
			if waited := firstReading.Sub(t0); waited < window || waited >= window+s.SamplePeriod {
				t.Errorf("first reading %v after the start, want one window (%v) at most a period late", waited, window)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
