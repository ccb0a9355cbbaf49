// Package deploy holds fleet-role's manifests (a kustomize base and the file
// rendered from it) and the Dockerfile's tests. These tests hold the rendered
// file to the base and the pods to their hardening, apply it to a real
// kube-apiserver (with kube-controller-manager's admission policy status
// controller type-checking the policy), check the RBAC it grants with kubectl
// auth can-i and with each ServiceAccount's own token, make every request
// the admission policy must refuse or admit with tokens bound to Pods on
// Nodes, and build the binary as the Dockerfile does. The can-i and
// admission tables are docs/records.md's "What each part may do".
package deploy

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
	"github.com/fleet-role/fleet-role/lab/run/apiserver/apiservertest"
)

const (
	ns       = "fleet-role"
	rns      = "fleet-role-records" // the records' own namespace
	rendered = "fleet-role.yaml"
	// renderedActing is the install with acting on (deploy/acting).
	renderedActing = "fleet-role-acting.yaml"
	image          = testkit.ImageTag
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

// TestRenderedActingIsOverlay: deploy/fleet-role-acting.yaml is exactly
// `kubectl kustomize deploy/acting` under its comment header.
func TestRenderedActingIsOverlay(t *testing.T) {
	out, err := exec.Command(testenv.Kubectl(t), "kustomize", "acting").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize acting: %v", err)
	}
	b, err := os.ReadFile(renderedActing)
	if err != nil {
		t.Fatal(err)
	}
	if got := stripHeader(b); !bytes.Equal(got, out) {
		t.Fatalf("deploy/%s differs from `kubectl kustomize deploy/acting`: run deploy/render.sh", renderedActing)
	}
}

// withoutHeader returns the rendered file without its leading comment lines.
func withoutHeader(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(rendered)
	if err != nil {
		t.Fatal(err)
	}
	return stripHeader(b)
}

// stripHeader returns a rendered manifest without its leading comment lines.
func stripHeader(b []byte) []byte {
	for bytes.HasPrefix(b, []byte("#")) {
		_, b, _ = bytes.Cut(b, []byte("\n"))
	}
	return b
}

// docs splits the rendered file into its objects, by kind and name.
func docs(t *testing.T) map[string][]byte {
	t.Helper()
	return docsOf(t, withoutHeader(t))
}

// docsOf splits a rendered manifest, without its header, into its objects.
func docsOf(t *testing.T, manifest []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, d := range bytes.Split(manifest, []byte("\n---\n")) {
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
	s := settingsOf(t, docs(t))
	if !reflect.DeepEqual(s, settings.Defaults()) {
		t.Errorf("shipped settings %+v\ndiffer from the defaults %+v", s, settings.Defaults())
	}
}

// settingsOf parses and validates the settings a manifest's objects ship.
func settingsOf(t *testing.T, objects map[string][]byte) settings.Settings {
	t.Helper()
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(objects["ConfigMap/fleet-role-settings"], &cm); err != nil {
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
	return s
}

// The controller's user is the Dockerfile's USER (distroless's nonroot);
// the probe's is its own, which nothing else in the manifests runs as
// (deploy/base/probe.yaml says why): the runAsUser and runAsGroup of each
// pod, and for the probe the owner the init container gives the fsync
// directory.
const controllerUser, probeUser = 65532, 64876

// workloads reads the two workloads of the rendered file as the API types.
func workloads(t *testing.T) (appsv1.Deployment, appsv1.DaemonSet) {
	t.Helper()
	d := docs(t)
	var dep appsv1.Deployment
	if err := yaml.Unmarshal(d["Deployment/fleet-role"], &dep); err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(d["DaemonSet/fleet-role-probe"], &ds); err != nil {
		t.Fatal(err)
	}
	return dep, ds
}

// TestPodsAreHardened reads the two workloads as the API types and checks
// what the install promises of them: both pods non-root, each as a user
// of its own (the controller 65532, the probe 64876), under RuntimeDefault
// seccomp; every container, the init container too, with a
// read-only root filesystem, no privilege escalation and every capability
// dropped; only the init container root, with CHOWN alone added back; the
// probe's one host path its fsync directory.
func TestPodsAreHardened(t *testing.T) {
	dep, ds := workloads(t)
	for _, p := range []struct {
		name string
		spec corev1.PodSpec
		cmd  string
		user int64
	}{{"controller", dep.Spec.Template.Spec, "controller", controllerUser}, {"probe", ds.Spec.Template.Spec, "probe", probeUser}} {
		sc := p.spec.SecurityContext
		if sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: seccomp is not RuntimeDefault", p.name)
		}
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != p.user ||
			sc.RunAsGroup == nil || *sc.RunAsGroup != p.user {
			t.Errorf("%s: pod security context %+v, want runAsNonRoot and runAsUser = runAsGroup = %d", p.name, sc, p.user)
		}
		if len(p.spec.Containers) != 1 {
			t.Fatalf("%s: %d containers", p.name, len(p.spec.Containers))
		}
		c := p.spec.Containers[0]
		if len(c.Args) == 0 || c.Args[0] != p.cmd || !contains(c.Args, "--settings=/etc/fleet-role/settings.yaml") {
			t.Errorf("%s: args %v", p.name, c.Args)
		}
		for _, c := range append(append([]corev1.Container(nil), p.spec.InitContainers...), p.spec.Containers...) {
			where := p.name + "/" + c.Name
			if c.Image != image {
				t.Errorf("%s: image %s, want %s", where, c.Image, image)
			}
			if c.ImagePullPolicy != corev1.PullIfNotPresent {
				t.Errorf("%s: imagePullPolicy %q, want IfNotPresent: the tag is a release's and does not move", where, c.ImagePullPolicy)
			}
			sc := c.SecurityContext
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
				(sc.Privileged != nil && *sc.Privileged) || sc.ProcMount != nil {
				t.Errorf("%s: container security context %+v: want no escalation, a read-only root, ALL dropped, unprivileged", where, sc)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s: CPU and memory requests and a memory limit must be set: %+v", where, c.Resources)
			}
			// The probe times connects and fdatasyncs: a CFS quota would add
			// its throttling to them (test/pods measured it). Every other
			// container is held to a CPU limit.
			if timesReadings := where == "probe/probe"; timesReadings != c.Resources.Limits.Cpu().IsZero() {
				t.Errorf("%s: CPU limit %v: the probe, which times its readings, must have none; every other container one", where, c.Resources.Limits.Cpu())
			}
			for _, m := range c.VolumeMounts {
				if m.RecursiveReadOnly != nil && *m.RecursiveReadOnly != corev1.RecursiveReadOnlyDisabled && !m.ReadOnly {
					t.Errorf("%s: mount %s is recursiveReadOnly %s without readOnly: the API server refuses that", where, m.Name, *m.RecursiveReadOnly)
				}
			}
		}
		// The main containers run as the pod does and add nothing back.
		if sc := c.SecurityContext; sc != nil && (len(sc.Capabilities.Add) != 0 || sc.RunAsUser != nil || sc.RunAsNonRoot != nil) {
			t.Errorf("%s: the container overrides the pod's user or adds capabilities: %+v", p.name, sc)
		}
	}

	pod := dep.Spec.Template.Spec
	if len(pod.InitContainers) != 0 {
		t.Errorf("controller: init containers %v, want none", pod.InitContainers)
	}
	// POD_NAME: the Lease holder's identity, and with POD_IP what the
	// leader names in the Service's Endpoints. GOMEMLIMIT: Go's soft memory
	// limit, three quarters of the container's (deploy/base/controller.yaml
	// says why).
	wantEnv := []corev1.EnvVar{{Name: "FLEET_ROLE_DRY_RUN", Value: "true"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "GOMEMLIMIT", Value: "192MiB"}}
	if env := pod.Containers[0].Env; !reflect.DeepEqual(env, wantEnv) {
		t.Errorf("controller env %+v, want FLEET_ROLE_DRY_RUN=true, POD_NAME from metadata.name, POD_IP from status.podIP, GOMEMLIMIT=192MiB and nothing else", env)
	}
	mib, err := strconv.ParseInt(strings.TrimSuffix(wantEnv[3].Value, "MiB"), 10, 64)
	if hard := pod.Containers[0].Resources.Limits.Memory().Value(); err != nil || mib<<20*4 != hard*3 {
		t.Errorf("controller GOMEMLIMIT %s (%v) is not three quarters of its memory limit, %d bytes", wantEnv[3].Value, err, hard)
	}
	// With POD_IP set the page would be served on eth0's address alone by
	// default; every interface keeps kubectl port-forward, which connects
	// to localhost in the pod. The leader names its page in the Service
	// fleet-role, which has no selector, on the port it serves.
	args := pod.Containers[0].Args
	if !slices.Contains(args, "--metrics-address=:9870") || !slices.Contains(args, "--page-service=fleet-role") {
		t.Errorf("controller args %q, want --metrics-address=:9870 and --page-service=fleet-role", args)
	}
	var svc corev1.Service
	if err := yaml.Unmarshal(docs(t)["Service/fleet-role"], &svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Selector) != 0 || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != kube.PagePortName || svc.Spec.Ports[0].Port != 9870 {
		t.Errorf("Service fleet-role: selector %v, ports %+v; want no selector and one port %q, 9870", svc.Spec.Selector, svc.Spec.Ports, kube.PagePortName)
	}
	if _, ok := docs(t)["Endpoints/fleet-role"]; ok {
		t.Error("the install makes Endpoints fleet-role: applying v1 Endpoints is answered with a deprecation warning; the leader makes them")
	}
	// On servers alone: a term per server label k3s sets itself (a kubelet
	// may not set node-role.kubernetes.io labels), required; the taints k3s
	// servers carry tolerated by key, none with an empty key (which would
	// tolerate every taint, a lost node's among them). test/pods holds the
	// scheduler to it on a real kubelet.
	wantTerms := []corev1.NodeSelectorTerm{
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}},
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "node-role.kubernetes.io/etcd", Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}}},
	}
	if a := pod.Affinity; a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		!reflect.DeepEqual(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, wantTerms) || len(pod.NodeSelector) != 0 {
		t.Errorf("controller: affinity %+v, node selector %v: want required node affinity to the k3s server labels %+v alone", pod.Affinity, pod.NodeSelector, wantTerms)
	}
	var keys []string
	for _, tol := range pod.Tolerations {
		keys = append(keys, tol.Key)
	}
	if want := []string{"CriticalAddonsOnly", "node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/etcd"}; !slices.Equal(keys, want) {
		t.Errorf("controller: tolerations of keys %q, want %q (no empty key)", keys, want)
	}
	// Two replicas, one writer by the Lease; a roll adds the new pod
	// before an old one goes, and a disruption budget keeps one.
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 || dep.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType ||
		dep.Spec.Strategy.RollingUpdate == nil || dep.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("controller: replicas %v, strategy %+v: want 2, a rolling update with none unavailable", dep.Spec.Replicas, dep.Spec.Strategy)
	}
	var pdb policyv1.PodDisruptionBudget
	if err := yaml.Unmarshal(docs(t)["PodDisruptionBudget/fleet-role"], &pdb); err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.Selector == nil ||
		!reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, dep.Spec.Selector.MatchLabels) {
		t.Errorf("controller's PodDisruptionBudget %+v: want minAvailable 1 over the Deployment's pods", pdb.Spec)
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
	for _, m := range pod.Containers[0].VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("controller: mount %s is writable", m.Name)
		}
	}

	probe := ds.Spec.Template.Spec
	if !probe.HostNetwork {
		t.Error("probe: not on the host network")
	}
	wantEnv = []corev1.EnvVar{
		{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
	}
	if env := probe.Containers[0].Env; !reflect.DeepEqual(env, wantEnv) {
		t.Errorf("probe env %+v, want NODE_NAME (spec.nodeName) and HOST_IP (status.hostIP) from the downward API, nothing else", env)
	}
	// Its readings from its own /proc and /sys, which on the host's
	// network are the host's (test/pods shows it reading by reading).
	for _, a := range probe.Containers[0].Args {
		if strings.HasPrefix(a, "--host-root") {
			t.Errorf("probe: %s: it reads the host from its own /proc and /sys, under no other root", a)
		}
	}
	// Ready while it writes its samples (docs/records.md, Fail closed).
	if rp := probe.Containers[0].ReadinessProbe; rp == nil || rp.HTTPGet == nil || rp.HTTPGet.Path != "/readyz" || rp.HTTPGet.Port.String() != "metrics" {
		t.Error("probe: no /readyz readiness probe on the metrics port")
	}
	if len(probe.Tolerations) != 1 || probe.Tolerations[0].Operator != corev1.TolerationOpExists || probe.Tolerations[0].Key != "" {
		t.Errorf("probe: tolerations %+v do not tolerate every taint", probe.Tolerations)
	}

	// The host paths, where each container mounts them, and how.
	type mount struct {
		path     string
		readOnly bool
		rro      corev1.RecursiveReadOnlyMode
	}
	mounts := func(c corev1.Container) map[string]mount { // host path -> mount
		out := map[string]mount{}
		for _, v := range probe.Volumes {
			if v.HostPath == nil {
				continue
			}
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					rro := corev1.RecursiveReadOnlyDisabled
					if m.RecursiveReadOnly != nil {
						rro = *m.RecursiveReadOnly
					}
					out[v.HostPath.Path] = mount{m.MountPath, m.ReadOnly, rro}
				}
			}
		}
		return out
	}
	const fsyncHost, fsyncMount = "/var/lib/rancher/k3s/server/db/fleet-role-fsync", "/var/lib/fleet-role/fsync"
	want := map[string]mount{
		fsyncHost: {fsyncMount, false, corev1.RecursiveReadOnlyDisabled},
	}
	if got := mounts(probe.Containers[0]); !reflect.DeepEqual(got, want) {
		t.Errorf("probe host mounts %+v,\nwant %+v: the fsync directory alone (no host /proc: it would show every process of the node)", got, want)
	}
	if !contains(probe.Containers[0].Args, "--fsync-dir="+fsyncMount) {
		t.Errorf("probe: no --fsync-dir=%s in %v", fsyncMount, probe.Containers[0].Args)
	}

	// The init container: root with CHOWN alone, the fsync directory alone,
	// handing it to the user the probe runs as.
	if len(probe.InitContainers) != 1 {
		t.Fatalf("probe: %d init containers, want 1 (prepare-fsync-dir)", len(probe.InitContainers))
	}
	ic := probe.InitContainers[0]
	wantArgs := []string{"prepare-fsync-dir", "--dir=" + fsyncMount, fmt.Sprintf("--owner=%d:%d", *probe.SecurityContext.RunAsUser, *probe.SecurityContext.RunAsGroup)}
	if !reflect.DeepEqual(ic.Args, wantArgs) {
		t.Errorf("probe init container args %v, want %v (the probe's own user and group)", ic.Args, wantArgs)
	}
	isc := ic.SecurityContext
	if isc == nil || isc.RunAsUser == nil || *isc.RunAsUser != 0 || isc.RunAsGroup == nil || *isc.RunAsGroup != 0 ||
		isc.RunAsNonRoot == nil || *isc.RunAsNonRoot || !reflect.DeepEqual(isc.Capabilities.Add, []corev1.Capability{"CHOWN"}) {
		t.Errorf("probe init container security context %+v: want root (runAsUser 0, runAsNonRoot false) with CHOWN alone added", isc)
	}
	if got, want := mounts(ic), map[string]mount{fsyncHost: {fsyncMount, false, corev1.RecursiveReadOnlyDisabled}}; !reflect.DeepEqual(got, want) || len(ic.VolumeMounts) != 1 {
		t.Errorf("probe init container mounts %v (%+v), want the fsync directory alone", ic.VolumeMounts, got)
	}
	if len(ic.Env) != 0 || len(ic.EnvFrom) != 0 || len(ic.Ports) != 0 {
		t.Errorf("probe init container has env %v, envFrom %v, ports %v: it needs none", ic.Env, ic.EnvFrom, ic.Ports)
	}
}

