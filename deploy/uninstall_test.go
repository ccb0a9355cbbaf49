package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/kit/docsteps"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
	"github.com/fleet-role/fleet-role/lab/run/apiserver/apiservertest"
)

// uninstallSteps are the shell blocks of docs/install.md's Uninstall: the
// cluster's (step 2) and a host's (step 3).
func uninstallSteps(t *testing.T) (cluster, host string) {
	t.Helper()
	u, err := docsteps.ReadUninstall("..")
	if err != nil {
		t.Fatal(err)
	}
	return u.Cluster, u.Host
}

// TestUninstallLeavesNothing installs the manifest on a real API server,
// makes what the components write when they run (each node's record, the
// status, the Lease, the controller's Events on the Nodes, the eligible and
// pinned labels under both the shipped and the hardened keys), then runs
// docs/install.md's uninstall step 2 as written, with the real kubectl,
// and lists every object of every resource the server serves: nothing of
// fleet-role is left, and what is not fleet-role's (another label, another
// component's Event) is. Step 3's paths are the ones the code writes: the
// drop-in `render k3s-config` names, and the DaemonSet's host directory.
// The components' writes are made here with the administrator's client, as
// the objects the components make; the namespace controller of a real
// kube-controller-manager finishes the namespace's deletion, as on a
// cluster.
func TestUninstallLeavesNothing(t *testing.T) {
	clusterSteps, hostSteps := uninstallSteps(t)

	// Step 3: each path it removes is one fleet-role writes.
	var render bytes.Buffer
	if code := cli.Main([]string{"render", "k3s-config", "--eligible=true", "--pinned=false"}, &render, os.Stderr); code != cli.ExitOK {
		t.Fatalf("render k3s-config: exit %d", code)
	}
	dropIn := regexp.MustCompile(`/etc/rancher/k3s/config\.yaml\.d/[^ \n]+\.yaml`).FindString(render.String())
	_, ds := workloads(t)
	var hostDir string
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.HostPath != nil {
			if hostDir != "" {
				t.Fatalf("the DaemonSet mounts host paths %s and %s: the uninstall names one", hostDir, v.HostPath.Path)
			}
			hostDir = v.HostPath.Path
		}
	}
	for what, path := range map[string]string{"the drop-in render k3s-config names": dropIn, "the DaemonSet's host directory": hostDir} {
		if path == "" || !strings.Contains(hostSteps, " "+path+"\n") {
			t.Errorf("the uninstall's step 3 does not remove %s, %q:\n%s", what, path, hostSteps)
		}
	}

	s := apiservertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kc := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := s.Kubeconfig(kc, ""); err != nil {
		t.Fatal(err)
	}
	testkit.StartControllerManager(t, kc, "namespace")
	kubectl := testenv.Kubectl(t)
	// run is kubectl's standard output: its warnings (a deprecated
	// resource listed, say) go to standard error.
	run := func(args ...string) string {
		t.Helper()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kc}, args...)...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
		}
		return string(out)
	}
	run("apply", "--server-side", "-f", rendered)
	admin, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	shipped := settings.Defaults()
	nodes := map[string]map[string]string{
		"server-1": {shipped.EligibleLabel: "true", shipped.PinnedLabel: "false", "keep": "me"},
		"server-2": {hardened.eligible: "true", hardened.pinned: "true", "keep": "me"},
	}
	for name, labels := range nodes {
		n, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: shipped.RecordsNamespace(),
			Labels:          map[string]string{"fleet-role.io/record": "probe"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: n.UID}}},
			Data: map[string]string{"entry": "v1"}}
		if _, err := admin.CoreV1().ConfigMaps(shipped.RecordsNamespace()).Create(ctx, rec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, src := range []string{kube.EventComponent, "someone-else"} {
			ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: name + ".", Namespace: metav1.NamespaceDefault},
				InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: name, UID: n.UID},
				Reason:         "VoterUnfit", Message: "written as " + src, Type: corev1.EventTypeNormal,
				Source: corev1.EventSource{Component: src}}
			if _, err := admin.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := admin.CoreV1().ConfigMaps(shipped.Namespace).Patch(ctx, shipped.StatusConfigMap, "application/merge-patch+json",
		[]byte(`{"data":{"status.json":"{}"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	holder := "fleet-role-0"
	if _, err := admin.CoordinationV1().Leases(shipped.Namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-role", Namespace: shipped.Namespace},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The leader's page in the Service's Endpoints, applied as the
	// controller applies them.
	client, err := kube.NewClientForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	eps, err := client.PageEndpoints(shipped.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eps.Set(ctx, "fleet-role", kube.PageAddress{Namespace: shipped.Namespace, Pod: "fleet-role-0", IP: "10.42.0.7", Port: 9870}, ""); err != nil {
		t.Fatal(err)
	}
	before := fleetRoleObjects(t, run)
	if len(before) < 25 {
		t.Fatalf("installed and written, the cluster holds %d objects of fleet-role, want the manifest's and the components' writes:\n%s", len(before), strings.Join(before, "\n"))
	}
	t.Logf("installed and written: %d objects of fleet-role", len(before))

	// Step 2, as written, with this kubeconfig and the real kubectl first
	// on the PATH.
	bin := t.TempDir()
	if err := os.Symlink(kubectl, filepath.Join(bin, "kubectl")); err != nil {
		t.Fatal(err)
	}
	sh := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", clusterSteps)
	sh.Env = append(os.Environ(), "KUBECONFIG="+kc, "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := sh.CombinedOutput()
	t.Logf("docs/install.md's uninstall step 2:\n%s", out)
	if err != nil {
		t.Fatalf("docs/install.md's uninstall step 2: %v", err)
	}
	if left := fleetRoleObjects(t, run); len(left) > 0 {
		t.Errorf("after the uninstall, the cluster still holds:\n%s", strings.Join(left, "\n"))
	}
	for name := range nodes {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels["keep"] != "me" {
			t.Errorf("node %s lost a label not fleet-role's: %v", name, n.Labels)
		}
	}
	evs, err := admin.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	others := 0
	for _, e := range evs.Items {
		if e.Source.Component == "someone-else" {
			others++
		}
	}
	if others != len(nodes) {
		t.Errorf("after the uninstall, %d Events of another component are left, want %d", others, len(nodes))
	}
}

// fleetRoleObjects lists every object of every resource the API server
// serves (kubectl api-resources --verbs=list) and names each that is
// fleet-role's: labelled part of it, named after it, in its namespace, an
// Event its controller wrote, a Node with one of its label keys.
func fleetRoleObjects(t *testing.T, run func(...string) string) []string {
	t.Helper()
	resources := strings.Fields(run("api-resources", "--verbs=list", "-o", "name"))
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string            `json:"name"`
				Namespace string            `json:"namespace"`
				Labels    map[string]string `json:"labels"`
			} `json:"metadata"`
			Source struct {
				Component string `json:"component"`
			} `json:"source"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(run("get", strings.Join(resources, ","), "-A", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, o := range list.Items {
		m := o.Metadata
		why := ""
		switch {
		case m.Labels["app.kubernetes.io/part-of"] == "fleet-role":
			why = "labelled app.kubernetes.io/part-of=fleet-role"
		case strings.Contains(m.Name, "fleet-role"):
			why = "named after fleet-role"
		case m.Namespace == "fleet-role":
			why = "in namespace fleet-role"
		case o.Source.Component == kube.EventComponent:
			why = "written by " + kube.EventComponent
		}
		for k := range m.Labels {
			if strings.Contains(k, "fleet-role") {
				why = "labelled " + k
			}
		}
		if why != "" {
			found = append(found, o.Kind+" "+m.Namespace+"/"+m.Name+": "+why)
		}
	}
	return found
}
