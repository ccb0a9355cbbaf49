package pods

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/httpserve"
	"github.com/fleet-role/fleet-role/lab/fleets/cluster"
)

// slowFlood holds every connection place the probe's server gives other
// hosts, as many slow clients on several addresses would: from each of its
// addresses it keeps the per-host share open, each connection sending a
// header line a second and never ending its request, and dials again at
// once when the server closes one (its read timeout). It counts the
// connections it holds and those the server refused on arrival.
type slowFlood struct {
	held, refused atomic.Int64
	stop          chan struct{}
	once          sync.Once
	wg            sync.WaitGroup
	lastErr       atomic.Value // the last refusal's error, for a failure's message
}

// startSlowFlood holds perHost connections from each of the addresses.
func startSlowFlood(addr string, hosts []net.IP, perHost int) *slowFlood {
	f := &slowFlood{stop: make(chan struct{})}
	for _, h := range hosts {
		for range perHost {
			f.wg.Go(func() { f.hold(addr, h) })
		}
	}
	return f
}

// hold keeps one connection from `from` open until stop, dialling again
// whenever the server closes it.
func (f *slowFlood) hold(addr string, from net.IP) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: from}, Timeout: 2 * time.Second}
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			f.lastErr.Store(fmt.Sprintf("dial: %v", err))
			f.refused.Add(1)
			f.pause(100 * time.Millisecond)
			continue
		}
		// The server refuses a connection over its caps by closing it
		// at once; one it holds waits for the rest of the request.
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\n")
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
			_, err = c.Read(make([]byte, 1))
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			c.Close()
			f.lastErr.Store(fmt.Sprintf("first read: %v", err))
			f.refused.Add(1)
			f.pause(100 * time.Millisecond)
			continue
		}
		f.held.Add(1)
		for err = nil; err == nil; {
			select {
			case <-f.stop:
				err = net.ErrClosed
			case <-time.After(time.Second):
				_, err = io.WriteString(c, "X-Slow: 1\r\n")
			}
		}
		f.held.Add(-1)
		c.Close()
	}
}

func (f *slowFlood) pause(d time.Duration) {
	select {
	case <-f.stop:
	case <-time.After(d):
	}
}

// Stop ends the flood and waits for its connections to close; once.
func (f *slowFlood) Stop() {
	f.once.Do(func() { close(f.stop) })
	f.wg.Wait()
}

// probeCounts are the kubelet's prober_probe_total for one container, by
// probe type and result ("Liveness/successful").
type probeCounts map[string]float64

var proberLine = regexp.MustCompile(`^prober_probe_total\{([^}]*)\} ([0-9.e+]+)$`)

// proberCounts reads the kubelet's /metrics/probes through the API
// server's node proxy: the counts of the container's checks.
func (s *scenario) proberCounts(t *testing.T, ctx context.Context, pod *corev1.Pod, container string) probeCounts {
	t.Helper()
	raw, err := s.c.Admin.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", pod.Spec.NodeName, "proxy/metrics/probes").DoRaw(ctx)
	if err != nil {
		t.Fatalf("read the kubelet's /metrics/probes: %v", err)
	}
	counts := probeCounts{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		m := proberLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(m[1], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		if labels["pod_uid"] != string(pod.UID) || labels["container"] != container {
			continue
		}
		n, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("prober_probe_total %q: %v", sc.Text(), err)
		}
		counts[labels["probe_type"]+"/"+labels["result"]] += n
	}
	return counts
}

