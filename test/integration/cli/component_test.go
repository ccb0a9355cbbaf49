package cli

// The probe and controller commands on a real kube-apiserver with
// deploy/fleet-role.yaml applied and real RBAC, each with a kubeconfig
// holding a token of its own ServiceAccount (TokenRequest). The kubelet is
// the only fake: there is none, so no pod runs; the Nodes are created through
// the API as k3s labels them, and the commands run as processes of the
// binary built from cmd/fleet-role (or through Main where only the exit code
// and what was written matter).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/metricscrape"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
	"github.com/fleet-role/fleet-role/lab/run/apiserver"
	"github.com/fleet-role/fleet-role/lab/run/fleetbin"
)

// get fetches a URL of a component's metrics server.
func get(url string) (int, string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// scrape fetches a component's /metrics page and parses it as Prometheus
// would; the text comes back too, for a failure to show.
func scrape(url string) (*metricscrape.Page, string, error) {
	_, text, err := get(url)
	if err != nil {
		return nil, text, err
	}
	p, err := metricscrape.Parse(strings.NewReader(text))
	if err != nil {
		return nil, text, fmt.Errorf("%s: %w", url, err)
	}
	return p, text, nil
}

// metric is the value of the first series of name on the page whose
// labels hold match, or -1 when it has none (or there is no page).
func metric(p *metricscrape.Page, name string, match metricscrape.Labels) float64 {
	if p == nil {
		return -1
	}
	if v, ok := p.Value(name, match); ok {
		return v
	}
	return -1
}

func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := apiserver.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
}

// timeFlags compress the period as the loops' tests do (the window stays at
// the smallest p95 allows, so the settings validate).
func timeFlags(period time.Duration) []string {
	return []string{"--sample-period=" + period.String(), "--window=20", "--tail-percentile=0.95"}
}

// FLEET_ROLE_DRY_RUN unset, empty or anything but "true" or "false",
// dry_run false in the settings without acting guided or auto, or acting
// without the Lease: the controller exits 2 with a clear message before it
// reads or writes anything; the status ConfigMap is untouched.
func TestControllerRefusesWithoutDryRun(t *testing.T) {
	c := testkit.Start(t)
	kc := c.Kubeconfig(t, testkit.ControllerSA)
	before := c.ConfigMap(t, "fleet-role-status")
	for _, tc := range []struct {
		name  string
		env   *string
		extra []string
		want  string
	}{
		{"unset", nil, nil, `FLEET_ROLE_DRY_RUN is ""`},
		{"empty", ptr(""), nil, `FLEET_ROLE_DRY_RUN is ""`},
		{"false", ptr("false"), nil, "dry_run = false with acting = off"},
		{"false, --acting=plan", ptr("false"), []string{"--acting=plan"}, "dry_run = false with acting = plan"},
		{"1", ptr("1"), nil, `FLEET_ROLE_DRY_RUN is "1"`},
		{"true, --dry-run=false", ptr("true"), []string{"--dry-run=false"}, "dry_run = false with acting = off"},
		{"true, --dry-run=false --acting=plan", ptr("true"), []string{"--dry-run=false", "--acting=plan"}, "dry_run = false with acting = plan"},
		{"true, --acting=guided", ptr("true"), []string{"--acting=guided"}, "acting = guided with dry_run = true"},
		{"false, --acting=guided --leader-elect=false", ptr("false"), []string{"--acting=guided", "--leader-elect=false"},
			"acting = guided with --leader-elect=false"},
		{"true, --dry-run=false --acting=auto --leader-elect=false", ptr("true"), []string{"--dry-run=false", "--acting=auto", "--leader-elect=false"},
			"acting = auto with --leader-elect=false"},
		{"true, --acting=sometimes", ptr("true"), []string{"--acting=sometimes"}, `acting = sometimes: must be one of off, plan, guided or auto`},
		{"true, --page-service without an election", ptr("true"), []string{"--page-service=fleet-role", "--leader-elect=false"},
			"--page-service fleet-role with --leader-elect=false"},
		{"true, --page-service outside a Pod", ptr("true"), []string{"--page-service=fleet-role"},
			`--page-service fleet-role: POD_NAME "" and POD_IP "" must name this Pod`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Outside a Pod, whatever runs the tests.
			t.Setenv("POD_NAME", "")
			t.Setenv("POD_IP", "")
			if tc.env == nil {
				t.Setenv("FLEET_ROLE_DRY_RUN", "")
				os.Unsetenv("FLEET_ROLE_DRY_RUN")
			} else {
				t.Setenv("FLEET_ROLE_DRY_RUN", *tc.env)
			}
			var out, errb bytes.Buffer
			args := append([]string{"controller", "--kubeconfig", kc, "--metrics-address="}, tc.extra...)
			code := cli.Main(args, &out, &errb)
			if code != cli.ExitUsage || !strings.Contains(errb.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 saying %s", code, errb.String(), tc.want)
			}
		})
	}
	// The built binary, as a Deployment would run it with the env mistyped.
	bin := fleetbin.Build(t)
	p := fleetbin.Run(t, bin, []string{"FLEET_ROLE_DRY_RUN=yes"}, "controller", "--kubeconfig", kc, "--metrics-address=")
	if code := p.Wait(t, time.Minute); code != cli.ExitUsage || !strings.Contains(p.Log(), "FLEET_ROLE_DRY_RUN") {
		t.Errorf("the binary exited %d: %s", code, p.Log())
	}
	after := c.ConfigMap(t, "fleet-role-status")
	if after.ResourceVersion != before.ResourceVersion || len(after.Data) != 0 {
		t.Errorf("fleet-role-status changed: resourceVersion %s -> %s, data %v", before.ResourceVersion, after.ResourceVersion, after.Data)
	}
}

