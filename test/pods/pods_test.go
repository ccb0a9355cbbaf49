package pods

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/yaml"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/link"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/fleets/cluster"
	"github.com/fleet-role/fleet-role/lab/kit/image"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

const (
	// node is the one node's name, as a k3s server's would be.
	node = "server-1"
	// imageTag is the image deploy/fleet-role.yaml names; the scenario
	// imports the image built from the checkout under it.
	imageTag  = testkit.ImageTag
	pauseTag  = "fleet-role.test/pause:v1"
	namespace = "fleet-role"
	// recordsNS holds the probes' records (settings records_namespace).
	recordsNS  = "fleet-role-records"
	probeSA    = "fleet-role-probe"
	probeLabel = "app.kubernetes.io/name=fleet-role-probe"
	ctrlLabel  = "app.kubernetes.io/name=fleet-role"
	// fsyncHostDir is the probe's hostPath as deploy/fleet-role.yaml ships
	// it, and fsyncPodDir where the pod mounts it.
	fsyncHostDir = "/var/lib/rancher/k3s/server/db/fleet-role-fsync"
	// podsTimeout bounds the pods' start: the image is local, so this is
	// the kubelet's sync and the containers' start on a loaded machine.
	podsTimeout = 3 * time.Minute
)

// settingsSubstitutions are what the scenario changes in
// deploy/fleet-role.yaml beside the image pull policy
// (testkit.LocalManifest): the time, compressed as every scenario with
// real pods compresses it (testkit.CompressedTime), and nothing else.
var settingsSubstitutions = testkit.CompressedTime

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the pods scenario runs from test/pods of the checkout: %v", err)
	}
	return root
}

// manifest is deploy/fleet-role.yaml with the settings substitutions made
// and the image never pulled (testkit.LocalManifest).
func manifest(t *testing.T) []byte {
	t.Helper()
	return testkit.LocalManifest(t, settingsSubstitutions)
}

// scenario is the running cluster with fleet-role installed.
type scenario struct {
	c        *cluster.Cluster
	dir      string
	bin      string // fleet-role built for the host's own commands
	settings settings.Settings
}

