package acting

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/fleets/k3sfleet"
	"github.com/fleet-role/fleet-role/lab/kit/image"
	"github.com/fleet-role/fleet-role/lab/kit/quorumwatch"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// The install that acts, as the lab runs it: time compressed as in
// test/k3s (a 2 s period, a window of 20 at the p95), learner_stall_time
// a minute and a half (k3s's own is 5 min: the swap's deadlines and the
// decision's cooldown derive from it, and the cases wait out that
// cooldown between swaps; with one minute, the newcomer's Node, promoted
// 30 s after its join under the slowed leader, was not yet labelled and
// called a voter by k3s 51 s later, and promote's deadline of 90 s
// aborted the swap; at a minute and a half it is 2 minutes, and promote
// took at most 41 s in the sixteen swaps since), the disk reading skipped
// (etcd on tmpfs), and the
// actuator restarting k3s through the harness's supervisor, whose
// directory it is given (k3sfleet.LabDir), for systemd.
var actingSubstitutions = append(slices.Clone(testkit.CompressedTime),
	[2]string{"learner_stall_time: 5m ", "learner_stall_time: 1m30s "},
	[2]string{`fsync_skip_reason: "" `, `fsync_skip_reason: "etcd data on tmpfs in the acting scenario" `},
	[2]string{"        - --k3s-restart=systemd\n", "        - --k3s-restart=file:" + k3sfleet.LabDir + "\n"},
	[2]string{"        - mountPath: /var/lib/fleet-role/actuator\n          name: state\n",
		"        - mountPath: /var/lib/fleet-role/actuator\n          name: state\n        - mountPath: /host" + k3sfleet.LabDir + "\n          name: lab\n"},
	[2]string{"          path: /var/lib/fleet-role/actuator\n          type: DirectoryOrCreate\n        name: state\n",
		"          path: /var/lib/fleet-role/actuator\n          type: DirectoryOrCreate\n        name: state\n      - hostPath:\n          path: " + k3sfleet.LabDir + "\n          type: Directory\n        name: lab\n"},
)

// injected is the delay on every packet to and from the leaving voter, as
// test/k3s slows its voter: past the connect limit (250 ms at k3s's 5 s
// election timeout), not so far that etcd's heartbeats (500 ms) fail.
const injected = 300 * time.Millisecond

const (
	applyTimeout    = 3 * time.Minute // k3s's deploy controller, then the pods' start
	baselineTimeout = 6 * time.Minute // a window (40 s) and the decision's cooldown (2m10s) from the last transition
	planTimeout     = 5 * time.Minute // the slow samples fill the tail, the decision's cooldown (2m10s) from the last swap ends, and the hysteresis publishes
)

// guided is the scenario of fleet-role acting guided on real k3s.
type guided struct {
	*harness
	settings settings.Settings
	// cut is the cut-off standby's case, once it began.
	cut cutState
	// removals are the leaving voters' windows from their member's
	// removal to their settle's end, one a swap done.
	removals []removal
}

// removal is a leaving voter's window between its member's removal (the
// observer's) and the end of its settle step (the journal's).
type removal struct {
	host             string
	removed, settled time.Time
}