// TestSettingsNamespaceAndScope: every namespaced object is in fleet-role's
// own namespace, which enforces the privileged Pod Security level (the
// probe needs the host's network and paths) and warns and audits at
// restricted, but the grants over the records, which are in the records'
// own namespace (restricted: no pod runs there); the cluster-scoped objects
// are the two namespaces, the node reader, the admission policy and the
// flow control.
func TestSettingsNamespaceAndScope(t *testing.T) {
	d := docs(t)
	// Pod Security: fleet-role's namespace enforces privileged; the
	// records' runs no pod and is restricted at every level.
	for name, enforce := range map[string]string{ns: "privileged", rns: "restricted"} {
		var nsObj corev1.Namespace
		if err := yaml.Unmarshal(d["Namespace/"+name], &nsObj); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"pod-security.kubernetes.io/enforce": enforce,
			"pod-security.kubernetes.io/warn":    "restricted",
			"pod-security.kubernetes.io/audit":   "restricted",
			"app.kubernetes.io/part-of":          "fleet-role",
		}
		if !reflect.DeepEqual(nsObj.Labels, want) {
			t.Errorf("namespace %s labels %v, want %v", name, nsObj.Labels, want)
		}
	}
	if s := settings.Defaults(); s.Namespace != ns || s.RecordsNamespace() != rns {
		t.Errorf("settings namespaces %q and %q, manifests' %q and %q", s.Namespace, s.RecordsNamespace(), ns, rns)
	}
	// What lives in the records' namespace: the grants to write and read
	// them, nothing else.
	inRecords := map[string]bool{"Role/fleet-role-probe-records": true, "RoleBinding/fleet-role-probe-records": true,
		"Role/fleet-role-records": true, "RoleBinding/fleet-role-records": true}
	cluster := map[string]bool{
		"Namespace/" + ns: true, "Namespace/" + rns: true, "ClusterRole/fleet-role-node-reader": true,
		"ClusterRole/fleet-role-policy-reader": true, "ClusterRoleBinding/fleet-role-policy-reader": true, "ClusterRoleBinding/fleet-role-node-reader": true,
		"ValidatingAdmissionPolicy/fleet-role-probe-records": true, "ValidatingAdmissionPolicyBinding/fleet-role-probe-records": true,
		"FlowSchema/fleet-role-probe": true, "PriorityLevelConfiguration/fleet-role-probe": true,
	}
	// The grant to write Events on Nodes, which the API server admits only
	// in namespace default (rbac.yaml).
	inDefault := map[string]bool{"Role/fleet-role-events": true, "RoleBinding/fleet-role-events": true}
	for key, b := range d {
		var m metav1.PartialObjectMetadata
		if err := yaml.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if inDefault[key] {
			if m.Namespace != "default" {
				t.Errorf("%s: namespace %q, want default", key, m.Namespace)
			}
			delete(inDefault, key)
			continue
		}
		if inRecords[key] {
			if m.Namespace != rns {
				t.Errorf("%s: namespace %q, want %s", key, m.Namespace, rns)
			}
			delete(inRecords, key)
			continue
		}
		if cluster[key] {
			if m.Namespace != "" {
				t.Errorf("%s: cluster-scoped, but namespace %q", key, m.Namespace)
			}
			delete(cluster, key)
			continue
		}
		if m.Namespace != ns {
			t.Errorf("%s: namespace %q, want %s", key, m.Namespace, ns)
		}
		if m.Labels["app.kubernetes.io/part-of"] != "fleet-role" {
			t.Errorf("%s: no app.kubernetes.io/part-of=fleet-role", key)
		}
	}
	for key := range cluster {
		t.Errorf("%s missing from the rendered file", key)
	}
	for key := range inRecords {
		t.Errorf("%s missing from the rendered file", key)
	}
	for key := range inDefault {
		t.Errorf("%s missing from the rendered file", key)
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

// update rewrites docs/records.md's section "What each part may do" from
// the tables TestOnAPIServer makes on the real API server.
var update = flag.Bool("update", false, "rewrite docs/records.md's \"What each part may do\" from this run's tables")

const (
	docsFile    = "../docs/records.md"
	docsHeading = "## What each part may do"
	policyName  = "fleet-role-probe-records"
)

// The words of the admission policy's messages (deploy/base/admission.yaml)
// that each refusal must carry; TestOnAPIServer checks that each is in the
// rendered policy too, so a reworded message fails here, not silently.
const (
	msgClaim     = "fleet-role-probe writes records only with a token bound to a Pod on a Node"
	msgPod       = "fleet-role-probe writes records only with a token bound to a Pod, as the kubelet issues it"
	msgNodeUID   = "fleet-role-probe writes records only with a token that carries the UID of its Node"
	msgOwnRecord = "may write only its own record, the ConfigMap "
	msgNotRecord = "fleet-role-probe may change or delete only a probe record (labelled fleet-role.io/record=probe) or its tail (=tail)"
	msgLabels    = "a probe record carries exactly the labels fleet-role.io/record=probe and app.kubernetes.io/part-of=fleet-role"
	msgMeta      = "a probe record carries no annotations and no finalizers"
	msgOwner     = "a probe record has exactly one ownerReference, to its own Node "
	msgData      = "a probe record holds data.entry or binaryData.window (both: a release before the tail layout wrote data.entry over a window, and data.entry is read), a tail one key, binaryData.tail, and neither is immutable"
	msgTailLabel = "a probe tail carries exactly the labels fleet-role.io/record=tail and app.kubernetes.io/part-of=fleet-role"
	msgCapPacked = "a probe record's packed window or tail holds at most 213027 bytes (the record cap at the shipped settings, in whole base64 groups of 3 bytes)"
	msgCap       = "bytes (the record cap at the shipped settings); this entry is "
	msgManaged   = "a probe record's managedFields hold at most 10 entries, each of apiVersion v1 and no subresource, naming only"
	// The API server's own words for a refusal by RBAC.
	msgRBAC = "cannot "
)

// The nodes of the admission tests: a probe on each of the first two, and a
// third whose name an administrator has given to a ConfigMap that is no
// record.
const (
	node1, node2, node3 = "server-1", "server-2", "server-3"
)

// policy reads the admission policy of the rendered file.
func policy(t *testing.T) admissionregistrationv1.ValidatingAdmissionPolicy {
	t.Helper()
	var p admissionregistrationv1.ValidatingAdmissionPolicy
	if err := yaml.Unmarshal(docs(t)["ValidatingAdmissionPolicy/"+policyName], &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// recordCap is the figure the policy holds data.entry to, read from its
// expression; its message must name the same figure.
func recordCap(t *testing.T) int {
	t.Helper()
	re := regexp.MustCompile(`object\.data\.entry\)\)?\s*<=\s*(\d+)\s*$`)
	for _, v := range policy(t).Spec.Validations {
		if m := re.FindStringSubmatch(v.Expression); m != nil {
			n, err := strconv.Atoi(m[1])
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(v.MessageExpression, "'a probe record holds at most "+m[1]+" bytes") {
				t.Fatalf("the cap's message %q does not name its figure %s", v.MessageExpression, m[1])
			}
			return n
		}
	}
	t.Fatal("no validation in the policy holds data.entry to a size")
	return 0
}

// TestOnAPIServer applies the rendered file to a real kube-apiserver
// (k3s's own, v1.34.2+k3s1) and holds what it grants: the RBAC, as kubectl auth can-i sees
// it and with each ServiceAccount's own token; and the admission policy,
// with tokens bound to Pods on two Nodes, a token bound to none, and the
// controller's.
func TestOnAPIServer(t *testing.T) {
	var text strings.Builder
	for _, v := range policy(t).Spec.Validations {
		text.WriteString(v.Message + "\n" + v.MessageExpression + "\n")
	}
	for _, m := range []string{msgClaim, msgPod, msgNodeUID, msgOwnRecord, msgNotRecord, msgLabels, msgTailLabel, msgMeta, msgOwner, msgData, msgCap, msgCapPacked, msgManaged} {
		if !strings.Contains(text.String(), m) {
			t.Fatalf("the policy in %s no longer says %q: update the test's words with it", rendered, m)
		}
	}
	// The policy's cap is the code's at the shipped settings: a probe at
	// those settings never writes more, and nothing larger is admitted.
	capBytes := recordCap(t)
	shipped := settings.Defaults()
	if want := record.CapBytes(shipped.Window, shipped.MaxServers); capBytes != want {
		t.Errorf("the policy caps a record at %d bytes, the code at the shipped settings (window %d, max_servers %d) at %d",
			capBytes, shipped.Window, shipped.MaxServers, want)
	}

	s := apiservertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kubectl := testenv.Kubectl(t)
	kc := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := s.Kubeconfig(kc, ""); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kc}, args...)...).CombinedOutput()
		return string(out), err
	}
	apply := func() string {
		t.Helper()
		out, err := run("apply", "--server-side", "-f", rendered)
		if err != nil {
			t.Fatalf("kubectl apply --server-side: %v\n%s", err, out)
		}
		// A line a result, not the output: a failure below must stay
		// within what a truncated CI log shows.
		t.Logf("kubectl apply --server-side -f deploy/fleet-role.yaml: %d lines of output", strings.Count(out, "\n"))
		return out
	}
	// On a cluster without the namespace yet, a server-side dry run cannot
	// create it first, so the namespaced objects are refused for that alone;
	// the cluster-scoped ones (the admission policy's expressions compiled)
	// and the Events grant in namespace default pass. The dry run of the whole file must succeed once it is installed.
	out, err := run("apply", "--dry-run=server", "-f", rendered)
	t.Logf("kubectl apply --dry-run=server before the install (%v): %d lines of output, each judged below", err, strings.Count(out, "\n"))
	passed := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.HasSuffix(line, " created (server dry run)"):
			passed++
		case line == `Error from server (NotFound): error when creating "fleet-role.yaml": namespaces "`+ns+`" not found`,
			line == `Error from server (NotFound): error when creating "fleet-role.yaml": namespaces "`+rns+`" not found`:
		default:
			t.Errorf("kubectl apply --dry-run=server before the install: %q is neither a pass nor the missing namespace", line)
		}
	}
	if passed != 12 {
		t.Errorf("kubectl apply --dry-run=server before the install passed %d objects, want the 10 cluster-scoped ones and the 2 in namespace default:\n%s", passed, out)
	}
	checkWarnings(t, apply())
	if out, err := run("apply", "--server-side", "--dry-run=server", "-f", rendered); err != nil {
		t.Errorf("kubectl apply --server-side --dry-run=server on the installed cluster: %v\n%s", err, out)
	}
	if out, err := run("apply", "--dry-run=server", "-f", rendered); err != nil {
		t.Errorf("kubectl apply --dry-run=server on the installed cluster: %v\n%s", err, out)
	} else {
		t.Logf("kubectl apply --dry-run=server -f deploy/fleet-role.yaml on the installed cluster: %d lines of output", strings.Count(out, "\n"))
	}

	admin, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	startPolicyStatusController(t, kc)
	checkTypeChecking(t, ctx, admin)
	c := &testkit.Cluster{Server: s, Admin: admin, Namespace: ns}

	cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "fleet-role-status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.Data) != 0 {
		t.Errorf("fleet-role-status created with data %v, want empty", cm.Data)
	}
	// Something else to be denied: a Secret, a ConfigMap elsewhere.
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*corev1.Node{}
	for _, n := range []string{node1, node2, node3} {
		created, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodes[n] = created
	}

	var canITable, admissionTable string
	t.Run("CanI", func(t *testing.T) { canITable = testCanI(t, ctx, c, kubectl, kc) })
	t.Run("Admission", func(t *testing.T) { admissionTable = testAdmission(t, ctx, c, nodes, capBytes) })
	t.Run("FlowControl", func(t *testing.T) { testFlowControl(t, ctx, c, admin) })
	t.Run("FloodingProbe", func(t *testing.T) { testFloodingProbe(t, ctx, c, admin, nodes, capBytes) })

	// Applying again (k3s re-applies its manifests on every start) leaves
	// what the controller wrote to its status: the installer never owned it.
	status := `{"hosts":[]}`
	ctrl := c.Client(t, testkit.ControllerSA)
	if err := ctrl.ConfigMaps(ns).PatchKey(ctx, "fleet-role-status", "status.json", &status); err != nil {
		t.Fatalf("controller patches status.json of fleet-role-status: %v", err)
	}
	apply()
	if got := c.Data(t, "fleet-role-status"); got["status.json"] != status {
		t.Errorf("after a second apply fleet-role-status holds %v, want the controller's status.json kept", got)
	}
	if !t.Failed() {
		checkDocs(t, canITable, admissionTable)
	}
}

