package pods

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// reachTag is the attacker image the scenario builds (lab/kit/image Reach).
const reachTag = "fleet-role.test/reach:v1"

// reachResult is what lab/cmd/reach prints.
type reachResult struct {
	UID, GID int
	Seen     map[string]int
	Read     []string
	Absent   []string
}

// probeTemplate is the pod template of the probe's DaemonSet, as the
// scenario applied it.
func probeTemplate(t *testing.T) corev1.PodSpec {
	t.Helper()
	for _, doc := range strings.Split(string(manifest(t)), "\n---\n") {
		if !strings.Contains(doc, "\nkind: DaemonSet\n") {
			continue
		}
		var ds struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &ds); err != nil {
			t.Fatal(err)
		}
		return ds.Spec.Template.Spec
	}
	t.Fatal("deploy/fleet-role.yaml has no DaemonSet")
	return corev1.PodSpec{}
}

// runReach runs the attacker, lab/cmd/reach, in place of the probe in a
// pod made from spec on the node, waits for it to finish and returns what
// it printed.
func (s *scenario) runReach(t *testing.T, ctx context.Context, name string, spec corev1.PodSpec, procDirs ...string) reachResult {
	t.Helper()
	spec.NodeName = node
	spec.RestartPolicy = corev1.RestartPolicyNever
	c := &spec.Containers[0]
	c.Image, c.ImagePullPolicy, c.Command, c.Args = reachTag, corev1.PullNever, []string{"/reach"}, procDirs
	// The probe's port is the running probe's on the host's network; the
	// attacker serves nothing.
	c.Ports, c.LivenessProbe, c.ReadinessProbe = nil, nil, nil
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: spec}
	pods := s.c.Admin.CoreV1().Pods(namespace)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pods.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	err := poll(ctx, podsTimeout, func() error {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			return nil
		case corev1.PodFailed:
			logs, _ := pods.GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			return fmt.Errorf("pod %s failed: %s %s", name, containerStates(p), logs)
		}
		return fmt.Errorf("pod %s %s %s", name, p.Status.Phase, containerStates(p))
	})
	if err != nil {
		s.events(t, ctx)
		t.Fatal(err)
	}
	logs, err := pods.GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var r reachResult
	if err := json.Unmarshal(logs, &r); err != nil {
		t.Fatalf("%s printed %q: %v", name, logs, err)
	}
	return r
}

// checkReach: a compromised probe cannot read another process's environ,
// nor through /proc/PID/root the controller's token or any other pod's. The
// attacker runs in the probe's own pod template, and in a control that is
// the template as it was before issue 21 (the controller's user 65532 and
// the host's /proc mounted at /host/proc), which must reach the
// controller's token: without it the first result would show nothing.
func (s *scenario) checkReach(t *testing.T, ctx context.Context) {
	spec := probeTemplate(t)
	uid := *spec.SecurityContext.RunAsUser
	got := s.runReach(t, ctx, "reach-probe", *spec.DeepCopy(), "/proc", "/host/proc")
	if int64(got.UID) != uid || int64(got.GID) != *spec.SecurityContext.RunAsGroup {
		t.Errorf("the attacker ran as %d:%d, not the probe's %d:%d", got.UID, got.GID, uid, *spec.SecurityContext.RunAsGroup)
	}
	if len(got.Read) > 0 {
		t.Errorf("in the probe's pod template the attacker read %v", got.Read)
	}
	if got.Seen["/proc"] != 0 || len(got.Absent) != 1 || got.Absent[0] != "/host/proc" {
		t.Errorf("in the probe's pod template the attacker saw %v processes but its own and no host /proc in %v: want none, and /host/proc absent", got.Seen, got.Absent)
	}
	t.Logf("the probe's pod template (%d:%d): processes seen but its own %v, /proc directories absent %v, read %v",
		got.UID, got.GID, got.Seen, got.Absent, got.Read)

	// The control: the old template.
	old := spec.DeepCopy()
	shared := int64(65532)
	old.SecurityContext.RunAsUser, old.SecurityContext.RunAsGroup = &shared, &shared
	old.Volumes = append(old.Volumes, corev1.Volume{Name: "host-proc",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/proc"}}})
	old.Containers[0].VolumeMounts = append(old.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "host-proc", MountPath: "/host/proc", ReadOnly: true})
	ctrl := s.runReach(t, ctx, "reach-control", *old, "/proc", "/host/proc")
	token := false
	for _, p := range ctrl.Read {
		token = token || strings.HasSuffix(p, "/root/var/run/secrets/kubernetes.io/serviceaccount/token")
	}
	if !token {
		t.Errorf("the control (65532 with the host's /proc) read %v and no token: the attack this guards against did not show, so the probe's result proves nothing", ctrl.Read)
	}
	t.Logf("the control, the template before (65532, host /proc at /host/proc): processes seen %v, read %d paths %v", ctrl.Seen, len(ctrl.Read), ctrl.Read)
}