// TestActingGuidedSwap: on real k3s in network namespaces (three voters,
// the first starting the cluster, and one control-plane-only standby),
// fleet-role installed with acting guided swaps out the voter it finds
// slow, once an operator approves the plan it publishes: afterwards etcd's
// members are the two fit voters and the standby, the old voter is a Ready
// control-plane-only server labelled a standby, and the status says done.
// The cases, one fleet for all: the standby's etcd peer traffic cut, so
// that its learner never catches up, and the swap aborts; the same swap
// with the leaving voter leading, so leadership is moved first, and the
// controller holding the Lease killed at one step boundary drawn per run;
// a swap of a voter that does not lead, restarted by nobody's plan once
// its drop-in is pre-written. With FLEET_ROLE_ACTING_CASES=all, before
// them the leadership moved alone (the slow voter leads and the standby is
// slowed too: no fit standby), and after them a swap begun by the
// controllers switched to acting auto. An observer independent of
// fleet-role samples etcd's members and health every 250 ms and writes
// through the API server throughout.
func TestActingGuidedSwap(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.HoldHost(t)
	began := time.Now()
	root := testkit.RepoRoot(t)
	k3sBin := testenv.K3s(t, root)
	testenv.Kubectl(t)
	k3sfleet.CheckHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
	defer cancel()
	dir := t.TempDir()

	frTar, pauseTar := filepath.Join(dir, "fleet-role.tar"), filepath.Join(dir, "pause.tar")
	if err := image.Build(ctx, root, image.FleetRole, testkit.ImageTag, frTar); err != nil {
		t.Fatal(err)
	}
	if err := image.Build(ctx, root, image.Pause, pauseTag, pauseTar); err != nil {
		t.Fatal(err)
	}
	hosts := []string{first, second, leaving, standby}
	dropIns := map[string]map[string][]byte{}
	for _, h := range hosts {
		dropIns[h] = map[string][]byte{"fleet-role.yaml": render(t)}
	}
	f := k3sfleet.Start(t, k3sfleet.Config{
		Dir:        filepath.Join(dir, "fleet"),
		K3s:        k3sBin,
		Servers:    []string{first, second, leaving},
		Standbys:   []string{standby},
		Token:      "fleet-role-acting-guided",
		PauseImage: pauseTag,
		Images:     []string{frTar, pauseTar},
		DropIns:    dropIns,
		// The cut-off standby's k3s exits after each join that cannot
		// reach a peer; a real host's systemd starts it again.
		RestartOnExit: true,
	})
	t.Logf("fleet formed in %.1f s", f.Formed.Seconds())
	cli3, err := f.Etcd(first, second, leaving)
	if err != nil {
		t.Fatal(err)
	}
	defer cli3.Close()
	g := &guided{harness: &harness{t: t, ctx: ctx, f: f, etcd: cli3}}
	defer g.report()
	defer g.podLogs()

	g.install(hosts)
	if path := os.Getenv("FLEET_ROLE_ACTING_FORMED_FILE"); path != "" {
		// hack/timed-tests.sh starts the mesh beside this test once its
		// fleet is formed and fleet-role's pods run: the formation's CPU
		// (four k3s starting, the images imported, the pods started) is
		// what the mesh's judgement of timing must not share.
		if err := os.WriteFile(path, []byte(time.Now().Format(time.RFC3339)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := g.waitStatus("a baseline: every host fit, no swap, acting guided", baselineTimeout, func(st *status.Status) error {
		for _, h := range st.Hosts {
			if h.Verdict != status.Fit {
				return fmt.Errorf("%s is %s", h.Name, h.Verdict)
			}
		}
		if st.Acting == nil || st.Acting.Mode != settings.ActingGuided || st.Acting.Journal != nil {
			return fmt.Errorf("acting %+v, want guided and no journal", st.Acting)
		}
		if st.Decision.Action == status.ActionSwap {
			return fmt.Errorf("a swap %s -> %s on a fit fleet", st.Decision.Out, st.Decision.In)
		}
		return nil
	})
	t.Logf("baseline %.1f s after the start: %s", time.Since(began).Seconds(), st.Decision.Action)

	all := os.Getenv("FLEET_ROLE_ACTING_CASES") == "all"
	if !all {
		t.Log("the three cases the test command runs: the standby cut off, the leader with its controller killed, the restart by nobody's plan (FLEET_ROLE_ACTING_CASES=all adds the leadership move alone and acting auto)")
	}

	// First the leadership alone: the slow voter leads, and the standby
	// is slowed too, so no standby is fit to take its vote.
	if all {
		g.leadOnly(leaving, standby, []string{first, second, leaving})
		if t.Failed() {
			return
		}
		g.resetJournal() // the move counts for the cooldown as a swap does
	}

	// The standby's etcd peer traffic cut: its learner never catches up
	// nor is promoted, and the swap aborts back to the voters it began
	// with. First, as it changes no voter: the next case waits for no
	// cooldown of the decision's.
	g.carry(swapCase{out: leaving, in: standby, voters: []string{first, second, leaving}, cutStandby: true})

	// The same swap, the leaving voter leading (leadership is moved
	// first), with the controller that holds the Lease killed at one step
	// boundary drawn per run. The journal is made anew between cases, as
	// a fresh install's (an hour of cooldown after each is a guard of the
	// product, not of this test).
	if !t.Failed() {
		g.resetJournal()
		g.carry(swapCase{out: leaving, in: standby, leads: true, voters: []string{first, second, leaving}, killAt: drawKill(t)})
	}
	if !t.Failed() {
		// The voter swapped out is now the standby: the next swap takes
		// it back in for a voter that does not lead, and that voter's k3s
		// is restarted by nobody's plan once its drop-in is pre-written.
		g.resetJournal()
		g.carry(swapCase{out: second, in: leaving, voters: []string{first, second, standby}, unplannedRestart: true})
	}
	if all && !t.Failed() {
		// Acting auto: the standby now is the second server, taken back
		// in for the first case's standby, begun by the controller itself
		// once its plan has been published steadily for a window.
		g.resetJournal()
		g.actingAuto()
		g.carry(swapCase{out: standby, in: second, voters: []string{first, leaving, standby}, auto: true})
	}
	for _, e := range f.Exited() {
		t.Errorf("a process of the fleet exited: %s", e)
	}
	g.checkExits()
	t.Logf("the whole test took %.1f s", time.Since(began).Seconds())
}

// podLogs, when the test failed, logs the tail of every fleet-role pod's
// log (the actuators' say what each host did of its commands), read
// through the first server's API server, which no swap here removes.
func (g *guided) podLogs() {
	if !g.t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := g.f.Admin.CoreV1().Pods("fleet-role").List(ctx, metav1.ListOptions{})
	if err != nil {
		g.t.Logf("pod logs: %v", err)
		return
	}
	tail := int64(120)
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			b, err := g.f.Admin.CoreV1().Pods("fleet-role").GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail}).DoRaw(ctx)
			if err != nil {
				g.t.Logf("log of %s/%s on %s: %v", p.Name, c.Name, p.Spec.NodeName, err)
				continue
			}
			g.t.Logf("log of %s/%s on %s (last %d lines):\n%s", p.Name, c.Name, p.Spec.NodeName, tail, b)
		}
	}
}