func TestPods(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.HoldHost(t) // one kubelet run at a time: test/k3s takes it too
	began := time.Now()
	s := &scenario{dir: t.TempDir()}
	root := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	// The tools first, so that a missing one fails before any build.
	cfg := cluster.Config{
		Dir:               filepath.Join(s.dir, "cluster"),
		Node:              node,
		Etcd:              testenv.Etcd(t),
		APIServer:         testenv.KubeAPIServer(t),
		ControllerManager: testenv.KubeControllerManager(t),
		Scheduler:         testenv.KubeScheduler(t),
		Kubelet:           testenv.Kubelet(t),
		PauseImage:        pauseTag,
	}
	testenv.Kubectl(t)
	testenv.Fio(t)
	cluster.CheckHost(t)

	// The images, from the checkout.
	t0 := time.Now()
	frTar, pauseTar := filepath.Join(s.dir, "fleet-role.tar"), filepath.Join(s.dir, "pause.tar")
	if err := image.Build(ctx, root, image.FleetRole, imageTag, frTar); err != nil {
		t.Fatal(err)
	}
	if err := image.Build(ctx, root, image.Pause, pauseTag, pauseTar); err != nil {
		t.Fatal(err)
	}
	reachTar := filepath.Join(s.dir, "reach.tar")
	if err := image.Build(ctx, root, image.Reach, reachTag, reachTar); err != nil {
		t.Fatal(err)
	}
	s.bin = filepath.Join(s.dir, "fleet-role")
	build := exec.CommandContext(ctx, "go", "build", "-o", s.bin, "./cmd/fleet-role")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fleet-role: %v\n%s", err, out)
	}
	t.Logf("images built from the checkout in %.1f s", time.Since(t0).Seconds())

	t0 = time.Now()
	cfg.NodeLabels = s.renderedLabels(t, ctx)
	cfg.Images = []string{frTar, pauseTar, reachTar}
	s.c = cluster.Start(t, cfg)
	t.Logf("cluster up, node %s Ready, in %.1f s", node, time.Since(t0).Seconds())
	s.labelAsK3s(t, ctx)

	path := filepath.Join(s.dir, "fleet-role.yaml")
	if err := os.WriteFile(path, manifest(t), 0o644); err != nil {
		t.Fatal(err)
	}
	s.kubectl(t, ctx, "apply", "--server-side", "-f", path)
	s.readSettings(t, ctx)

	t0 = time.Now()
	probe := s.waitReady(t, ctx, probeLabel, "")
	ctrl := s.waitReady(t, ctx, ctrlLabel, "")
	t.Logf("both pods Running and Ready %.1f s after the apply: %s, %s", time.Since(t0).Seconds(), probe.Name, ctrl.Name)

	ok := t.Run("record", func(t *testing.T) { s.checkRecord(t, ctx) })
	ok = t.Run("status", func(t *testing.T) { s.checkStatus(t, ctx) }) && ok
	t.Run("readme table", func(t *testing.T) { s.checkReadmeTable(t, ctx, probe) })
	t.Run("processes", func(t *testing.T) {
		s.checkProcess(t, probe, "probe")
		s.checkProcess(t, ctrl, "controller")
	})
	t.Run("admission", func(t *testing.T) { s.checkAdmission(t, ctx, probe) })
	t.Run("kubelet checks under a flood", func(t *testing.T) { s.checkChecksUnderFlood(t, ctx, probe) })
	t.Run("reach", func(t *testing.T) { s.checkReach(t, ctx) })
	t.Run("page", func(t *testing.T) { s.checkPage(t, ctx) })
	if ok {
		t.Run("resume", func(t *testing.T) { s.checkResume(t, ctx, probe) })
	}
	t.Run("servers only", func(t *testing.T) { s.checkServersOnly(t, ctx) })
	for _, e := range s.c.ExitedComponents() {
		t.Errorf("a component exited during the scenario: %s", e)
	}
	t.Logf("scenario ran in %.1f s (cleanup follows)", time.Since(began).Seconds())
}

// renderedLabels runs `fleet-role render k3s-config` for the node (eligible,
// and pinned as the first server) and returns the labels its drop-in gives
// k3s, which k3s passes to its kubelet as --node-labels.
func (s *scenario) renderedLabels(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	out, err := exec.CommandContext(ctx, s.bin, "render", "k3s-config", "--eligible=true", "--pinned=true").Output()
	if err != nil {
		t.Fatalf("fleet-role render k3s-config: %v", err)
	}
	var dropIn map[string][]string
	if err := yaml.Unmarshal(out, &dropIn); err != nil {
		t.Fatalf("parse the rendered drop-in: %v\n%s", err, out)
	}
	labels := map[string]string{}
	for _, e := range dropIn["node-label+"] {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			t.Fatalf("rendered node label %q is not key=value", e)
		}
		labels[k] = v
	}
	if len(labels) == 0 {
		t.Fatalf("the rendered drop-in has no node-label+ entries:\n%s", out)
	}
	return labels
}

