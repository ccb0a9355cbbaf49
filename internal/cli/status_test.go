package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/apiserver/apiservertest"
)

// cliRun is one run of the command line: its exit code and what it printed.
type cliRun struct {
	code           int
	stdout, stderr string
}

func runMain(args ...string) cliRun {
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return cliRun{code, out.String(), errb.String()}
}

// decided runs `fleet-role decide` on one of the decision core's golden
// scenarios, as an operator would replay it, and returns its JSON and its
// table.
func decided(t *testing.T, scenario string) (doc, table string) {
	doc, table, _ = decidedAt(t, scenario)
	return doc, table
}

// decidedAt is decided with the scenario's now, RFC 3339.
func decidedAt(t *testing.T, scenario string) (doc, table, at string) {
	t.Helper()
	dir := filepath.Join("..", "decide", "testdata", scenario)
	now, err := os.ReadFile(filepath.Join(dir, "now"))
	if err != nil {
		t.Fatal(err)
	}
	records := filepath.Join(dir, "records.json")
	args := []string{"decide", "--probe", records, "--nodes", filepath.Join(dir, "nodes.json"), "--now", strings.TrimSpace(string(now))}
	for flag, file := range map[string]string{"--previous": "previous.json", "--settings": "settings.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, file)); err == nil {
			args = append(args, flag, filepath.Join(dir, file))
		}
	}
	j := runMain(append(args, "-o", "json")...)
	tb := runMain(append(args, "-o", "table")...)
	// A swap exits 1, an answer as status's is, with nothing on stderr.
	if j.code > StatusExitSwap || tb.code != j.code || j.stderr != "" || tb.stderr != "" {
		t.Fatalf("decide %s: exit %d/%d: %s%s", scenario, j.code, tb.code, j.stderr, tb.stderr)
	}
	return j.stdout, tb.stdout, strings.TrimSpace(string(now))
}

