// Package toolcache finds, and builds when asked, the real etcd server that
// the demo runs and the tests run against. It keeps one binary per version in
// the same cache hack/tools.sh fills, built with the same flags, so that the
// demo, the tests and the test script share one build.
package toolcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Versions of the components, as hack/tools.sh pins them.
const (
	EtcdVersion = "v3.6.15"
	// KubeVersion is the Kubernetes of kube-apiserver,
	// kube-controller-manager, kube-scheduler and the kubelet: k3s's own,
	// built from its source with it (hack/tools.sh), so that Kubernetes is
	// compiled once and the tests run the Kubernetes k3s users run.
	KubeVersion = K3sVersion
	// PromtoolVersion is the github.com/prometheus/prometheus module
	// promtool is built from.
	PromtoolVersion = "v0.316.0"
	// HelmVersion is the helm.sh/helm/v4 module helm is built from.
	HelmVersion = "v4.3.2"
	// K3sVersion and K3sCommit name the k3s source hack/tools.sh builds
	// k3s from: the tarball K3sTarball, kept beside the checkout.
	K3sVersion = "v1.34.2+k3s1"
	K3sCommit  = "8dac81b2"
	K3sTarball = "k3s-" + K3sVersion + "-" + K3sCommit + "-src.tar.gz"
)

// ModulePath is fleet-role's module; the etcd build is a nested module in it.
const ModulePath = "github.com/fleet-role/fleet-role"

// Dir is where built tools are kept: $FLEET_ROLE_CACHE, else
// $XDG_CACHE_HOME/fleet-role, else ~/.cache/fleet-role.
func Dir() string {
	if d := os.Getenv("FLEET_ROLE_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "fleet-role")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "fleet-role-cache")
	}
	return filepath.Join(home, ".cache", "fleet-role")
}

// EtcdPath is where the etcd binary is (or will be) cached.
func EtcdPath() string { return filepath.Join(Dir(), "bin", "etcd-"+EtcdVersion) }

// KubeAPIServerPath is where the kube-apiserver binary is cached.
func KubeAPIServerPath() string {
	return filepath.Join(Dir(), "bin", "kube-apiserver-"+KubeVersion)
}

// KubeControllerManagerPath is where hack/tools.sh keeps the
// kube-controller-manager binary.
func KubeControllerManagerPath() string {
	return filepath.Join(Dir(), "bin", "kube-controller-manager-"+KubeVersion)
}

// PromtoolPath is where hack/tools.sh keeps promtool.
func PromtoolPath() string { return filepath.Join(Dir(), "bin", "promtool-"+PromtoolVersion) }

// HelmPath is where hack/tools.sh keeps helm.
func HelmPath() string { return filepath.Join(Dir(), "bin", "helm-"+HelmVersion) }

// PrometheusPath is where hack/tools.sh keeps the Prometheus server, built
// from the same module as promtool.
func PrometheusPath() string { return filepath.Join(Dir(), "bin", "prometheus-"+PromtoolVersion) }

// KubeletPath is where hack/tools.sh keeps the kubelet binary.
func KubeletPath() string { return filepath.Join(Dir(), "bin", "kubelet-"+KubeVersion) }

// KubeSchedulerPath is where hack/tools.sh keeps the kube-scheduler binary.
func KubeSchedulerPath() string {
	return filepath.Join(Dir(), "bin", "kube-scheduler-"+KubeVersion)
}

// K3sSource is the folder holding k3s's source tarball and its module proxy
// overlay: $FLEET_ROLE_K3S_SRC, else ../shared/k3s beside the checkout at
// root, where hack/tools.sh looks too.
func K3sSource(root string) string {
	if d := os.Getenv("FLEET_ROLE_K3S_SRC"); d != "" {
		return d
	}
	return filepath.Join(root, "..", "shared", "k3s")
}

// K3sPath is where hack/tools.sh keeps k3s built from the tarball in
// K3sSource(root) (a link to the one binary of k3s and the Kubernetes
// commands, tools/k3s): the name carries the first 16 hex digits of the
// tarball's SHA-256, so that another tarball is another build.
func K3sPath(root string) (string, error) {
	tarball := filepath.Join(K3sSource(root), K3sTarball)
	f, err := os.Open(tarball)
	if err != nil {
		return "", fmt.Errorf("k3s %s is built from its source kept beside the checkout (../shared/k3s, or $FLEET_ROLE_K3S_SRC): %w", K3sVersion, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("checksum %s: %w", tarball, err)
	}
	return filepath.Join(Dir(), "bin", "k3s-"+K3sVersion+"-"+hex.EncodeToString(h.Sum(nil))[:16]), nil
}

// ErrNoSource means the etcd binary is not built and there is no checkout of
// fleet-role to build it from.
var ErrNoSource = errors.New("no fleet-role checkout to build etcd from")

// Etcd returns the etcd binary: $FLEET_ROLE_ETCD when set, else the cached
// build, else it builds one from tools/etcd of the checkout that contains the
// working directory, telling progress what it does (the first build takes
// minutes; later runs take none).
func Etcd(ctx context.Context, progress io.Writer) (string, error) {
	if p := os.Getenv("FLEET_ROLE_ETCD"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("FLEET_ROLE_ETCD: %w", err)
		}
		return p, nil
	}
	out := EtcdPath()
	if isExecutable(out) {
		return out, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("etcd %s is not built at %s and %w: run hack/tools.sh etcd in a checkout, or set FLEET_ROLE_ETCD", EtcdVersion, out, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("make cache directory: %w", err)
	}
	// One build at a time, shared with hack/tools.sh's lock.
	lock, err := os.OpenFile(filepath.Join(filepath.Dir(out), ".etcd.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("open build lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("take build lock: %w", err)
	}
	if isExecutable(out) {
		return out, nil
	}
	fmt.Fprintf(progress, "building etcd %s from the Go module proxy, once (a few minutes; cached in %s)\n", EtcdVersion, out)
	// hack/tools.sh's flags: stripped, so no debug information is written,
	// and no -trimpath, so that its compiles are the ones go vet and go
	// test reuse (hack/tools.sh says why).
	cmd := exec.CommandContext(ctx, "go", "build", "-gcflags=all=-dwarf=false", "-ldflags", "-s -w", "-o", out+".tmp", ".")
	cmd.Dir = filepath.Join(root, "tools", "etcd")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build etcd in %s: %w: %s", cmd.Dir, err, strings.TrimSpace(stderr.String()))
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return "", fmt.Errorf("install etcd build: %w", err)
	}
	return out, nil
}

// moduleRoot finds the checkout of fleet-role that holds the working
// directory, by its go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module "+ModulePath+"\n") {
			if _, err := os.Stat(filepath.Join(dir, "tools", "etcd", "main.go")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoSource
		}
		dir = parent
	}
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