// leadOnly slows the voter x, made etcd's leader, and the standby s too:
// the decision would replace x but has no fit standby, so acting drafts a
// leadership move alone. Approved, it must hand the leadership to another
// voter and change no member.
func (g *guided) leadOnly(x, s string, voters []string) {
	t := g.t
	if l := g.leader(); l != x {
		g.moveLeader(l, x)
	}
	for _, h := range []string{x, s} {
		if err := g.f.Lab.SetDelay(h, injected); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, h := range []string{x, s} {
			if err := g.f.Lab.SetDelay(h, 0); err != nil {
				t.Error(err)
			}
		}
	}()
	began := time.Now()
	var plan *acting.Plan
	g.waitStatus("a leadership move off the slow leader published, ready but for the approval", planTimeout, func(st *status.Status) error {
		if st.Acting == nil || st.Acting.Plan == nil {
			return fmt.Errorf("no plan: decision %s", st.Decision.Action)
		}
		p := st.Acting.Plan
		if p.Kind != acting.KindMoveLeader || p.Out.Node != x {
			return fmt.Errorf("plan %s of kind %s: %s", p.ID, p.Kind, acting.Parties(p.Kind, p.Out.Node, p.In.Node))
		}
		if !p.Ready {
			return fmt.Errorf("plan %s not ready: %s", p.ID, heldBy(p))
		}
		plan = p
		return nil
	})
	t.Logf("plan %s (%s) published %.1f s after %s and %s were slowed", plan.ID, acting.Parties(plan.Kind, x, ""), time.Since(began).Seconds(), x, s)
	o := g.watch()
	approved := time.Now()
	var out, errb bytes.Buffer
	if code := cli.Main([]string{"approve", "--kubeconfig", g.f.AdminKC, plan.ID}, &out, &errb); code != cli.ExitOK {
		t.Fatalf("fleet-role approve %s: exit %d: %s%s", plan.ID, code, out.String(), errb.String())
	}
	t.Logf("fleet-role approve: %s", strings.TrimSpace(out.String()))
	st := g.waitStatus("the leadership move done", acting.TotalDeadline(g.settings), func(st *status.Status) error {
		j := st.Acting.Journal
		if j == nil || j.PlanID != plan.ID {
			return errors.New("no journal of this plan yet")
		}
		if j.Phase == acting.PhaseAborted || j.Phase == acting.PhaseHalted {
			t.Fatalf("the leadership move ended %s: abort %+v; history %+v", j.Phase, j.Abort, j.History)
		}
		if j.Phase != acting.PhaseDone {
			return fmt.Errorf("%s", j.Phase)
		}
		return nil
	})
	fig := o.stop()
	g.judge(fig)
	j := st.Acting.Journal
	ml := journalStep(j, acting.StepMoveLeader)
	t.Logf("the leadership move took %.1f s from the approval (move-leader %.1f s)", time.Since(approved).Seconds(), tookOf(ml).Seconds())
	g.steps = append(g.steps, step{name: "move-leader alone", took: tookOf(ml), note: x + " led, no fit standby"})
	if l := g.leader(); l == x || l == s {
		t.Errorf("etcd's leader after the move is %s, want a fit voter", l)
	}
	for _, e := range fig.Events {
		t.Errorf("the observer saw a membership change during a leadership move: %s %s %s", e.At.Format("15:04:05.000"), e.Member, e.Kind)
	}
	if ms := g.memberHosts(); !slices.Equal(ms, voters) {
		t.Errorf("etcd's members after the leadership move are on %v, want %v as before", ms, voters)
	}
}

// journalStep is the journal's record of n.
func journalStep(j *acting.Journal, n acting.StepName) acting.JournalStep {
	for _, s := range j.Steps {
		if s.Name == n {
			return s
		}
	}
	return acting.JournalStep{}
}

// render is the drop-in `fleet-role render k3s-config --eligible=true`
// prints: the README's way to label a host.
func render(t *testing.T) []byte {
	t.Helper()
	var out, errb bytes.Buffer
	if code := cli.Main([]string{"render", "k3s-config", "--eligible=true", "--pinned=false"}, &out, &errb); code != cli.ExitOK {
		t.Fatalf("fleet-role render k3s-config: exit %d: %s", code, errb.String())
	}
	return out.Bytes()
}

func heldBy(p *acting.Plan) string {
	var held []string
	for _, gd := range p.Steps[0].Guards {
		if !gd.OK && gd.Code != acting.GuardApproval {
			held = append(held, string(gd.Code)+": "+gd.Detail)
		}
	}
	return strings.Join(held, "; ")
}

