package acting

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/lab/fleets/k3sfleet"
	"github.com/fleet-role/fleet-role/lab/kit/image"
	"github.com/fleet-role/fleet-role/lab/kit/quorumwatch"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// The fleet: three voters, the first starting the cluster and the others
// joining it with --server, and one control-plane-only standby. The swap
// sends out server-3 (a joiner: the first server, with --cluster-init and
// no --server, cannot be a standby, docs/acting.md "The first server") and
// takes in server-4.
const (
	first   = "server-1"
	second  = "server-2"
	leaving = "server-3"
	standby = "server-4"
	// stays is the voter that takes the leadership off the leaving one
	// (the actuator's choice, the fittest voter that stays; all are fit
	// here).
	stays = first
	// planID stands in for the plan ID the controller writes beside k3s's
	// remove annotation.
	planID   = "test-acting-k3s-mechanics"
	pauseTag = "fleet-role.test/pause:v1"
)

// k3s's Node annotations (pkg/etcd: NodeNameAnnotation,
// NodeAddressAnnotation, removedNodeNameAnnotation).
const (
	nodeNameAnnotation    = "etcd.k3s.cattle.io/node-name"
	nodeAddressAnnotation = "etcd.k3s.cattle.io/node-address"
	removedNameAnnotation = "etcd.k3s.cattle.io/removed-node-name"
)

// electionTimeout is etcd's election timeout as k3s starts it: k3s sets
// 5000 ms (pkg/etcd/etcd.go:1061 and 1132, ElectionTimeout: 5000 with a
// 500 ms heartbeat), not etcd's default of 1000 ms.
const electionTimeout = 5 * time.Second

// Deadlines of the waits: several times what each step takes on an idle
// machine (docs/acting.md's deadlines are the product's; these are the
// test's bounds on a loaded 2-core machine).
const (
	restartTimeout = 2 * time.Minute // the supervisor's restart (SIGTERM, up to 15 s, then a new process)
	admitTimeout   = 5 * time.Minute // k3s's start and its join as a learner (learner_stall_time)
	promoteTimeout = 5 * time.Minute // catch-up and the 15 s promotion tick, then the EtcdIsVoter write
	leaderTimeout  = time.Minute
	removeTimeout  = 2 * time.Minute // 2 x k3s's 1 min removalTimeout
	settleTimeout  = 5 * time.Minute
	// stabiliseHold is how long the standby must hold its vote, with a
	// leader and its Node condition True, before the leaving voter goes:
	// two of k3s's 15 s ticks, so that the leader's tick has rewritten the
	// condition once more with the new member counted.
	stabiliseHold = 30 * time.Second
	// absentHold is how long a removed member must stay out of the member
	// list after its server came back: one of k3s's 15 s promotion ticks
	// and more, in which a re-added learner would show.
	absentHold = 20 * time.Second
)

// step is one step of the swap as the test timed it.
type step struct {
	name acting.StepName
	took time.Duration
	note string
}

// harness is the running fleet and what the test keeps of it.
type harness struct {
	t     *testing.T
	ctx   context.Context
	f     *k3sfleet.Fleet
	etcd  *clientv3.Client
	steps []step
	// claims are the research notes' claims as the run saw them, for the
	// report at the end: each "held" or "FALSE: ...".
	claims []string
}

