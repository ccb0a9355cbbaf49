package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// The bounds the "Done when" sets on what one sample costs the etcd
// fleet-role judges, now that each host writes a record of its own: the
// bytes etcd's WAL takes per sample may grow by at most a quarter from 10 to
// 50 recording hosts (flat in the fleet's size, where the shared ConfigMap
// grew with it: every write rewrote every host's window), and stay within
// twice the record's own size (a write costs its record and etcd's framing,
// not the fleet).
const (
	MaxWALGrowth   = 1.25
	MaxWALToRecord = 2.0
	// MaxWALPerSample is a kubelet heartbeat's budget, about 100 bytes a
	// second a node since heartbeats moved to Leases (KEP-589), at the
	// shipped 15 s period (docs/performance.md).
	MaxWALPerSample = 100 * 15
)

// WALPeriod is the sample period of the WAL measurement: a second, so that a
// measurement of tens of periods takes a minute rather than the shipped
// 15 s period's quarter of an hour. What a write costs etcd does not depend
// on how often it comes.
const WALPeriod = time.Second

// WALRun is one measurement of the etcd WAL bytes the probes' writes cost.
type WALRun struct {
	Hosts   int
	Periods int // periods the measurement waited for (Hosts x Periods writes)
	// Writes is how many record writes of the measured hosts etcd stored
	// between the two scrapes (one sample each); Other the rest of etcd's
	// revisions meanwhile (the API server's leases and the like).
	Writes, Other int
	// WALBytes is what etcd_disk_wal_write_bytes_total gained between the
	// scrapes, the mean over the members (each writes the whole log).
	WALBytes float64
	// RecordBytes is the mean size of a measured record as etcd stores it
	// (the ConfigMap's protobuf encoding, managedFields included);
	// EntryBytes the mean of the entry it reads as (with its tail, in the
	// tail layout).
	RecordBytes, EntryBytes float64
	// WrittenBytes is the mean size, as etcd stores it, of the objects the
	// writes counted stored: the record's in the entry layout; a window's
	// or a tail's in the tail layout (docs/records.md, "Layouts").
	WrittenBytes float64
	// Windows and Tails count the writes of the records and of their
	// tails.
	Windows, Tails int
	Elapsed        time.Duration // the whole run: start, warm-up, measurement
	Measured       time.Duration // between the two scrapes
}

// PerSample is the WAL bytes per record write.
func (r WALRun) PerSample() float64 {
	if r.Writes == 0 {
		return 0
	}
	return r.WALBytes / float64(r.Writes)
}

// WALVerdict holds two runs, at fewer and at more hosts, to the bounds: the
// growth of the bytes per sample from small to large, the large run's
// bytes per sample over the size of the objects it wrote, and each run's
// bytes per sample under a heartbeat's. ok is false with the reasons, each
// naming its figure and bound, when either is passed.
func WALVerdict(small, large WALRun) (growth, toRecord float64, problems []string) {
	growth = large.PerSample() / small.PerSample()
	toRecord = large.PerSample() / large.WrittenBytes
	if small.Writes == 0 || large.Writes == 0 {
		problems = append(problems, fmt.Sprintf("no record writes measured (%d at %d hosts, %d at %d hosts)", small.Writes, small.Hosts, large.Writes, large.Hosts))
		return growth, toRecord, problems
	}
	if !(growth <= MaxWALGrowth) {
		problems = append(problems, fmt.Sprintf("WAL bytes per sample grew %.3fx from %d to %d hosts (%.0f to %.0f bytes), more than the %.2fx allowed",
			growth, small.Hosts, large.Hosts, small.PerSample(), large.PerSample(), MaxWALGrowth))
	}
	if !(toRecord <= MaxWALToRecord) {
		problems = append(problems, fmt.Sprintf("WAL bytes per sample at %d hosts are %.3f times the %.0f bytes of the objects written, more than the %.0fx allowed",
			large.Hosts, toRecord, large.WrittenBytes, MaxWALToRecord))
	}
	for _, r := range []WALRun{small, large} {
		if !(r.PerSample() <= MaxWALPerSample) {
			problems = append(problems, fmt.Sprintf("WAL bytes per sample at %d hosts are %.0f, more than a heartbeat's %d", r.Hosts, r.PerSample(), MaxWALPerSample))
		}
	}
	return growth, toRecord, problems
}