// install drops the acting manifest into the first server's manifests
// directory and waits for every pod: a probe on every host, two
// controllers, an actuator on every eligible server.
func (g *guided) install(hosts []string) {
	t := g.t
	first := g.f.Host(first)
	path := first.File("/var/lib/rancher/k3s/server/manifests/fleet-role.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	if err := os.WriteFile(path, testkit.LocalActingManifest(t, actingSubstitutions), 0o644); err != nil {
		t.Fatal(err)
	}
	g.wait("every pod of the acting install Ready", applyTimeout, func() error {
		for _, c := range []struct {
			selector string
			want     int
		}{{"app.kubernetes.io/name=fleet-role-probe", len(hosts)}, {"app.kubernetes.io/name=fleet-role", 2}, {"app.kubernetes.io/name=fleet-role-actuator", len(hosts)}} {
			l, err := g.f.Admin.CoreV1().Pods("fleet-role").List(g.ctx, metav1.ListOptions{LabelSelector: c.selector})
			if err != nil {
				return err
			}
			ready := 0
			for _, p := range l.Items {
				for _, cond := range p.Status.Conditions {
					if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
			if ready != c.want {
				return fmt.Errorf("%d pods %s Ready, want %d", ready, c.selector, c.want)
			}
		}
		return nil
	})
	t.Logf("every pod Ready %.1f s after the manifest was written", time.Since(written).Seconds())
	cm, err := g.f.Admin.CoreV1().ConfigMaps("fleet-role").Get(g.ctx, "fleet-role-settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := settings.Parse([]byte(cm.Data["settings.yaml"]), settings.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	s.Acting, s.DryRun = settings.ActingGuided, false // the overlay's environment
	g.settings = s
}

// waitStatus polls the published status until cond holds.
func (g *guided) waitStatus(what string, timeout time.Duration, cond func(*status.Status) error) *status.Status {
	g.t.Helper()
	var st *status.Status
	lastLog := time.Now()
	g.wait(what, timeout, func() error {
		cm, err := g.f.Admin.CoreV1().ConfigMaps("fleet-role").Get(g.ctx, "fleet-role-status", metav1.GetOptions{})
		if err != nil {
			return err
		}
		raw := cm.Data[status.StatusKey]
		if raw == "" {
			return errors.New("no status yet")
		}
		s, err := status.UnmarshalStatus([]byte(raw))
		if err != nil {
			return err
		}
		if err := cond(s); err != nil {
			if time.Since(lastLog) >= 30*time.Second {
				// Progress, and what holds it, on a long wait.
				lastLog = time.Now()
				line := string(s.Decision.Action)
				if r, ok := s.Decision.DecidingStep(); ok {
					line += ", " + r.Signal + ": " + r.Detail
				}
				g.t.Logf("waiting for %s: %v (decision %s)", what, err, line)
			}
			return err
		}
		st = s
		return nil
	})
	return st
}

// swapCase is one swap the scenario has fleet-role carry out.
type swapCase struct {
	out, in string
	// leads: the leaving voter leads, so move-leader has work; else
	// leadership is moved off it first, and the step is skipped.
	leads bool
	// voters are etcd's members before the swap.
	voters []string
	// unplannedRestart restarts the leaving voter's k3s, as a crash or an
	// operator would, once its drop-in is pre-written: it must remove its
	// own member and never be re-added, and the swap end done.
	unplannedRestart bool
	// killAt, when set, is the step at whose start the controller that
	// holds the Lease is killed (its pod deleted without grace): the other
	// replica takes the Lease at a newer term and carries the swap on from
	// the journal, taking no step twice.
	killAt acting.StepName
	// cutStandby cuts the standby's etcd peer traffic (port 2380, both
	// ways) before the swap opens: admitted, its learner can never catch
	// up, so etcd refuses its promotion, promote passes its deadline and
	// the swap aborts, removing its member from a voter's side; its peer
	// traffic comes back once the abort has ended. Its actuator and its API
	// traffic are left alone: the abort's last command is its to carry
	// out. It must never be promoted, and the members end as they began.
	// (Its link cut whole once admitted came too late: k3s had promoted
	// the learner 6 s after adding it.)
	cutStandby bool
	// auto switches the controllers to acting auto before the swap: no
	// one approves it; the controller does once the plan has been
	// published steadily for a window.
	auto bool
}

// actingAuto switches both controllers to acting auto, as an operator
// would: the Deployment's FLEET_ROLE_ACTING set to auto, and every
// controller pod of the new template Ready.
func (g *guided) actingAuto() {
	t := g.t
	deps := g.f.Admin.AppsV1().Deployments("fleet-role")
	patch := `{"spec":{"template":{"spec":{"containers":[{"name":"controller","env":[{"name":"FLEET_ROLE_ACTING","value":"auto"}]}]}}}}`
	if _, err := deps.Patch(g.ctx, "fleet-role", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("set FLEET_ROLE_ACTING=auto on the controller: %v", err)
	}
	g.wait("both controllers running acting auto", applyTimeout, func() error {
		d, err := deps.Get(g.ctx, "fleet-role", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != *d.Spec.Replicas || d.Status.ReadyReplicas != *d.Spec.Replicas || d.Status.Replicas != *d.Spec.Replicas {
			return fmt.Errorf("rollout: %d updated, %d ready, %d in all, of %d", d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.Replicas, *d.Spec.Replicas)
		}
		return nil
	})
	g.settings.Acting = settings.ActingAuto
	g.waitStatus("the status saying acting auto", applyTimeout, func(st *status.Status) error {
		if st.Acting == nil || st.Acting.Mode != settings.ActingAuto {
			return fmt.Errorf("acting %+v", st.Acting)
		}
		return nil
	})
}

// killableSteps are the step boundaries a controller can be killed at on
// k3s: each step's start (move-leader only when the leaving voter leads).
var killableSteps = []acting.StepName{acting.StepAdmit, acting.StepPromote, acting.StepStabilise, acting.StepPrewrite, acting.StepRemove, acting.StepSettle}

// drawKill is the one boundary this run kills the controller at, drawn
// from the clock (logged, and settable by FLEET_ROLE_ACTING_KILL_AT to
// rerun one): every run tries another; the executor's unit tests try them
// all on the model.
func drawKill(t *testing.T) acting.StepName {
	if v := os.Getenv("FLEET_ROLE_ACTING_KILL_AT"); v != "" {
		if !slices.Contains(acting.Steps, acting.StepName(v)) {
			t.Fatalf("FLEET_ROLE_ACTING_KILL_AT=%q is no step of %v", v, acting.Steps)
		}
		return acting.StepName(v)
	}
	n := killableSteps[time.Now().UnixNano()%int64(len(killableSteps))]
	t.Logf("the controller is killed at the start of %s this run (FLEET_ROLE_ACTING_KILL_AT=%s reruns it)", n, n)
	return n
}

// killer kills the leading controller once the journal shows a step
// running.
type killer struct {
	cancel context.CancelFunc
	done   chan struct{}
	pod    string
	term   int32
}

// killAt watches the journal ConfigMap, every version of it, and kills the
// controller that holds the Lease at the first version that shows plan's
// step running: the published status, polled, can pass over a step of a
// few seconds (stabilise's 9.6 s was missed on a loaded machine), a watch
// of the journal cannot.
func (g *guided) killAt(plan string, step acting.StepName) *killer {
	ctx, cancel := context.WithCancel(g.ctx)
	k := &killer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(k.done)
		cms := g.f.Admin.CoreV1().ConfigMaps("fleet-role")
		rv := "" // a watch that ends is taken up from the last version seen
		for ctx.Err() == nil {
			w, err := cms.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + acting.JournalConfigMap, ResourceVersion: rv})
			if err != nil {
				// The API server may be restarting, or rv too old: again,
				// from what it has now.
				rv = ""
				select {
				case <-ctx.Done():
				case <-time.After(250 * time.Millisecond):
				}
				continue
			}
			for ev := range w.ResultChan() {
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok {
					rv = "" // an error event: its version is gone
					continue
				}
				rv = cm.ResourceVersion
				j, err := acting.UnmarshalJournal([]byte(cm.Data[acting.JournalKey]))
				if err != nil || j.PlanID != plan || journalStep(j, step).State != acting.StateRunning {
					continue
				}
				// Off the test's goroutine: an error is reported, not
				// fatal (stop's caller fails on no kill).
				pod, err := g.killLeader()
				if err != nil {
					g.t.Errorf("%s running: %v", step, err)
					w.Stop()
					return
				}
				k.pod, k.term = pod, j.Term
				g.t.Logf("%s running: the leading controller %s killed (term %d)", step, k.pod, k.term)
				w.Stop()
				return
			}
		}
	}()
	return k
}

// stop ends the watch and returns the pod killed ("" for none) and its
// term. On a nil killer it returns none.
func (k *killer) stop() (string, int32) {
	if k == nil {
		return "", 0
	}
	k.cancel()
	<-k.done
	return k.pod, k.term
}

// killLeader deletes the pod of the controller that holds the Lease, with
// no grace, as a crashed node or an OOM kill would stop it: it releases
// nothing. It returns the pod's name; it may run off the test's goroutine,
// so it returns its error rather than fail the test.
func (g *guided) killLeader() (string, error) {
	l, err := g.f.Admin.CoordinationV1().Leases("fleet-role").Get(g.ctx, "fleet-role", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return "", fmt.Errorf("the controller's Lease: %v %+v", err, l)
	}
	holder := *l.Spec.HolderIdentity
	pod, _, _ := strings.Cut(holder, "_")
	zero := int64(0)
	if err := g.f.Admin.CoreV1().Pods("fleet-role").Delete(g.ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return "", fmt.Errorf("kill the controller %s: %w", pod, err)
	}
	return pod, nil
}

// carry slows c.out, waits for the plan fleet-role publishes, approves it
// as an operator, and follows the swap to done with the observer running,
// holding what the Done-when says of the end.
func (g *guided) carry(c swapCase) {
	t := g.t
	f := g.f
	began := time.Now()
	if l := g.leader(); c.leads && l != c.out {
		g.moveLeader(l, c.out)
	} else if !c.leads && l == c.out {
		g.moveLeader(l, first)
	}
	if err := f.Lab.SetDelay(c.out, injected); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := f.Lab.SetDelay(c.out, 0); err != nil {
			t.Error(err)
		}
	}()
	var plan *acting.Plan
	g.waitStatus("the slow voter's swap published, ready but for the approval", planTimeout, func(st *status.Status) error {
		if st.Acting == nil || st.Acting.Plan == nil {
			return fmt.Errorf("no plan: decision %s %s -> %s", st.Decision.Action, st.Decision.Out, st.Decision.In)
		}
		p := st.Acting.Plan
		if p.Out.Node != c.out || p.In.Node != c.in {
			return fmt.Errorf("plan %s: %s out, %s in", p.ID, p.Out.Node, p.In.Node)
		}
		if !p.Ready {
			return fmt.Errorf("plan %s not ready: %s", p.ID, heldBy(p))
		}
		plan = p
		return nil
	})
	t.Logf("plan %s published %.1f s after %s was slowed", plan.ID, time.Since(began).Seconds(), c.out)
	if ms := g.memberHosts(); !slices.Equal(ms, c.voters) {
		t.Fatalf("etcd's members before the approval are on %v, want %v: fleet-role changed them unapproved", ms, c.voters)
	}

	o := g.watch()
	if c.cutStandby {
		g.peerTraffic(c.in, false)
		g.cut = cutState{host: c.in, cutAt: time.Now()}
		t.Logf("%s's etcd peer traffic cut before the approval", c.in)
	}
	approved := time.Now()
	if !c.auto {
		var out, errb bytes.Buffer
		if code := cli.Main([]string{"approve", "--kubeconfig", f.AdminKC, plan.ID}, &out, &errb); code != cli.ExitOK {
			t.Fatalf("fleet-role approve %s: exit %d: %s%s", plan.ID, code, out.String(), errb.String())
		}
		t.Logf("fleet-role approve: %s", strings.TrimSpace(out.String()))
	}
	restarted, lifted := false, false
	var kill *killer
	if c.killAt != "" {
		kill = g.killAt(plan.ID, c.killAt)
	}
	total := acting.TotalDeadline(g.settings)
	st := g.waitStatus("the swap done", total+time.Minute, func(st *status.Status) error {
		j := st.Acting.Journal
		if j == nil || j.PlanID != plan.ID {
			return errors.New("no journal of this plan yet")
		}
		if c.cutStandby {
			return g.cutOff(c, j, &g.cut)
		}
		if j.Phase == acting.PhaseAborted || j.Phase == acting.PhaseHalted {
			t.Fatalf("the swap ended %s: abort %+v, halt %q; history %+v", j.Phase, j.Abort, j.Halt, j.History)
		}
		if !lifted && journalStep(j, acting.StepRemove).State == acting.StateDone {
			// X holds no vote any more: the slow path between voters,
			// the fault, is over for etcd. A host restarted behind it
			// takes minutes to start its API server (every etcd read a
			// 600 ms round trip: 2 min after its restart it was not yet
			// Ready, and settle's deadline halted the swap), so the test
			// ends the fault here, as an operator moves a host off a bad
			// link; settle then waits on k3s's own restart.
			lifted = true
			if err := f.Lab.SetDelay(c.out, 0); err != nil {
				t.Fatal(err)
			}
			t.Logf("remove done: the delay on %s lifted", c.out)
		}
		if c.unplannedRestart && !restarted && journalStep(j, acting.StepPrewrite).State == acting.StateDone {
			restarted = true
			t.Logf("prewrite done: %s's k3s restarted by nobody's plan", c.out)
			if err := f.Host(c.out).RestartK3s(); err != nil {
				t.Fatal(err)
			}
		}
		if j.Phase != acting.PhaseDone {
			if cur := j.Current(); cur != nil {
				return fmt.Errorf("%s: step %s %s", j.Phase, cur.Name, cur.State)
			}
			return fmt.Errorf("%s (abort %+v, halt %q)", j.Phase, j.Abort, j.Halt)
		}
		return nil
	})
	fig := o.stop()
	g.judge(fig)
	if c.cutStandby {
		g.checkAborted(c, st.Acting.Journal, fig, g.cut)
		return
	}
	if c.unplannedRestart && !restarted {
		t.Errorf("the swap was done before its prewrite was seen done: %s was never restarted unplanned", c.out)
	}
	t.Logf("the swap took %.1f s from the approval", time.Since(approved).Seconds())
	j := st.Acting.Journal
	if want := map[bool]string{true: "auto", false: "operator"}[c.auto]; j.ApprovedBy != want {
		t.Errorf("the swap was approved by %q, want %q", j.ApprovedBy, want)
	}
	if c.auto {
		t.Logf("acting auto began the swap %.1f s after its plan was ready (a window of %d samples is %v)",
			j.Started.Sub(approved).Seconds(), g.settings.Window, time.Duration(g.settings.Window)*g.settings.SamplePeriod)
	}
	if c.killAt != "" {
		killed, killTerm := kill.stop()
		if killed == "" {
			t.Errorf("%s was never seen running in the journal: no controller was killed", c.killAt)
		} else if j.Term <= killTerm {
			t.Errorf("the swap ended in term %d, the killed controller's was %d: no other controller carried it on", j.Term, killTerm)
		}
	}
	// No step taken twice, whoever carried it.
	ran := map[string]int{}
	for _, e := range j.History {
		if e.State == string(acting.StateRunning) && slices.Contains(acting.Steps, acting.StepName(e.Step)) {
			ran[e.Step]++
		}
	}
	for n, k := range ran {
		if k != 1 {
			t.Errorf("step %s went under way %d times; history %+v", n, k, j.History)
		}
	}
	for _, s := range j.Steps {
		took := "-"
		if s.Started != nil && s.Ended != nil {
			took = fmt.Sprintf("%.1f s", s.Ended.Sub(*s.Started).Seconds())
		}
		t.Logf("step %-11s %-7s %s", s.Name, s.State, took)
		g.steps = append(g.steps, step{name: s.Name, took: tookOf(s), note: fmt.Sprintf("%s, %s out (leads %v, unplanned restart %v)", s.State, c.out, c.leads, c.unplannedRestart)})
	}
	moved := journalStep(j, acting.StepMoveLeader).State
	if c.leads && moved != acting.StateDone {
		t.Errorf("move-leader %s, want done: %s led", moved, c.out)
	}
	if !c.leads && moved != acting.StateSkipped {
		t.Errorf("move-leader %s, want skipped: %s did not lead", moved, c.out)
	}
	// A removed member never comes back: add first, so no member is added
	// after the leaving one's removal while the observer watched.
	removedAt := -1
	for i, e := range fig.Events {
		t.Logf("observer: %s %s %s", e.At.Format("15:04:05.000"), e.Member, e.Kind)
		if e.Kind == quorumwatch.Removed && strings.HasPrefix(e.Member, c.out+"-") {
			removedAt = i
		}
	}
	if removedAt < 0 {
		t.Errorf("the observer saw no removal of %s's member", c.out)
	} else if settled := journalStep(j, acting.StepSettle).Ended; settled != nil {
		g.removals = append(g.removals, removal{host: c.out, removed: fig.Events[removedAt].At, settled: *settled})
	}
	for _, e := range fig.Events[removedAt+1:] {
		if e.Kind == quorumwatch.AddedLearner || e.Kind == quorumwatch.AddedVoter {
			t.Errorf("a member %s %s after %s's removal", e.Member, e.Kind, c.out)
		}
	}

	// What the Done-when holds: the members, the old voter a Ready
	// control-plane-only server labelled a standby, the status done.
	want := append(slices.DeleteFunc(slices.Clone(c.voters), func(v string) bool { return v == c.out }), c.in)
	slices.Sort(want)
	if ms := g.memberHosts(); !slices.Equal(ms, want) {
		t.Errorf("etcd's members after the swap are on %v, want %v", ms, want)
	}
	g.wait(c.out+" a Ready control-plane-only server labelled a standby", time.Minute, func() error {
		n, err := g.node(c.out)
		if err != nil {
			return err
		}
		if err := controlPlaneOnly(n); err != nil {
			return err
		}
		if v := n.Labels[g.settings.EligibleLabel]; v != "true" {
			return fmt.Errorf("%s labelled %s=%q", c.out, g.settings.EligibleLabel, v)
		}
		return nil
	})
}

