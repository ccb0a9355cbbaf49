package k3s

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/fleet-role/fleet-role/lab/kit/docsteps"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

// decoy is a manifest of the test's own beside fleet-role's on every
// server: k3s applies it, the test deletes the object it made (not the
// file), and k3s making it again after a restart shows that k3s's deploy
// controller applied its manifests directory at start, which is what step
// 1 of the uninstall stops for fleet-role's copy.
const (
	decoyName = "k3s-reapply-decoy"
	decoyPath = "/var/lib/rancher/k3s/server/manifests/" + decoyName + ".yaml"
	decoyYAML = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + decoyName + "\n  namespace: kube-system\n"
)

var addons = schema.GroupVersionResource{Group: "k3s.cattle.io", Version: "v1", Resource: "addons"}

// uninstall runs docs/install.md's Uninstall as written (lab/kit/docsteps
// reads it): step 1 on every server and once, step 2 against the cluster
// with the real kubectl, step 3 on every host; then restarts k3s on the
// server that holds k3s's leader lease, whose deploy controller applies
// its manifests directory at start, and holds that nothing of fleet-role
// came back while the decoy did: no Addon, no namespace, no object
// labelled part of fleet-role, no label of its keys on a Node, no drop-in
// or fsync directory on a host.
func (s *scenario) uninstall(t *testing.T, ctx context.Context) {
	t.Helper()
	u, err := docsteps.ReadUninstall(s.root)
	if err != nil {
		t.Fatal(err)
	}
	serverPaths, err := docsteps.Removed(u.Servers)
	if err != nil {
		t.Fatal(err)
	}
	hostPaths, err := docsteps.Removed(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(s.fleet.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	cms := s.fleet.Admin.CoreV1().ConfigMaps("kube-system")

	// The decoy, applied by k3s from every server's directory, then its
	// object deleted.
	for _, name := range servers {
		if err := os.WriteFile(s.fleet.Host(name).File(decoyPath), []byte(decoyYAML), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := poll(ctx, applyTimeout, func() error {
		_, err := cms.Get(ctx, decoyName, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatalf("k3s did not apply the decoy manifest: %v", err)
	}
	if err := cms.Delete(ctx, decoyName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(addons).Namespace("kube-system").Get(ctx, "fleet-role", metav1.GetOptions{}); err != nil {
		t.Fatalf("k3s's Addon fleet-role, which step 1 deletes: %v", err)
	}
	var before []string
	for _, name := range hosts {
		for _, p := range hostPaths {
			if _, err := os.Stat(s.fleet.Host(name).File(p)); err == nil {
				before = append(before, name+":"+p)
			}
		}
	}

	// Step 1.
	for _, name := range servers {
		for _, p := range serverPaths {
			if err := os.RemoveAll(s.fleet.Host(name).File(p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	began := time.Now()
	s.shell(t, ctx, "step 1, once", u.Once)
	// Step 2.
	s.shell(t, ctx, "step 2", u.Cluster)
	// Step 3.
	for _, name := range hosts {
		for _, p := range hostPaths {
			if err := os.RemoveAll(s.fleet.Host(name).File(p)); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("uninstalled as docs/install.md says in %.1f s; of step 3's paths, the hosts held %v", time.Since(began).Seconds(), before)

	// k3s restarted where its deploy controller runs.
	l, err := s.fleet.Admin.CoordinationV1().Leases("kube-system").Get(ctx, "k3s", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		t.Fatalf("k3s's leader lease kube-system/k3s: %v", err)
	}
	leader := *l.Spec.HolderIdentity
	h := s.fleet.Host(leader)
	if h == nil {
		t.Fatalf("k3s's leader lease is held by %q, no server of the fleet", leader)
	}
	restarted := time.Now()
	if err := h.RestartK3s(); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, 3*time.Minute, func() error {
		_, err := cms.Get(ctx, decoyName, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatalf("k3s, restarted on %s, did not apply its manifests directory again (the decoy): %v\n%s", leader, err, h.K3s().Tail(20))
	}
	t.Logf("k3s restarted on %s (its leader) applied the decoy again %.1f s later", leader, time.Since(restarted).Seconds())

	var left []string
	if _, err := dyn.Resource(addons).Namespace("kube-system").Get(ctx, "fleet-role", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		left = append(left, fmt.Sprintf("k3s's Addon fleet-role (%v)", err))
	}
	for _, ns := range []string{namespace, recordsNS} {
		if _, err := s.fleet.Admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("namespace %s (%v)", ns, err))
		}
	}
	out, err := exec.CommandContext(ctx, testenv.Kubectl(t), "--kubeconfig", s.fleet.AdminKC, "get",
		"clusterrole,clusterrolebinding,validatingadmissionpolicy,validatingadmissionpolicybinding,flowschema,prioritylevelconfiguration,role,rolebinding",
		"--all-namespaces", "-l", "app.kubernetes.io/part-of=fleet-role", "-o", "name").Output()
	if err != nil {
		t.Fatalf("kubectl get the install's objects: %v", err)
	}
	if o := strings.TrimSpace(string(out)); o != "" {
		left = append(left, o)
	}
	nodes, err := s.fleet.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for k := range n.Labels {
			if strings.Contains(k, "fleet-role") {
				left = append(left, "label "+k+" on Node "+n.Name)
			}
		}
	}
	for _, name := range hosts {
		for _, p := range append(hostPaths, serverPaths...) {
			if _, err := os.Stat(s.fleet.Host(name).File(p)); err == nil {
				left = append(left, name+":"+p)
			}
		}
	}
	if len(left) > 0 {
		t.Errorf("after the uninstall and k3s's restart, left of fleet-role: %s", strings.Join(left, "; "))
	} else {
		t.Logf("after the uninstall and k3s's restart on %s: nothing of fleet-role in the cluster (Addon, namespace, the install's objects, node labels) or on the hosts (%d paths)", leader, len(hostPaths)+len(serverPaths))
	}
	for _, name := range servers {
		_ = os.Remove(s.fleet.Host(name).File(decoyPath))
	}
	_ = cms.Delete(ctx, decoyName, metav1.DeleteOptions{})
}

// shell runs a block of docs/install.md with bash, the real kubectl first
// on the PATH and the fleet's admin kubeconfig.
func (s *scenario) shell(t *testing.T, ctx context.Context, what, block string) {
	t.Helper()
	bin := filepath.Join(s.dir, "uninstall-bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(bin, "kubectl")); err != nil {
		if err := os.Symlink(testenv.Kubectl(t), filepath.Join(bin, "kubectl")); err != nil {
			t.Fatal(err)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	sh := exec.CommandContext(sctx, "bash", "-euo", "pipefail", "-c", block)
	sh.Env = append(os.Environ(), "KUBECONFIG="+s.fleet.AdminKC, "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := sh.CombinedOutput()
	t.Logf("docs/install.md's uninstall, %s:\n%s", what, out)
	if err != nil {
		t.Fatalf("docs/install.md's uninstall, %s: %v", what, err)
	}
}