// WALHostName names the i-th recording host of the WAL measurement.
func WALHostName(i int) string { return fmt.Sprintf("standby-wal-%03d", i+1) }

// walEvent is one stored write of a record or its tail, as the admin's
// watch saw it: its node, its revision, its size as etcd stores it, and
// whether it was the tail.
type walEvent struct {
	name   string
	rv     int64
	stored int
	tail   bool
}

// WALPerSample runs `fleet-role probe` (binary, each its own process) on
// hosts standbys and measures the etcd WAL bytes their writes cost. Each
// standby has an eligible Node and a token bound to a Pod on that Node, so
// that its writes pass the admission policy as in a cluster. Before the
// probes start, each record is written as the admin with a full realistic
// window of a standby (testkit.RealisticEntry, connects to the three
// voters, a disk reading), shaped as the probe writes it, so that each probe
// resumes a full window and every write it makes is a full window's. Once
// every probe has written twice, the WAL counter and revision of every etcd
// member are scraped, the probes run periods more periods, and they are
// scraped again; the writes counted are those of the measured records (and
// their tails) whose revision lies between the two scrapes. The controller's
// Lease says its holder reads the tail layout, as this release's controller
// writes it, so that a probe of this release writes it (an older one reads
// no Lease). Nodes and Pods stay for a larger run after a smaller one; the
// records are written afresh each run, and their tails removed.
func (e *Env) WALPerSample(ctx context.Context, binary string, hosts, periods int) (WALRun, error) {
	run := WALRun{Hosts: hosts, Periods: periods}
	started := time.Now()
	s := e.Settings
	s.SamplePeriod = WALPeriod
	if err := s.Validate(); err != nil {
		return run, fmt.Errorf("wal settings: %w", err)
	}
	nodes, err := e.walNodes(ctx, hosts)
	if err != nil {
		return run, err
	}
	var voters []string
	for i := range Voters {
		voters = append(voters, VoterName(i))
	}
	// The window ends now, and its disk reading was taken now: the probe's
	// next reading falls due a window later, after the measurement, so the
	// entries keep a real reading's size throughout.
	t0 := time.Now().Add(-time.Duration(s.Window) * s.SamplePeriod).UTC()
	if err := e.announceTailLayout(ctx); err != nil {
		return run, err
	}
	admin := kube.NewRecordsFor(e.Admin.CoreV1().ConfigMaps(s.RecordsNamespace()), s.RecordsNamespace())
	// Delete in the tail layout: the record and its tail.
	cleared := kube.NewRecordsFor(e.Admin.CoreV1().ConfigMaps(s.RecordsNamespace()), s.RecordsNamespace(), kube.Layout{})
	names := map[string]bool{}
	for _, n := range nodes {
		if err := cleared.Delete(ctx, n.Name); err != nil {
			return run, fmt.Errorf("clear record %s: %w", n.Name, err)
		}
		en := testkit.RealisticEntry(n.Name, voters, -1, s.Window, s.SamplePeriod, t0)
		en.Fsync.At = time.Now().UTC()
		text, err := entry.Encode(en)
		if err != nil {
			return run, err
		}
		if err := admin.Put(ctx, record.Owner{Name: n.Name, UID: n.UID}, text); err != nil {
			return run, fmt.Errorf("seed record %s: %w", n.Name, err)
		}
		names[n.Name] = true
	}

	events, stopWatch, err := e.watchRecords(ctx, names)
	if err != nil {
		return run, err
	}
	defer stopWatch()
	revStart, err := e.etcdRevision(ctx)
	if err != nil {
		return run, err
	}

	dir := filepath.Join(e.Dir, fmt.Sprintf("wal-%d", hosts))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return run, err
	}
	logPath := filepath.Join(dir, "probes.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return run, err
	}
	defer logf.Close()
	procs := make([]*exec.Cmd, 0, hosts)
	exited := make(chan error, hosts)
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for range procs {
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
			}
		}
	}()
	for _, n := range nodes {
		tok, err := e.ProbeToken(ctx, n.Name)
		if err != nil {
			return run, err
		}
		kc := filepath.Join(dir, n.Name+".kubeconfig")
		if err := e.API.Kubeconfig(kc, tok); err != nil {
			return run, err
		}
		cmd := exec.Command(binary, "probe", "--kubeconfig", kc, "--node", n.Name,
			"--metrics-address", "", "--fsync-dir", dir,
			"--"+settings.FlagName("sample_period"), s.SamplePeriod.String(),
			// The reading was seeded a moment ago and falls due after
			// the measurement; should a slow start delay it that long,
			// it is skipped rather than writing 22 MiB for each host.
			"--"+settings.FlagName("fsync_skip_reason"), "bench: the WAL measurement takes no disk reading")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			return run, fmt.Errorf("start probe %s: %w", n.Name, err)
		}
		procs = append(procs, cmd)
		go func() { exited <- cmd.Wait() }()
	}

	// Warm-up: every probe has resumed its window and written twice.
	wait := func(what string, within time.Duration, done func() bool) error {
		deadline := time.Now().Add(within)
		for !done() {
			select {
			case err := <-exited:
				exited <- err
				return fmt.Errorf("a probe exited (%v) while waiting for %s; log %s", err, what, logPath)
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			if err := events.failed(); err != nil {
				return err
			}
			if time.Now().After(deadline) {
				per := map[string]int{}
				for _, ev := range events.since(revStart) {
					per[ev.name]++
				}
				return fmt.Errorf("%s not within %s: writes seen since the probes started, by host: %v; the probes' log ends:\n%s", what, within, per, tail(logPath, 20))
			}
		}
		return nil
	}
	// A probe's start, its token's first requests and two periods, for
	// every host on two shared cores.
	warm := time.Minute + time.Duration(hosts)*time.Second
	err = wait("every probe to write its record twice", warm, func() bool {
		per := map[string]int{}
		for _, ev := range events.since(revStart) {
			per[ev.name]++
		}
		for n := range names {
			if per[n] < 2 {
				return false
			}
		}
		return true
	})
	if err != nil {
		return run, err
	}

	before, err := e.walScrape(ctx)
	if err != nil {
		return run, err
	}
	t1 := time.Now()
	// The measurement lasts until the probes have written periods times
	// each; a write's every byte is counted wherever the interval ends.
	want := hosts * periods
	err = wait(fmt.Sprintf("%d record writes", want), time.Duration(periods)*s.SamplePeriod*3+time.Minute, func() bool {
		return len(events.between(before.revision, 1<<62)) >= want
	})
	if err != nil {
		return run, err
	}
	after, err := e.walScrape(ctx)
	if err != nil {
		return run, err
	}
	run.Measured = time.Since(t1)
	// Every write up to the second scrape's revision has been seen once the
	// watch has delivered one beyond it (a probe writes each period).
	if err := wait("the watch to pass the second scrape", time.Minute, func() bool {
		return len(events.between(after.revision, 1<<62)) > 0
	}); err != nil {
		return run, err
	}
	measured := events.between(before.revision, after.revision)
	run.Writes = len(measured)
	run.Other = int(after.revision-before.revision) - run.Writes
	var written float64
	for _, ev := range measured {
		written += float64(ev.stored)
		if ev.tail {
			run.Tails++
		} else {
			run.Windows++
		}
	}
	if run.Writes > 0 {
		run.WrittenBytes = written / float64(run.Writes)
	}
	run.WALBytes = after.walBytes - before.walBytes

	var rec, ent float64
	for _, n := range nodes {
		r, en, err := e.checkWALRecord(ctx, n.Name, s.Window)
		if err != nil {
			return run, err
		}
		rec, ent = rec+float64(r), ent+float64(en)
	}
	run.RecordBytes, run.EntryBytes = rec/float64(hosts), ent/float64(hosts)
	run.Elapsed = time.Since(started)
	return run, nil
}