// checkExits holds that the only k3s that exited on its own (and was
// started again, as systemd would) was the cut-off standby's, while it
// was cut off: its etcd's bootstrap gives up on peers it cannot reach; or
// a leaving voter's, crashed in etcd's own code between its member's
// removal and its settle (etcdPanicAfterRemoval).
func (g *guided) checkExits() {
	for _, r := range g.f.Restarts() {
		if r.Exited == "" {
			continue
		}
		g.t.Logf("%s's k3s exited on its own at %s (%s), started again %.1f s later", r.Host, r.Seen.Format("15:04:05.0"), r.Exited, r.Done.Sub(r.Seen).Seconds())
		if rm, ok := etcdPanicAfterRemoval(r, g.removals); ok {
			g.t.Logf("%s's k3s crashed in etcd's code %.1f s after its member's removal, before its settle ended (%s): k3s's own learner check asks the local member its status every 15 s (pkg/etcd/etcd.go:1233), which panics etcd 3.6.5 while the removed member closes; systemd starts it again, with the pre-written drop-in: %s",
				r.Host, r.Seen.Sub(rm.removed).Seconds(), rm.settled.Format("15:04:05.0"), firstLine(r.Crash))
			continue
		}
		if r.Host != g.cut.host || r.Seen.Before(g.cut.cutAt) || (!g.cut.mendedAt.IsZero() && r.Seen.After(g.cut.mendedAt)) {
			g.t.Errorf("%s's k3s exited on its own at %s, not the cut-off standby while cut off (%s, %s to %s); its log follows",
				r.Host, r.Seen.Format(time.RFC3339), g.cut.host, g.cut.cutAt.Format(time.RFC3339), g.cut.mendedAt.Format(time.RFC3339))
			// A line each, so that a summary of the test's own lines
			// (the CI's) keeps them: where it crashed, then how its
			// log ended.
			for _, l := range strings.Split(r.Crash, "\n") {
				if l != "" {
					g.t.Logf("%s's k3s crashed: %s", r.Host, l)
				}
			}
			for _, l := range strings.Split(r.Log, "\n") {
				g.t.Logf("%s's k3s log ended: %s", r.Host, l)
			}
		}
	}
}