func TestActingK3sMechanics(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.HoldHost(t)
	began := time.Now()
	root := testkit.RepoRoot(t)
	k3sBin := testenv.K3s(t, root)
	k3sfleet.CheckHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
	defer cancel()
	dir := t.TempDir()

	pauseTar := filepath.Join(dir, "pause.tar")
	if err := image.Build(ctx, root, image.Pause, pauseTag, pauseTar); err != nil {
		t.Fatal(err)
	}
	f := k3sfleet.Start(t, k3sfleet.Config{
		Dir:        filepath.Join(dir, "fleet"),
		K3s:        k3sBin,
		Servers:    []string{first, second, leaving},
		Standbys:   []string{standby},
		Token:      "fleet-role-acting-scenario",
		PauseImage: pauseTag,
		Images:     []string{pauseTar},
	})
	t.Logf("fleet formed in %.1f s (first API %.1f s): %s, %s, %s voters, %s a control-plane-only standby",
		f.Formed.Seconds(), f.FirstServer.Seconds(), first, second, leaving, standby)
	cli, err := f.Etcd(first, second, leaving)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	h := &harness{t: t, ctx: ctx, f: f, etcd: cli}
	defer h.report()
	h.checkStandbyAtStart()

	// The leaving voter leads, so that the swap's move-leader step has
	// something to move (k3s's first server leads the cluster it started).
	if l := h.leader(); l != leaving {
		h.moveLeader(l, leaving)
	}

	o := h.watch()
	h.swap(leaving, standby)
	h.judge(o.stop())
	if ms := h.memberHosts(); !slices.Equal(ms, []string{first, second, standby}) {
		t.Errorf("etcd's members after the swap are on %v, want %s, %s and %s, all voters", ms, first, second, standby)
	}

	if t.Failed() {
		t.Logf("the swap failed: the unplanned restart's subtest is not run")
	} else {
		t.Run("UnplannedRestartAfterPrewrite", func(t *testing.T) {
			sub := &harness{t: t, ctx: ctx, f: f, etcd: cli}
			defer func() { h.claims = append(h.claims, sub.claims...) }()
			sub.unplannedRestart()
		})
	}
	for _, e := range f.Exited() {
		t.Errorf("a process of the fleet exited: %s", e)
	}
	t.Logf("the whole test took %.1f s", time.Since(began).Seconds())
}

