package apiserver_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/run/apiserver/apiservertest"
)

// TestServer drives one real API server through everything the other tests
// lean on: the admin, a kubeconfig kubectl accepts, a ServiceAccount token
// that RBAC holds to nothing, and a restart that keeps data, port and tokens.
func TestServer(t *testing.T) {
	s := apiservertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	admin, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t"}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}
	if _, err := admin.CoreV1().ServiceAccounts("t").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The minimum TokenRequest lifetime the API accepts is 10 minutes.
	tok, err := s.TokenFor(ctx, "t", "nobody", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TokenFor(ctx, "t", "nobody", 10*time.Minute-time.Second); err == nil {
		t.Errorf("a token lifetime under 10 minutes was accepted")
	}
	if _, err := s.TokenFor(ctx, "t", "missing", 10*time.Minute); !apierrors.IsNotFound(err) {
		t.Errorf("token for a missing ServiceAccount: %v, want NotFound", err)
	}
	nobody, err := kubernetes.NewForConfig(s.TokenConfig(tok))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nobody.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a ServiceAccount with no binding listed namespaces: %v, want Forbidden", err)
	}

	// kubectl accepts the kubeconfig and parses the server's version.
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := s.Kubeconfig(kc, ""); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, testenv.Kubectl(t), "--kubeconfig", kc, "version", "-o", "json").CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"gitVersion": "`+testenv.KubeVersion+`"`) {
		t.Errorf("kubectl version: %v\n%s", err, out)
	}
	kcTok := filepath.Join(t.TempDir(), "kubeconfig-nobody")
	if err := s.Kubeconfig(kcTok, tok); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.CommandContext(ctx, testenv.Kubectl(t), "--kubeconfig", kcTok, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").CombinedOutput()
	if got := strings.TrimSpace(string(out)); got != "system:serviceaccount:t:nobody" {
		t.Errorf("kubectl auth whoami with the token's kubeconfig = %q", got)
	}

	// Stopped, the API refuses connections; restarted, it has kept its data,
	// its URL and the tokens issued before.
	url := s.URL
	s.Stop()
	if s.Running() {
		t.Fatal("Running after Stop")
	}
	if _, err := admin.CoreV1().Namespaces().Get(ctx, "t", metav1.GetOptions{}); err == nil {
		t.Fatal("the stopped API server answered")
	}
	began := time.Now()
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted in %.1f s", time.Since(began).Seconds())
	if s.URL != url {
		t.Errorf("URL changed across Restart: %s, then %s", url, s.URL)
	}
	if _, err := admin.CoreV1().Namespaces().Get(ctx, "t", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace after restart: %v", err)
	}
	if _, err := nobody.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the token issued before the restart: %v, want Forbidden (authenticated, not authorised)", err)
	}
}