// checkWarnings holds the Pod Security warnings of the apply (the namespace
// warns at restricted) to exactly what the probe needs of the host: its
// network, its hostPath volumes, and its init container, root with CHOWN.
// The controller meets restricted: a warning naming anything else fails.
func checkWarnings(t *testing.T, out string) {
	t.Helper()
	var warnings []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Warning:") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 1 {
		t.Fatalf("apply gave %d warnings, want exactly one, the probe's Pod Security warning:\n%s", len(warnings), strings.Join(warnings, "\n"))
	}
	const prefix = `Warning: would violate PodSecurity "restricted:latest": `
	rest, ok := strings.CutPrefix(warnings[0], prefix)
	if !ok {
		t.Fatalf("warning %q is not a Pod Security warning at restricted", warnings[0])
	}
	for _, want := range []string{
		"host namespaces (hostNetwork=true)",
		`restricted volume types (volume "fsync" uses restricted volume type "hostPath")`,
		`unrestricted capabilities (container "fsync-dir" must not include "CHOWN" in securityContext.capabilities.add)`,
		`runAsNonRoot != true (container "fsync-dir" must not set securityContext.runAsNonRoot=false)`,
		`runAsUser=0 (container "fsync-dir" must not set runAsUser=0)`,
	} {
		if !strings.Contains(rest, want) {
			t.Errorf("the Pod Security warning does not name %s: %s", want, warnings[0])
		}
		rest = strings.Replace(rest, want, "", 1)
	}
	if left := strings.Trim(strings.ReplaceAll(rest, ", ", ""), " "); left != "" {
		t.Errorf("the Pod Security warning names more than the probe needs: %q (whole: %s)", left, warnings[0])
	}
	t.Logf("Pod Security (warn: restricted), the probe's alone: %s", warnings[0])
}