// aged is what status prints of doc at now: its age line, then table.
func aged(t *testing.T, doc, table string, now time.Time) string {
	t.Helper()
	st, err := status.UnmarshalStatus([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	line, _ := ageLine(st, now)
	return line + "\n" + table
}

// TestStatusAgainstAPIServer runs `fleet-role status` against a real
// kube-apiserver, with the status published as the controller publishes it
// (a merge patch of status.json into the ConfigMap the manifests create),
// and checks its table, its JSON, the one-host view and every exit code.
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
	runStatus := func(args ...string) cliRun {
		return runMain(append([]string{"status", "--kubeconfig", kc, "--namespace", ns, "--status-configmap", name, "--now", readAt}, args...)...)
	}
	wantCode := func(t *testing.T, r cliRun, code int, stderr string) {
		t.Helper()
		if r.code != code {
			t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, stderr) {
			t.Fatalf("stderr %q does not say %q", r.stderr, stderr)
		}
	}

	t.Run("missing configmap exits 2", func(t *testing.T) {
		r := runStatus()
		wantCode(t, r, StatusExitError, "configmap fleet-ops/fleet-status: not found")
		if r.stdout != "" {
			t.Fatalf("printed %q", r.stdout)
		}
	})
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("no status.json yet exits 2", func(t *testing.T) {
		wantCode(t, runStatus(), StatusExitError, "has no status.json: the controller has not published a decision yet")
	})
	t.Run("malformed status exits 2", func(t *testing.T) {
		publish(t, `{"schema":"fleet-role.io/status/v1","hosts":[`)
		wantCode(t, runStatus(), StatusExitError, "configmap fleet-ops/fleet-status, status.json: decode status:")
		publish(t, `{"schema":"fleet-role.io/status/v0","hosts":[]}`)
		wantCode(t, runStatus("-o", "json"), StatusExitError, `schema "fleet-role.io/status/v0", this fleet-role reads "fleet-role.io/status/v1"`)
	})
	t.Run("bad output exits 2", func(t *testing.T) {
		wantCode(t, runStatus("-o", "yaml"), StatusExitError, `-o "yaml": want table, json or html`)
	})

	t.Run("nothing to do exits 0", func(t *testing.T) {
		doc, table := decided(t, "all-fit")
		publish(t, doc)
		r := runStatus()
		wantCode(t, r, StatusExitNone, "")
		if table := aged(t, doc, table, at); r.stdout != table {
			t.Fatalf("status prints\n%s\ndecide -o table prints\n%s", r.stdout, table)
		}
		r = runStatus("-o", "json")
		wantCode(t, r, StatusExitNone, "")
		if r.stdout != doc {
			t.Fatalf("status -o json is not the published document:\n%s", r.stdout)
		}
	})

	doc, decideTable := decided(t, "most-slow-links")
	table := aged(t, doc, decideTable, at)
	t.Run("a swap exits 1", func(t *testing.T) {
		publish(t, doc)
		r := runStatus()
		wantCode(t, r, StatusExitSwap, "")
		if r.stderr != "" {
			t.Fatalf("a swap is an answer, not an error, but stderr says %q", r.stderr)
		}
		if r.stdout != table {
			t.Fatalf("status prints\n%s\ndecide -o table prints\n%s", r.stdout, table)
		}
		if !strings.Contains(r.stdout, "decision: swap bravo out, delta in") {
			t.Fatalf("no swap in\n%s", r.stdout)
		}
		r = runStatus("-o", "json")
		wantCode(t, r, StatusExitSwap, "")
		if r.stdout != doc {
			t.Fatalf("status -o json is not the published document")
		}
		// --html writes the status page of the published document, and
		// the table is printed as well.
		page := filepath.Join(t.TempDir(), "status.html")
		r = runStatus("--html", page)
		wantCode(t, r, StatusExitSwap, "")
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		if r.stdout != table || !strings.Contains(string(b), "would swap <b>bravo</b> out for <b>delta</b>") ||
			!strings.Contains(string(b), "published status (ConfigMap "+ns+"/"+name+")") || !strings.Contains(string(b), `id="link-matrix"`) {
			t.Fatalf("--html wrote %d bytes without the swap, the source or the matrix, or the table changed", len(b))
		}
		wantCode(t, runStatus("--html", page, "--watch"), StatusExitError, "html and --watch")
		// -o html prints the same page, and exits as the table does.
		r = runStatus("-o", "html")
		wantCode(t, r, StatusExitSwap, "")
		if r.stdout != string(b) {
			t.Fatalf("status -o html printed %d bytes, not the %d-byte page --html writes", len(r.stdout), len(b))
		}
		wantCode(t, runStatus("-o", "html", "--watch"), StatusExitError, "html and --watch")
		wantCode(t, runStatus("-o", "html", "bravo"), StatusExitError, `-o html and HOST "bravo"`)
	})
	t.Run("the page shows the history the status carries", func(t *testing.T) {
		st, err := status.UnmarshalStatus([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if r := runStatus("-o", "html"); !strings.Contains(r.stdout, "written from one decision") {
			t.Fatalf("a status without a history: the page does not say it holds one decision")
		}
		st.History = &status.History{TimesMS: []int64{st.GeneratedAt.UnixMilli() - 1500, 500, 500, 500}, Hosts: []status.HostHistory{{Name: "bravo", Marks: "F2U2"}}}
		with, err := st.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		publish(t, string(with))
		r := runStatus("-o", "html")
		wantCode(t, r, StatusExitSwap, "")
		if !strings.Contains(r.stdout, "4 remembered") || strings.Contains(r.stdout, "written from one decision") {
			t.Fatalf("the page of a status carrying four decisions of history shows no history:\n%.2000s", r.stdout)
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
			{limit - time.Millisecond, StatusExitSwap, "decided 2026-11-29T12:00:00Z by no elected controller, 25m39s ago (stale after 25m38.8s)"},
			{limit, StatusExitSwap, "decided 2026-11-29T12:00:00Z by no elected controller, 25m39s ago (stale after 25m38.8s)"},
			{limit + time.Millisecond, StatusExitStale, "STALE: decided 2026-11-29T12:00:00Z by no elected controller, 25m39s ago: over the 25m38.8s within which the controller rewrites it at least once a window (100 x 15s) and a period, and a follower takes over within 23.8s; no controller is writing it, and its decision is not current"},
			{-90 * time.Second, StatusExitSwap, "decided 2026-11-29T12:00:00Z by no elected controller, 1m30s ahead of this clock: the writer's clock and this one differ (stale after 25m38.8s)"},
		} {
			now := st.GeneratedAt.Add(c.age).Format(time.RFC3339Nano)
			r := runMain("status", "--kubeconfig", kc, "--namespace", ns, "--status-configmap", name, "--now", now)
			if first, rest, _ := strings.Cut(r.stdout, "\n"); r.code != c.code || first != c.first || rest != decideTable {
				t.Errorf("read %v after the decision: exit %d, first line %q; want %d and %q, then the table", c.age, r.code, first, c.code, c.first)
			}
			r = runMain("status", "--kubeconfig", kc, "--namespace", ns, "--status-configmap", name, "--now", now, "-o", "json")
			if r.code != c.code || r.stdout != doc {
				t.Errorf("-o json read %v after the decision: exit %d, want %d and the document as published", c.age, r.code, c.code)
			}
		}
		wantCode(t, runStatus("--now", "yesterday"), StatusExitError, `--now "yesterday": want an RFC 3339 time`)
	})

	t.Run("one host with every reason", func(t *testing.T) {
		st, err := status.UnmarshalStatus([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		h, ok := findHost(st, "bravo")
		if !ok {
			t.Fatal("no bravo in the scenario")
		}
		r := runStatus("bravo")
		wantCode(t, r, StatusExitSwap, "")
		words := strings.Join(strings.Fields(r.stdout), " ")
		for _, want := range []string{"host bravo role voter eligible true pinned false verdict unfit samples 100 of a window of 100", "this host would leave", "deciding: connect alpha: 801.103ms, must be at most 250ms"} {
			if !strings.Contains(words, want) {
				t.Errorf("host view lacks %q:\n%s", want, r.stdout)
			}
		}
		if len(h.Reasons) < 5 {
			t.Fatalf("bravo has %d reasons; the test wants a host with many", len(h.Reasons))
		}
		for _, reason := range h.Reasons {
			line := status.Printable(status.Summary(reason))
			if !strings.Contains(r.stdout, line) {
				t.Errorf("host view lacks the reason %q", line)
			}
			if reason.Basis != "" && !strings.Contains(r.stdout, "basis: "+status.Printable(reason.Basis)) {
				t.Errorf("host view lacks the basis %q", reason.Basis)
			}
		}
		if got := strings.Count(r.stdout, "\n  ok  ") + strings.Count(r.stdout, "\n  NO  "); got != len(h.Reasons) {
			t.Errorf("host view lists %d reasons, the status holds %d:\n%s", got, len(h.Reasons), r.stdout)
		}

		r = runStatus("bravo", "-o", "json")
		wantCode(t, r, StatusExitSwap, "")
		var got status.Host
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(h)
		back, _ := json.Marshal(got)
		if !bytes.Equal(want, back) {
			t.Fatalf("host JSON\n%s\nis not the document's\n%s", back, want)
		}

		wantCode(t, runStatus("zulu"), StatusExitError, `host "zulu": not in the status (hosts alpha, bravo, charlie, delta, echo)`)
		wantCode(t, runStatus("alpha", "bravo"), StatusExitError, "accepts at most 1 arg")
	})

	t.Run("KUBECONFIG", func(t *testing.T) {
		t.Setenv("KUBECONFIG", kc)
		r := runMain("status", "--namespace", ns, "--status-configmap", name, "--now", readAt)
		wantCode(t, r, StatusExitSwap, "")
		if r.stdout != table {
			t.Fatal("with KUBECONFIG the table differs")
		}
		absent := filepath.Join(t.TempDir(), "absent")
		t.Setenv("KUBECONFIG", absent)
		t.Setenv("HOME", t.TempDir())
		wantCode(t, runMain("status", "--namespace", ns), StatusExitError, "no kubeconfig: tried --kubeconfig (not given), $KUBECONFIG ("+absent+": no cluster in it)")

		// No KUBECONFIG and no ~/.kube/config (none on this machine's
		// root, nor on CI's): k3s's own kubeconfig is read, and -n is
		// --namespace.
		if exists(clientcmd.RecommendedHomeFile) {
			t.Fatalf("%s exists: the test needs a machine without one", clientcmd.RecommendedHomeFile)
		}
		os.Unsetenv("KUBECONFIG")
		saved := k3sKubeconfig
		t.Cleanup(func() { k3sKubeconfig = saved })
		k3sKubeconfig = filepath.Join(t.TempDir(), "absent-k3s.yaml")
		wantCode(t, runMain("status", "-n", ns), StatusExitError,
			"$KUBECONFIG (unset), "+clientcmd.RecommendedHomeFile+" (not found), k3s's "+k3sKubeconfig+" (not found, or not readable by this user), the in-cluster ServiceAccount")
		k3sKubeconfig = kc
		r = runMain("status", "-n", ns, "--status-configmap", name, "--now", readAt)
		wantCode(t, r, StatusExitSwap, "")
		if r.stdout != table {
			t.Fatal("with k3s's kubeconfig and -n the table differs")
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
		wantCode(t, r, StatusExitError, "forbidden")
	})

	t.Run("watch", func(t *testing.T) {
		noneDoc, noneTable := decided(t, "all-fit")
		noneTable = aged(t, noneDoc, noneTable, at)
		publish(t, noneDoc)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// process's output buffers are safe to write and read at once.
		var out, errb process
		done := make(chan int, 1)
		go func() {
			done <- MainContext(wctx, []string{"status", "--watch", "--kubeconfig", kc, "--namespace", ns, "--status-configmap", name, "--now", readAt}, &out, &errb)
		}()
		waitFor(t, "the first table", func() bool { return out.log() == noneTable })
		publish(t, doc)
		waitFor(t, "the swap's table after the first", func() bool { return out.log() == noneTable+"\n"+table })
		publish(t, "{")
		waitFor(t, "the malformed document reported", func() bool { return strings.Contains(errb.log(), "decode status") })
		publish(t, doc)
		waitFor(t, "the swap again", func() bool { return out.log() == noneTable+"\n"+table+"\n"+table })
		cancel()
		select {
		case code := <-done:
			if code != StatusExitSwap {
				t.Fatalf("watch ended with exit %d, want %d (the last status, a swap); stderr: %s", code, StatusExitSwap, errb.log())
			}
		case <-time.After(time.Minute):
			t.Fatal("watch did not end within a minute of its context")
		}
	})
}

func TestCommandName(t *testing.T) {
	for arg0, want := range map[string]string{
		"/usr/local/bin/fleet-role":         "fleet-role",
		"fleet-role":                        "fleet-role",
		"/usr/local/bin/kubectl-fleet_role": "kubectl fleet-role",
		"kubectl-fleet_role":                "kubectl fleet-role",
		"kubectl-":                          "fleet-role",
		"/tmp/go-build1/exe/main":           "fleet-role",
	} {
		if got := commandName(arg0); got != want {
			t.Errorf("commandName(%q) = %q, want %q", arg0, got, want)
		}
	}
	// Run by kubectl as a plugin, the help names the command as typed.
	args := os.Args
	t.Cleanup(func() { os.Args = args })
	os.Args = []string{"/usr/local/bin/kubectl-fleet_role", "status", "--help"}
	r := runMain("status", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "\n  kubectl fleet-role status [HOST] [flags]\n") || !strings.Contains(r.stdout, "kubectl fleet-role status --watch") {
		t.Fatalf("exit %d, help as a plugin:\n%s", r.code, r.stdout)
	}
}

// waitFor polls cond until it holds, failing the test after a deadline of
// a minute (the API server's watch delivers in milliseconds; the margin is
// for a loaded 2-core machine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// status --watch against an API server that does not answer (a closed port
// of this machine: a real refused connect) says each failed try and keeps
// trying, rather than waiting in silence; stopped, it exits 2.
func TestWatchSaysEachFailedTry(t *testing.T) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["gone"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: "x"}
	kc.Contexts["gone"] = &clientcmdapi.Context{Cluster: "gone", AuthInfo: "user"}
	kc.CurrentContext = "gone"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb process
	done := make(chan int, 1)
	go func() { done <- MainContext(ctx, []string{"status", "--watch", "--kubeconfig", path}, &out, &errb) }()
	waitFor(t, "two failed tries said", func() bool { return strings.Count(errb.log(), "; trying again\n") >= 2 })
	if !strings.Contains(errb.log(), " configmap fleet-role/fleet-role-status: ") || !strings.Contains(errb.log(), "connection refused") {
		t.Errorf("stderr %q does not name the ConfigMap and the refused connect", errb.log())
	}
	cancel()
	select {
	case code := <-done:
		if code != StatusExitError || out.log() != "" {
			t.Errorf("watch ended with exit %d and printed %q, want 2 and nothing", code, out.log())
		}
	case <-time.After(time.Minute):
		t.Fatal("watch did not end within a minute of its context")
	}
}
