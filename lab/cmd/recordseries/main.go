// Command recordseries records the metrics that fleet-role's real probes and
// controller export while the demo's fleet (real etcd members, one process
// each) runs on a real kube-apiserver through faults, so that the alert
// rules' unit tests (promtool test rules) are fed with what the components
// really export, not with hand-typed guesses. It is harness, not product.
//
// Each period it scrapes every component's /metrics over HTTP, as
// Prometheus would, and writes the exposition texts, one block per target
// and scrape, to DIR/RUN.prom.gz. The runs:
//
//   - slow: voter-2's peer traffic delayed (the demo's slow fault). From the
//     fault's start until the voters have read unfit for a while, an
//     admission policy on the API server refuses voter-3's record writes (its probe writes a refusal
//     marker), which holds the swap back (gate_reported); then the policy
//     goes, the swap is published and held; then everything stops and the
//     scrapes fail (the controller no longer decides).
//
//   - pause: voter-2's member paused (SIGSTOP) and its probe stopped, held
//     long enough for the controller to call its record stale.
//
//     go run ./lab/cmd/recordseries -out deploy/monitoring/testdata/recorded
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleet-role/fleet-role/internal/httpserve"
	"github.com/fleet-role/fleet-role/lab/fleets/demo"
	"github.com/fleet-role/fleet-role/lab/kit/metricscrape"
	"github.com/fleet-role/fleet-role/lab/kit/toolcache"
	"github.com/fleet-role/fleet-role/lab/run/apiserver"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
)

// Period is the demo's sample period; the recorder scrapes at the same
// period, as a Prometheus whose scrape interval is the sample period does.
const period = time.Second

func main() {
	// The standbys' disk reading goes where the demo makes its temporary
	// directories: on tmpfs it is reported, not held against the host, so
	// that a machine whose disk others load does not decide the recording
	// (the voters' etcd data is on tmpfs already).
	if os.Getenv("TMPDIR") == "" {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			os.Setenv("TMPDIR", "/dev/shm")
		}
	}
	out := flag.String("out", "deploy/monitoring/testdata/recorded", "directory for the recordings")
	runs := flag.String("runs", "slow,pause", "runs to record")
	flag.Parse()
	if err := run(*out, strings.Split(*runs, ",")); err != nil {
		log.Fatal(err)
	}
}

func run(out string, runs []string) error {
	// Interrupted, it still stops every process it started.
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sig, 30*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "recordseries-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	etcdBin, err := toolcache.Etcd(ctx, os.Stderr)
	if err != nil {
		return err
	}
	etcd, err := etcdproc.Start(ctx, etcdproc.Config{Binary: etcdBin, Dir: filepath.Join(dir, "etcd"), Members: 1})
	if err != nil {
		return err
	}
	defer etcd.Stop()
	api, err := apiserver.Start(ctx, apiserver.Config{
		Binary:      toolcache.KubeAPIServerPath(),
		EtcdServers: []string{etcd.Members[0].ClientURL},
		Dir:         filepath.Join(dir, "apiserver"),
	})
	if err != nil {
		return err
	}
	defer api.Stop()
	kc := filepath.Join(dir, "kubeconfig")
	if err := api.Kubeconfig(kc, ""); err != nil {
		return err
	}
	admin, err := kubernetes.NewForConfig(api.AdminConfig())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, name := range runs {
		if err := record(ctx, name, kc, admin, out); err != nil {
			return fmt.Errorf("run %s: %w", name, err)
		}
	}
	return nil
}

// recorder serves each component's registry and scrapes them all once a
// period.
type recorder struct {
	mu      sync.Mutex
	targets map[string]string // target name -> /metrics URL
	servers []*httpserve.Server
	buf     bytes.Buffer
	n       int
	events  []string
}