// swap carries out the swap of voter x for standby s, step by step, each
// step making the writes fleet-role would make and waiting for what says
// it is done.
func (h *harness) swap(x, s string) {
	t := h.t
	t.Helper()

	// admit: S's drop-in says voter, and k3s restarts on S.
	h.do(acting.StepAdmit, func() string {
		h.writeDropIn(s, acting.DropInVoter)
		h.restart(s, "admit-"+s)
		var sawLearner, namedAsLearner bool
		var learnerCond string
		h.wait("a member of "+s, admitTimeout, func() error {
			m, err := h.memberOn(s)
			if err != nil {
				return err
			}
			if m.IsLearner {
				sawLearner = true
				if n, err := h.node(s); err == nil {
					if n.Annotations[nodeNameAnnotation] != "" {
						namedAsLearner = true
					}
					for _, c := range n.Status.Conditions {
						if string(c.Type) == k3sfleet.EtcdIsVoter {
							learnerCond = fmt.Sprintf("%s/%s", c.Status, c.Reason)
						}
					}
				}
			}
			return nil
		})
		h.t.Logf("%s's Node while its member was a learner: %s %q (empty: none)", s, k3sfleet.EtcdIsVoter, learnerCond)
		h.claim("a joining server is added as a learner (etcd.go:644-656)", sawLearner,
			"the first member list with "+s+" showed it a voter")
		h.claim("a learner's Node has no node-name annotation before promotion (no API server while a learner)", !namedAsLearner,
			s+"'s Node was annotated "+nodeNameAnnotation+" while its member was a learner")
		return fmt.Sprintf("%s's member seen, learner %v", s, sawLearner)
	})

	// promote: k3s's leader promotes the caught-up learner; fleet-role
	// only watches.
	h.do(acting.StepPromote, func() string {
		began := time.Now()
		var promoted time.Duration
		h.wait(s+" a voter, its Node's "+k3sfleet.EtcdIsVoter+" True", promoteTimeout, func() error {
			m, err := h.memberOn(s)
			if err != nil {
				return err
			}
			if m.IsLearner {
				return fmt.Errorf("%s is still a learner", m.Name)
			}
			if promoted == 0 {
				promoted = time.Since(began)
			}
			return h.voterCondition(s, corev1.ConditionTrue)
		})
		return fmt.Sprintf("%s a voter in the member list after %.1f s, its %s True after %.1f s (k3s's leader writes it at its 15 s tick)",
			s, promoted.Seconds(), k3sfleet.EtcdIsVoter, time.Since(began).Seconds())
	})

	// stabilise: S holds its vote, with a leader, its Node condition True
	// and named, for stabiliseHold without a break.
	h.do(acting.StepStabilise, func() string {
		var since time.Time
		h.wait(fmt.Sprintf("%s holding its vote for %v", s, stabiliseHold), stabiliseHold+3*time.Minute, func() error {
			err := h.holdsVote(s)
			if err != nil {
				since = time.Time{}
				return err
			}
			if since.IsZero() {
				since = time.Now()
			}
			if held := time.Since(since); held < stabiliseHold {
				return fmt.Errorf("held for %v", held.Round(time.Second))
			}
			return nil
		})
		return fmt.Sprintf("held %v", stabiliseHold)
	})

	// prewrite: X's drop-in says standby, without a restart.
	h.do(acting.StepPrewrite, func() string {
		h.writeDropIn(x, acting.DropInStandby)
		return "no restart"
	})

	// move-leader: when X leads, MoveLeader on X's own member to a voter
	// that stays.
	h.do(acting.StepMoveLeader, func() string {
		l := h.leader()
		if l != x {
			t.Errorf("%s does not lead at move-leader (%s does): the step is not exercised", x, l)
			return "skipped: " + x + " does not lead"
		}
		h.moveLeader(x, stays)
		return "from " + x + " to " + stays
	})

	// remove: k3s's remove annotation on X's Node, with the plan's
	// remove-requested beside it in the same patch, as the controller
	// writes them; k3s's member controller removes the member.
	var removedName string
	h.do(acting.StepRemove, func() string {
		m, err := h.memberOn(x)
		if err != nil {
			t.Fatal(err)
		}
		removedName = m.Name
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true",%q:%q}}}`,
			acting.RemoveAnnotation, acting.RemoveRequestedAnnotation, planID)
		pctx, cancel := context.WithTimeout(h.ctx, 30*time.Second)
		_, err = h.f.Admin.CoreV1().Nodes().Patch(pctx, x, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		cancel()
		if err != nil {
			t.Fatalf("annotate %s's Node for removal: %v", x, err)
		}
		h.wait(x+"'s member gone", removeTimeout, func() error {
			if _, err := h.memberOn(x); err == nil {
				return fmt.Errorf("%s still has a member", x)
			} else if !errors.Is(err, errNoMember) {
				return err
			}
			return nil
		})
		// k3s's member controller writes its bookkeeping after the
		// removal (member_controller.go:94-101).
		var n *corev1.Node
		h.wait(x+"'s Node annotated removed by k3s", time.Minute, func() error {
			var err error
			n, err = h.node(x)
			if err != nil {
				return err
			}
			if n.Annotations[removedNameAnnotation] == "" {
				return fmt.Errorf("no %s yet", removedNameAnnotation)
			}
			return nil
		})
		a := n.Annotations
		h.claim("the member controller sets removed-node-name to the removed member's name and deletes remove, node-name and node-address (member_controller.go:94-101)",
			a[removedNameAnnotation] == removedName && a[acting.RemoveAnnotation] == "" && a[nodeNameAnnotation] == "" && a[nodeAddressAnnotation] == "",
			fmt.Sprintf("annotations after the removal: removed-node-name %q (member %q), remove %q, node-name %q, node-address %q",
				a[removedNameAnnotation], removedName, a[acting.RemoveAnnotation], a[nodeNameAnnotation], a[nodeAddressAnnotation]))
		h.claim("k3s's member controller keeps fleet-role's remove-requested annotation", a[acting.RemoveRequestedAnnotation] == planID,
			fmt.Sprintf("%s is %q after the removal", acting.RemoveRequestedAnnotation, a[acting.RemoveRequestedAnnotation]))
		// What the removed server's k3s did on its own before settle
		// restarts it: it keeps running with etcd closed.
		hx := h.f.Host(x)
		h.wait(x+"'s etcd told it was removed", time.Minute, func() error {
			if _, err := os.Stat(hx.File("/var/lib/rancher/k3s/server/db/etcd/tombstone")); err != nil {
				return fmt.Errorf("no tombstone: %w", err)
			}
			return nil
		})
		exited, _ := hx.K3s().Exited()
		h.claim("a removed server's k3s writes a tombstone and stays up until restarted (daemons/executor/etcd.go:83-91)", !exited,
			x+"'s k3s exited after its removal")
		return fmt.Sprintf("member %s removed", removedName)
	})

	// settle: k3s restarts on X, control plane only.
	h.do(acting.StepSettle, func() string {
		h.restart(x, "settle-"+x)
		h.wait(x+" Ready, control-plane, no etcd label", settleTimeout, func() error {
			n, err := h.node(x)
			if err != nil {
				return err
			}
			return controlPlaneOnly(n)
		})
		n, _ := h.node(x)
		var stale string
		for _, c := range n.Status.Conditions {
			if string(c.Type) == k3sfleet.EtcdIsVoter {
				stale = fmt.Sprintf("%s/%s", c.Status, c.Reason)
			}
		}
		h.claim("a control-plane-only restart may leave the Node's EtcdIsVoter as it was (metadata_controller.go removes it with Update, not UpdateStatus) [I]",
			stale != "", x+"'s Node has no "+k3sfleet.EtcdIsVoter+" after settle")
		h.t.Logf("%s's Node after settle: %s %q (empty: none), though it holds no member", x, k3sfleet.EtcdIsVoter, stale)
		old, _ := filepath.Glob(h.f.Host(x).File("/var/lib/rancher/k3s/server/db/etcd-old-*"))
		_, errEtcd := os.Stat(h.f.Host(x).File("/var/lib/rancher/k3s/server/db/etcd"))
		h.claim("a control-plane-only restart moves db/etcd aside to db/etcd-old-<ts> (etcd.go:1743-1747)",
			len(old) == 1 && errors.Is(errEtcd, os.ErrNotExist),
			fmt.Sprintf("db/etcd-old-*: %d, db/etcd: %v", len(old), errEtcd))
		return x + " control plane only"
	})

	h.do(acting.StepDone, func() string {
		ms, err := h.members()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.IsLearner {
				t.Errorf("member %s is a learner at the end", m.Name)
			}
		}
		for _, name := range []string{first, second, s} {
			if err := h.voterCondition(name, corev1.ConditionTrue); err != nil {
				t.Errorf("at the end: %v", err)
			}
		}
		return strings.Join(h.memberHosts(), ", ")
	})
}