// etcdPanicAfterRemoval is the removal whose window holds restart r, when
// r is a panic in etcd's server code (a frame under go.etcd.io/etcd/server)
// of the leaving voter between its member's removal and its settle's end.
// Any other exit, or one elsewhen, is not.
func etcdPanicAfterRemoval(r k3sfleet.Restart, removals []removal) (removal, bool) {
	if !strings.HasPrefix(r.Crash, "panic: ") || !strings.Contains(r.Crash, "go.etcd.io/etcd/server/") {
		return removal{}, false
	}
	for _, rm := range removals {
		// The observer sees the removal up to a sample after the removed
		// member does.
		if r.Host == rm.host && !r.Seen.Before(rm.removed.Add(-observerInterval)) && !r.Seen.After(rm.settled) {
			return rm, true
		}
	}
	return removal{}, false
}

// observerInterval is quorumwatch's sampling period as test/acting runs it
// (its default).
const observerInterval = 250 * time.Millisecond

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// cutState is how far the cut-off standby's case has gone.
type cutState struct {
	host            string
	cutAt, mendedAt time.Time
}

// peerTraffic lets host h's etcd peer traffic (TCP port 2380, to it and
// from it) through, or drops it, by iptables rules in its network
// namespace; the rest of its traffic is left alone.
func (g *guided) peerTraffic(h string, on bool) {
	op := "-I"
	if on {
		op = "-D"
	}
	for _, rule := range [][]string{{"INPUT", "--dport"}, {"OUTPUT", "--dport"}} {
		cmd := g.f.Host(h).Net.Command(g.ctx, "iptables", op, rule[0], "-p", "tcp", rule[1], "2380", "-j", "DROP")
		if out, err := cmd.CombinedOutput(); err != nil {
			g.t.Fatalf("iptables %s %s on %s: %v\n%s", op, rule[0], h, err, out)
		}
	}
}