func (r *recorder) register(component, host string, reg *prometheus.Registry) {
	srv, err := httpserve.Start("127.0.0.1:0", reg, httpserve.Plain(func() error { return nil }), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		log.Fatalf("serve %s %s: %v", component, host, err)
	}
	name := component
	if host != "" {
		name += "/" + host
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.targets[name] = "http://" + srv.Addr + "/metrics"
	r.servers = append(r.servers, srv)
}

// stopServing shuts every server: the components are gone, as their pods
// would be, and every later scrape fails.
func (r *recorder) stopServing() {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), period)
	defer cancel()
	for _, s := range r.servers {
		_ = s.Shutdown(ctx)
	}
}

func (r *recorder) event(format string, a ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := fmt.Sprintf("# event scrape=%d ", r.n) + fmt.Sprintf(format, a...)
	r.events = append(r.events, e)
	log.Print(e)
}

// scrape takes one scrape of every target, in a fixed order; a failed
// scrape is written as such (Prometheus' up 0).
func (r *recorder) scrape(ctx context.Context) map[string]string {
	r.mu.Lock()
	names := make([]string, 0, len(r.targets))
	for n := range r.targets {
		names = append(names, n)
	}
	urls := make(map[string]string, len(names))
	for _, n := range names {
		urls[n] = r.targets[n]
	}
	n := r.n
	r.n++
	r.mu.Unlock()
	sort.Strings(names)
	texts := map[string]string{}
	var b bytes.Buffer
	for _, name := range names {
		text, err := get(ctx, urls[name])
		if err != nil {
			fmt.Fprintf(&b, "# scrape=%d target=%s up=0 error=%q\n", n, name, err.Error())
			continue
		}
		texts[name] = text
		fmt.Fprintf(&b, "# scrape=%d target=%s up=1\n%s", n, name, text)
	}
	r.mu.Lock()
	r.buf.Write(b.Bytes())
	r.mu.Unlock()
	return texts
}

// get fetches one page within half a period, so that a scrape round ends
// before the next is due.
func get(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, period/2)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %s", resp.Status)
	}
	return string(b), nil
}

// Scrapes after the demo ends, with every component stopped: enough for a
// Prometheus to see the controller gone for longer than its alert waits.
const afterScrapes = 12

// Periods the refusal of voter-3's writes lasts after a voter reads unfit:
// longer than the held alert's wait ((steady periods + 1) periods) with
// room to spare.
const refusalPeriods = 12

