// Package deploy holds fleet-role's manifests (a kustomize base and the file
// rendered from it) and the Dockerfile's tests. These tests hold the rendered
// file to the base, apply it to a real kube-apiserver, check the RBAC it
// grants with kubectl auth can-i and with each ServiceAccount's own token,
// and build the binary as the Dockerfile does.
package deploy

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleet-role/fleet-role/internal/apiserver/apiservertest"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/testenv"
)

const (
	ns       = "github-runner-platform"
	rendered = "fleet-role.yaml"
	image    = "ghcr.io/fleet-role/fleet-role:latest"
)

// TestRenderedIsBase: deploy/fleet-role.yaml is exactly `kubectl kustomize
// deploy/base` under its comment header (regenerate with deploy/render.sh).
func TestRenderedIsBase(t *testing.T) {
	out, err := exec.Command(testenv.Kubectl(t), "kustomize", "base").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize base: %v", err)
	}
	if got := withoutHeader(t); !bytes.Equal(got, out) {
		t.Fatalf("deploy/fleet-role.yaml differs from `kubectl kustomize deploy/base`: run deploy/render.sh")
	}
}

// withoutHeader returns the rendered file without its leading comment lines.
func withoutHeader(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(rendered)
	if err != nil {
		t.Fatal(err)
	}
	for bytes.HasPrefix(b, []byte("#")) {
		_, b, _ = bytes.Cut(b, []byte("\n"))
	}
	return b
}

// docs splits the rendered file into its objects, by kind and name.
func docs(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, d := range bytes.Split(withoutHeader(t), []byte("\n---\n")) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(d, &meta); err != nil {
			t.Fatal(err)
		}
		out[meta.Kind+"/"+meta.Metadata.Name] = d
	}
	return out
}

// TestSettingsAreTheDefaults: the settings the manifests ship parse with no
// unknown key, validate, and are exactly fleet-role's defaults, so an install
// and `fleet-role decide` with no file agree.
func TestSettingsAreTheDefaults(t *testing.T) {
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(docs(t)["ConfigMap/fleet-role-settings"], &cm); err != nil {
		t.Fatal(err)
	}
	text, ok := cm.Data[settings.ConfigMapKey]
	if !ok {
		t.Fatalf("fleet-role-settings has no key %s", settings.ConfigMapKey)
	}
	s, err := settings.Parse([]byte(text), settings.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, settings.Defaults()) {
		t.Errorf("shipped settings %+v\ndiffer from the defaults %+v", s, settings.Defaults())
	}
}

