package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/run/fleetbin"
)

// runMain runs the command line through Main.
func runMain(args ...string) fleetbin.Ran { return fleetbin.RunMain(Main, args...) }

// decided is fleetbin.Decided: `fleet-role decide` on one of the decision
// core's golden scenarios, its JSON and its table.
func decided(t *testing.T, scenario string) (doc, table string) {
	doc, table, _ = fleetbin.Decided(t, Main, StatusExitSwap, scenario)
	return doc, table
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
	if r.Code != 0 || !strings.Contains(r.Stdout, "\n  kubectl fleet-role status [HOST] [flags]\n") || !strings.Contains(r.Stdout, "kubectl fleet-role status --watch") {
		t.Fatalf("exit %d, help as a plugin:\n%s", r.Code, r.Stdout)
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
	var out, errb fleetbin.Buffer
	done := make(chan int, 1)
	go func() { done <- MainContext(ctx, []string{"status", "--watch", "--kubeconfig", path}, &out, &errb) }()
	waitFor(t, "two failed tries said", func() bool { return strings.Count(errb.String(), "; trying again\n") >= 2 })
	if !strings.Contains(errb.String(), " configmap fleet-role/fleet-role-status: ") || !strings.Contains(errb.String(), "connection refused") {
		t.Errorf("stderr %q does not name the ConfigMap and the refused connect", errb.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != StatusExitError || out.String() != "" {
			t.Errorf("watch ended with exit %d and printed %q, want 2 and nothing", code, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("watch did not end within a minute of its context")
	}
}

// Which kubeconfig status reads with no --kubeconfig, no $KUBECONFIG and no
// ~/.kube/config: k3s's own, where a k3s server writes it, and when that is
// absent too, none, with an error naming every place tried. An API server
// of the test's own serves the status ConfigMap, since what is tested is
// which kubeconfig is read; status against a real API server is
// test/integration/cli's TestStatusAgainstAPIServer.
func TestUserConfigFallsBackToK3s(t *testing.T) {
	// None on this machine's root, nor on CI's, nor the test user's.
	if exists(clientcmd.RecommendedHomeFile) {
		t.Fatalf("%s exists: the test needs a machine without one", clientcmd.RecommendedHomeFile)
	}
	t.Setenv("KUBECONFIG", "")
	os.Unsetenv("KUBECONFIG")
	saved := k3sKubeconfig
	t.Cleanup(func() { k3sKubeconfig = saved })
	const ns, name = "fleet-ops", "fleet-status"

	k3sKubeconfig = filepath.Join(t.TempDir(), "absent-k3s.yaml")
	tried := "$KUBECONFIG (unset), " + clientcmd.RecommendedHomeFile + " (not found), k3s's " + k3sKubeconfig + " (not found, or not readable by this user), the in-cluster ServiceAccount"
	if cfg, err := userConfig("", ""); err == nil || !strings.Contains(err.Error(), tried) {
		t.Errorf("userConfig with no kubeconfig anywhere: %v, %v; want an error saying it tried %s", cfg, err, tried)
	}
	// -n is --namespace.
	if r := runMain("status", "-n", ns); r.Code != StatusExitError || !strings.Contains(r.Stderr, tried) {
		t.Errorf("status with no kubeconfig anywhere: exit %d, stderr %q; want %d saying it tried %s", r.Code, r.Stderr, StatusExitError, tried)
	}

	doc, decideTable := decided(t, "most-slow-links")
	const readAt = "2026-11-29T12:01:00Z"
	at, err := time.Parse(time.RFC3339, readAt)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{status.StatusKey: doc}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/api/v1/namespaces/"+ns+"/configmaps/"+name {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["k3s"] = &clientcmdapi.Cluster{Server: srv.URL}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: "x"}
	kc.Contexts["k3s"] = &clientcmdapi.Context{Cluster: "k3s", AuthInfo: "admin"}
	kc.CurrentContext = "k3s"
	k3sKubeconfig = filepath.Join(t.TempDir(), "k3s.yaml")
	if err := clientcmd.WriteToFile(*kc, k3sKubeconfig); err != nil {
		t.Fatal(err)
	}
	if cfg, err := userConfig("", ""); err != nil || cfg.Host != srv.URL {
		t.Errorf("userConfig with k3s's kubeconfig alone: %+v, %v; want its server %s", cfg, err, srv.URL)
	}
	r := runMain("status", "-n", ns, "--status-configmap", name, "--now", readAt)
	if r.Code != StatusExitSwap || r.Stderr != "" {
		t.Fatalf("status with k3s's kubeconfig: exit %d, stderr %q; want %d", r.Code, r.Stderr, StatusExitSwap)
	}
	if r.Stdout != aged(t, doc, decideTable, at) {
		t.Fatal("with k3s's kubeconfig and -n the table differs")
	}
}