// cutOff follows the cut-off standby's case at each status: it returns
// nil, with the standby's peer traffic back, once the swap has ended
// aborted.
func (g *guided) cutOff(c swapCase, j *acting.Journal, cut *cutState) error {
	t := g.t
	if j.Phase == acting.PhaseHalted || j.Phase == acting.PhaseDone {
		t.Fatalf("the swap ended %s with the standby cut off, want aborted: halt %q; history %+v", j.Phase, j.Halt, j.History)
	}
	if j.Phase != acting.PhaseAborted {
		if cur := j.Current(); cur != nil && j.Phase == acting.PhaseRunning {
			return fmt.Errorf("%s: step %s %s", j.Phase, cur.Name, cur.State)
		}
		return fmt.Errorf("%s (abort %+v)", j.Phase, j.Abort)
	}
	// The traffic back only once the abort has ended: until standby-in has
	// restarted it as a standby, its k3s (started again by its service
	// manager after each failed join) would join once more after
	// remove-in, and, no longer cut off, catch up and be promoted by k3s.
	// The executor removes such a member again, but only while the swap
	// is open.
	if cut.mendedAt.IsZero() {
		g.peerTraffic(c.in, true)
		cut.mendedAt = time.Now()
		t.Logf("the abort ended: %s's peer traffic back after %.1f s cut", c.in, cut.mendedAt.Sub(cut.cutAt).Seconds())
	}
	return nil
}