// unplannedRestart holds the fault the prewrite step closes: with the
// fleet at the swap's end, the former voter is admitted back (a standby
// made voter again, without a reinstall), its standby drop-in pre-written,
// and its k3s restarted unplanned (not through the swap's settle): k3s
// removes its member on the way up and does not add it again.
func (h *harness) unplannedRestart() {
	t := h.t
	o := h.watch()
	defer func() { h.judge(o.stop()) }()

	x := leaving
	before, err := h.node(x)
	if err != nil {
		t.Fatal(err)
	}
	h.writeDropIn(x, acting.DropInVoter)
	h.restart(x, "readmit-"+x)
	// A voter again by what its own k3s writes once its API server runs
	// (the node-name annotation naming its new member, the etcd label)
	// and by the leader's condition: the condition alone would not do,
	// since settle left it True on the Node while x held no member.
	staleWhileLearner := ""
	h.wait(x+" a voter again, its Node named and labelled by its k3s", admitTimeout+promoteTimeout, func() error {
		if m, err := h.memberOn(x); err == nil && m.IsLearner && staleWhileLearner == "" {
			if n, err := h.node(x); err == nil {
				for _, c := range n.Status.Conditions {
					if string(c.Type) == k3sfleet.EtcdIsVoter {
						staleWhileLearner = fmt.Sprintf("%s/%s", c.Status, c.Reason)
					}
				}
			}
		}
		if err := h.holdsVote(x); err != nil {
			return err
		}
		n, err := h.node(x)
		if err != nil {
			return err
		}
		if n.Labels[k3sfleet.EtcdLabel] != "true" {
			return fmt.Errorf("%s not labelled %s yet", x, k3sfleet.EtcdLabel)
		}
		return nil
	})
	h.t.Logf("%s's Node while its member was a learner again: %s %q", x, k3sfleet.EtcdIsVoter, staleWhileLearner)
	h.claim("EtcdIsVoter reads False/MemberIsLearner while a Node's member is a learner (etcd.go:1309-1318)",
		staleWhileLearner == "False/MemberIsLearner",
		fmt.Sprintf("a former voter admitted again read %q while a learner: what the leader wrote before it left. The leader writes the condition only on Nodes with the etcd label, which a learner's own k3s sets once its API server runs, after promotion", staleWhileLearner))
	n, err := h.node(x)
	if err != nil {
		t.Fatal(err)
	}
	h.claim("a voter swapped out comes back as a voter by dropping disable-etcd and restarting", true, "")
	h.t.Logf("%s's Node after coming back: %s %q (before: %q), %s %q", x,
		removedNameAnnotation, n.Annotations[removedNameAnnotation], before.Annotations[removedNameAnnotation],
		nodeNameAnnotation, n.Annotations[nodeNameAnnotation])
	h.claim("removed-node-name stays on a Node that rejoined under a new member name (member_controller.go:65-74: a later remove request is consumed once)",
		n.Annotations[removedNameAnnotation] != "" && n.Annotations[removedNameAnnotation] != n.Annotations[nodeNameAnnotation],
		fmt.Sprintf("removed-node-name %q, node-name %q", n.Annotations[removedNameAnnotation], n.Annotations[nodeNameAnnotation]))

	// The pre-write, then the restart nobody planned: an operator's, a
	// crash's, an upgrade's.
	h.writeDropIn(x, acting.DropInStandby)
	if l := h.leader(); l == x {
		t.Logf("%s leads when it restarts: etcd's Stop hands the leadership over first", x)
	}
	began := time.Now()
	if err := h.f.Host(x).RestartK3s(); err != nil {
		t.Fatal(err)
	}
	h.wait(x+"'s member removed by its own k3s", settleTimeout, func() error {
		if _, err := h.memberOn(x); err == nil {
			return fmt.Errorf("%s still has a member", x)
		} else if !errors.Is(err, errNoMember) {
			return err
		}
		return nil
	})
	removed := time.Since(began)
	h.wait(x+" Ready, control-plane, no etcd label", settleTimeout, func() error {
		n, err := h.node(x)
		if err != nil {
			return err
		}
		return controlPlaneOnly(n)
	})
	settled := time.Since(began)
	// And it stays out: a re-added learner would show within a tick.
	back := time.Now()
	h.wait(fmt.Sprintf("%s out of etcd for %v after it came back", x, absentHold), absentHold+time.Minute, func() error {
		if _, err := h.memberOn(x); err == nil {
			t.Fatalf("%s has a member again after its unplanned restart", x)
		} else if !errors.Is(err, errNoMember) {
			return err
		}
		if held := time.Since(back); held < absentHold {
			return fmt.Errorf("out for %v", held.Round(time.Second))
		}
		return nil
	})
	h.claim("a server restarted with disable-etcd removes its own member (RemoveSelf, cluster/cluster.go:158-161) and is not re-added", true, "")
	t.Logf("unplanned restart of %s with the standby drop-in: its member removed %.1f s after the restart began, its Node control plane only %.1f s after",
		x, removed.Seconds(), settled.Seconds())
	if ms := h.memberHosts(); !slices.Equal(ms, []string{first, second, standby}) {
		t.Errorf("etcd's members after the unplanned restart are on %v, want %s, %s and %s", ms, first, second, standby)
	}
}