func record(ctx context.Context, name, kubeconfig string, admin kubernetes.Interface, out string) error {
	r := &recorder{targets: map[string]string{}}
	opt := demo.Defaults()
	opt.Period = period
	opt.Kubeconfig = kubeconfig
	opt.Namespace = "record-" + name
	// The demo says when its fault begins; the slow run's refusal starts
	// then, so that it is in place when the voters turn unfit.
	var faultStarted atomic.Bool
	opt.Out = watchWriter{w: os.Stderr, word: "== fault:", seen: &faultStarted}
	opt.Registries = r.register
	// Long enough after the fault shows for every alert that waits on it
	// (at most three periods for a stale record, plus three) to fire.
	opt.Hold = 12 * period
	switch name {
	case "slow":
		opt.Fault = demo.FaultSlow
	case "pause":
		opt.Fault = demo.FaultPause
	default:
		return fmt.Errorf("no run %q: want slow or pause", name)
	}
	scrapeCtx, stopScrapes := context.WithCancel(ctx)
	demoDone := make(chan struct{})
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		tick := time.NewTicker(period)
		defer tick.Stop()
		refusing, refused, unfitAt := false, false, -1
		after := -1
		for i := 0; ; i++ {
			select {
			case <-scrapeCtx.Done():
				return
			case <-tick.C:
			}
			texts := r.scrape(scrapeCtx)
			select {
			case <-demoDone:
				if after < 0 {
					after = 0
					r.stopServing()
					r.event("demo ended; every component stopped")
				}
			default:
			}
			if after >= 0 {
				after++
				if after > afterScrapes {
					return
				}
				continue
			}
			if name != "slow" {
				continue
			}
			if !refused && !refusing && faultStarted.Load() {
				if err := refuse(scrapeCtx, admin, opt.Namespace, "voter-3", true); err != nil {
					log.Printf("refuse: %v", err)
					continue
				}
				refusing = true
				r.event("admission policy refuses voter-3's record writes over 512 bytes")
			}
			if refusing && unfitAt < 0 {
				unfit, err := voterUnfit(texts["controller"])
				if err != nil {
					log.Printf("scrape %d: %v", i, err)
				} else if unfit {
					unfitAt = i
				}
			}
			if refusing && unfitAt >= 0 && i-unfitAt >= refusalPeriods {
				if err := refuse(scrapeCtx, admin, opt.Namespace, "voter-3", false); err != nil {
					log.Printf("unrefuse: %v", err)
					continue
				}
				refusing, refused = false, true
				r.event("admission policy removed")
			}
		}
	}()
	res, err := demo.Run(ctx, opt)
	r.event("demo returned")
	close(demoDone)
	<-scraped
	stopScrapes()
	if err != nil {
		return err
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "# Recorded by lab/cmd/recordseries (go run ./lab/cmd/recordseries): fleet-role's real probes and controller\n")
	fmt.Fprintf(&head, "# on the demo's fleet (etcd %s, one process per member) with records on a real kube-apiserver %s,\n", toolcache.EtcdVersion, toolcache.KubeVersion)
	fmt.Fprintf(&head, "# fault %s on %s; scraped over HTTP every %s (the sample period), window %d.\n", opt.Fault, res.Slowed, period, demo.Settings(period).Window)
	fmt.Fprintf(&head, "# run=%s period=%s window=%d recorded=%s\n", name, period, demo.Settings(period).Window, time.Now().UTC().Format(time.RFC3339))
	for _, e := range r.events {
		head.WriteString(e + "\n")
	}
	f, err := os.Create(filepath.Join(out, name+".prom.gz"))
	if err != nil {
		return err
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	zw.Header.ModTime = time.Time{}
	if _, err := zw.Write(append(head.Bytes(), r.buf.Bytes()...)); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// voterUnfit reports whether the controller's page shows a voter unfit.
func voterUnfit(page string) (bool, error) {
	p, err := metricscrape.Parse(strings.NewReader(page))
	if err != nil {
		return false, fmt.Errorf("the controller's page: %w", err)
	}
	unfit := p.Series("fleet_role_host_verdict", metricscrape.Labels{"role": "voter", "verdict": "unfit"})
	return slices.ContainsFunc(unfit, func(s metricscrape.Series) bool { return s.Value == 1 }), nil
}

// refuse puts in place (or removes) an admission policy that refuses the
// host's record whenever its entry is over 512 bytes: the probe's window is
// refused and its refusal marker (a few hundred bytes) passes, as with the
// shipped policy's size cap.
func refuse(ctx context.Context, admin kubernetes.Interface, namespace, host string, on bool) error {
	name := "recordseries-refuse-" + namespace
	pol := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies()
	bind := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if !on {
		if err := bind.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		return pol.Delete(ctx, name, metav1.DeleteOptions{})
	}
	fail := admissionv1.Fail
	_, err := pol.Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
						Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
					},
				}},
			},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.namespace != '%s' || object.metadata.name != '%s' || !has(object.data) || !('entry' in object.data) || size(object.data['entry']) <= 512", namespace, host),
				Message:    "recordseries: " + host + "'s record is refused over 512 bytes",
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	_, err = bind.Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}, metav1.CreateOptions{})
	return err
}

// watchWriter passes the demo's output on and notes when a line holds word.
type watchWriter struct {
	w    io.Writer
	word string
	seen *atomic.Bool
}

func (w watchWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(w.word)) {
		w.seen.Store(true)
	}
	return w.w.Write(p)
}