// checkAborted holds what the cut-off standby's case must end with: the
// swap aborted at promote's deadline, the standby never promoted, the
// members as they began, the standby a Ready control-plane-only server.
func (g *guided) checkAborted(c swapCase, j *acting.Journal, fig quorumwatch.Figures, cut cutState) {
	t := g.t
	if cut.cutAt.IsZero() || cut.mendedAt.IsZero() {
		t.Errorf("the standby was cut at %v and mended at %v: the case did not run its course", cut.cutAt, cut.mendedAt)
	}
	if j.Abort == nil || j.Abort.Step != acting.StepPromote || j.Abort.Cause != acting.CauseDeadline {
		t.Errorf("abort %+v, want at promote, its deadline passed", j.Abort)
	} else {
		undone := "-"
		if j.Ended != nil {
			undone = fmt.Sprintf("%.1f s", j.Ended.Sub(j.Abort.At).Seconds())
		}
		t.Logf("aborted at %s (%s) %.1f s after the cut; undone in %s", j.Abort.Step, j.Abort.Cause, j.Abort.At.Sub(cut.cutAt).Seconds(), undone)
	}
	for _, e := range fig.Events {
		t.Logf("observer: %s %s %s", e.At.Format("15:04:05.000"), e.Member, e.Kind)
		if strings.HasPrefix(e.Member, c.in+"-") && (e.Kind == quorumwatch.Promoted || e.Kind == quorumwatch.AddedVoter) {
			t.Errorf("the cut-off standby %s was %s", c.in, e.Kind)
		}
	}
	if ms := g.memberHosts(); !slices.Equal(ms, c.voters) {
		t.Errorf("etcd's members after the abort are on %v, want %v as before", ms, c.voters)
	}
	g.wait(c.in+" a Ready control-plane-only server again", 2*time.Minute, func() error {
		n, err := g.node(c.in)
		if err != nil {
			return err
		}
		return controlPlaneOnly(n)
	})
}

func tookOf(s acting.JournalStep) time.Duration {
	if s.Started == nil || s.Ended == nil {
		return 0
	}
	return s.Ended.Sub(*s.Started)
}

// resetJournal makes the journal anew, as a fresh install of the acting
// manifest would: deleted and created empty by the administrator (the
// admission policy refuses an administrator an update of it, not these).
func (g *guided) resetJournal() {
	g.t.Helper()
	// The approval first, as an operator withdraws it: the journal is
	// what records an approval spent, so an approval left beside a journal
	// made anew would start the same plan again if it were published
	// again (after the leadership move, the same leader named while its
	// standby was still read unfit: a second move began, and its hour of
	// cooldown held the next swap).
	var out, errb bytes.Buffer
	if code := cli.Main([]string{"approve", "--kubeconfig", g.f.AdminKC, "--withdraw"}, &out, &errb); code != cli.ExitOK {
		g.t.Fatalf("fleet-role approve --withdraw: exit %d: %s%s", code, out.String(), errb.String())
	}
	cms := g.f.Admin.CoreV1().ConfigMaps("fleet-role")
	if err := cms.Delete(g.ctx, acting.JournalConfigMap, metav1.DeleteOptions{}); err != nil {
		g.t.Fatal(err)
	}
	if _, err := cms.Create(g.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: acting.JournalConfigMap, Namespace: "fleet-role",
		Labels: map[string]string{"app.kubernetes.io/name": "fleet-role", "app.kubernetes.io/part-of": "fleet-role"}}}, metav1.CreateOptions{}); err != nil {
		g.t.Fatal(err)
	}
}