// checkStandbyAtStart holds what the research notes say of a server k3s
// runs with disable-etcd: labelled control-plane, no etcd label, no
// EtcdIsVoter condition (k3s writes it only for etcd Nodes), no member.
func (h *harness) checkStandbyAtStart() {
	n, err := h.node(standby)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := controlPlaneOnly(n); err != nil {
		h.t.Errorf("the standby at the start: %v", err)
	}
	var cond string
	for _, c := range n.Status.Conditions {
		if string(c.Type) == k3sfleet.EtcdIsVoter {
			cond = fmt.Sprintf("%s/%s", c.Status, c.Reason)
		}
	}
	h.claim("a disable-etcd server's Node is labelled control-plane, has no etcd label and no EtcdIsVoter condition (etcd.go:1309-1318)",
		cond == "", standby+"'s Node has "+k3sfleet.EtcdIsVoter+" "+cond)
	if _, err := h.memberOn(standby); !errors.Is(err, errNoMember) {
		h.t.Errorf("the standby %s at the start: member lookup: %v", standby, err)
	}
}

// controlPlaneOnly says why Node n is not a Ready control-plane-only
// server, or nil.
func controlPlaneOnly(n *corev1.Node) error {
	var why []string
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		why = append(why, "not Ready")
	}
	if n.Labels[k3sfleet.ControlPlaneLabel] != "true" {
		why = append(why, "not labelled "+k3sfleet.ControlPlaneLabel)
	}
	if _, ok := n.Labels[k3sfleet.EtcdLabel]; ok {
		why = append(why, "labelled "+k3sfleet.EtcdLabel)
	}
	if len(why) > 0 {
		return fmt.Errorf("%s: %s", n.Name, strings.Join(why, ", "))
	}
	return nil
}