// walNodes returns the first n WAL hosts' Nodes, creating those missing as
// eligible standbys.
func (e *Env) walNodes(ctx context.Context, n int) ([]corev1.Node, error) {
	var out, missing []corev1.Node
	for i := range n {
		name := WALHostName(i)
		got, err := e.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			out = append(out, *got)
			continue
		}
		node := FleetNodes(e.Settings, 0, 1, nil)[0]
		node.Name = name
		node.Labels["kubernetes.io/hostname"] = name
		missing = append(missing, node)
	}
	created, err := e.createNodes(ctx, missing)
	if err != nil {
		return nil, err
	}
	return append(out, created...), nil
}

// walSample is one scrape of every etcd member.
type walSample struct {
	walBytes float64 // etcd_disk_wal_write_bytes_total, the members' mean
	revision int64   // the first member's current revision
}

// walScrape reads the WAL bytes of every member and the first member's
// revision (from the same page as its WAL bytes).
func (e *Env) walScrape(ctx context.Context) (walSample, error) {
	var w walSample
	for i, m := range e.Etcd.Members {
		v, err := scrapeSums(ctx, m.MetricsURL, "etcd_disk_wal_write_bytes_total", "etcd_debugging_mvcc_current_revision")
		if err != nil {
			return w, fmt.Errorf("scrape etcd member %d: %w", i+1, err)
		}
		b, ok := v["etcd_disk_wal_write_bytes_total"]
		r, ok2 := v["etcd_debugging_mvcc_current_revision"]
		if !ok || !ok2 {
			return w, fmt.Errorf("etcd member %d's page %s lacks etcd_disk_wal_write_bytes_total or etcd_debugging_mvcc_current_revision", i+1, m.MetricsURL)
		}
		w.walBytes += b / float64(len(e.Etcd.Members))
		if i == 0 {
			w.revision = int64(r)
		}
	}
	return w, nil
}

