package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// Component is one run of the built fleet-role binary as its own process,
// so that its resident memory is its own and not the bench's.
type Component struct {
	Name    string // "probe" or "controller"
	Loops   int    // samples or decisions taken when Memory was read
	Memory  Memory
	Elapsed time.Duration
}

// RunComponent starts `fleet-role ARGS...` with its metrics served on a free
// loopback port, waits until counter has reached loops, reads its memory,
// and stops it with SIGTERM.
func RunComponent(ctx context.Context, binary, name, counter string, loops int, timeout time.Duration, env []string, args ...string) (Component, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Component{}, err
	}
	addr := l.Addr().String()
	l.Close()
	logPath := filepath.Join(os.TempDir(), "fleet-role-bench-"+name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return Component{}, err
	}
	defer logf.Close()
	cmd := exec.Command(binary, append([]string{name, "--metrics-address", addr}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return Component{}, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	deadline := time.Now().Add(timeout)
	url := "http://" + addr + "/metrics"
	for {
		n, err := scrapeCounter(ctx, url, counter)
		if err == nil && n >= loops {
			m, err := ReadMemory(cmd.Process.Pid)
			el := time.Since(t0)
			stop()
			return Component{Name: name, Loops: n, Memory: m, Elapsed: el}, err
		}
		select {
		case err := <-exited:
			return Component{}, fmt.Errorf("fleet-role %s exited (%v) after %d of %d loops; log %s", name, err, n, loops, logPath)
		case <-ctx.Done():
			stop()
			return Component{}, ctx.Err()
		case <-time.After(time.Second):
		}
		if time.Now().After(deadline) {
			stop()
			return Component{}, fmt.Errorf("fleet-role %s: %d of %d loops within %s; log %s", name, n, loops, timeout, logPath)
		}
	}
}

// scrapeCounter sums the series of one metric on a Prometheus text page.
func scrapeCounter(ctx context.Context, url, name string) (int, error) {
	v, err := scrapeSums(ctx, url, name)
	if err != nil {
		return 0, err
	}
	return int(v[name]), nil
}

// scrapeSums fetches a Prometheus text page once and sums the series of
// each metric named; a metric the page lacks is absent from the map.
func scrapeSums(ctx context.Context, url string, names ...string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	sums := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		for _, name := range names {
			if line == name || strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
				f := strings.Fields(line)
				v, err := strconv.ParseFloat(f[len(f)-1], 64)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %w", url, line, err)
				}
				sums[name] += v
			}
		}
	}
	return sums, nil
}

// ComponentPeriod is the sample period the component runs take: the
// shortest at which the probe's two requests a period stay within
// client-go's default 5 requests a second (internal/kube), so that the run
// is the probe as shipped, only faster.
const ComponentPeriod = 400 * time.Millisecond

// RunProbe runs `fleet-role probe` as the first voter for n samples.
func (e *Env) RunProbe(ctx context.Context, binary string, n int) (Component, error) {
	// The controller's Lease says it reads the tail layout, so that the
	// probe writes it as in an install of this release.
	if err := e.announceTailLayout(ctx); err != nil {
		return Component{}, err
	}
	return RunComponent(ctx, binary, "probe", "fleet_role_probe_samples_total", n,
		time.Duration(n)*ComponentPeriod*3+time.Minute, nil,
		"--kubeconfig", e.ProbeKubeconfig, "--node", e.Node, "--metrics-url", e.MetricsURL,
		"--fsync-dir", e.Dir, "--"+settings.FlagName("sample_period"), ComponentPeriod.String())
}

// RunController runs `fleet-role controller` for n decisions, with env
// added to its environment.
func (e *Env) RunController(ctx context.Context, binary string, n int, env ...string) (Component, error) {
	tok, err := e.API.TokenFor(ctx, e.Settings.Namespace, ControllerSA, 24*time.Hour)
	if err != nil {
		return Component{}, err
	}
	kc := filepath.Join(e.Dir, "controller.kubeconfig")
	if err := e.API.Kubeconfig(kc, tok); err != nil {
		return Component{}, err
	}
	return RunComponent(ctx, binary, "controller", "fleet_role_decisions_total", n,
		time.Duration(n)*ComponentPeriod*3+time.Minute, append([]string{"FLEET_ROLE_DRY_RUN=true"}, env...),
		"--kubeconfig", kc, "--"+settings.FlagName("sample_period"), ComponentPeriod.String())
}

