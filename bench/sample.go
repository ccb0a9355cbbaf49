package bench

import (
	"bufio"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
)

// Cost is what one sample took, averaged over a batch.
type Cost struct {
	Samples    int
	CPU        time.Duration // user + system
	Wall       time.Duration
	Allocs     float64 // heap allocations (ours only)
	AllocBytes float64
}

func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		panic(fmt.Sprintf("getrusage: %v", err)) // never fails for SELF/CHILDREN
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProbeSamples has p take n samples, back to back (a period of its fake
// clock each, the next as soon as the last is written), and returns the cost
// of one: everything a period does but the fsync reading, which a voter
// never takes (list the Nodes, connect to the other voters, scrape the etcd
// member, read memory and the link, append, encode, merge-patch the entry).
// The CPU is this process's own (getrusage RUSAGE_SELF), which the probe
// alone uses while the batch runs.
func ProbeSamples(ctx context.Context, p *Prober, n int) (Cost, error) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0, t0 := rusageCPU(syscall.RUSAGE_SELF), time.Now()
	for i := range n {
		p.clk.Step(p.period)
		if err := p.written(ctx); err != nil {
			return Cost{}, fmt.Errorf("probe sample %d of %d: %w", i+1, n, err)
		}
	}
	wall, cpu := time.Since(t0), rusageCPU(syscall.RUSAGE_SELF)-cpu0
	runtime.ReadMemStats(&m1)
	return Cost{
		Samples: n, CPU: cpu / time.Duration(n), Wall: wall / time.Duration(n),
		Allocs:     float64(m1.Mallocs-m0.Mallocs) / float64(n),
		AllocBytes: float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n),
	}, nil
}

// CheckProbeEntry reads the record the probe wrote and checks that its last
// sample has every reading: a sample that failed would be cheap for the
// wrong reason.
func (e *Env) CheckProbeEntry(ctx context.Context, want int) error {
	raw, err := kube.NewRecordsFor(e.Admin.CoreV1().ConfigMaps(e.Settings.RecordsNamespace()), e.Settings.RecordsNamespace()).Get(ctx, e.Node)
	if err != nil {
		return err
	}
	got, err := entry.Decode(raw)
	if err != nil {
		return fmt.Errorf("entry of %s: %w", e.Node, err)
	}
	if len(got.Samples) < want {
		return fmt.Errorf("entry of %s holds %d samples, want at least %d", e.Node, len(got.Samples), want)
	}
	last := got.Samples[len(got.Samples)-1]
	if len(last.Errors) > 0 || last.Etcd == nil || last.Etcd.Err != "" || len(last.Connect) != Voters-1 {
		return fmt.Errorf("last sample of %s is incomplete: errors %q, etcd %+v, %d connects", e.Node, last.Errors, last.Etcd, len(last.Connect))
	}
	for peer, c := range last.Connect {
		if c.Err != "" {
			return fmt.Errorf("last sample of %s: connect to %s: %s", e.Node, peer, c.Err)
		}
	}
	return nil
}

// EntryBytes is the size of the entry a ConfigMap of the namespace reads
// as: a probe's record (named after its node) with its tail in the tail
// layout, or the shell route's data.entry (ShellRecord).
func (e *Env) EntryBytes(ctx context.Context, name string) (int, error) {
	cms := e.Admin.CoreV1().ConfigMaps(e.Settings.RecordsNamespace())
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	if !record.IsRecord(cm) {
		return len(cm.Data[record.DataKey]), nil
	}
	text, err := kube.NewRecordsFor(cms, e.Settings.RecordsNamespace()).Get(ctx, name)
	return len(text), err
}

//go:embed shell_route.sh
var shellRoute []byte

// ShellRecord is the ConfigMap the shell route writes: record-shaped (the
// record's labels, one data key entry) and named shell-<node>, beside the
// probe's own record. The shell route acts as the admin: the admission
// policy lets the probe's ServiceAccount write only the record named after
// its node, and a second Node and Pod for the shell alone would change the
// Node list both routes read. The credential changes nothing the comparison
// counts, which is the client's CPU; the ConfigMap carries no owner, so the
// shell route's writes are as large as the probe's but for its one
// ownerReference. It is not a probe record of any Node: RemoveShellRecord
// takes it away before the controller runs.
func (e *Env) ShellRecord() string { return "shell-" + e.Node }