func (e *Env) etcdRevision(ctx context.Context) (int64, error) {
	w, err := e.walScrape(ctx)
	return w.revision, err
}

// recordEvents collects the admin's watch of the records.
type recordEvents struct {
	mu     sync.Mutex
	events []walEvent
	err    error
}

// between returns the events with a revision in (from, to].
func (r *recordEvents) between(from, to int64) []walEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []walEvent
	for _, ev := range r.events {
		if ev.rv > from && ev.rv <= to {
			out = append(out, ev)
		}
	}
	return out
}

func (r *recordEvents) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *recordEvents) since(from int64) []walEvent { return r.between(from, 1<<62) }

// watchRecords watches, as the admin, every write of the named records from
// now on; each event's resource version is the etcd revision that stored it.
// The admin's client bounds a request to 30 s, a watch included, so the
// watch is taken up again from the last revision it delivered whenever the
// server ends it, as an informer's reflector does.
func (e *Env) watchRecords(ctx context.Context, names map[string]bool) (*recordEvents, func(), error) {
	cms := e.Admin.CoreV1().ConfigMaps(e.Settings.RecordsNamespace())
	opts := metav1.ListOptions{LabelSelector: record.AnySelector, AllowWatchBookmarks: true}
	l, err := cms.List(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("list records: %w", err)
	}
	opts.ResourceVersion = l.ResourceVersion
	wctx, cancel := context.WithCancel(ctx)
	r := &recordEvents{}
	fail := func(err error) {
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wctx.Err() == nil {
			w, err := cms.Watch(wctx, opts)
			if err != nil {
				if wctx.Err() == nil {
					fail(fmt.Errorf("watch records from revision %s: %w", opts.ResourceVersion, err))
				}
				return
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					fail(fmt.Errorf("watch of the records: %v", ev.Object))
					w.Stop()
					return
				}
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok {
					continue
				}
				opts.ResourceVersion = cm.ResourceVersion
				node := record.NodeOf(cm)
				if (ev.Type != watch.Added && ev.Type != watch.Modified) || !names[node] {
					continue
				}
				rv, err := strconv.ParseInt(cm.ResourceVersion, 10, 64)
				if err != nil {
					fail(fmt.Errorf("record %s: resource version %q: %w", cm.Name, cm.ResourceVersion, err))
					w.Stop()
					return
				}
				stored, err := StoredSize(cm)
				if err != nil {
					fail(err)
					w.Stop()
					return
				}
				r.mu.Lock()
				r.events = append(r.events, walEvent{name: node, rv: rv, stored: stored, tail: record.IsTail(cm)})
				r.mu.Unlock()
			}
			w.Stop()
		}
	}()
	return r, func() { cancel(); <-done }, nil
}