// do runs one step and times it.
func (h *harness) do(name acting.StepName, fn func() string) {
	h.t.Helper()
	h.t.Logf("== step %s", name)
	began := time.Now()
	note := fn()
	took := time.Since(began)
	h.steps = append(h.steps, step{name: name, took: took, note: note})
	h.t.Logf("== step %s done in %.1f s: %s", name, took.Seconds(), note)
}

// wait polls cond every 250 ms until it holds, failing the test after
// timeout.
func (h *harness) wait(what string, timeout time.Duration, cond func() error) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		for _, e := range h.f.Exited() {
			h.t.Fatalf("waiting for %s: a process of the fleet exited: %s", what, e)
		}
		select {
		case <-ctx.Done():
			h.t.Fatalf("waiting for %s (%v): %v", what, timeout, err)
		case <-tick.C:
		}
	}
}

// claim records a research-notes claim as the run saw it.
func (h *harness) claim(what string, held bool, otherwise string) {
	if held {
		h.claims = append(h.claims, "held: "+what)
		return
	}
	h.claims = append(h.claims, "FALSE: "+what+": "+otherwise)
	h.t.Logf("claim FALSE: %s: %s", what, otherwise)
}

// report prints the step times and the claims.
func (h *harness) report() {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-12s %8s  %s\n", "step", "seconds", "done when")
	for _, s := range h.steps {
		fmt.Fprintf(&b, "%-12s %8.1f  %s\n", s.name, s.took.Seconds(), s.note)
	}
	for _, r := range h.f.Restarts() {
		fmt.Fprintf(&b, "restart of %s (token %s): %.1f s from request seen to new k3s started\n", r.Host, r.Token, r.Done.Sub(r.Seen).Seconds())
	}
	for _, c := range h.claims {
		fmt.Fprintf(&b, "claim %s\n", c)
	}
	h.t.Logf("%s", b.String())
}

// observer is the quorumwatch observer of a part of the test.
type observer struct {
	h       *harness
	w       *quorumwatch.Watch
	stopped bool
}

// watch starts the observer with k3s's client certificate and the admin
// client; it is stopped at cleanup if the test ends first.
func (h *harness) watch() *observer {
	h.t.Helper()
	tlsConfig, err := h.f.EtcdTLS()
	if err != nil {
		h.t.Fatal(err)
	}
	var eps []string
	for _, name := range []string{first, second, leaving, standby} {
		eps = append(eps, "https://"+h.f.Host(name).Addr.String()+":2379")
	}
	w, err := quorumwatch.Start(h.ctx, quorumwatch.Config{Endpoints: eps, TLS: tlsConfig, Kube: h.f.AdminConfig, Logf: h.t.Logf})
	if err != nil {
		h.t.Fatal(err)
	}
	o := &observer{h: h, w: w}
	h.t.Cleanup(func() {
		if !o.stopped {
			o.stopped = true
			w.Stop(context.Background()).Log(h.t.Logf)
		}
	})
	return o
}

// stop stops the observer and prints its figures.
func (o *observer) stop() quorumwatch.Figures {
	o.stopped = true
	fig := o.w.Stop(o.h.ctx)
	o.h.t.Logf("the observer's figures:")
	fig.Log(o.h.t.Logf)
	return fig
}