// startPolicyStatusController runs the real kube-controller-manager with one
// controller, the admission policy status controller: it type-checks each
// ValidatingAdmissionPolicy against the API server's schemas and writes
// status.typeChecking, as it does in a cluster. Stopped when the test ends.
func startPolicyStatusController(t *testing.T, kubeconfig string) {
	t.Helper()
	testkit.StartControllerManager(t, kubeconfig, "validatingadmissionpolicy-status-controller")
}

// checkTypeChecking waits for the API server to type-check the admission
// policy against the ConfigMap schema and fails on any warning: an
// expression that does not type-check is one that fails closed at runtime.
func checkTypeChecking(t *testing.T, ctx context.Context, admin kubernetes.Interface) {
	t.Helper()
	var p *admissionregistrationv1.ValidatingAdmissionPolicy
	testkit.Eventually(t, time.Minute, func() error {
		var err error
		p, err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, policyName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
			return fmt.Errorf("policy %s: generation %d, status observed %d, typeChecking %v: not type-checked yet",
				policyName, p.Generation, p.Status.ObservedGeneration, p.Status.TypeChecking)
		}
		return nil
	})
	for _, w := range p.Status.TypeChecking.ExpressionWarnings {
		t.Errorf("policy %s: type checking warns on %s: %s", policyName, w.FieldRef, w.Warning)
	}
	// The check can fail: a policy (bound to nothing) whose expression adds
	// a number to a ConfigMap's string is warned about.
	bad := p.DeepCopy()
	bad.ObjectMeta = metav1.ObjectMeta{Name: "fleet-role-test-ill-typed"}
	bad.Status = admissionregistrationv1.ValidatingAdmissionPolicyStatus{}
	bad.Spec.Validations = []admissionregistrationv1.Validation{{Expression: "object.data.entry + 1 > 0"}}
	if _, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, time.Minute, func() error {
		got, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, bad.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status.TypeChecking == nil || len(got.Status.TypeChecking.ExpressionWarnings) == 0 {
			return fmt.Errorf("the ill-typed policy %s has no type-checking warning yet: %+v", bad.Name, got.Status.TypeChecking)
		}
		t.Logf("the ill-typed control policy is warned about, as it must be: %s", got.Status.TypeChecking.ExpressionWarnings[0].Warning)
		return nil
	})
	if err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, bad.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Status.Conditions {
		t.Logf("policy %s condition %s=%s %s %s", policyName, c.Type, c.Status, c.Reason, c.Message)
	}
	t.Logf("policy %s type-checked at generation %d: %d expression warnings", policyName, p.Generation, len(p.Status.TypeChecking.ExpressionWarnings))
}

// canI is one row of the matrix: verb and resource (with /name or a
// --subresource) in namespace (empty: cluster scope), and what rbac.yaml
// grants each ServiceAccount.
type canI struct {
	verb, resource, namespace, subresource string
	probe, controller                      bool
	note                                   string
}