// FillerHosts is how many standbys FillRecords adds: the largest fleet
// BenchmarkDecide measures (5, 50, 500 hosts), so that the controller's
// memory is read at the size its decision time is known for. Records have
// no shared 1 MiB to fill any more; a fleet's size is what sizes the
// controller.
const FillerHosts = 500

// FillRecords gives the fleet FillerHosts more standbys, each with an
// eligible Node and a record of its own, so that the controller is measured
// at a large fleet. Each record is created as the admin, shaped as a probe
// writes it (the record's labels, data.entry, an ownerReference to its
// Node), and holds the first voter's real window without its etcd readings
// (what a standby records) under the filler's name. The shell route's
// ConfigMap, which is no host's record, is removed first. It returns the
// records the namespace then holds and their entries' total bytes.
func (e *Env) FillRecords(ctx context.Context) (hosts, bytes int, err error) {
	if err := e.RemoveShellRecord(ctx); err != nil {
		return 0, 0, err
	}
	records := kube.NewRecordsFor(e.Admin.CoreV1().ConfigMaps(e.Settings.RecordsNamespace()), e.Settings.RecordsNamespace())
	raw, err := records.Get(ctx, e.Node)
	if err != nil {
		return 0, 0, err
	}
	own, err := entry.Decode(raw)
	if err != nil {
		return 0, 0, fmt.Errorf("entry of %s: %w", e.Node, err)
	}
	for i := range own.Samples {
		own.Samples[i].Etcd = nil
	}
	created, err := e.createNodes(ctx, e.namedStandbys("filler", FillerHosts, e.Settings.PinnedLabel, "false"))
	if err != nil {
		return 0, 0, err
	}
	texts := make([]string, len(created))
	for i, n := range created {
		own.Node = n.Name
		if texts[i], err = entry.Encode(own); err != nil {
			return 0, 0, err
		}
	}
	if err := e.createRecords(ctx, created, texts); err != nil {
		return 0, 0, err
	}
	l, err := e.Admin.CoreV1().ConfigMaps(e.Settings.RecordsNamespace()).List(ctx, metav1.ListOptions{LabelSelector: record.Selector})
	if err != nil {
		return 0, 0, fmt.Errorf("list records: %w", err)
	}
	for _, cm := range l.Items {
		bytes += len(cm.Data[record.DataKey])
	}
	return len(l.Items), bytes, nil
}

// FloodNodes and FloodBytes size the flood FloodRecords adds: the issue's
// figure (1,000 Nodes, 200 KB records), a node holding the join token
// registering Nodes that no vote could go to, a probe on each writing a
// record near the cap (213,026 bytes at the shipped settings).
const (
	FloodNodes = 1000
	FloodBytes = 200_000
)

// FloodRecords adds n Nodes that are neither voters nor eligible, each
// with a record of size bytes (created as the admin, shaped as the probe
// writes it; the policy admits it from that node's probe too, being under
// the cap), so that the controller is measured against records it must
// count and never hold. It returns the records' total bytes.
func (e *Env) FloodRecords(ctx context.Context, n, size int) (int, error) {
	created, err := e.createNodes(ctx, e.namedStandbys("flood", n, e.Settings.EligibleLabel, "false"))
	if err != nil {
		return 0, err
	}
	text := strings.Repeat("x", size)
	texts := make([]string, len(created))
	for i := range texts {
		texts[i] = text
	}
	if err := e.createRecords(ctx, created, texts); err != nil {
		return 0, err
	}
	return n * size, nil
}

// namedStandbys is n standby Nodes as FleetNodes makes them, named
// prefix-NNNN.fleet.example.internal, each with label set to value.
func (e *Env) namedStandbys(prefix string, n int, label, value string) []corev1.Node {
	nodes := make([]corev1.Node, n)
	for i := range nodes {
		name := fmt.Sprintf("%s-%04d.fleet.example.internal", prefix, i)
		nodes[i] = FleetNodes(e.Settings, 0, 1, nil)[0]
		nodes[i].Name = name
		nodes[i].Labels["kubernetes.io/hostname"] = name
		nodes[i].Labels[label] = value
	}
	return nodes
}

// createRecords creates, as the admin, the record of each node holding the
// entry of the same index, shaped as the probe writes it.
func (e *Env) createRecords(ctx context.Context, nodes []corev1.Node, texts []string) error {
	cms := e.Admin.CoreV1().ConfigMaps(e.Settings.RecordsNamespace())
	for i, n := range nodes {
		obj := record.Object(e.Settings.RecordsNamespace(), record.Owner{Name: n.Name, UID: n.UID}, texts[i])
		if _, err := cms.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create record %s: %w", obj.Name, err)
		}
	}
	return nil
}