// labelAsK3s gives the node what a k3s server with embedded etcd gets from
// k3s itself rather than from its kubelet (docs/facts.md, k3s): the role labels,
// the etcd annotations and the EtcdIsVoter condition.
func (s *scenario) labelAsK3s(t *testing.T, ctx context.Context) {
	t.Helper()
	patch := map[string]any{"metadata": map[string]any{
		"labels": serverLabelValues(),
		"annotations": map[string]string{
			"etcd.k3s.cattle.io/node-name": s.c.Etcd.Members[0].Name,
			k3snode.NodeAddressAnnotation:  cluster.NodeIP.String(),
		},
	}}
	b, _ := json.Marshal(patch)
	if _, err := s.c.Admin.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatalf("label the node as k3s does: %v", err)
	}
	now := metav1.Now()
	cond := map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: k3snode.EtcdIsVoterCondition, Status: corev1.ConditionTrue, Reason: "MemberNotLearner",
		Message: "Node is a voting member of the etcd cluster", LastHeartbeatTime: now, LastTransitionTime: now,
	}}}}
	b, _ = json.Marshal(cond)
	if _, err := s.c.Admin.CoreV1().Nodes().PatchStatus(ctx, node, b); err != nil {
		t.Fatalf("set the EtcdIsVoter condition: %v", err)
	}
	n, err := s.c.Admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := kube.NodesFromKube([]corev1.Node{*n}, settings.Defaults())
	if len(got) != 1 || !got[0].Voter || !got[0].Eligible || !got[0].Pinned || got[0].PeerAddress != cluster.NodeIP.String() {
		t.Fatalf("node %s reads %+v: want a voter, eligible and pinned, at %s", node, got, cluster.NodeIP)
	}
}

func (s *scenario) kubectl(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, testenv.Kubectl(t), append([]string{"--kubeconfig", s.c.AdminKC}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// serverLabels are the labels k3s itself gives a server's Node, which its
// kubelet may not set (NodeRestriction): labelAsK3s sets them.
var serverLabels = []string{k3snode.EtcdRoleLabel, "node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"}

func serverLabelValues() map[string]string {
	m := map[string]string{}
	for _, k := range serverLabels {
		m[k] = "true"
	}
	return m
}

// checkServersOnly holds the controller to servers on the real scheduler:
// with k3s's server labels taken off the node (to the scheduler, an
// agent), a new controller pod is not scheduled, for its node affinity;
// with them given back, it runs there and is ready.
func (s *scenario) checkServersOnly(t *testing.T, ctx context.Context) {
	labels := map[string]any{}
	for _, k := range serverLabels {
		labels[k] = nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if _, err := s.c.Admin.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatalf("take the server labels off the node: %v", err)
	}
	if err := s.c.Admin.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: ctrlLabel}); err != nil {
		t.Fatalf("delete the controller's pods: %v", err)
	}
	err := poll(ctx, podsTimeout, func() error {
		l, err := s.c.Admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: ctrlLabel})
		if err != nil {
			return err
		}
		var waiting, state []string
		for _, p := range l.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			why := "not yet judged by the scheduler"
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					why = c.Message
				}
			}
			if p.Spec.NodeName == "" && strings.Contains(why, "node affinity") {
				waiting = append(waiting, p.Name)
				continue
			}
			state = append(state, fmt.Sprintf("%s on node %q: %s", p.Name, p.Spec.NodeName, why))
		}
		if len(state) > 0 || len(waiting) == 0 {
			return fmt.Errorf("controller pods on a node without the server labels: unschedulable for node affinity %v; others %v", waiting, state)
		}
		t.Logf("without the server labels, the controller's pods %v are unschedulable for their node affinity", waiting)
		return nil
	})
	if err != nil {
		s.events(t, ctx)
		t.Fatal(err)
	}
	s.labelAsK3s(t, ctx)
	p := s.waitReady(t, ctx, ctrlLabel, "")
	t.Logf("with the server labels back, %s is Running and Ready on %s", p.Name, p.Spec.NodeName)
}

// readSettings reads the settings as the cluster holds them.
func (s *scenario) readSettings(t *testing.T, ctx context.Context) {
	t.Helper()
	s.settings = testkit.AppliedSettings(t, ctx, s.c.Admin, namespace, s.dir)
}