// checkWALRecord reads node's record and checks that it holds a full
// window of samples, the last one with a connect to every voter, none
// failed: a record that shrank or a probe that failed would make the bytes
// per sample small for the wrong reason. It returns the record's size as
// etcd stores it and its entry's.
func (e *Env) checkWALRecord(ctx context.Context, node string, window int) (stored, entryBytes int, err error) {
	cms := e.Admin.CoreV1().ConfigMaps(e.Settings.RecordsNamespace())
	cm, err := cms.Get(ctx, record.Name(node), metav1.GetOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("record of %s: %w", node, err)
	}
	text, err := kube.NewRecordsFor(cms, e.Settings.RecordsNamespace()).Get(ctx, node)
	if err != nil {
		return 0, 0, err
	}
	en, err := entry.Decode(text)
	if err != nil {
		return 0, 0, fmt.Errorf("entry of %s: %w", node, err)
	}
	if len(en.Samples) != window {
		return 0, 0, fmt.Errorf("entry of %s holds %d samples, want a full window of %d", node, len(en.Samples), window)
	}
	last := en.Samples[len(en.Samples)-1]
	if len(last.Errors) > 0 || len(last.Connect) != Voters {
		return 0, 0, fmt.Errorf("last sample of %s: errors %q, %d connects (want %d, one a voter)", node, last.Errors, len(last.Connect), Voters)
	}
	for peer, c := range last.Connect {
		if c.Err != "" {
			return 0, 0, fmt.Errorf("last sample of %s: connect to %s: %s", node, peer, c.Err)
		}
	}
	n, err := StoredSize(cm)
	return n, len(text), err
}

// announceTailLayout makes the controller's Lease say, as this release's
// controller does at each renewal, that its holder reads the tail layout
// (record.FormatAnnotation): the probes of this release then write it.
func (e *Env) announceTailLayout(ctx context.Context) error {
	leases := e.Admin.CoordinationV1().Leases(e.Settings.Namespace)
	ann := map[string]string{record.FormatAnnotation: strconv.Itoa(record.FormatRead)}
	l, err := leases.Get(ctx, controller.LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		holder := "bench"
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: controller.LeaseName, Namespace: e.Settings.Namespace, Annotations: ann},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
	} else if err == nil {
		l.Annotations = ann
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("announce the tail layout on Lease %s/%s: %w", e.Settings.Namespace, controller.LeaseName, err)
	}
	return nil
}

// StoredSize is the size of cm as the API server stores it in etcd: its
// protobuf encoding (the API server's storage media type) with the resource
// version cleared, as the storage layer clears it before writing.
func StoredSize(cm *corev1.ConfigMap) (int, error) {
	obj := cm.DeepCopy()
	obj.ResourceVersion = ""
	obj.APIVersion, obj.Kind = "v1", "ConfigMap"
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(obj, &buf); err != nil {
		return 0, fmt.Errorf("encode %s as protobuf: %w", cm.Name, err)
	}
	if buf.Len() == 0 {
		return 0, errors.New("protobuf encoding of " + cm.Name + " is empty")
	}
	return buf.Len(), nil
}

// tail is the last n lines of the file at path, for an error.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