// TestPodsAreHardened reads the two workloads as the API types and checks
// what the install promises of them.
func TestPodsAreHardened(t *testing.T) {
	d := docs(t)
	var dep appsv1.Deployment
	if err := yaml.Unmarshal(d["Deployment/fleet-role"], &dep); err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(d["DaemonSet/fleet-role-probe"], &ds); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name string
		spec corev1.PodSpec
		cmd  string
	}{{"controller", dep.Spec.Template.Spec, "controller"}, {"probe", ds.Spec.Template.Spec, "probe"}} {
		if p.spec.SecurityContext == nil || p.spec.SecurityContext.SeccompProfile == nil ||
			p.spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: seccomp is not RuntimeDefault", p.name)
		}
		if len(p.spec.Containers) != 1 {
			t.Fatalf("%s: %d containers", p.name, len(p.spec.Containers))
		}
		c := p.spec.Containers[0]
		if c.Image != image {
			t.Errorf("%s: image %s, want %s", p.name, c.Image, image)
		}
		if len(c.Args) == 0 || c.Args[0] != p.cmd || !contains(c.Args, "--settings=/etc/fleet-role/settings.yaml") {
			t.Errorf("%s: args %v", p.name, c.Args)
		}
		sc := c.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
			len(sc.Capabilities.Add) != 0 || (sc.Privileged != nil && *sc.Privileged) {
			t.Errorf("%s: container security context %+v", p.name, sc)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() ||
			c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: requests and limits must be set: %+v", p.name, c.Resources)
		}
	}
	pod := dep.Spec.Template.Spec
	if sc := pod.SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("controller: not run as non-root: %+v", sc)
	}
	env := pod.Containers[0].Env
	if len(env) != 1 || env[0].Name != "FLEET_ROLE_DRY_RUN" || env[0].Value != "true" {
		t.Errorf("controller env %+v, want FLEET_ROLE_DRY_RUN=true only", env)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		c := pod.Containers[0]
		probe := c.LivenessProbe
		if path == "/readyz" {
			probe = c.ReadinessProbe
		}
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "metrics" {
			t.Errorf("controller: no %s probe on the metrics port", path)
		}
	}

	probe := ds.Spec.Template.Spec
	if !probe.HostNetwork {
		t.Error("probe: not on the host network")
	}
	if e := probe.Containers[0].Env; len(e) != 1 || e[0].Name != "NODE_NAME" || e[0].ValueFrom == nil ||
		e[0].ValueFrom.FieldRef == nil || e[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("probe: NODE_NAME not from the downward API: %+v", e)
	}
	if !contains(probe.Containers[0].Args, "--host-root=/host") {
		t.Errorf("probe: no --host-root=/host in %v", probe.Containers[0].Args)
	}
	if len(probe.Tolerations) != 1 || probe.Tolerations[0].Operator != corev1.TolerationOpExists || probe.Tolerations[0].Key != "" {
		t.Errorf("probe: tolerations %+v do not tolerate every taint", probe.Tolerations)
	}
	hostPaths := map[string]string{} // host path -> mount path
	readOnly := map[string]bool{}
	for _, v := range probe.Volumes {
		if v.HostPath == nil {
			continue
		}
		for _, m := range probe.Containers[0].VolumeMounts {
			if m.Name == v.Name {
				hostPaths[v.HostPath.Path] = m.MountPath
				readOnly[v.HostPath.Path] = m.ReadOnly
			}
		}
	}
	want := map[string]string{
		"/proc": "/host/proc", "/sys": "/host/sys",
		"/var/lib/rancher/k3s/server/db/fleet-role-fsync": "/var/lib/fleet-role/fsync",
	}
	if !reflect.DeepEqual(hostPaths, want) {
		t.Errorf("probe host paths %v, want %v", hostPaths, want)
	}
	if !readOnly["/proc"] || !readOnly["/sys"] || readOnly["/var/lib/rancher/k3s/server/db/fleet-role-fsync"] {
		t.Errorf("probe: /proc and /sys must be read-only and only the fsync directory writable: %v", readOnly)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestOnAPIServer applies the rendered file to a real kube-apiserver and
// holds the RBAC it grants, first as kubectl auth can-i sees it, then for
// real with each ServiceAccount's own token.
func TestOnAPIServer(t *testing.T) {
	s := apiservertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kubectl := testenv.Kubectl(t)
	kc := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := s.Kubeconfig(kc, ""); err != nil {
		t.Fatal(err)
	}
	apply := func() {
		t.Helper()
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kc, "apply", "--server-side", "-f", rendered).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl apply --server-side: %v\n%s", err, out)
		}
		t.Logf("kubectl apply --server-side -f deploy/fleet-role.yaml:\n%s", out)
	}
	apply()
	admin, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fleet-role-probe", "fleet-role-status"} {
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(cm.Data) != 0 {
			t.Errorf("%s created with data %v, want empty", name, cm.Data)
		}
	}
	// Something else to be denied: a Secret and another ConfigMap.
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "server-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("can-i", func(t *testing.T) { testCanI(t, ctx, kubectl, kc) })
	t.Run("enforced", func(t *testing.T) {
		probeTok, err := s.TokenFor(ctx, ns, "fleet-role-probe", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ctrlTok, err := s.TokenFor(ctx, ns, "fleet-role", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		// The probe connects through a kubeconfig, as a process would.
		probeKC := filepath.Join(t.TempDir(), "probe.kubeconfig")
		if err := s.Kubeconfig(probeKC, probeTok); err != nil {
			t.Fatal(err)
		}
		probe, err := kube.NewClient(probeKC)
		if err != nil {
			t.Fatal(err)
		}
		ctrl, err := kube.NewClientForConfig(s.TokenConfig(ctrlTok))
		if err != nil {
			t.Fatal(err)
		}
		testEnforced(t, ctx, probe, ctrl)
	})
	// Applying again (k3s re-applies its manifests on every start) leaves the
	// keys the components wrote: the installer never owned them.
	apply()
	data, err := kube.NewClientForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	got, err := data.ConfigMaps(ns).Get(ctx, "fleet-role-probe")
	if err != nil || got["server-1"] != `{"samples":[]}` {
		t.Errorf("after a second apply fleet-role-probe holds %v (%v), want the probe's key kept", got, err)
	}
}

// canI is one row of the matrix: verb and resource (with /name or a
// --subresource) in namespace (empty: cluster scope).
type canI struct {
	verb, resource, namespace, subresource string
	probe, controller                      bool
}

func testCanI(t *testing.T, ctx context.Context, kubectl, kc string) {
	rows := []canI{
		{verb: "get", resource: "nodes", probe: true, controller: true},
		{verb: "list", resource: "nodes", probe: true, controller: true},
		{verb: "watch", resource: "nodes", probe: true, controller: true},
		{verb: "patch", resource: "nodes"},
		{verb: "update", resource: "nodes"},
		{verb: "delete", resource: "nodes"},
		{verb: "create", resource: "nodes"},
		{verb: "patch", resource: "nodes", subresource: "status"},
		{verb: "get", resource: "configmaps/fleet-role-probe", namespace: ns, probe: true, controller: true},
		{verb: "patch", resource: "configmaps/fleet-role-probe", namespace: ns, probe: true},
		{verb: "update", resource: "configmaps/fleet-role-probe", namespace: ns},
		{verb: "delete", resource: "configmaps/fleet-role-probe", namespace: ns},
		{verb: "get", resource: "configmaps/fleet-role-status", namespace: ns, controller: true},
		{verb: "update", resource: "configmaps/fleet-role-status", namespace: ns, controller: true},
		{verb: "patch", resource: "configmaps/fleet-role-status", namespace: ns, controller: true},
		{verb: "delete", resource: "configmaps/fleet-role-status", namespace: ns},
		{verb: "get", resource: "configmaps/fleet-role-settings", namespace: ns},
		{verb: "get", resource: "configmaps/other", namespace: ns},
		{verb: "patch", resource: "configmaps/other", namespace: ns},
		{verb: "get", resource: "configmaps/kube-root-ca.crt", namespace: "kube-system"},
		{verb: "list", resource: "configmaps", namespace: ns},
		{verb: "watch", resource: "configmaps", namespace: ns},
		{verb: "create", resource: "configmaps", namespace: ns},
		{verb: "get", resource: "secrets/other", namespace: ns},
		{verb: "list", resource: "secrets", namespace: ns},
		{verb: "get", resource: "secrets", namespace: "kube-system"},
		{verb: "get", resource: "pods", namespace: ns},
		{verb: "create", resource: "pods", namespace: ns},
		{verb: "create", resource: "serviceaccounts/fleet-role", namespace: ns, subresource: "token"},
		{verb: "impersonate", resource: "users"},
		{verb: "*", resource: "*"},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-12s %-38s %-22s %-10s %-10s\n", "verb", "resource", "namespace", "probe", "controller")
	for _, r := range rows {
		got := map[string]bool{}
		for _, sa := range []string{"fleet-role-probe", "fleet-role"} {
			args := []string{"--kubeconfig", kc, "auth", "can-i", r.verb, r.resource, "--as=system:serviceaccount:" + ns + ":" + sa}
			if r.namespace != "" {
				args = append(args, "-n", r.namespace)
			}
			if r.subresource != "" {
				args = append(args, "--subresource="+r.subresource)
			}
			out, err := exec.CommandContext(ctx, kubectl, args...).Output()
			answer := strings.TrimSpace(string(out))
			// can-i exits 0 for yes and 1 for no; anything else is a failure.
			if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
				t.Fatalf("kubectl %v: %v %s", args, err, out)
			}
			if answer != "yes" && answer != "no" {
				t.Fatalf("kubectl %v answered %q", args, answer)
			}
			got[sa] = answer == "yes"
		}
		res := r.resource
		if r.subresource != "" {
			res += " (" + r.subresource + ")"
		}
		scope := r.namespace
		if scope == "" {
			scope = "(cluster)"
		}
		fmt.Fprintf(&table, "%-12s %-38s %-22s %-10s %-10s\n", r.verb, res, scope, yesNo(got["fleet-role-probe"]), yesNo(got["fleet-role"]))
		if got["fleet-role-probe"] != r.probe {
			t.Errorf("probe can-i %s %s in %s = %v, want %v", r.verb, res, scope, got["fleet-role-probe"], r.probe)
		}
		if got["fleet-role"] != r.controller {
			t.Errorf("controller can-i %s %s in %s = %v, want %v", r.verb, res, scope, got["fleet-role"], r.controller)
		}
	}
	t.Logf("kubectl auth can-i --as=system:serviceaccount:%s:SA\n%s", ns, table.String())
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// testEnforced makes the requests for real with each ServiceAccount's token.
func testEnforced(t *testing.T, ctx context.Context, probe, ctrl *kube.Client) {
	entry := `{"samples":[]}`
	status := `{"hosts":[]}`
	allowed := []struct {
		what string
		err  error
	}{
		{"probe patches its key of fleet-role-probe", probe.ConfigMaps(ns).PatchKey(ctx, "fleet-role-probe", "server-1", &entry)},
		{"controller patches status.json of fleet-role-status", ctrl.ConfigMaps(ns).PatchKey(ctx, "fleet-role-status", "status.json", &status)},
	}
	for _, a := range allowed {
		if a.err != nil {
			t.Errorf("%s: %v", a.what, a.err)
		}
	}
	if got, err := probe.ConfigMaps(ns).Get(ctx, "fleet-role-probe"); err != nil || got["server-1"] != entry {
		t.Errorf("probe reads fleet-role-probe: %v, %v", got, err)
	}
	if got, err := ctrl.ConfigMaps(ns).Get(ctx, "fleet-role-probe"); err != nil || got["server-1"] != entry {
		t.Errorf("controller reads fleet-role-probe: %v, %v", got, err)
	}
	if got, err := ctrl.ConfigMaps(ns).Get(ctx, "fleet-role-status"); err != nil || got["status.json"] != status {
		t.Errorf("controller reads fleet-role-status: %v, %v", got, err)
	}
	// The controller may also update its status with a full object.
	cm, err := ctrl.Clientset.CoreV1().ConfigMaps(ns).Get(ctx, "fleet-role-status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["status.json"] = `{"hosts":[{}]}`
	if _, err := ctrl.Clientset.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Errorf("controller updates fleet-role-status: %v", err)
	}
	for name, c := range map[string]*kube.Client{"probe": probe, "controller": ctrl} {
		if nodes, err := c.Nodes().List(ctx); err != nil || len(nodes) != 1 {
			t.Errorf("%s lists nodes: %d, %v", name, len(nodes), err)
		}
	}

	x := "x"
	cs := func(c *kube.Client) kubernetes.Interface { return c.Clientset }
	denied := []struct {
		what string
		err  error
	}{
		{"probe patches fleet-role-status", probe.ConfigMaps(ns).PatchKey(ctx, "fleet-role-status", "status.json", &x)},
		{"probe reads fleet-role-status", second(probe.ConfigMaps(ns).Get(ctx, "fleet-role-status"))},
		{"controller patches fleet-role-probe", ctrl.ConfigMaps(ns).PatchKey(ctx, "fleet-role-probe", "server-1", &x)},
		{"probe reads another ConfigMap", second(probe.ConfigMaps(ns).Get(ctx, "other"))},
		{"controller reads another ConfigMap", second(ctrl.ConfigMaps(ns).Get(ctx, "other"))},
		{"probe reads the settings ConfigMap", second(probe.ConfigMaps(ns).Get(ctx, "fleet-role-settings"))},
		{"controller patches another ConfigMap", ctrl.ConfigMaps(ns).PatchKey(ctx, "other", "k", &x)},
		{"probe patches a node", second(cs(probe).CoreV1().Nodes().Patch(ctx, "server-1", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}))},
		{"controller patches a node", second(cs(ctrl).CoreV1().Nodes().Patch(ctx, "server-1", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}))},
		{"controller deletes a node", cs(ctrl).CoreV1().Nodes().Delete(ctx, "server-1", metav1.DeleteOptions{})},
		{"probe reads a Secret", second(cs(probe).CoreV1().Secrets(ns).Get(ctx, "other", metav1.GetOptions{}))},
		{"controller reads a Secret", second(cs(ctrl).CoreV1().Secrets(ns).Get(ctx, "other", metav1.GetOptions{}))},
		{"probe lists ConfigMaps", second(cs(probe).CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}))},
		{"controller creates a ConfigMap", second(cs(ctrl).CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{}))},
		{"controller deletes fleet-role-status", cs(ctrl).CoreV1().ConfigMaps(ns).Delete(ctx, "fleet-role-status", metav1.DeleteOptions{})},
	}
	for _, d := range denied {
		if !apierrors.IsForbidden(d.err) {
			t.Errorf("%s: %v, want Forbidden", d.what, d.err)
		}
	}
	t.Logf("with their own tokens: %d requests refused Forbidden, as can-i says", len(denied))
}

