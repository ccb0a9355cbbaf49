// Package testenv finds the real components fleet-role's tests run against:
// the etcd and kube-apiserver binaries that hack/tools.sh builds from the Go
// module proxy, and fio from Debian. A missing tool fails the test with the
// command that provides it; it never skips, so a green run always means the
// real thing was exercised.
package testenv

import (
	"os"
	"os/exec"
	"testing"

	"github.com/fleet-role/fleet-role/lab/kit/toolcache"
)

// Versions of the components, matching hack/tools.sh.
const (
	EtcdVersion = toolcache.EtcdVersion
	KubeVersion = toolcache.KubeVersion
)

// Etcd returns the path of the etcd server binary.
func Etcd(t testing.TB) string {
	t.Helper()
	return find(t, "FLEET_ROLE_ETCD", toolcache.EtcdPath(), "etcd")
}

// KubeAPIServer returns the path of the kube-apiserver binary.
func KubeAPIServer(t testing.TB) string {
	t.Helper()
	return find(t, "FLEET_ROLE_KUBE_APISERVER", toolcache.KubeAPIServerPath(), "kube-apiserver")
}

// KubeControllerManager returns the path of the kube-controller-manager
// binary (its garbage collector deletes a record whose Node is gone).
func KubeControllerManager(t testing.TB) string {
	t.Helper()
	return find(t, "FLEET_ROLE_KUBE_CONTROLLER_MANAGER", toolcache.KubeControllerManagerPath(), "kube-controller-manager")
}

// Kubelet returns the path of the kubelet binary (test/pods).
func Kubelet(t testing.TB) string {
	t.Helper()
	return find(t, "FLEET_ROLE_KUBELET", toolcache.KubeletPath(), "kubelet")
}

// KubeScheduler returns the path of the kube-scheduler binary (test/pods).
func KubeScheduler(t testing.TB) string {
	t.Helper()
	return find(t, "FLEET_ROLE_KUBE_SCHEDULER", toolcache.KubeSchedulerPath(), "kube-scheduler")
}

// Promtool returns the path of promtool (the alert rules' checks and unit
// tests).
func Promtool(t testing.TB) string {
	t.Helper()
	return find(t, "FLEET_ROLE_PROMTOOL", toolcache.PromtoolPath(), "promtool")
}

// Helm returns the path of helm (deploy's chart tests), built by
// hack/tools.sh helm.
func Helm(t testing.TB) string {
	t.Helper()
	return find(t, "FLEET_ROLE_HELM", toolcache.HelmPath(), "helm")
}

// K3s returns the path of the k3s binary (test/k3s), built by
// hack/tools.sh k3s from the source kept beside the checkout.
func K3s(t testing.TB, root string) string {
	t.Helper()
	if p := os.Getenv("FLEET_ROLE_K3S"); p != "" {
		return find(t, "FLEET_ROLE_K3S", "", "k3s")
	}
	cached, err := toolcache.K3sPath(root)
	if err != nil {
		t.Fatalf("%v: run hack/tools.sh k3s, which says what it needs", err)
	}
	return find(t, "FLEET_ROLE_K3S", cached, "k3s")
}

// Prometheus returns the path of the Prometheus server (the live alert
// test).
func Prometheus(t testing.TB) string {
	t.Helper()
	return find(t, "FLEET_ROLE_PROMETHEUS", toolcache.PrometheusPath(), "prometheus")
}

// Chromium returns the path of Debian's Chromium (the status page's test in
// a real browser).
func Chromium(t testing.TB) string {
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Helper()
	t.Fatalf("chromium is not installed: run hack/test.sh (it installs it with apt-get) or hack/tools.sh chromium")
	return ""
}

// Fio returns the path of fio.
func Fio(t testing.TB) string {
	if p, err := exec.LookPath("fio"); err == nil {
		return p
	}
	t.Helper()
	t.Fatalf("fio is not installed: run hack/test.sh (it installs fio with apt-get) or apt-get install -y fio")
	return ""
}

// Kubectl returns the path of kubectl.
func Kubectl(t testing.TB) string {
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	t.Helper()
	t.Fatalf("kubectl is not on PATH")
	return ""
}

// RequireRoot fails the test unless it runs as root (network namespaces).
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test makes network namespaces and needs root (CI runs as root)")
	}
}

// Qemu returns the path of Debian's qemu-user-static emulator for a Go
// architecture (arm64, arm), which runs a binary built for it here.
func Qemu(t testing.TB, goarch string) string {
	t.Helper()
	names := map[string]string{"arm64": "qemu-aarch64-static", "arm": "qemu-arm-static"}
	n, ok := names[goarch]
	if !ok {
		t.Fatalf("no qemu-user-static emulator known for %s", goarch)
	}
	if p, err := exec.LookPath(n); err == nil {
		return p
	}
	t.Fatalf("%s is not installed: run hack/test.sh (it installs qemu-user-static with apt-get) or hack/tools.sh qemu", n)
	return ""
}

func find(t testing.TB, env, cached, tool string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s=%s: %v", env, p, err)
		}
		return p
	}
	if _, err := os.Stat(cached); err == nil {
		return cached
	}
	t.Fatalf("%s is not built: run hack/test.sh, or hack/tools.sh %s, which builds it into %s", tool, tool, cached)
	return ""
}
