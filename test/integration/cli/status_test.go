package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
	"github.com/fleet-role/fleet-role/lab/run/apiserver/apiservertest"
	"github.com/fleet-role/fleet-role/lab/run/fleetbin"
)

// runMain runs the command line through cli.Main.
func runMain(args ...string) fleetbin.Ran { return fleetbin.RunMain(cli.Main, args...) }

// decided runs `fleet-role decide` on one of the decision core's golden
// scenarios, as an operator would replay it, and returns its JSON and its
// table.
func decided(t *testing.T, scenario string) (doc, table string) {
	doc, table, _ = fleetbin.Decided(t, cli.Main, cli.StatusExitSwap, scenario)
	return doc, table
}

// readAtLine is the line status prints before the table of either
// scenario's decision (all-fit, most-slow-links: both decided at
// 12:00:00Z with the shipped settings, by no controller) read a minute
// later: written out here, as the stale case's lines are below, since
// the function that makes it is internal/cli's own.
const readAtLine = "decided 2026-11-29T12:00:00Z by no elected controller, 1m0s ago (stale after 25m38.8s)"

// aged is what status prints of doc at now, a minute after it was
// decided: its age line, then table.
func aged(t *testing.T, doc, table string, now time.Time) string {
	t.Helper()
	st, err := status.UnmarshalStatus([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if at := st.GeneratedAt.UTC().Format(time.RFC3339); at != "2026-11-29T12:00:00Z" || st.Writer != nil || now.Sub(st.GeneratedAt) != time.Minute {
		t.Fatalf("the scenario was decided at %s by %+v, read at %v; readAtLine says 2026-11-29T12:00:00Z by no controller, read a minute later", at, st.Writer, now)
	}
	return readAtLine + "\n" + table
}

// hostIn is the host of st named name, or nil.
func hostIn(st *status.Status, name string) *status.Host {
	for i := range st.Hosts {
		if st.Hosts[i].Name == name {
			return &st.Hosts[i]
		}
	}
	return nil
}

func TestStatusAgainstAPIServer(t *testing.T) {
	s := apiservertest.Start(t)
	ctx := context.Background()
	admin, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	const ns, name = "fleet-ops", "fleet-status"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := s.Kubeconfig(kc, ""); err != nil {
		t.Fatal(err)
	}
	client, err := kube.NewClientForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	store := client.ConfigMaps(ns)
	publish := func(t *testing.T, text string) {
		t.Helper()
		if err := store.PatchKey(ctx, name, status.StatusKey, &text); err != nil {
			t.Fatal(err)
		}
	}
	// The settings flags name the ConfigMap, as they do for the controller.
	// Read a minute after the scenarios' decisions (their now): the
	// status is fresh.
	const readAt = "2026-11-29T12:01:00Z"
	at, err := time.Parse(time.RFC3339, readAt)
	if err != nil {
		t.Fatal(err)
	}
	runStatus := func(args ...string) fleetbin.Ran {
		return runMain(append([]string{"status", "--kubeconfig", kc, "--namespace", ns, "--status-configmap", name, "--now", readAt}, args...)...)
	}
	wantCode := func(t *testing.T, r fleetbin.Ran, code int, stderr string) {
		t.Helper()
		if r.Code != code {
			t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", r.Code, code, r.Stdout, r.Stderr)
		}
		if !strings.Contains(r.Stderr, stderr) {
			t.Fatalf("stderr %q does not say %q", r.Stderr, stderr)
		}
	}

	t.Run("missing configmap exits 2", func(t *testing.T) {
		r := runStatus()
		wantCode(t, r, cli.StatusExitError, "configmap fleet-ops/fleet-status: not found")
		if r.Stdout != "" {
			t.Fatalf("printed %q", r.Stdout)
		}
	})
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("no status.json yet exits 2", func(t *testing.T) {
		wantCode(t, runStatus(), cli.StatusExitError, "has no status.json: the controller has not published a decision yet")
	})
	t.Run("malformed status exits 2", func(t *testing.T) {
		publish(t, `{"schema":"fleet-role.io/status/v1","hosts":[`)
		wantCode(t, runStatus(), cli.StatusExitError, "configmap fleet-ops/fleet-status, status.json: decode status:")
		publish(t, `{"schema":"fleet-role.io/status/v0","hosts":[]}`)
		wantCode(t, runStatus("-o", "json"), cli.StatusExitError, `schema "fleet-role.io/status/v0", this fleet-role reads "fleet-role.io/status/v1"`)
	})
	t.Run("bad output exits 2", func(t *testing.T) {
		wantCode(t, runStatus("-o", "yaml"), cli.StatusExitError, `-o "yaml": want table, json or html`)
	})

	t.Run("nothing to do exits 0", func(t *testing.T) {
		doc, table := decided(t, "all-fit")
		publish(t, doc)
		r := runStatus()
		wantCode(t, r, cli.StatusExitNone, "")
		if table := aged(t, doc, table, at); r.Stdout != table {
			t.Fatalf("status prints\n%s\ndecide -o table prints\n%s", r.Stdout, table)
		}
		r = runStatus("-o", "json")
		wantCode(t, r, cli.StatusExitNone, "")
		if r.Stdout != doc {
			t.Fatalf("status -o json is not the published document:\n%s", r.Stdout)
		}
	})

	doc, decideTable := decided(t, "most-slow-links")
	table := aged(t, doc, decideTable, at)
	t.Run("a swap exits 1", func(t *testing.T) {
		publish(t, doc)
		r := runStatus()
		wantCode(t, r, cli.StatusExitSwap, "")
		if r.Stderr != "" {
			t.Fatalf("a swap is an answer, not an error, but stderr says %q", r.Stderr)
		}
		if r.Stdout != table {
			t.Fatalf("status prints\n%s\ndecide -o table prints\n%s", r.Stdout, table)
		}
		if !strings.Contains(r.Stdout, "decision: swap bravo out, delta in") {
			t.Fatalf("no swap in\n%s", r.Stdout)
		}
		r = runStatus("-o", "json")
		wantCode(t, r, cli.StatusExitSwap, "")
		if r.Stdout != doc {
			t.Fatalf("status -o json is not the published document")
		}
		// --html writes the status page of the published document, and
		// the table is printed as well.
		page := filepath.Join(t.TempDir(), "status.html")
		r = runStatus("--html", page)
		wantCode(t, r, cli.StatusExitSwap, "")
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if r.Stdout != table || !strings.Contains(string(b), "would swap <b>bravo</b> out for <b>delta</b>") ||
			!strings.Contains(string(b), "published status (ConfigMap "+ns+"/"+name+")") || !strings.Contains(string(b), `id="link-matrix"`) {
			t.Fatalf("--html wrote %d bytes without the swap, the source or the matrix, or the table changed", len(b))
		}
		wantCode(t, runStatus("--html", page, "--watch"), cli.StatusExitError, "html and --watch")
		// -o html prints the same page, and exits as the table does.
		r = runStatus("-o", "html")
		wantCode(t, r, cli.StatusExitSwap, "")
		if r.Stdout != string(b) {
			t.Fatalf("status -o html printed %d bytes, not the %d-byte page --html writes", len(r.Stdout), len(b))
		}
		wantCode(t, runStatus("-o", "html", "--watch"), cli.StatusExitError, "html and --watch")
		wantCode(t, runStatus("-o", "html", "bravo"), cli.StatusExitError, `-o html and HOST "bravo"`)
	})
	t.Run("the page shows the history the status carries", func(t *testing.T) {
		st, err := status.UnmarshalStatus([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if r := runStatus("-o", "html"); !strings.Contains(r.Stdout, "written from one decision") {
			t.Fatalf("a status without a history: the page does not say it holds one decision")
		}
		st.History = &status.History{TimesMS: []int64{st.GeneratedAt.UnixMilli() - 1500, 500, 500, 500}, Hosts: []status.HostHistory{{Name: "bravo", Marks: "F2U2"}}}
		with, err := st.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		publish(t, string(with))
		r := runStatus("-o", "html")
		wantCode(t, r, cli.StatusExitSwap, "")
		if !strings.Contains(r.Stdout, "4 remembered") || strings.Contains(r.Stdout, "written from one decision") {
			t.Fatalf("the page of a status carrying four decisions of history shows no history:\n%.2000s", r.Stdout)
		}
		publish(t, doc)
	})

	t.Run("a stale status exits 3", func(t *testing.T) {
		publish(t, doc)
		st, err := status.UnmarshalStatus([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		// The shipped window of 100 periods of 15 s, a period, and the
		// shipped takeover: 15 s and two retry periods of 2 s, each up to
		// 1.2 longer.
		v := st.Settings.Values
		limit := time.Duration(v.Window)*v.SamplePeriod + v.SamplePeriod + 15*time.Second + time.Duration(2*2.2*float64(2*time.Second))
		if v.Window != 100 || v.SamplePeriod != 15*time.Second || limit != 1538800*time.Millisecond {
			t.Fatalf("the scenario's settings: window %d, period %v (limit %v); the test wants the shipped ones", v.Window, v.SamplePeriod, limit)
		}
		for _, c := range []struct {
			age   time.Duration
			code  int
			first string
		}{
			{limit - time.Millisecond, cli.StatusExitSwap, "decided 2026-11-29T12:00:00Z by no elected controller, 25m39s ago (stale after 25m38.8s)"},
			{limit, cli.StatusExitSwap, "decided 2026-11-29T12:00:00Z by no elected controller, 25m39s ago (stale after 25m38.8s)"},
			{limit + time.Millisecond, cli.StatusExitStale, "STALE: decided 2026-11-29T12:00:00Z by no elected controller, 25m39s ago: over the 25m38.8s within which the controller rewrites it at least once a window (100 x 15s) and a period, and a follower takes over within 23.8s; no controller is writing it, and its decision is not current"},
			{-90 * time.Second, cli.StatusExitSwap, "decided 2026-11-29T12:00:00Z by no elected controller, 1m30s ahead of this clock: the writer's clock and this one differ (stale after 25m38.8s)"},
		} {
			now := st.GeneratedAt.Add(c.age).Format(time.RFC3339Nano)
			r := runMain("status", "--kubeconfig", kc, "--namespace", ns, "--status-configmap", name, "--now", now)
			if first, rest, _ := strings.Cut(r.Stdout, "\n"); r.Code != c.code || first != c.first || rest != decideTable {
				t.Errorf("read %v after the decision: exit %d, first line %q; want %d and %q, then the table", c.age, r.Code, first, c.code, c.first)
			}
			r = runMain("status", "--kubeconfig", kc, "--namespace", ns, "--status-configmap", name, "--now", now, "-o", "json")
			if r.Code != c.code || r.Stdout != doc {
				t.Errorf("-o json read %v after the decision: exit %d, want %d and the document as published", c.age, r.Code, c.code)
			}
		}
		wantCode(t, runStatus("--now", "yesterday"), cli.StatusExitError, `--now "yesterday": want an RFC 3339 time`)
	})

	t.Run("one host with every reason", func(t *testing.T) {
		st, err := status.UnmarshalStatus([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		h := hostIn(st, "bravo")
		if h == nil {
			t.Fatal("no bravo in the scenario")
		}
		r := runStatus("bravo")
		wantCode(t, r, cli.StatusExitSwap, "")
		words := strings.Join(strings.Fields(r.Stdout), " ")
		for _, want := range []string{"host bravo role voter eligible true pinned false verdict unfit samples 100 of a window of 100", "this host would leave", "deciding: connect alpha: 801.103ms, must be at most 250ms"} {
			if !strings.Contains(words, want) {
				t.Errorf("host view lacks %q:\n%s", want, r.Stdout)
			}
		}
		if len(h.Reasons) < 5 {
			t.Fatalf("bravo has %d reasons; the test wants a host with many", len(h.Reasons))
		}
		for _, reason := range h.Reasons {
			line := status.Printable(status.Summary(reason))
			if !strings.Contains(r.Stdout, line) {
				t.Errorf("host view lacks the reason %q", line)
			}
			if reason.Basis != "" && !strings.Contains(r.Stdout, "basis: "+status.Printable(reason.Basis)) {
				t.Errorf("host view lacks the basis %q", reason.Basis)
			}
		}
		if got := strings.Count(r.Stdout, "\n  ok  ") + strings.Count(r.Stdout, "\n  NO  "); got != len(h.Reasons) {
			t.Errorf("host view lists %d reasons, the status holds %d:\n%s", got, len(h.Reasons), r.Stdout)
		}

		r = runStatus("bravo", "-o", "json")
		wantCode(t, r, cli.StatusExitSwap, "")
		var got status.Host
		if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(*h)
		back, _ := json.Marshal(got)
		if !bytes.Equal(want, back) {
			t.Fatalf("host JSON\n%s\nis not the document's\n%s", back, want)
		}

		wantCode(t, runStatus("zulu"), cli.StatusExitError, `host "zulu": not in the status (hosts alpha, bravo, charlie, delta, echo)`)
		wantCode(t, runStatus("alpha", "bravo"), cli.StatusExitError, "accepts at most 1 arg")
	})

	t.Run("KUBECONFIG", func(t *testing.T) {
		t.Setenv("KUBECONFIG", kc)
		r := runMain("status", "--namespace", ns, "--status-configmap", name, "--now", readAt)
		wantCode(t, r, cli.StatusExitSwap, "")
		if r.Stdout != table {
			t.Fatal("with KUBECONFIG the table differs")
		}
		absent := filepath.Join(t.TempDir(), "absent")
		t.Setenv("KUBECONFIG", absent)
		t.Setenv("HOME", t.TempDir())
		wantCode(t, runMain("status", "--namespace", ns), cli.StatusExitError, "no kubeconfig: tried --kubeconfig (not given), $KUBECONFIG ("+absent+": no cluster in it)")
	})
	// -n is --namespace. (Which kubeconfig status reads, k3s's among them,
	// is internal/cli's TestUserConfigFallsBackToK3s.)
	t.Run("-n", func(t *testing.T) {
		r := runMain("status", "--kubeconfig", kc, "-n", ns, "--status-configmap", name, "--now", readAt)
		wantCode(t, r, cli.StatusExitSwap, "")
		if r.Stdout != table {
			t.Fatal("with -n the table differs")
		}
	})

	t.Run("forbidden exits 2", func(t *testing.T) {
		if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tok, err := s.TokenFor(ctx, ns, "nobody", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		nobody := filepath.Join(t.TempDir(), "kubeconfig")
		if err := s.Kubeconfig(nobody, tok); err != nil {
			t.Fatal(err)
		}
		r := runMain("status", "--kubeconfig", nobody, "--namespace", ns, "--status-configmap", name)
		wantCode(t, r, cli.StatusExitError, "forbidden")
	})

	t.Run("watch", func(t *testing.T) {
		noneDoc, noneTable := decided(t, "all-fit")
		noneTable = aged(t, noneDoc, noneTable, at)
		publish(t, noneDoc)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// The buffers are read while the command writes them.
		var out, errb fleetbin.Buffer
		done := make(chan int, 1)
		go func() {
			done <- cli.MainContext(wctx, []string{"status", "--watch", "--kubeconfig", kc, "--namespace", ns, "--status-configmap", name, "--now", readAt}, &out, &errb)
		}()
		testkit.Eventually(t, time.Minute, func() error {
			if out.String() == noneTable {
				return nil
			}
			return fmt.Errorf("printed %q, not yet the first table", out.String())
		})
		publish(t, doc)
		testkit.Eventually(t, time.Minute, func() error {
			if out.String() == noneTable+"\n"+table {
				return nil
			}
			return fmt.Errorf("printed %q, not yet the swap's table after the first", out.String())
		})
		publish(t, "{")
		testkit.Eventually(t, time.Minute, func() error {
			if strings.Contains(errb.String(), "decode status") {
				return nil
			}
			return fmt.Errorf("stderr %q does not yet report the malformed document", errb.String())
		})
		publish(t, doc)
		testkit.Eventually(t, time.Minute, func() error {
			if out.String() == noneTable+"\n"+table+"\n"+table {
				return nil
			}
			return fmt.Errorf("printed %q, not yet the swap again", out.String())
		})
		cancel()
		select {
		case code := <-done:
			if code != cli.StatusExitSwap {
				t.Fatalf("watch ended with exit %d, want %d (the last status, a swap); stderr: %s", code, cli.StatusExitSwap, errb.String())
			}
		case <-time.After(time.Minute):
			t.Fatal("watch did not end within a minute of its context")
		}
	})
}