// waitReady waits for the one pod matching selector, other than the pod
// named not, to be Running with every container Ready.
func (s *scenario) waitReady(t *testing.T, ctx context.Context, selector, not string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := poll(ctx, podsTimeout, func() error {
		l, err := s.c.Admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		var state []string
		for i := range l.Items {
			p := &l.Items[i]
			if p.Name == not || p.DeletionTimestamp != nil {
				continue
			}
			ready := false
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready = true
				}
			}
			if p.Status.Phase == corev1.PodRunning && ready {
				pod = p
				return nil
			}
			state = append(state, fmt.Sprintf("%s %s ready=%v %s", p.Name, p.Status.Phase, ready, containerStates(p)))
		}
		return fmt.Errorf("pods %s: %v", selector, state)
	})
	if err != nil {
		s.events(t, ctx)
		s.crashLogs(t, ctx, selector)
		t.Fatal(err)
	}
	return pod
}

// crashLogs logs the previous run's output of every container that
// restarted, for a failure.
func (s *scenario) crashLogs(t *testing.T, ctx context.Context, selector string) {
	l, err := s.c.Admin.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return
	}
	for _, p := range l.Items {
		for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if cs.RestartCount == 0 {
				continue
			}
			b, err := s.c.Admin.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, Previous: true}).DoRaw(ctx)
			t.Logf("%s/%s restarted %d times; its previous run's log (%v):\n%s", p.Name, cs.Name, cs.RestartCount, err, b)
		}
	}
}

func containerStates(p *corev1.Pod) string {
	var out []string
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil:
			out = append(out, cs.Name+": waiting "+cs.State.Waiting.Reason+" "+cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			out = append(out, fmt.Sprintf("%s: terminated %s exit %d %s", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode, cs.State.Terminated.Message))
		case cs.State.Running != nil:
			out = append(out, fmt.Sprintf("%s: running, ready %v, restarts %d", cs.Name, cs.Ready, cs.RestartCount))
		}
	}
	return strings.Join(out, "; ")
}