func testCanI(t *testing.T, ctx context.Context, c *testkit.Cluster, kubectl, kc string) string {
	const admitted = "RBAC allows it; the admission policy admits only the probe's own record"
	rows := []canI{
		{verb: "list", resource: "nodes", probe: true, controller: true},
		{verb: "get", resource: "nodes/" + node1},
		{verb: "watch", resource: "nodes", probe: true, controller: true},
		{verb: "patch", resource: "nodes/" + node1},
		{verb: "update", resource: "nodes/" + node1},
		{verb: "delete", resource: "nodes/" + node1},
		{verb: "create", resource: "nodes"},
		{verb: "patch", resource: "nodes/" + node1, subresource: "status"},
		// The records' own namespace: the probe's writes, the controller's
		// list and watch, nothing else.
		{verb: "get", resource: "configmaps/" + node1, namespace: rns, probe: true},
		{verb: "create", resource: "configmaps", namespace: rns, probe: true, note: admitted},
		{verb: "patch", resource: "configmaps/" + node1, namespace: rns, probe: true, note: admitted},
		{verb: "delete", resource: "configmaps/" + node1, namespace: rns, probe: true, note: admitted},
		{verb: "update", resource: "configmaps/" + node1, namespace: rns},
		{verb: "list", resource: "configmaps", namespace: rns, controller: true},
		{verb: "watch", resource: "configmaps", namespace: rns, controller: true},
		{verb: "list", resource: "configmaps/" + node1, namespace: rns, controller: true},
		{verb: "deletecollection", resource: "configmaps", namespace: rns},
		{verb: "create", resource: "pods", namespace: rns},
		{verb: "create", resource: "roles", namespace: rns},
		// fleet-role's own namespace: out of every probe credential's reach
		// but for following the settings, by name; so with the admission
		// policy off no probe can touch the status or the settings.
		{verb: "get", resource: "configmaps/" + node1, namespace: ns},
		{verb: "create", resource: "configmaps", namespace: ns, note: "no probe record is here: RBAC refuses the probe every write in this namespace"},
		{verb: "list", resource: "configmaps", namespace: ns},
		{verb: "watch", resource: "configmaps", namespace: ns},
		{verb: "deletecollection", resource: "configmaps", namespace: ns},
		{verb: "get", resource: "configmaps/fleet-role-status", namespace: ns, controller: true},
		{verb: "patch", resource: "configmaps/fleet-role-status", namespace: ns, controller: true},
		{verb: "update", resource: "configmaps/fleet-role-status", namespace: ns},
		{verb: "create", resource: "configmaps/fleet-role-status", namespace: ns, controller: true,
			note: "a server-side apply that makes a deleted status anew, authorized as a create of that name (a POST create, which carries no name, is refused)"},
		{verb: "create", resource: "configmaps/fleet-role-settings", namespace: ns},
		{verb: "delete", resource: "configmaps/fleet-role-status", namespace: ns},
		{verb: "get", resource: "configmaps/fleet-role-settings", namespace: ns},
		{verb: "list", resource: "configmaps/fleet-role-settings", namespace: ns, probe: true, controller: true,
			note: "by name alone, a list selected by metadata.name, to follow the settings (--settings-configmap)"},
		{verb: "watch", resource: "configmaps/fleet-role-settings", namespace: ns, probe: true, controller: true,
			note: "by name alone, a watch selected by metadata.name, to follow the settings (--settings-configmap)"},
		{verb: "patch", resource: "configmaps/fleet-role-settings", namespace: ns},
		{verb: "get", resource: "leases.coordination.k8s.io/fleet-role", namespace: ns, probe: true, controller: true,
			note: "the probe: by name alone, for the record layout the controller reads (fleet-role.io/record-format)"},
		{verb: "update", resource: "leases.coordination.k8s.io/fleet-role", namespace: ns, controller: true},
		{verb: "create", resource: "leases.coordination.k8s.io", namespace: ns, controller: true,
			note: "RBAC cannot restrict create by name; the replicas make the Lease fleet-role at their first start"},
		{verb: "get", resource: "leases.coordination.k8s.io/other", namespace: ns},
		{verb: "update", resource: "leases.coordination.k8s.io/other", namespace: ns},
		{verb: "delete", resource: "leases.coordination.k8s.io/fleet-role", namespace: ns},
		{verb: "update", resource: "leases.coordination.k8s.io/kube-controller-manager", namespace: "kube-system"},
		{verb: "get", resource: "endpoints/fleet-role", namespace: ns, controller: true},
		{verb: "patch", resource: "endpoints/fleet-role", namespace: ns, controller: true,
			note: "the leader names its page in the Service fleet-role's Endpoints by a server-side apply"},
		{verb: "create", resource: "endpoints/fleet-role", namespace: ns, controller: true,
			note: "the leader's server-side apply makes them when there are none, authorized as a create of that name"},
		{verb: "update", resource: "endpoints/fleet-role", namespace: ns},
		{verb: "create", resource: "endpoints", namespace: ns, note: "a POST create carries no name, and is refused"},
		{verb: "delete", resource: "endpoints/fleet-role", namespace: ns},
		{verb: "patch", resource: "endpoints/other", namespace: ns},
		{verb: "patch", resource: "endpointslices.discovery.k8s.io/fleet-role", namespace: ns},
		{verb: "patch", resource: "services/fleet-role", namespace: ns},
		{verb: "get", resource: "configmaps/kube-root-ca.crt", namespace: "kube-system"},
		{verb: "create", resource: "configmaps", namespace: "default"},
		{verb: "list", resource: "configmaps", namespace: "default"},
		{verb: "get", resource: "secrets/other", namespace: ns},
		{verb: "list", resource: "secrets", namespace: ns},
		{verb: "get", resource: "secrets", namespace: "kube-system"},
		{verb: "get", resource: "pods", namespace: ns},
		{verb: "create", resource: "pods", namespace: ns},
		{verb: "create", resource: "serviceaccounts/fleet-role", namespace: ns, subresource: "token"},
		{verb: "patch", resource: "roles/fleet-role-probe", namespace: ns},
		{verb: "get", resource: "validatingadmissionpolicies.admissionregistration.k8s.io/" + policyName, controller: true,
			note: "the controller checks for itself that the policy holds every probe write (docs/records.md, Fail closed)"},
		{verb: "get", resource: "validatingadmissionpolicybindings.admissionregistration.k8s.io/" + policyName, controller: true},
		{verb: "get", resource: "validatingadmissionpolicies.admissionregistration.k8s.io/other"},
		{verb: "list", resource: "validatingadmissionpolicies.admissionregistration.k8s.io"},
		{verb: "update", resource: "validatingadmissionpolicybindings.admissionregistration.k8s.io/" + policyName},
		{verb: "delete", resource: "validatingadmissionpolicies.admissionregistration.k8s.io/" + policyName},
		{verb: "delete", resource: "validatingadmissionpolicybindings.admissionregistration.k8s.io/" + policyName},
		{verb: "delete", resource: "namespaces/" + ns},
		// Events on Nodes: the controller writes them where the API server
		// admits them and kubectl describe node finds them, namespace
		// default, and can do nothing else with any Event.
		{verb: "create", resource: "events", namespace: "default", controller: true, note: "an Event on a Node (nodeevents)"},
		{verb: "patch", resource: "events", namespace: "default", controller: true, note: "the recorder counts a repeat"},
		{verb: "update", resource: "events", namespace: "default"},
		{verb: "get", resource: "events", namespace: "default"},
		{verb: "list", resource: "events", namespace: "default"},
		{verb: "delete", resource: "events", namespace: "default"},
		{verb: "create", resource: "events", namespace: ns},
		{verb: "create", resource: "events", namespace: "kube-system"},
		{verb: "create", resource: "events.events.k8s.io", namespace: "default"},
		{verb: "impersonate", resource: "users"},
		{verb: "*", resource: "*"},
	}
	// Each ServiceAccount two ways: impersonated by the admin (--as), and
	// with a token of its own (the probe's bound to a Pod on server-1, as
	// the kubelet issues it).
	own := map[string]string{}
	for sa, tok := range map[string]string{
		testkit.ProbeSA:      c.ProbeToken(t, node1),
		testkit.ControllerSA: c.Token(t, testkit.ControllerSA),
	} {
		own[sa] = filepath.Join(t.TempDir(), sa+".kubeconfig")
		if err := c.Server.Kubeconfig(own[sa], tok); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(kubeconfig string, r canI, as string) bool {
		t.Helper()
		args := []string{"--kubeconfig", kubeconfig, "auth", "can-i", r.verb, r.resource}
		if as != "" {
			args = append(args, "--as="+as)
		}
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
		return answer == "yes"
	}
	var md, log strings.Builder
	fmt.Fprintf(&log, "%-17s %-70s %-12s %-6s %-10s\n", "verb", "resource", "namespace", "probe", "controller")
	md.WriteString("| verb | resource | namespace | probe | controller | note |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		got := map[string]bool{}
		for _, sa := range []string{testkit.ProbeSA, testkit.ControllerSA} {
			as := ask(kc, r, "system:serviceaccount:"+ns+":"+sa)
			tok := ask(own[sa], r, "")
			if as != tok {
				t.Errorf("%s: can-i %s %s in %q: %v impersonated, %v with its own token", sa, r.verb, r.resource, r.namespace, as, tok)
			}
			got[sa] = as
		}
		res := r.resource
		if r.subresource != "" {
			res += " (" + r.subresource + ")"
		}
		scope := r.namespace
		if scope == "" {
			scope = "(cluster)"
		}
		fmt.Fprintf(&log, "%-17s %-70s %-12s %-6s %-10s\n", r.verb, res, scope, yesNo(got[testkit.ProbeSA]), yesNo(got[testkit.ControllerSA]))
		fmt.Fprintf(&md, "| %s | %s | %s | %s | %s | %s |\n", r.verb, res, scope, yesNo(got[testkit.ProbeSA]), yesNo(got[testkit.ControllerSA]), r.note)
		if got[testkit.ProbeSA] != r.probe {
			t.Errorf("probe can-i %s %s in %s = %v, want %v", r.verb, res, scope, got[testkit.ProbeSA], r.probe)
		}
		if got[testkit.ControllerSA] != r.controller {
			t.Errorf("controller can-i %s %s in %s = %v, want %v", r.verb, res, scope, got[testkit.ControllerSA], r.controller)
		}
	}
	t.Logf("kubectl auth can-i, --as=system:serviceaccount:%s:SA and with each one's own token (the same answers)\n%s", ns, log.String())
	return md.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// attempt is one request of the admission test: who made it, what it tried,
// and the words its refusal must carry ("" when it must be admitted).
type attempt struct {
	who, what string
	do        func() error
	want      string
	code      int32 // the refusal's HTTP status; 0 for 403
}

// testAdmission makes, in order, the requests of the issue: each probe
// writes its own record; writing, deleting or adding an ownerReference to
// the other's is refused; neither touches the status; a token bound to no
// Pod writes nothing; every shape the policy forbids is refused, on create
// and on patch; the record cap at, just under and just over; a ConfigMap
// named after a node that is no record stays out of its probe's reach; the
// controller writes no record. It returns the table as markdown.
func testAdmission(t *testing.T, ctx context.Context, c *testkit.Cluster, nodes map[string]*corev1.Node, capBytes int) string {
	p1, p2, p3 := c.ProbeClient(t, node1), c.ProbeClient(t, node2), c.ProbeClient(t, node3)
	unbound := c.Client(t, testkit.ProbeSA) // a plain TokenRequest: bound to no Pod
	// A token bound to the Node itself: anyone who may create the probe's
	// tokens can mint one, with the node's claims and no Pod's.
	nodeTok, err := c.Server.TokenForNode(ctx, ns, testkit.ProbeSA, node1, nodes[node1].UID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	nodeBound := c.ClientForToken(t, nodeTok)
	// A token bound to a Pod on a node that did not exist when it was
	// issued: it names the node, and carries no node UID.
	early := c.ProbeClient(t, "server-9")
	ctrl := c.Client(t, testkit.ControllerSA)
	admin := c.Admin

	owner := func(n string) record.Owner { return record.Owner{Name: n, UID: nodes[n].UID} }
	ref := func(n string) metav1.OwnerReference { return owner(n).OwnerReference() }
	const e1, e2 = `{"samples":[]}`, `{"samples":[{}]}`
	// shaped is node's record as the probe creates it, changed by edit.
	shaped := func(n string, edit func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm := record.Object(rns, owner(n), e1)
		if edit != nil {
			edit(cm)
		}
		return cm
	}
	create := func(cl *kube.Client, cm *corev1.ConfigMap) func() error {
		return func() error {
			_, err := cl.ConfigMapClient(rns).Create(ctx, cm, metav1.CreateOptions{})
			return err
		}
	}
	patch := func(cl *kube.Client, name, body string) func() error {
		return func() error {
			_, err := cl.ConfigMapClient(rns).Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
			return err
		}
	}
	del := func(cl *kube.Client, name string) func() error {
		return func() error { return cl.ConfigMapClient(rns).Delete(ctx, name, metav1.DeleteOptions{}) }
	}
	// The status and the settings are in fleet-role's own namespace, where
	// RBAC gives a probe nothing to write.
	patchOwn := func(cl *kube.Client, name, body string) func() error {
		return func() error {
			_, err := cl.ConfigMapClient(ns).Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
			return err
		}
	}
	delOwn := func(cl *kube.Client, name string) func() error {
		return func() error { return cl.ConfigMapClient(ns).Delete(ctx, name, metav1.DeleteOptions{}) }
	}
	put := func(cl *kube.Client, n, entry string) func() error {
		return func() error { return cl.Records(rns).Put(ctx, owner(n), entry) }
	}
	refsPatch := func(refs ...metav1.OwnerReference) string {
		b, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// packedPatch is a merge patch of n bytes of binaryData key (and no
	// data), as the tail layout writes it.
	packedPatch := func(key string, n int) string {
		b, err := json.Marshal(map[string]any{"data": nil, "binaryData": map[string][]byte{key: bytes.Repeat([]byte{'x'}, n)}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// lastWindow is the entry text of e's last 100 samples.
	lastWindow := func(e entry.Entry) string {
		e.Samples = e.Samples[len(e.Samples)-100:]
		text, err := entry.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		return text
	}
	entryPatch := func(entry string) string {
		b, err := json.Marshal(map[string]any{"data": map[string]string{record.DataKey: entry}})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// check is a step of the test that is no write (a read, or the state
	// the table depends on): its error fails the row as "failed: ...".
	check := func(what string, fn func() error) func() error {
		return func() error {
			if err := fn(); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
	}
	own := func(n, other string) string {
		return "fleet-role-probe on node " + n + " " + msgOwnRecord + n + " (and its tail " + n + ".tail), not " + other
	}
	ownerOf := func(n string) string { return msgOwner + n + " " }
	P1, P2, P3 := "probe on "+node1, "probe on "+node2, "probe on "+node3
	U, C, A := "probe, token bound to no Pod", "controller", "admin"
	NB, E := "probe, token bound to Node "+node1+" (no Pod)", "probe on server-9, token issued before Node server-9 existed"
	twoByte := strings.Repeat("é", capBytes/2+1) // (cap/2+1) characters, cap+2 bytes
	// The packed cap: the cap in whole base64 groups of 3 bytes, as the
	// policy reads binaryData (admission.yaml).
	packedCap := 3 * ((capBytes + 2) / 3)
	r := func(edit func(*corev1.ConfigMap)) *corev1.ConfigMap { return shaped(node1, edit) }

	attempts := []attempt{
		// A token bound to no Pod carries no node: it writes nothing.
		{U, "creates the record of " + node1 + " (Records.Put)", put(unbound, node1, e1), msgClaim, 0},
		{U, "creates the record of " + node2 + " (Records.Put)", put(unbound, node2, e1), msgClaim, 0},
		// A token bound to the Node rather than to a Pod, and one without
		// the node's UID: neither writes, even the node's own record.
		{NB, "creates the record of " + node1 + " (Records.Put)", put(nodeBound, node1, e1), msgPod + " (the authentication.kubernetes.io/pod-name and pod-uid claims); this token, bound to Node " + node1 + ", carries no Pod", 0},
		{NB, "creates the record of " + node2 + " (Records.Put)", put(nodeBound, node2, e1), msgPod, 0},
		{A, "registers Node server-9", check("create Node server-9", func() error {
			_, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "server-9"}}, metav1.CreateOptions{})
			return err
		}), "", 0},
		{E, "creates the record of server-9 (Records.Put)", func() error {
			n, err := admin.CoreV1().Nodes().Get(ctx, "server-9", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return early.Records(rns).Put(ctx, record.Owner{Name: "server-9", UID: n.UID}, e1)
		}, msgNodeUID + " (the authentication.kubernetes.io/node-uid claim: the Node server-9 existed when the token was issued); this token carries none", 0},

		// The controller writes no record: RBAC alone refuses it.
		{C, "creates the record of " + node1, create(ctrl, r(nil)), msgRBAC + "create resource \"configmaps\"", 0},
		{C, "writes the record of " + node1 + " (Records.Put)", put(ctrl, node1, e1), msgRBAC + "patch resource \"configmaps\"", 0},

		// Creates of every shape the policy forbids, by the probe on
		// server-1, while its record does not exist yet.
		{P1, "creates the record of " + node2 + " (named and owned as " + node2 + "'s)", create(p1, shaped(node2, nil)), own(node1, node2), 0},
		{P1, "creates a record by generateName " + node1, create(p1, r(func(cm *corev1.ConfigMap) { cm.Name, cm.GenerateName = "", node1 })), msgOwnRecord, 0},
		{P1, "creates its record labelled fleet-role.io/record=controller", create(p1, r(func(cm *corev1.ConfigMap) { cm.Labels[record.Label] = "controller" })), msgLabels, 0},
		{P1, "creates its record with an extra label", create(p1, r(func(cm *corev1.ConfigMap) { cm.Labels["x"] = "y" })), msgLabels, 0},
		{P1, "creates its record without app.kubernetes.io/part-of", create(p1, r(func(cm *corev1.ConfigMap) { delete(cm.Labels, record.PartOfLabel) })), msgLabels, 0},
		{P1, "creates its record without labels", create(p1, r(func(cm *corev1.ConfigMap) { cm.Labels = nil })), msgLabels, 0},
		{P1, "creates its record with an annotation", create(p1, r(func(cm *corev1.ConfigMap) { cm.Annotations = map[string]string{"x": "y"} })), msgMeta, 0},
		{P1, "creates its record with a finalizer", create(p1, r(func(cm *corev1.ConfigMap) { cm.Finalizers = []string{"fleet-role.io/keep"} })), msgMeta, 0},
		{P1, "creates its record with no ownerReference", create(p1, r(func(cm *corev1.ConfigMap) { cm.OwnerReferences = nil })), ownerOf(node1), 0},
		{P1, "creates its record owned by Node " + node2, create(p1, r(func(cm *corev1.ConfigMap) { cm.OwnerReferences = []metav1.OwnerReference{ref(node2)} })), ownerOf(node1), 0},
		{P1, "creates its record owned by a Node " + node1 + " of another UID (one deleted and made again)", create(p1, r(func(cm *corev1.ConfigMap) { cm.OwnerReferences[0].UID = "00000000-0000-4000-8000-000000000001" })),
			ownerOf(node1) + "(apiVersion v1, kind Node, uid " + string(nodes[node1].UID) + " as its token carries it", 0},
		{P1, "creates its record with a second ownerReference (Node " + node2 + ")", create(p1, r(func(cm *corev1.ConfigMap) { cm.OwnerReferences = append(cm.OwnerReferences, ref(node2)) })), ownerOf(node1), 0},
		{P1, "creates its record with blockOwnerDeletion true", create(p1, r(func(cm *corev1.ConfigMap) { cm.OwnerReferences[0].BlockOwnerDeletion = ptr(true) })), ownerOf(node1), 0},
		{P1, "creates its record with controller true", create(p1, r(func(cm *corev1.ConfigMap) { cm.OwnerReferences[0].Controller = ptr(true) })), ownerOf(node1), 0},
		{P1, "creates its record with a second data key", create(p1, r(func(cm *corev1.ConfigMap) { cm.Data["extra"] = "x" })), msgData, 0},
		{P1, "creates its record with binaryData", create(p1, r(func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"b": {1}} })), msgData, 0},
		{P1, "creates its record with no data", create(p1, r(func(cm *corev1.ConfigMap) { cm.Data = nil })), msgData, 0},
		{P1, "creates its record immutable", create(p1, r(func(cm *corev1.ConfigMap) { cm.Immutable = ptr(true) })), msgData, 0},
		{P1, fmt.Sprintf("creates its record with an entry of %d bytes (cap + 1)", capBytes+1), create(p1, r(func(cm *corev1.ConfigMap) { cm.Data[record.DataKey] = strings.Repeat("x", capBytes+1) })),
			fmt.Sprintf("%s%d bytes", msgCap, capBytes+1), http.StatusRequestEntityTooLarge},

		// The probe's own path: create, read, patch of data.entry.
		{P1, "creates its record (Records.Put: record.Object)", put(p1, node1, e1), "", 0},
		{P1, "reads its record (Records.Get)", check("Records.Get", func() error {
			if got, err := p1.Records(rns).Get(ctx, node1); err != nil || got != e1 {
				return fmt.Errorf("%q, %v; want %q", got, err, e1)
			}
			return nil
		}), "", 0},
		{P1, "writes its record again (Records.Put: a merge patch of data.entry)", put(p1, node1, e2), "", 0},
		{P2, "creates its record (Records.Put)", put(p2, node2, e1), "", 0},

		// managedFields, which a writer may set in a patch: only field sets
		// of the record's own fields, at most 10 entries of them.
		{P1, "sets its record's managedFields to an entry naming a data key it lacks", patch(p1, node1, managedPatch(managedEntry("x", "Update", map[string]any{
			"f:data": map[string]any{"f:extra": map[string]any{}}}))), msgManaged, 0},
		{P1, fmt.Sprintf("sets its record's managedFields to an entry naming %d labels (%d bytes)", len(manyKeys), len(managedPatch(managedEntry("x", "Update", map[string]any{
			"f:metadata": map[string]any{"f:labels": manyKeys}})))), patch(p1, node1, managedPatch(managedEntry("x", "Update", map[string]any{
			"f:metadata": map[string]any{"f:labels": manyKeys}}))), msgManaged, 0},
		// An entry of an apiVersion the API server does not serve it drops
		// itself: what is stored is bounded either way.
		{P1, "sets its record's managedFields to an entry of apiVersion 1,000 bytes long", patch(p1, node1, managedPatch(func() map[string]any {
			m := managedEntry("x", "Update", recordFields(string(nodes[node1].UID)))
			m["apiVersion"] = strings.Repeat("v", 1000)
			return m
		}())), "", 0},
		{A, "reads " + node1 + "'s record: the API server dropped that entry", check("managedFields after the patch", func() error {
			cm, err := admin.CoreV1().ConfigMaps(rns).Get(ctx, node1, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, m := range cm.ManagedFields {
				if m.APIVersion != "v1" {
					return fmt.Errorf("an entry of apiVersion %.20s... (%d bytes) is stored", m.APIVersion, len(m.APIVersion))
				}
			}
			return nil
		}), "", 0},
		{P1, "sets its record's managedFields to an entry naming an ownerReference of another UID", patch(p1, node1, managedPatch(managedEntry("x", "Update",
			recordFields("00000000-0000-4000-8000-000000000001")))), msgManaged, 0},
		{P1, "sets its record's managedFields to 11 entries of its own fields (applied by 11 managers)", patch(p1, node1, managedPatch(appliedBy(11, string(nodes[node1].UID))...)),
			msgManaged, 0},
		{P1, "sets its record's managedFields to 10 entries of its own fields (applied by 10 managers)", patch(p1, node1, managedPatch(appliedBy(10, string(nodes[node1].UID))...)), "", 0},
		{A, "reads " + node1 + "'s record: 10 managedFields entries", check("managedFields after the patch", func() error {
			cm, err := admin.CoreV1().ConfigMaps(rns).Get(ctx, node1, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(cm.ManagedFields) != 10 {
				return fmt.Errorf("%d entries, want the 10 patched", len(cm.ManagedFields))
			}
			return nil
		}), "", 0},
		{P1, "writes its record (Records.Put): its own update would be an 11th entry", put(p1, node1, e1), msgManaged, 0},
		{A, "resets " + node1 + "'s managedFields (a list of one empty entry)", check("reset managedFields", func() error {
			_, err := admin.CoreV1().ConfigMaps(rns).Patch(ctx, node1, types.MergePatchType, []byte(`{"metadata":{"managedFields":[{}]}}`), metav1.PatchOptions{})
			return err
		}), "", 0},
		{P1, "writes its record (Records.Put) after the reset", put(p1, node1, e1), "", 0},

		// The other's record: refused by name.
		{P1, "patches data.entry of " + node2 + "'s record", patch(p1, node2, entryPatch(e2)), own(node1, node2), 0},
		{P1, "writes " + node2 + "'s record (Records.Put with " + node2 + "'s owner)", put(p1, node2, e2), own(node1, node2), 0},
		{P1, "adds an ownerReference (Node " + node1 + ") to " + node2 + "'s record", patch(p1, node2, refsPatch(ref(node2), ref(node1))), own(node1, node2), 0},
		{P1, "deletes " + node2 + "'s record", del(p1, node2), own(node1, node2), 0},
		{P2, "deletes " + node1 + "'s record", del(p2, node1), own(node2, node1), 0},
		{P2, "patches data.entry of " + node1 + "'s record", patch(p2, node1, entryPatch(e1)), own(node2, node1), 0},

		// Neither touches the status, nor the settings: they are in another
		// namespace, where RBAC refuses every probe any write, whatever the
		// admission policy (docs/security.md).
		{P1, "patches status.json of fleet-role-status", patchOwn(p1, "fleet-role-status", `{"data":{"status.json":"{}"}}`), msgRBAC + "patch resource \"configmaps\"", 0},
		{P2, "patches status.json of fleet-role-status", patchOwn(p2, "fleet-role-status", `{"data":{"status.json":"{}"}}`), msgRBAC + "patch resource \"configmaps\"", 0},
		{P1, "deletes fleet-role-status", delOwn(p1, "fleet-role-status"), msgRBAC + "delete resource \"configmaps\"", 0},
		{U, "deletes fleet-role-status", delOwn(unbound, "fleet-role-status"), msgRBAC + "delete resource \"configmaps\"", 0},
		{P1, "patches fleet-role-settings", patchOwn(p1, "fleet-role-settings", `{"data":{"settings.yaml":""}}`), msgRBAC + "patch resource \"configmaps\"", 0},
		{P1, "creates its record in fleet-role's own namespace", func() error {
			_, err := p1.ConfigMapClient(ns).Create(ctx, record.Object(ns, owner(node1), e1), metav1.CreateOptions{})
			return err
		}, msgRBAC + "create resource \"configmaps\"", 0},

		// Patches of its own record into a shape the policy forbids.
		{P1, "adds a label to its record", patch(p1, node1, `{"metadata":{"labels":{"x":"y"}}}`), msgLabels, 0},
		{P1, "removes app.kubernetes.io/part-of from its record", patch(p1, node1, `{"metadata":{"labels":{"app.kubernetes.io/part-of":null}}}`), msgLabels, 0},
		{P1, "adds an annotation to its record", patch(p1, node1, `{"metadata":{"annotations":{"x":"y"}}}`), msgMeta, 0},
		{P1, "adds a finalizer to its record", patch(p1, node1, `{"metadata":{"finalizers":["fleet-role.io/keep"]}}`), msgMeta, 0},
		{P1, "adds a second ownerReference (Node " + node2 + ") to its record", patch(p1, node1, refsPatch(ref(node1), ref(node2))), ownerOf(node1), 0},
		{P1, "moves its record's ownerReference to Node " + node2, patch(p1, node1, refsPatch(ref(node2))), ownerOf(node1), 0},
		{P1, "sets blockOwnerDeletion on its record's ownerReference", patch(p1, node1, refsPatch(func() metav1.OwnerReference {
			o := ref(node1)
			o.BlockOwnerDeletion = ptr(true)
			return o
		}())), ownerOf(node1), 0},
		{P1, "adds a second data key to its record", patch(p1, node1, `{"data":{"extra":"x"}}`), msgData, 0},
		{P1, "adds binaryData to its record", patch(p1, node1, `{"binaryData":{"b":"AQ=="}}`), msgData, 0},
		{P1, "makes its record immutable", patch(p1, node1, `{"immutable":true}`), msgData, 0},
		{P1, "replaces its record (update, PUT)", func() error {
			cm, err := p1.ConfigMapClient(rns).Get(ctx, node1, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("probe reads its record: %v", err)
			}
			_, err = kubernetes.NewForConfigOrDie(p1.Config()).CoreV1().ConfigMaps(rns).Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}, msgRBAC + "update resource \"configmaps\"", 0},

		// The record cap: at, just under and just over.
		{P1, fmt.Sprintf("writes an entry of %d bytes (cap - 1)", capBytes-1), put(p1, node1, strings.Repeat("x", capBytes-1)), "", 0},
		{P1, fmt.Sprintf("writes an entry of %d bytes (the cap)", capBytes), put(p1, node1, strings.Repeat("x", capBytes)), "", 0},
		{P1, fmt.Sprintf("writes an entry of %d bytes (cap + 1)", capBytes+1), put(p1, node1, strings.Repeat("x", capBytes+1)),
			fmt.Sprintf("%s%d bytes", msgCap, capBytes+1), http.StatusRequestEntityTooLarge},
		{P1, fmt.Sprintf("writes an entry of %d two-byte characters (%d bytes, cap + 2)", len([]rune(twoByte)), len(twoByte)), put(p1, node1, twoByte),
			fmt.Sprintf("%s%d bytes", msgCap, len(twoByte)), http.StatusRequestEntityTooLarge},
		{A, "reads " + node1 + "'s record: the refused writes left the cap-sized entry", check("record after the refusals", func() error {
			cm, err := admin.CoreV1().ConfigMaps(rns).Get(ctx, node1, metav1.GetOptions{})
			if err != nil {
				return err
			}
			want := record.Object(rns, owner(node1), strings.Repeat("x", capBytes))
			if len(cm.Data[record.DataKey]) != capBytes || !reflect.DeepEqual(cm.Labels, want.Labels) ||
				!reflect.DeepEqual(cm.OwnerReferences, want.OwnerReferences) || len(cm.Data) != 1 ||
				len(cm.Annotations) != 0 || len(cm.Finalizers) != 0 || len(cm.BinaryData) != 0 || cm.Immutable != nil {
				return fmt.Errorf("record %s is not as its probe last wrote it: labels %v, owners %v, %d data keys, entry %d bytes, annotations %v, finalizers %v",
					node1, cm.Labels, cm.OwnerReferences, len(cm.Data), len(cm.Data[record.DataKey]), cm.Annotations, cm.Finalizers)
			}
			return nil
		}), "", 0},

		// The tail layout (docs/records.md, "Layouts"): the probe writes its
		// record's window packed and its tail, and no other node's tail,
		// in the shape the policy holds, its packed bytes under the cap.
		{P1, "writes its record in the tail layout, then its tail (Records.Put in the tail layout, twice)", check("the tail layout", func() error {
			rs := kube.NewRecordsFor(p1.ConfigMapClient(rns), rns, kube.Layout{Format: func(context.Context) int { return record.FormatTail }})
			// A full window, then the window a period on: a snapshot,
			// then a tail of one sample.
			e := testkit.RealisticEntry(node1, []string{node1, node2}, 0, 101, 15*time.Second, time.Now())
			for n := 100; n <= 101; n++ {
				w := e
				w.Samples = e.Samples[n-100 : n]
				text, err := entry.Encode(w)
				if err != nil {
					return err
				}
				if err := rs.Put(ctx, owner(node1), text); err != nil {
					return err
				}
			}
			cm, err := admin.CoreV1().ConfigMaps(rns).Get(ctx, node1, metav1.GetOptions{})
			if err != nil {
				return err
			}
			tail, err := admin.CoreV1().ConfigMaps(rns).Get(ctx, node1+record.TailSuffix, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(cm.Data) != 0 || len(cm.BinaryData[record.WindowKey]) == 0 || len(tail.BinaryData[record.TailKey]) == 0 {
				return fmt.Errorf("record data %d keys, window %d bytes; tail %d bytes: the entry layout was written (a refusal of the tail layout)",
					len(cm.Data), len(cm.BinaryData[record.WindowKey]), len(tail.BinaryData[record.TailKey]))
			}
			want := lastWindow(e)
			if _, got, err := record.Assemble(cm, tail); err != nil || got != want {
				return fmt.Errorf("the record reads %d bytes (%v), want the window's %d", len(got), err, len(want))
			}
			return nil
		}), "", 0},
		{P1, "creates the tail of " + node2, create(p1, record.TailObject(rns, owner(node2), []byte{1})), own(node1, node2+record.TailSuffix), 0},
		{P1, "adds data.entry to its tail", patch(p1, node1+record.TailSuffix, `{"data":{"entry":"x"}}`), msgData, 0},
		{P1, "labels its tail as a record", patch(p1, node1+record.TailSuffix, `{"metadata":{"labels":{"fleet-role.io/record":"probe"}}}`), msgTailLabel, 0},
		{P1, "creates a tail named as its record", create(p1, func() *corev1.ConfigMap {
			cm := record.TailObject(rns, owner(node1), []byte{1})
			cm.Name = node1
			return cm
		}()), msgLabels, 0},
		{P1, fmt.Sprintf("writes a packed window of %d bytes (the packed cap)", packedCap), patch(p1, node1, packedPatch(record.WindowKey, packedCap)), "", 0},
		{P1, fmt.Sprintf("writes a packed window of %d bytes (packed cap + 1)", packedCap+1), patch(p1, node1, packedPatch(record.WindowKey, packedCap+1)), msgCapPacked, http.StatusRequestEntityTooLarge},
		{P1, fmt.Sprintf("writes a packed window of %d bytes (packed cap - 1)", packedCap-1), patch(p1, node1, packedPatch(record.WindowKey, packedCap-1)), "", 0},
		{P1, fmt.Sprintf("writes a tail of %d bytes (the packed cap)", packedCap), patch(p1, node1+record.TailSuffix, packedPatch(record.TailKey, packedCap)), "", 0},
		{P1, fmt.Sprintf("writes a tail of %d bytes (packed cap + 1)", packedCap+1), patch(p1, node1+record.TailSuffix, packedPatch(record.TailKey, packedCap+1)), msgCapPacked, http.StatusRequestEntityTooLarge},
		{P2, "deletes " + node1 + "'s tail", del(p2, node1+record.TailSuffix), own(node2, node1+record.TailSuffix), 0},
		{P1, "deletes its tail", del(p1, node1+record.TailSuffix), "", 0},
		{P1, "writes data.entry over its packed window (Records.Put in the entry layout, as a release before the tail layout writes)", put(p1, node1, e1), "", 0},
		{P1, "adds a second binaryData key beside its window", patch(p1, node1, `{"binaryData":{"b":"AQ=="}}`), msgData, 0},
		{P1, "writes its record in the entry layout alone", patch(p1, node1, `{"binaryData":null}`), "", 0},

		// A ConfigMap named after a node that is no record: its probe can
		// neither write, relabel nor delete it.
		{A, "creates ConfigMap " + node3 + " without the record label", func() error {
			_, err := admin.CoreV1().ConfigMaps(rns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: node3, Namespace: rns}, Data: map[string]string{"x": "y"}}, metav1.CreateOptions{})
			return err
		}, "", 0},
		{P3, "writes its record (Records.Put) over ConfigMap " + node3, put(p3, node3, e1), msgNotRecord + "; the ConfigMap " + node3 + " is not one", 0},
		{P3, "labels ConfigMap " + node3 + " as its record", patch(p3, node3, `{"metadata":{"labels":{"fleet-role.io/record":"probe","app.kubernetes.io/part-of":"fleet-role"}}}`), msgNotRecord, 0},
		{P3, "deletes ConfigMap " + node3, del(p3, node3), msgNotRecord, 0},

		// The controller reads the records and writes none of them.
		{C, "lists the records (" + record.Selector + ")", check("controller lists the records", func() error {
			l, err := ctrl.ConfigMapClient(rns).List(ctx, metav1.ListOptions{LabelSelector: record.Selector})
			if err != nil {
				return err
			}
			var names []string
			for _, cm := range l.Items {
				names = append(names, cm.Name)
			}
			if !reflect.DeepEqual(names, []string{node1, node2}) {
				return fmt.Errorf("listed %v, want [%s %s]", names, node1, node2)
			}
			return nil
		}), "", 0},
		{C, "patches data.entry of " + node1 + "'s record", patch(ctrl, node1, entryPatch(e1)), msgRBAC + "patch resource \"configmaps\"", 0},
		{C, "deletes " + node1 + "'s record", del(ctrl, node1), msgRBAC + "delete resource \"configmaps\"", 0},
		{U, "deletes " + node1 + "'s record", del(unbound, node1), msgClaim, 0},

		// Each probe deletes its own record.
		{P1, "writes its record once more (Records.Put)", put(p1, node1, e1), "", 0},
		{P1, "deletes its record (Records.Delete)", func() error { return p1.Records(rns).Delete(ctx, node1) }, "", 0},
		{P1, "deletes its record again, absent (Records.Delete)", func() error { return p1.Records(rns).Delete(ctx, node1) }, "", 0},
		{P2, "deletes its record (Records.Delete)", func() error { return p2.Records(rns).Delete(ctx, node2) }, "", 0},
		{A, "reads the records: none left", check("records after the deletes", func() error {
			l, err := admin.CoreV1().ConfigMaps(rns).List(ctx, metav1.ListOptions{LabelSelector: record.Selector})
			if err != nil {
				return err
			}
			if len(l.Items) != 0 {
				return fmt.Errorf("%d records left", len(l.Items))
			}
			return nil
		}), "", 0},
	}

	var log, md strings.Builder
	md.WriteString("| who | tried | outcome |\n|---|---|---|\n")
	refused := 0
	for i, a := range attempts {
		err := a.do()
		got := generated.ReplaceAllString(outcome(err), "${1}xxxxx (a generated name)")
		for n, node := range nodes {
			// A Node's UID differs every run: the table names whose it is.
			got = strings.ReplaceAll(got, string(node.UID), "(the UID of Node "+n+")")
		}
		fmt.Fprintf(&log, "%2d  %-30s  %-90s  %s\n", i+1, a.who, a.what, got)
		fmt.Fprintf(&md, "| %s | %s | %s |\n", a.who, mdEscape(a.what), mdEscape(got))
		if a.want == "" {
			if err != nil {
				t.Errorf("%s %s: %v, want it admitted", a.who, a.what, err)
			}
			continue
		}
		refused++
		var st apierrors.APIStatus
		if !errors.As(err, &st) {
			t.Errorf("%s %s: %v, want it refused with %q", a.who, a.what, err, a.want)
			continue
		}
		code := a.code
		if code == 0 {
			code = http.StatusForbidden
		}
		if st.Status().Code != code || !strings.Contains(err.Error(), a.want) {
			t.Errorf("%s %s: refused %d %q, want %d with %q", a.who, a.what, st.Status().Code, err, code, a.want)
		}
		if a.want != msgRBAC && !strings.HasPrefix(a.want, msgRBAC) &&
			!strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policyName+"' with binding '"+policyName+"' denied request") {
			t.Errorf("%s %s: refused %q, not by the policy %s", a.who, a.what, err, policyName)
		}
	}
	t.Logf("what each part tried on the real API server (%d requests, %d refused as they must be):\n%s", len(attempts), refused, log.String())
	return md.String()
}

// managedEntry is a managedFields entry of a ConfigMap, as a patch sets it.
func managedEntry(manager, op string, fields map[string]any) map[string]any {
	return map[string]any{"manager": manager, "operation": op, "apiVersion": "v1",
		"time": "2026-12-06T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields}
}

// recordFields is the field set of every field a probe writes in its
// record, its one ownerReference keyed by uid.
func recordFields(uid string) map[string]any {
	leaf := map[string]any{}
	return map[string]any{
		"f:data": map[string]any{".": leaf, "f:" + record.DataKey: leaf},
		"f:metadata": map[string]any{
			"f:labels": map[string]any{".": leaf, "f:" + record.Label: leaf, "f:" + record.PartOfLabel: leaf},
			"f:ownerReferences": map[string]any{".": leaf, `k:{"uid":"` + uid + `"}`: map[string]any{
				".": leaf, "f:apiVersion": leaf, "f:kind": leaf, "f:name": leaf, "f:uid": leaf}},
		},
	}
}

// appliedBy is n entries of the record's own fields, each applied by a
// manager of its own: the API server caps the entries of updates at 10 by
// merging the oldest, not those of applies.
func appliedBy(n int, uid string) []map[string]any {
	var es []map[string]any
	for i := range n {
		es = append(es, managedEntry(fmt.Sprintf("applier-%02d", i+1), "Apply", recordFields(uid)))
	}
	return es
}

// managedPatch is a merge patch setting metadata.managedFields.
func managedPatch(entries ...map[string]any) string {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"managedFields": entries}})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// manyKeys is a field set of 20,000 labels, each a leaf: about 380 KB, the
// size an attacker could add to its record at every write were
// managedFields not bounded.
var manyKeys = func() map[string]any {
	m := map[string]any{}
	for i := range 20000 {
		m[fmt.Sprintf("f:label-%05d", i)] = map[string]any{}
	}
	return m
}()

// generated matches a name the API server generated from generateName
// (five random characters), so that the table is the same every run.
var generated = regexp.MustCompile(`(not ` + node1 + `)[a-z0-9]{5}$`)

// outcome is what the API server answered, for the table: "admitted", or
// the status code and the message that matters (the policy's own, after the
// API server's preamble).
func outcome(err error) string {
	if err == nil {
		return "admitted"
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return "failed: " + err.Error()
	}
	msg := st.Status().Message
	if _, after, ok := strings.Cut(msg, "denied request: "); ok {
		msg = "policy: " + after
	} else if _, after, ok := strings.Cut(msg, " is forbidden: "); ok {
		msg = "RBAC: " + after
	}
	return fmt.Sprintf("refused, %d %s: %s", st.Status().Code, st.Status().Reason, msg)
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func ptr[T any](v T) *T { return &v }

// checkDocs holds docs/records.md's section "What each part may do" to the
// tables of this run (rewritten with -update), so the document says what
// the real API server does with the manifests as they are.
func checkDocs(t *testing.T, canITable, admissionTable string) {
	t.Helper()
	section := docsHeading + `

What the install lets each part do, as the real kube-apiserver (k3s's v1.34.2+k3s1)
answered with deploy/fleet-role.yaml applied. Written by
` + "`go test ./deploy -run TestOnAPIServer -update`" + ` (TestOnAPIServer fails
while this section differs from what the API server answers).

### RBAC (kubectl auth can-i)

Each ServiceAccount asked two ways, impersonated
(` + "`--as=system:serviceaccount:" + ns + ":SA`" + `) and with a token of its own (the
probe's bound to a Pod on a Node); the answers are the same. RBAC cannot bind
a write to a node: where it allows the probe a write, the admission policy
` + policyName + ` (deploy/base/admission.yaml) narrows it to the probe's own
record.

` + canITable + `
### The admission policy, request by request

The probes act with tokens bound to Pods on ` + node1 + `, ` + node2 + ` and ` + node3 + `
(TokenRequest with a boundObjectRef, as the kubelet issues them: the token
carries the Pod in authentication.kubernetes.io/pod-name and pod-uid, and the
node in ` + record.NodeNameClaim + ` and node-uid); the
token bound to no Pod is a plain TokenRequest of the probe's ServiceAccount,
the token bound to Node ` + node1 + ` a TokenRequest whose boundObjectRef is the
Node (no Pod claims), and the token of server-9 is bound to a Pod on a node
that was registered only after the token was issued (no node-uid claim). In
order:

` + admissionTable
	b, err := os.ReadFile(docsFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	doc := string(b)
	var next string
	if i := strings.Index(doc, docsHeading+"\n"); i >= 0 {
		// Replace the section up to the next heading of its level.
		rest := doc[i+len(docsHeading):]
		next = doc[:i] + section
		if j := strings.Index(rest, "\n## "); j >= 0 {
			next += "\n" + rest[j+1:]
		}
	} else if doc == "" {
		next = "# Records\n\n" + section
	} else {
		next = strings.TrimRight(doc, "\n") + "\n\n" + section
	}
	if next == doc {
		return
	}
	if *update {
		if err := os.WriteFile(docsFile, []byte(next), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s, section %q", docsFile, docsHeading)
		return
	}
	t.Errorf("%s, section %q, differs from what the API server answered: run go test ./deploy -run TestOnAPIServer -update", docsFile, docsHeading)
}

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
	containers := []corev1.Container{dep.Spec.Template.Spec.Containers[0], ds.Spec.Template.Spec.Containers[0]}
	containers = append(containers, ds.Spec.Template.Spec.InitContainers...)
	for _, c := range containers {
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
	for _, c := range containers {
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
