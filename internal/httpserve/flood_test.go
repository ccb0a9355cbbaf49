package httpserve

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// childEnv names the limits a re-executed test binary serves with: the
// server under measurement runs in a process of its own, so that its RSS is
// its own and not the 8,000 client sockets'.
const childEnv = "FLEET_ROLE_HTTPSERVE_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(serveChild(mode))
	}
	os.Exit(m.Run())
}

// serveChild serves on loopback with the named limits, prints its address,
// and answers each "stats" line on stdin with its memory and connections
// until stdin closes.
func serveChild(mode string) int {
	lim := DefaultLimits
	if mode == "none" {
		lim = Limits{}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector())
	s, err := startLimits("127.0.0.1:0", reg, Plain(func() error { return nil }), nil, lim)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("addr %s\n", s.Addr)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		c := s.Conns()
		fmt.Printf("stats %d %d %d %d %d\n", ms.HeapInuse+ms.StackInuse, runtime.NumGoroutine(), c.Open, c.Accepted, c.Refused)
	}
	return 0
}

type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	addr string
}

type childStats struct {
	heapStack, rss, hwm uint64 // bytes
	goroutines          int
	open                int
	accepted, refused   uint64
}

func startChild(t *testing.T, mode string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewScanner(outp)}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	if !c.out.Scan() {
		t.Fatalf("server process (%s) printed no address", mode)
	}
	c.addr = strings.TrimPrefix(c.out.Text(), "addr ")
	return c
}

func (c *child) stats(t *testing.T) childStats {
	t.Helper()
	if _, err := io.WriteString(c.in, "stats\n"); err != nil {
		t.Fatal(err)
	}
	if !c.out.Scan() {
		t.Fatal("server process ended")
	}
	var s childStats
	if _, err := fmt.Sscanf(c.out.Text(), "stats %d %d %d %d %d", &s.heapStack, &s.goroutines, &s.open, &s.accepted, &s.refused); err != nil {
		t.Fatalf("stats line %q: %v", c.out.Text(), err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "kB" {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				s.rss = n << 10
			case "VmHWM:":
				s.hwm = n << 10
			}
		}
	}
	return s
}

const (
	floodConns = 8000
	// hostShare: four connections from each flooding address, so that the
	// flood is at every address's per-host cap and the total cap is what
	// holds it.
	hostShare = 4
	// probeHeadroom is what the probe may add before its 128 MiB limit:
	// the limit less its measured peak (VmHWM 49.2 MiB, docs/performance.md)
	// and the fsync reading's 22 MiB file in the page cache, both charged
	// to the pod.
	probeHeadroom = 128<<20 - 49<<20 - 22<<20
)

// floodFrom is the loopback address of flooding host i.
func floodFrom(i int) net.IP { return net.IPv4(127, 1, byte(i/250), byte(i%250+1)) }