// events logs the namespace's events, for a failure.
func (s *scenario) events(t *testing.T, ctx context.Context) {
	l, err := s.c.Admin.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, e := range l.Items {
		t.Logf("event %s %s/%s: %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
}

// readRecord reads the node's record as the admin, with its tail in the
// tail layout (docs/records.md, "Layouts").
func (s *scenario) readRecord(ctx context.Context) (entry.Entry, *corev1.ConfigMap, error) {
	cms := s.c.Admin.CoreV1().ConfigMaps(recordsNS)
	cm, err := cms.Get(ctx, record.Name(node), metav1.GetOptions{})
	if err != nil {
		return entry.Entry{}, nil, err
	}
	raw, err := kube.NewRecordsFor(cms, recordsNS).Get(ctx, node)
	if err != nil {
		return entry.Entry{}, cm, err
	}
	e, err := entry.Decode(raw)
	return e, cm, err
}

// checkRecord: the probe pod wrote its node's record with this host's
// readings, taken inside the container: the link the host's default route
// leaves by, etcd's own member ID, the host's memory.
func (s *scenario) checkRecord(t *testing.T, ctx context.Context) {
	var e entry.Entry
	var last entry.Sample
	err := poll(ctx, time.Minute, func() error {
		var err error
		e, _, err = s.readRecord(ctx)
		if err != nil {
			return err
		}
		for _, smp := range e.Samples {
			if smp.Etcd != nil && smp.Etcd.Err == "" && smp.Link.Interface != "" && smp.MemTotalBytes > 0 {
				last = smp
			}
		}
		if last.Etcd == nil {
			return fmt.Errorf("the record holds %d samples, none yet with etcd, link and memory read", len(e.Samples))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	host, err := link.Read("/")
	if err != nil {
		t.Fatalf("the host's own link reading: %v", err)
	}
	if last.Link.Interface != host.Interface || last.Link.Class != string(host.Class) {
		t.Errorf("the probe pod read the link %s (%s); the host's is %s (%s)", last.Link.Interface, last.Link.Class, host.Interface, host.Class)
	}
	want := s.c.Etcd.Members[0].MemberID()
	if last.Etcd.MemberID != want {
		t.Errorf("the probe pod read etcd member %s; etcd's own ID is %s", last.Etcd.MemberID, want)
	}
	if !last.Etcd.IsLeader || !last.Etcd.HasLeader {
		t.Errorf("the probe pod read etcd leader %v, has leader %v: the one member leads", last.Etcd.IsLeader, last.Etcd.HasLeader)
	}
	total := hostMemTotal(t)
	if last.MemTotalBytes != total {
		t.Errorf("the probe pod read MemTotal %d bytes; the host's /proc/meminfo says %d", last.MemTotalBytes, total)
	}
	if len(last.Errors) > 0 {
		t.Errorf("the probe's sample records failed readings: %v", last.Errors)
	}
	t.Logf("record %s: %d samples; link %s (%s), etcd member %s (leader), MemTotal %d bytes: as the host reads them",
		node, len(e.Samples), last.Link.Interface, last.Link.Class, last.Etcd.MemberID, last.MemTotalBytes)
}

// checkStatus: once the probe holds a full window, the controller pod's
// status judges the host, with its reasons.
func (s *scenario) checkStatus(t *testing.T, ctx context.Context) {
	window := s.settings.Window
	bound := time.Duration(window+5) * s.settings.SamplePeriod * 2 // a window, with room for a loaded machine
	var st *status.Status
	var h status.Host
	err := poll(ctx, bound, func() error {
		cm, err := s.c.Admin.CoreV1().ConfigMaps(namespace).Get(ctx, "fleet-role-status", metav1.GetOptions{})
		if err != nil {
			return err
		}
		raw := cm.Data[status.StatusKey]
		if raw == "" {
			return fmt.Errorf("no status published yet")
		}
		if st, err = status.UnmarshalStatus([]byte(raw)); err != nil {
			return err
		}
		for _, x := range st.Hosts {
			if x.Name == node {
				h = x
				if x.Samples >= window && x.Verdict != status.Unknown {
					return nil
				}
				return fmt.Errorf("host %s: %s with %d/%d samples", node, x.Verdict, x.Samples, window)
			}
		}
		return fmt.Errorf("the status names no host %s", node)
	})
	if err != nil {
		for _, r := range h.Reasons {
			t.Logf("  reason %s %s ok=%v %s", r.Signal, r.Subject, r.OK, r.Detail)
		}
		t.Fatal(err)
	}
	if len(h.Reasons) == 0 {
		t.Fatalf("host %s is %s with no reasons", node, h.Verdict)
	}
	t.Logf("the controller pod judges %s %s on %d samples (dry run %v); decision: %s", node, h.Verdict, h.Samples, st.DryRun, st.Decision.Action)
	for _, r := range h.Reasons {
		if r.Signal == "" || (r.Value == nil && r.Detail == "") {
			t.Errorf("reason %+v carries neither a number nor a detail", r)
		}
		v := "-"
		if r.Value != nil {
			v = strconv.FormatFloat(*r.Value, 'g', 4, 64)
		}
		lim := "-"
		if r.Limit != nil {
			lim = strconv.FormatFloat(*r.Limit, 'g', 4, 64)
		}
		t.Logf("  %s %s: %s (limit %s %s) ok=%v %s", r.Signal, r.Subject, v, lim, r.Unit, r.OK, r.Detail)
	}
	if !st.DryRun {
		t.Errorf("the status is not a dry run")
	}
}

// exec runs a command in a pod's container through the API server and the
// kubelet, as kubectl exec does, and returns its standard output.
func (s *scenario) exec(ctx context.Context, pod *corev1.Pod, container string, cmd ...string) (string, error) {
	req := s.c.Admin.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: container, Command: cmd, Stdout: true, Stderr: true,
	}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(s.c.API.AdminConfig(), "POST", req.URL())
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		return stdout.String(), fmt.Errorf("exec %s in %s: %w: %s", strings.Join(cmd, " "), pod.Name, err, stderr.String())
	}
	return stdout.String(), nil
}

// checkAdmission: the admission policy of the records holds for the token
// the kubelet itself issued to the probe pod (read from the pod's
// projected volume on the host): it carries the node, may write its own
// record, and may not write another node's record or the status.
func (s *scenario) checkAdmission(t *testing.T, ctx context.Context, pod *corev1.Pod) {
	tok := testkit.PodToken(t, s.c.KubeletRoot, pod)
	other := record.Owner{Name: "server-2", UID: "00000000-0000-0000-0000-000000000002"}
	testkit.CheckProbePodToken(t, ctx, s.c.API.TokenConfig(tok), namespace, recordsNS, pod, other)
}

// checkResume: deleting the probe pod leaves its record, and the pod the
// DaemonSet makes in its place resumes it: it keeps the samples taken
// before and appends its own, the first marked as a restart.
func (s *scenario) checkResume(t *testing.T, ctx context.Context, old *corev1.Pod) {
	before, _, err := s.readRecord(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if err := s.c.Admin.CoreV1().Pods(namespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, time.Minute, func() error {
		_, err := s.c.Admin.CoreV1().Pods(namespace).Get(ctx, old.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("pod %s not gone yet (%v)", old.Name, err)
	}); err != nil {
		t.Fatal(err)
	}
	kept, _, err := s.readRecord(ctx)
	if err != nil {
		t.Fatalf("the record after the probe pod was deleted: %v", err)
	}
	if len(kept.Samples) < len(before.Samples) {
		t.Errorf("the record held %d samples before the pod was deleted and %d after", len(before.Samples), len(kept.Samples))
	}
	// The old pod's samples end before the new pod's first, which is
	// marked a restart; but the DaemonSet's new pod can start and write
	// that first sample before this test has seen the old Pod gone (seen
	// in full runs: the record read above already held it), so the anchor
	// is the window read before the deletion, and every unmarked sample
	// after it up to the restart is the old pod's, taken while it
	// stopped.
	last := before.Samples[len(before.Samples)-1].At
	neu := s.waitReady(t, ctx, probeLabel, old.Name)
	var got entry.Entry
	first := -1 // the index of the new pod's first sample
	err = poll(ctx, time.Minute, func() error {
		got, _, err = s.readRecord(ctx)
		if err != nil {
			return err
		}
		for i, smp := range got.Samples {
			if !smp.At.After(last) || !smp.Restart {
				continue
			}
			for _, later := range got.Samples[i+1:] {
				if later.Restart {
					return fmt.Errorf("two samples after the old window's last (%s) are marked a restart", last.Format("15:04:05.000"))
				}
			}
			if i == 0 {
				return fmt.Errorf("the new pod's record holds none of the %d samples taken before", len(kept.Samples))
			}
			first = i
			return nil
		}
		return fmt.Errorf("no sample from the new pod %s yet", neu.Name)
	})
	if err != nil {
		var at []string
		for _, smp := range got.Samples {
			at = append(at, fmt.Sprintf("%s restart=%v", smp.At.Format("15:04:05.000"), smp.Restart))
		}
		t.Logf("the old window's last sample at %s; the record's samples now: %s", last.Format("15:04:05.000"), strings.Join(at, ", "))
		t.Logf("the new pod's log:\n%s", s.kubectl(t, ctx, "logs", "-n", namespace, neu.Name, "-c", "probe", "--tail", "80"))
		t.Fatal(err)
	}
	old0 := 0
	for _, smp := range got.Samples {
		if !smp.At.After(last) {
			old0++
		}
	}
	t.Logf("probe pod %s deleted; %s resumed the record %.1f s later: %d samples from before kept (%d of them taken after the window read before the deletion), %d new",
		old.Name, neu.Name, time.Since(deleted).Seconds(), first, first-old0, len(got.Samples)-first)
}

// hostMemTotal is MemTotal of the host's /proc/meminfo, in bytes.
func hostMemTotal(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return 0
}

// poll calls cond until it returns nil, within bound.
func poll(ctx context.Context, bound time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	return cluster.WaitFor(ctx, "a condition within "+bound.String(), cond)
}