func ptr[T any](v T) *T { return &v }

// The controller as a process, running for the Lease as the Deployment's
// replicas do: /healthz answers from the start; /readyz fails while it has
// not read the Lease (the API server is down when it starts), naming the
// error of its last try, and it decides
// nothing; once it leads it decides, /readyz passes, and the status names it
// as the writer; /readyz fails again three periods after the API server
// stops; /metrics carries the verdicts, the leader gauge and the failed
// rounds. SIGTERM stops it with exit 0.
func TestControllerProcess(t *testing.T) {
	c := testkit.Start(t)
	c.AddNodes(t, testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.10.1"})
	kc := c.Kubeconfig(t, testkit.ControllerSA)
	bin := fleetbin.Build(t)
	addr := freeAddr(t)
	period := 300 * time.Millisecond
	c.Server.Stop()
	args := append([]string{"controller", "--kubeconfig", kc, "--metrics-address", addr}, timeFlags(period)...)
	p := fleetbin.Run(t, bin, []string{"FLEET_ROLE_DRY_RUN=true"}, args...)
	base := "http://" + addr

	testkit.Eventually(t, time.Minute, func() error {
		p.Running(t)
		if code, _, err := get(base + "/healthz"); err != nil || code != 200 {
			return fmt.Errorf("/healthz %d %v", code, err)
		}
		code, body, err := get(base + "/readyz")
		if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "not leading: the lease fleet-role/fleet-role has not been read: get lease") || !strings.Contains(body, "connection refused") {
			return fmt.Errorf("/readyz before the lease was read: %d %q %v", code, body, err)
		}
		page, _, err := scrape(base + "/metrics")
		if err != nil {
			return err
		}
		if v, ok := page.Value("fleet_role_leader", nil); !ok || v != 0 || len(page.Series("fleet_role_decisions_total", nil)) != 0 {
			return errors.New("not yet following without deciding")
		}
		// Not leading, the page serves no decision, and says why.
		if code, body, err := get(base + "/status"); err != nil || code != http.StatusServiceUnavailable ||
			!strings.Contains(body, "this controller does not lead, so it serves no decision: not leading: the lease fleet-role/fleet-role has not been read") {
			return fmt.Errorf("/status before the lease was read: %d %q %v", code, body, err)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Server.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, func() error {
		if code, body, err := get(base + "/readyz"); err != nil || code != 200 {
			return fmt.Errorf("/readyz %d %q %v", code, body, err)
		}
		return nil
	})
	raw := c.Data(t, "fleet-role-status")[status.StatusKey]
	st, err := status.UnmarshalStatus([]byte(raw))
	if err != nil {
		t.Fatalf("status.json: %v", err)
	}
	if len(st.Hosts) != 1 || st.Hosts[0].Name != "server-1" || st.Hosts[0].Verdict != status.Unknown {
		t.Errorf("status hosts %+v, want server-1 unknown (no probe entry)", st.Hosts)
	}
	if w := st.Writer; w == nil || w.Lease != "fleet-role/fleet-role" || !strings.HasPrefix(w.Identity, hostname(t)+"_") {
		t.Errorf("status writer %+v, want this host's name and a suffix, holding fleet-role/fleet-role", w)
	}
	page, text, err := scrape(base + "/metrics")
	if err != nil || metric(page, "fleet_role_host_verdict", metricscrape.Labels{"host": "server-1", "role": "voter", "verdict": "unknown"}) != 1 ||
		metric(page, "fleet_role_status_writes_total", nil) < 1 || metric(page, "fleet_role_leader", nil) != 1 {
		t.Errorf("/metrics (%v) lacks server-1's verdict or the status write:\n%s", err, text)
	}
	// One voter, unknown: no margin by design, none counting it lost.
	if metric(page, "fleet_role_failure_tolerance", metricscrape.Labels{"lost": "none"}) != 0 ||
		metric(page, "fleet_role_failure_tolerance", metricscrape.Labels{"lost": "unfit_and_unknown"}) != 0 {
		t.Errorf("/metrics lacks the failure tolerance:\n%s", text)
	}
	// The status page, on the same port.
	if code, body, err := get(base + "/status"); err != nil || code != http.StatusOK ||
		!strings.Contains(body, "<th scope=\"row\">server-1</th>") || !strings.Contains(body, "? unknown") || !strings.Contains(body, `id="tolerance-value">0<`) {
		t.Errorf("/status: %d %v:\n%s", code, err, body)
	}

	// Stop waits for the process to exit, and the API server stops
	// answering as soon as it begins: the outage starts now.
	stopped := time.Now()
	c.Server.Stop()
	var notReady string
	testkit.Eventually(t, time.Minute, func() error {
		code, body, err := get(base + "/readyz")
		if err != nil || code != http.StatusServiceUnavailable {
			return fmt.Errorf("/readyz %d %v with the API server stopped", code, err)
		}
		notReady = body
		return nil
	})
	if waited := time.Since(stopped); waited < 2*period {
		t.Errorf("/readyz failed %v after the API server stopped, before three periods could pass", waited)
	}
	// A leader whose decisions fail says so; one whose renewals failed for
	// the renew deadline first has stopped leading, and says that it has
	// not read the Lease since.
	if !strings.Contains(notReady, "over three sample periods") && !strings.Contains(notReady, "not leading: the lease fleet-role/fleet-role was last read") {
		t.Errorf("/readyz said %q", notReady)
	}
	p.Running(t)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, time.Minute); code != 0 {
		t.Errorf("SIGTERM: exit %d, want 0", code)
	}
	if recs := testkit.ParseLog(p.Log(), "controller stopped"); len(recs) != 1 {
		t.Errorf("no 'controller stopped' log line")
	}
	t.Logf("controller process: /readyz 503 before the first decision, 200 after, 503 %.1f s after the API server stopped (%s), exit 0 on SIGTERM",
		time.Since(stopped).Seconds(), strings.TrimSpace(notReady))
}

// The probe as a process, with the real host readings: it writes its entry,
// serves /metrics, /healthz and /readyz, keeps sampling while the API server
// is away, and on SIGTERM writes what it holds and exits 0.
func TestProbeProcess(t *testing.T) {
	c := testkit.Start(t)
	// The voters' peer listener: a real TCP listener here.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	c.AddNodes(t,
		testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.11.1", PeerAddress: ln.Addr().String()},
		testkit.Node{Name: "agent-1", Eligible: true, Address: "127.0.11.2"},
	)
	kc := c.ProbeKubeconfig(t, "agent-1")
	bin := fleetbin.Build(t)
	addr := freeAddr(t)
	// A period long enough that the write SIGTERM forces is not the
	// next period's.
	period := time.Second
	args := append([]string{"probe", "--kubeconfig", kc, "--metrics-address", addr, "--host-root=/", "--fsync-dir", t.TempDir()}, timeFlags(period)...)
	p := fleetbin.Run(t, bin, []string{"NODE_NAME=agent-1"}, args...)
	base := "http://" + addr

	testkit.Eventually(t, time.Minute, func() error {
		p.Running(t)
		raw, ok := c.Records(t)["agent-1"]
		if !ok {
			return errors.New("no entry yet")
		}
		e, err := entry.Decode(raw)
		if err != nil {
			t.Fatal(err)
		}
		if len(e.Samples) < 2 {
			return fmt.Errorf("%d samples", len(e.Samples))
		}
		return nil
	})
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body, err := get(base + path); err != nil || code != 200 {
			t.Errorf("%s: %d %q %v", path, code, body, err)
		}
	}
	page, text, err := scrape(base + "/metrics")
	if err != nil || metric(page, "fleet_role_probe_samples_total", nil) < 2 || metric(page, "fleet_role_probe_writes_total", metricscrape.Labels{"result": "ok"}) < 2 {
		t.Errorf("/metrics (%v):\n%s", err, text)
	}

	c.Server.Stop()
	var taken float64
	testkit.Eventually(t, time.Minute, func() error {
		page, _, err := scrape(base + "/metrics")
		if err != nil {
			return err
		}
		if metric(page, "fleet_role_probe_writes_total", metricscrape.Labels{"result": "error"}) < 2 {
			return errors.New("fewer than two failed writes")
		}
		taken = metric(page, "fleet_role_probe_samples_total", nil)
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Server.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	p.Running(t)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, time.Minute); code != 0 {
		t.Fatalf("SIGTERM: exit %d, want 0", code)
	}
	recs := testkit.ParseLog(p.Log(), "probe stopped")
	if len(recs) != 1 {
		t.Fatalf("'probe stopped' logged %d times", len(recs))
	}
	held, _ := recs[0]["samples"].(float64)
	if recs[0]["unwritten"] != false || held < taken {
		t.Errorf("stopped holding %v samples, unwritten %v; %v were taken before the API server came back", held, recs[0]["unwritten"], taken)
	}
	e, err := entry.Decode(c.Records(t)["agent-1"])
	if err != nil {
		t.Fatal(err)
	}
	if float64(len(e.Samples)) != held {
		t.Errorf("the record holds %d samples, the probe held %v when it stopped", len(e.Samples), held)
	}
	for i, x := range e.Samples {
		if x.Restart != (i == 0) || x.MemTotalBytes == 0 || len(x.Connect) != 1 || x.Connect["server-1"].Err != "" {
			t.Errorf("sample %d: restart %v memory %d connects %+v", i, x.Restart, x.MemTotalBytes, x.Connect)
		}
	}
	t.Logf("probe process: %d samples held and written at SIGTERM (%v taken before the API server came back), exit 0", len(e.Samples), taken)
}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