func second[T any](_ T, err error) error { return err }

// TestImageBinary builds the binary with the Dockerfile's own build command
// and checks it is static (no interpreter, no dynamic section) and has the
// commands the manifests run. There is no Docker engine here to build the
// image itself; this is the part of it that can fail.
func TestImageBinary(t *testing.T) {
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(df), "\\\n", " ")
	if !regexp.MustCompile(`(?m)^ENTRYPOINT \["fleet-role"\]$`).MatchString(text) {
		t.Error(`Dockerfile: no ENTRYPOINT ["fleet-role"]`)
	}
	if !regexp.MustCompile(`(?m)^USER 65532:65532$`).MatchString(text) || !strings.Contains(text, "distroless/static") {
		t.Error("Dockerfile: the final stage must be distroless/static run as USER 65532:65532")
	}
	var build string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "RUN ") && strings.Contains(line, "go build") {
			build = line
		}
	}
	if !strings.Contains(build, "CGO_ENABLED=0") || !strings.Contains(build, "-trimpath") {
		t.Fatalf("Dockerfile's build step %q must set CGO_ENABLED=0 and -trimpath", build)
	}
	// Drop RUN and its --mount options; write the binary into the test's
	// directory; run the rest as the Dockerfile's shell would.
	var words []string
	for _, w := range strings.Fields(strings.TrimPrefix(build, "RUN ")) {
		if !strings.HasPrefix(w, "--mount=") {
			words = append(words, w)
		}
	}
	bin := filepath.Join(t.TempDir(), "fleet-role")
	script := strings.Replace(strings.Join(words, " "), "/out/fleet-role", bin, 1)
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "TARGETOS=linux", "TARGETARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %v program header: it is not static", p.Type)
		}
	}
	if s := f.Section(".dynamic"); s != nil {
		t.Error("the binary has a .dynamic section: it is not static")
	}
	if libs, _ := f.ImportedLibraries(); len(libs) != 0 {
		t.Errorf("the binary imports %v", libs)
	}
	// Every command the manifests run exists in the binary.
	d := docs(t)
	var dep appsv1.Deployment
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(d["Deployment/fleet-role"], &dep); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(d["DaemonSet/fleet-role-probe"], &ds); err != nil {
		t.Fatal(err)
	}
	for _, c := range []corev1.Container{dep.Spec.Template.Spec.Containers[0], ds.Spec.Template.Spec.Containers[0]} {
		out, err := exec.Command(bin, "help", c.Args[0]).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "fleet-role "+c.Args[0]) {
			t.Errorf("fleet-role help %s: %v\n%s", c.Args[0], err, out)
		}
	}
	if out, err := exec.Command(bin, "help", "no-such-command").CombinedOutput(); err == nil && strings.Contains(string(out), "fleet-role no-such-command") {
		t.Errorf("the command check cannot fail: help of an unknown command said %s", out)
	}
	// Every container's args parse against the real command's flags: cobra
	// parses every flag before it looks at --help, so an unknown or
	// malformed flag fails (exit 2) and a good set prints the help (exit 0)
	// without reading the settings file or reaching a cluster.
	for _, c := range []corev1.Container{dep.Spec.Template.Spec.Containers[0], ds.Spec.Template.Spec.Containers[0]} {
		args := append(append([]string(nil), c.Args...), "--help")
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Errorf("fleet-role %s: the container's args do not parse: %v\n%s", strings.Join(c.Args, " "), err, out)
		}
		bad := append(append([]string(nil), c.Args...), "--no-such-flag=1", "--help")
		cmd := exec.Command(bin, bad...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "unknown flag") {
			t.Errorf("the args check cannot fail: fleet-role %s answered %v\n%s", strings.Join(bad, " "), err, out)
		}
	}
}