// RemoveShellRecord deletes the shell route's ConfigMap.
func (e *Env) RemoveShellRecord(ctx context.Context) error {
	err := e.Admin.CoreV1().ConfigMaps(e.Settings.RecordsNamespace()).Delete(ctx, e.ShellRecord(), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", e.ShellRecord(), err)
	}
	return nil
}

// ShellSamples takes n samples the shell way and returns the cost of one:
// the CPU is that of the shell and every process it ran (wait4's rusage of
// the child covers the descendants it waited for).
func (e *Env) ShellSamples(ctx context.Context, n int) (Cost, error) {
	work := filepath.Join(e.Dir, "shell")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return Cost{}, err
	}
	script := filepath.Join(work, "sample.sh")
	if err := os.WriteFile(script, shellRoute, 0o755); err != nil {
		return Cost{}, err
	}
	// The record exists before the first sample, as a probe's does after
	// its first write: the route's every sample is a get and a patch.
	cm := record.Object(e.Settings.RecordsNamespace(), record.Owner{}, "")
	cm.Name, cm.Data = e.ShellRecord(), nil
	if _, err := e.Admin.CoreV1().ConfigMaps(e.Settings.RecordsNamespace()).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return Cost{}, fmt.Errorf("create %s: %w", e.ShellRecord(), err)
	}
	env := append(os.Environ(),
		"KUBECONFIG="+e.AdminKubeconfig, "NS="+e.Settings.RecordsNamespace(), "CM="+e.ShellRecord(),
		"NODE="+e.Node, "METRICS="+e.MetricsURL,
		"WINDOW="+strconv.Itoa(e.Settings.Window), "WORK="+work,
		"PATH="+filepath.Dir(e.Tools.Kubectl)+":"+os.Getenv("PATH"))
	var cpu time.Duration
	t0 := time.Now()
	for range n {
		cmd := exec.CommandContext(ctx, "bash", script)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return Cost{}, fmt.Errorf("shell route: %w\n%s", err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return Cost{Samples: n, CPU: cpu / time.Duration(n), Wall: time.Since(t0) / time.Duration(n)}, nil
}

// Memory is a process's resident memory as /proc/PID/status gives it.
type Memory struct {
	RSS, HWM uint64 // bytes: VmRSS now, VmHWM its peak
	// Anon is the part of RSS that is the process's own (heap, stacks);
	// File is the executable's pages it has touched.
	Anon, File uint64
}

// ReadMemory reads the resident memory of pid.
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	var m Memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		field := map[string]*uint64{"VmRSS": &m.RSS, "VmHWM": &m.HWM, "RssAnon": &m.Anon, "RssFile": &m.File}[k]
		if !ok || field == nil {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
		}
		*field = kb << 10
	}
	return m, sc.Err()
}

// Prober is a probe loop (probe.Prober.Run) on a fake clock that the bench
// steps: each step is one period, taken as the DaemonSet's probe takes it,
// and the next comes as soon as the record is written.
type Prober struct {
	clk    *clocktesting.FakeClock
	period time.Duration
	wrote  chan struct{} // a record write, the end of a period
	stop   context.CancelFunc
	done   chan struct{}
}

// sampleWait bounds the wait for one period's write: a sample takes
// milliseconds, its readings half a period at most.
const sampleWait = time.Minute

// written waits for the loop's next write of its record.
func (p *Prober) written(ctx context.Context) error {
	t := time.NewTimer(sampleWait)
	defer t.Stop()
	select {
	case <-p.wrote:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("the probe wrote no record within %v of a period's start", sampleWait)
	}
}

// Close stops the loop and waits for it to return.
func (p *Prober) Close() {
	p.stop()
	<-p.done
}

// wroteRecords signals each write of the record on wrote, without waiting:
// one period writes once, and the bench waits for it.
type wroteRecords struct {
	kube.Records
	wrote chan<- struct{}
}

func (r wroteRecords) Put(ctx context.Context, owner record.Owner, text string) error {
	err := r.Records.Put(ctx, owner, text)
	select {
	case r.wrote <- struct{}{}:
	default:
	}
	return err
}