// flood opens n keep-alive connections from n/hostShare loopback addresses,
// sends one request on each and leaves it open; it returns the connections
// made and the number reset before the dial returned (the server refused
// those at once).
func flood(t *testing.T, addr string, n int) ([]net.Conn, int) {
	t.Helper()
	var (
		mu    sync.Mutex
		conns []net.Conn
		reset int
		wg    sync.WaitGroup
		next  = make(chan int)
	)
	for w := 0; w < 32; w++ {
		wg.Go(func() {
			for i := range next {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: floodFrom(i / hostShare)}, Timeout: 5 * time.Second}
				c, err := d.Dial("tcp", addr)
				if err != nil {
					mu.Lock()
					reset++
					mu.Unlock()
					continue
				}
				_, _ = io.WriteString(c, getHealthz) // a reset one refuses it; the server counts that
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns, reset
}

func needFiles(t *testing.T, n uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur < n && rl.Max >= n {
		rl.Cur = n
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			t.Fatal(err)
		}
	}
	if rl.Cur < n {
		t.Fatalf("RLIMIT_NOFILE is %d (hard %d): this test holds %d connections and needs %d descriptors; raise it (ulimit -n %d)", rl.Cur, rl.Max, floodConns, n, n)
	}
}

// 8,000 idle keep-alive connections against the real server, within
// DefaultLimits and without any: the caps hold the server's added memory
// far inside the probe's headroom, where without them it grows past the
// probe's whole limit.
func TestFloodOfIdleConnections(t *testing.T) {
	// The test process holds every client socket; the server process, at
	// worst (no caps), every server socket. Go raises the soft limit to
	// the hard one at start; check it is enough.
	needFiles(t, floodConns+256)

	added := map[string]childStats{}
	for _, mode := range []string{"default", "none"} {
		c := startChild(t, mode)
		// Warm the server: one scrape and one health check, so that what
		// is measured is the flood and not the first request's setup.
		for _, path := range []string{"/metrics", "/healthz"} {
			resp, err := http.Get("http://" + c.addr + path)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		base := c.stats(t)
		conns, reset := flood(t, c.addr, floodConns)
		// Wait until the server has taken in or refused every connection
		// the kernel completed.
		var after childStats
		deadline := time.Now().Add(2 * time.Minute)
		for {
			after = c.stats(t)
			if after.accepted+after.refused >= floodConns+base.accepted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: server took in %d and refused %d of %d connections", mode, after.accepted-base.accepted, after.refused, len(conns))
			}
			time.Sleep(50 * time.Millisecond)
		}
		d := childStats{
			heapStack:  after.heapStack - min(after.heapStack, base.heapStack),
			rss:        after.rss - min(after.rss, base.rss),
			hwm:        after.hwm - min(after.hwm, base.hwm),
			goroutines: after.goroutines - base.goroutines,
			open:       after.open, accepted: after.accepted - base.accepted, refused: after.refused,
		}
		added[mode] = d
		t.Logf("%s limits: %d connections made, %d reset while dialling; server holds %d, took in %d, refused %d; added heap+stacks %.1f MiB, RSS %.1f MiB, peak RSS %.1f MiB, %d goroutines (race detector: %v)",
			mode, len(conns), reset, d.open, d.accepted, d.refused, mib(d.heapStack), mib(d.rss), mib(d.hwm), d.goroutines, raceEnabled)

		if mode == "default" {
			// The warm-up's keep-alive connections came from the host
			// itself, beside the cap of other hosts' connections.
			if d.open > DefaultLimits.MaxConns+base.open {
				t.Errorf("server holds %d connections, cap %d and the warm-up's own %d", d.open, DefaultLimits.MaxConns, base.open)
			}
			if d.refused < floodConns-uint64(DefaultLimits.MaxConns) {
				t.Errorf("refused %d of %d, want all but the cap of %d", d.refused, floodConns, DefaultLimits.MaxConns)
			}
			// The caps allow 64 held connections of about 30 KiB: 2 MiB.
			// Allow four times that for the runtime's own slack, a
			// seventh of the probe's headroom.
			const budget = 8 << 20
			if d.heapStack > budget {
				t.Errorf("added heap and stacks %.1f MiB, budget %.1f MiB", mib(d.heapStack), mib(budget))
			}
			if !raceEnabled && d.hwm > budget {
				t.Errorf("added peak RSS %.1f MiB, budget %.1f MiB", mib(d.hwm), mib(budget))
			}
			// The host's own check (from the address the server
			// listens on, as the kubelet's comes) is served at once,
			// whatever the flood holds.
			if resp, err := askFrom(t, "127.0.0.1", c.addr); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("the host's own health check during the flood: %v", err)
			}
			// The flood holds its sockets open; the server's ends close
			// after the idle timeout, and another client under its share
			// is served again.
			deadline := time.Now().Add(DefaultLimits.IdleTimeout + 10*time.Second)
			for {
				resp, err := askFrom(t, "127.2.0.1", c.addr)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("no health check served within the idle timeout (%v) and 10 s while the flood's sockets stay open: %v", DefaultLimits.IdleTimeout, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		for _, conn := range conns {
			conn.Close()
		}
	}
	// Without the caps the same flood costs the server far more: the
	// measurement would see a regression.
	if capped, open := added["default"], added["none"]; open.heapStack < 10*capped.heapStack {
		t.Errorf("without caps added heap+stacks %.1f MiB, with caps %.1f MiB: want ten times at least", mib(open.heapStack), mib(capped.heapStack))
	} else if !raceEnabled && open.hwm <= probeHeadroom {
		t.Logf("without caps the peak RSS grew %.1f MiB, within the probe's headroom of %.1f MiB", mib(open.hwm), mib(probeHeadroom))
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