// checkChecksUnderFlood: while slow clients on more addresses than the
// probe's server gives places to hold every place it gives other hosts,
// the kubelet's liveness and readiness checks of the probe (which come from
// the node's own address, the pod being on the host's network) are served
// every time, and the probe is not restarted.
func (s *scenario) checkChecksUnderFlood(t *testing.T, ctx context.Context, probe *corev1.Pod) {
	lim := httpserve.DefaultLimits
	var (
		port int32
		live int32
	)
	for _, c := range probe.Spec.Containers {
		if c.Name != "probe" {
			continue
		}
		live = c.LivenessProbe.PeriodSeconds
		for _, p := range c.Ports {
			if p.Name == "metrics" {
				port = p.ContainerPort
			}
		}
	}
	if port == 0 || live == 0 {
		t.Fatalf("the probe pod %s has no container probe with a port named metrics and a liveness check", probe.Name)
	}
	addr := net.JoinHostPort(cluster.NodeIP.String(), strconv.Itoa(int(port)))
	pod, err := s.c.Admin.CoreV1().Pods(namespace).Get(ctx, probe.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restarts := restartsOf(pod, "probe")
	before := s.proberCounts(t, ctx, pod, "probe")

	// One address more than the places allow at their full share, so
	// that the flood fills the cap and some of it is always refused.
	// and a witness beside them.
	hosts := lim.MaxConns/lim.MaxConnsPerHost + 1
	addrs := s.c.ClientAddresses(t, hosts+1)
	f := startSlowFlood(addr, addrs[:hosts], lim.MaxConnsPerHost)
	defer f.Stop()
	began := time.Now()
	// witness: another host, under its share, is refused: the flood holds
	// every place other hosts may have.
	witness := func() error {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: addrs[hosts]}, Timeout: 2 * time.Second}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil // reset while dialling: refused
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n"); err != nil {
			return nil
		}
		if b, err := io.ReadAll(c); err == nil && len(b) > 0 {
			return fmt.Errorf("a host outside the flood was served (%d bytes) with the flood holding %d connections", len(b), f.held.Load())
		}
		return nil
	}
	if err := poll(ctx, 30*time.Second, func() error {
		if h := f.held.Load(); h < int64(lim.MaxConns) {
			return fmt.Errorf("the flood holds %d connections, the cap is %d (%d refused, the last: %v)", h, lim.MaxConns, f.refused.Load(), f.lastErr.Load())
		}
		return witness()
	}); err != nil {
		t.Fatalf("the flood never filled the probe's places: %v", err)
	}
	t.Logf("the flood, %d slow connections from %d addresses, holds %d places %.1f s after its start; another host is refused",
		hosts*lim.MaxConnsPerHost, hosts, f.held.Load(), time.Since(began).Seconds())

	// Wait for a liveness and a readiness check of the kubelet's made
	// during the flood: at most one liveness period and a sync's slack.
	var during probeCounts
	if err := poll(ctx, time.Duration(2*live)*time.Second, func() error {
		during = s.proberCounts(t, ctx, pod, "probe")
		for _, k := range []string{"Liveness/successful", "Readiness/successful"} {
			if during[k] <= before[k] {
				return fmt.Errorf("no %s check since the flood began", k)
			}
		}
		return nil
	}); err != nil {
		t.Errorf("the kubelet's checks during the flood: %v (counts %v before, %v now)", err, before, during)
	}
	// The server closes each of the flood's connections once its read
	// timeout passes (the slow-header defence) and the flood dials again:
	// in that gap another host may be served. The flood still holds every
	// place when, within two read timeouts, a witness is refused again.
	if err := poll(ctx, 2*lim.ReadTimeout+5*time.Second, witness); err != nil {
		t.Errorf("at the end of the flood, for two read timeouts (%v): %v", 2*lim.ReadTimeout, err)
	}
	held, refused := f.held.Load(), f.refused.Load()
	f.Stop()
	for k, n := range during {
		if !strings.HasSuffix(k, "/successful") && n > before[k] {
			t.Errorf("the kubelet's %s checks of the probe rose from %v to %v during the flood", k, before[k], n)
		}
	}
	pod, err = s.c.Admin.CoreV1().Pods(namespace).Get(ctx, probe.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := restartsOf(pod, "probe"); r != restarts {
		t.Errorf("the probe restarted %d times during the flood", r-restarts)
	}
	t.Logf("over %.1f s of flood (holding %d places at its end, %d of its connections refused), the kubelet's checks of the probe: %v before, %v after",
		time.Since(began).Seconds(), held, refused, before, during)
}

// restartsOf is the container's restart count, -1 when the pod has no
// status of it.
func restartsOf(pod *corev1.Pod, container string) int32 {
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == container {
			return st.RestartCount
		}
	}
	return -1
}
