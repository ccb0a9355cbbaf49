package k3s

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/fleets/k3sfleet"
	"github.com/fleet-role/fleet-role/lab/kit/auditlog"
	"github.com/fleet-role/fleet-role/lab/kit/statuscheck"
)

// chooseTarget picks the voter the faults are put on, so that each fault
// is the one it claims to be: not the pinned server (a pinned voter is
// never named to leave); not the host the controller pod runs on (a slowed
// or frozen controller would measure itself); and not a server whose API
// server the controller talks to. That last one is k3s's own: a pod
// reaches the API through the kubernetes Service, which kube-proxy sends
// to any server's API server, and a client whose server is frozen waits
// for its connection's health check (client-go's HTTP/2 ping, about 45 s)
// before it connects again; the scenario would time that, not fleet-role.
// When no server qualifies, the controller pod is deleted so that its
// Deployment starts another, which connects afresh. When the chosen
// server leads etcd, leadership moves to the pinned server first (k3s's
// first server leads a cluster it started): a slow leader holds every
// write back, which test/mesh measures as a variant of its own.
func (s *scenario) chooseTarget(t *testing.T, ctx context.Context) string {
	t.Helper()
	for attempt := 1; attempt <= 3; attempt++ {
		// The leader: the follower decides and writes nothing.
		ctrl, err := s.leaderPod(ctx)
		if err != nil {
			t.Fatalf("the controller pod that leads: %v", err)
		}
		apis := s.controllerAPIServers(t, ctrl)
		var target string
		for _, c := range servers {
			if c != pinnedHost && c != ctrl.Spec.NodeName && !apis[c] {
				target = c
				break
			}
		}
		if target != "" {
			leader := s.etcdLeader(t, ctx)
			s.fig.target = target
			s.fig.targetWhy = fmt.Sprintf("not pinned; the controller pod runs on %s and talks to the API server of %s; etcd's leader %s",
				ctrl.Spec.NodeName, strings.Join(sortedKeys(apis), " and "), leader)
			if leader == target {
				s.moveLeader(t, ctx, leader, pinnedHost)
				s.fig.targetWhy += ", moved to " + pinnedHost
			}
			t.Logf("the faults go on %s: %s", target, s.fig.targetWhy)
			return target
		}
		t.Logf("no server qualifies (the controller pod %s runs on %s and talks to the API server of %s): deleting it for its Deployment to start another (attempt %d)",
			ctrl.Name, ctrl.Spec.NodeName, strings.Join(sortedKeys(apis), " and "), attempt)
		last, err := s.status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.fleet.Admin.CoreV1().Pods(namespace).Delete(ctx, ctrl.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err = poll(ctx, applyTimeout, func() error {
			p, err := s.leaderPod(ctx)
			if err != nil {
				return err
			}
			if p.Name == ctrl.Name {
				return fmt.Errorf("the deleted controller pod %s still leads", ctrl.Name)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The new leader's first status: until it writes, the status is
		// still the deleted leader's, and holds its date.
		first := s.waitFor(t, "the new leader's first status", baselineTimeout, func(st *status.Status) error {
			if st.Writer == nil || last.Writer != nil && st.Writer.Identity == last.Writer.Identity {
				return fmt.Errorf("the status is still the deleted leader's")
			}
			return nil
		})
		s.redate(t, last, first)
		s.waitForBaseline(t)
	}
	t.Fatalf("no server but the pinned one is free of the controller after 3 controller pods")
	return ""
}

// redate takes the voter set's date as a new leader holds it, from its
// status st, after a failover from the leader that wrote last. A leader
// that never saw the one before it renew cannot know that writer's clock,
// so it counts the status it took over as generated when it read it
// (internal/controller, previousAt): every time the decision remembers
// moves later by that status's age when read, which lengthens the
// cooldown and never shortens it. So the date may move later, by at most
// the time from last's generation to st's, and never earlier.
func (s *scenario) redate(t *testing.T, last, st *status.Status) {
	t.Helper()
	got := st.Memory.VotersChangedAt.UTC()
	moved, most := got.Sub(s.votersChangedAt), st.GeneratedAt.Sub(last.GeneratedAt)
	if moved < 0 || moved > most {
		t.Errorf("after the failover the voter set dates from %s, %v after %s; a new leader may date it later by at most %v (the status it took over, of %s, counted as generated when read, by %s)",
			got.Format(time.RFC3339Nano), moved, s.votersChangedAt.Format(time.RFC3339Nano), most,
			last.GeneratedAt.Format(time.RFC3339Nano), st.GeneratedAt.Format(time.RFC3339Nano))
		return
	}
	t.Logf("after the failover the voter set dates from %s, %v later than the leader before held it (at most %v)",
		got.Format(time.RFC3339Nano), moved, most)
	s.votersChangedAt = got
}

// controllerAPIServers names the servers whose API server served the
// controller pod ctrl's requests since it started, by their audit logs.
func (s *scenario) controllerAPIServers(t *testing.T, ctrl *corev1.Pod) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	since := ctrl.CreationTimestamp.Time
	s.readAudit(t, func(server string, e auditlog.Event) {
		// The two replicas share the ServiceAccount: the token's pod-name
		// claim tells this pod's requests from the follower's.
		pod := e.User.Extra["authentication.kubernetes.io/pod-name"]
		if e.User.Username == "system:serviceaccount:"+namespace+":"+ctrlSA && len(pod) == 1 && pod[0] == ctrl.Name && !e.StageTimestamp.Before(since) {
			out[server] = true
		}
	})
	if len(out) == 0 {
		t.Fatalf("no server's audit log shows a request of the controller since %s", since.Format(time.RFC3339))
	}
	return out
}

// etcdLeader names the server whose member leads etcd.
func (s *scenario) etcdLeader(t *testing.T, ctx context.Context) string {
	t.Helper()
	cli, err := s.fleet.Etcd()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for _, name := range servers {
		h := s.fleet.Host(name)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := cli.Status(cctx, "https://"+h.Addr.String()+":2379")
		cancel()
		if err != nil {
			continue
		}
		if st.Leader == st.Header.MemberId {
			return name
		}
	}
	t.Fatalf("no server's etcd member reports itself leader")
	return ""
}

// moveLeader moves etcd's leadership from one server's member to
// another's: only the leader takes the request.
func (s *scenario) moveLeader(t *testing.T, ctx context.Context, from, to string) {
	t.Helper()
	snap := s.snapshot(t, ctx)
	m := snap.memberOf(s.fleet.Host(to).Addr.String())
	if m == nil {
		t.Fatalf("no etcd member on %s", to)
	}
	cli, err := s.fleet.Etcd(from)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := cli.MoveLeader(cctx, m.ID); err != nil {
		t.Fatalf("move etcd's leadership from %s to %s: %v", from, to, err)
	}
	if got := s.etcdLeader(t, ctx); got != to {
		t.Fatalf("etcd's leader is %s after moving it to %s", got, to)
	}
	t.Logf("moved etcd's leadership from %s to %s", from, to)
}

// slowVoter delays every packet to and from the target and holds that the
// target is reported unfit with its swap for the standby named within the
// bound, that no decision meanwhile reports a healthy host as not
// reporting, and that every host is fit again once the delay is removed.
func (s *scenario) slowVoter(t *testing.T, target string) {
	t.Helper()
	period := s.settings.SamplePeriod
	need, bound := statuscheck.DetectBound(s.settings)
	delayed := time.Now()
	stop := s.watchDecisions(t, delayed, func(st *status.Status) {
		s.fig.slowDecisions++
		for _, h := range st.Hosts {
			if h.Name == target {
				continue
			}
			if r := statuscheck.ReasonOf(&h, status.SignalFreshness, ""); r != nil && !r.OK {
				t.Errorf("%s: %s, a healthy host, reported as not reporting while %s is delayed: %s",
					st.GeneratedAt.Format("15:04:05.000"), h.Name, target, status.Summary(*r))
			}
		}
	})
	if err := s.fleet.Lab.SetDelay(target, injected); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.fleet.Lab.SetDelay(target, 0); err != nil {
			t.Error(err)
		}
	})
	st := s.waitFor(t, "the slow voter unfit and its swap named", slowTimeout, func(st *status.Status) error {
		if h := statuscheck.HostOf(st, target); h == nil || h.Verdict != status.Unfit {
			return fmt.Errorf("%s is not unfit yet", target)
		}
		if out, in, _, ok := statuscheck.NamedSwap(st); !ok || out != target || in != standby {
			return fmt.Errorf("decision %s names no swap %s -> %s", st.Decision.Action, target, standby)
		}
		return nil
	})
	s.fig.swapAfter = st.GeneratedAt.Sub(delayed)
	s.fig.swapPeriods = statuscheck.Periods(s.fig.swapAfter, period)
	if _, _, published, _ := statuscheck.NamedSwap(st); !published {
		st = s.waitFor(t, "the swap published", slowTimeout, func(st *status.Status) error {
			if d := st.Decision; d.Action != status.ActionSwap || d.Out != target || d.In != standby {
				return fmt.Errorf("decision %s %s -> %s, want swap %s -> %s", d.Action, d.Out, d.In, target, standby)
			}
			return nil
		})
	}
	s.fig.publishedAfter = st.GeneratedAt.Sub(delayed)
	s.checkSwap(t, st, target)
	pn := settings.PercentileName(s.settings.TailPercentile)
	if s.fig.swapPeriods > bound {
		t.Errorf("the swap was named %.1f periods after the delay started, over the bound of %.0f (%d slow samples for the p%s of %d, + 3); %s",
			s.fig.swapPeriods, bound, need, pn, s.settings.Window, loadavg())
	}
	if p := statuscheck.Periods(s.fig.publishedAfter, period); p > bound {
		t.Errorf("the swap was published %.1f periods after the delay started, over the bound of %.0f; %s", p, bound, loadavg())
	}
	t.Logf("swap %s -> %s named %.1f s = %.1f periods after the delay started, published after %.1f s (bound %.0f periods)",
		target, standby, s.fig.swapAfter.Seconds(), s.fig.swapPeriods, s.fig.publishedAfter.Seconds(), bound)

	if err := s.fleet.Lab.SetDelay(target, 0); err != nil {
		t.Fatal(err)
	}
	restored := time.Now()
	stop()
	st = s.waitFor(t, "every host fit again after the delay is removed", recoverTimeout, func(st *status.Status) error {
		return statuscheck.AllFit(st, hosts, s.settings)
	})
	s.fig.slowRestore = st.GeneratedAt.Sub(restored)
}

// checkSwap holds what the status naming the swap says: the target's links
// to the other servers each over the connect limit in its reasons (its own
// measurement or the other end's, mirrored), the decision replacing it for
// them, and the standby a fit candidate.
func (s *scenario) checkSwap(t *testing.T, st *status.Status, target string) {
	t.Helper()
	logStatus(t, st)
	h := statuscheck.HostOf(st, target)
	limit := s.settings.ConnectLimit()
	var others []string
	for _, other := range servers {
		if other == target {
			continue
		}
		others = append(others, other)
		var slow *status.Reason
		for i := range h.Reasons {
			if r := &h.Reasons[i]; r.Signal == status.SignalConnect && r.Subject == other && !r.OK {
				slow = r
			}
		}
		if slow == nil {
			t.Errorf("%s has no slow link to %s in its reasons", target, other)
			continue
		}
		if slow.Value != nil && *slow.Value <= limit.Value {
			t.Errorf("%s's slow link to %s reads %v, not over %v", target, other, *slow.Value, limit.Value)
		}
		t.Logf("%s: %s (%s)", target, status.Summary(*slow), slow.Detail)
	}
	r := statuscheck.DecisionReason(st, status.StepReplace, target)
	// The links to each of others were checked slow above; the step names
	// it for being on the most of them.
	if r == nil || !r.OK || r.Code != status.CodeMostSlowLinks || r.Value == nil || *r.Value < 2 {
		t.Errorf("the decision does not replace %s for its slow links to %s: %+v", target, strings.Join(others, " and "), r)
	} else {
		t.Logf("decision: %s", r.Detail)
	}
	if c := statuscheck.DecisionReason(st, status.StepCandidate, standby); c == nil || !c.OK {
		t.Errorf("%s is not a fit candidate: %+v", standby, c)
	}
}

// pauseHold is how long the pause is held at most: three of k3s's etcd
// leader's member checks, every 15 s (k3s pkg/etcd, manageTickerTime).
const pauseHold = 45 * time.Second

// pausedVoter freezes every process of the target (k3s with its etcd, API
// server and kubelet, containerd, the probe's container) and holds that
// the controller reports its probe stale and would not act within the
// bound; then thaws it and waits for every host fit. It records what k3s
// did with the target's EtcdIsVoter condition meanwhile.
func (s *scenario) pausedVoter(t *testing.T, ctx context.Context, target string) {
	t.Helper()
	period := s.settings.SamplePeriod
	h := s.fleet.Host(target)
	stopConditions := s.watchCondition(t, ctx, target)
	paused := time.Now()
	if err := h.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Resume(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("froze %s's %d processes", target, len(h.Processes()))
	s.probeFrozen(t, ctx, target)
	st := s.waitFor(t, "the paused voter's probe reported stale and the controller would not act", pauseTimeout, func(st *status.Status) error {
		x := statuscheck.HostOf(st, target)
		if x == nil || x.Verdict != status.Unknown {
			return fmt.Errorf("%s is not unknown yet", target)
		}
		if r := statuscheck.ReasonOf(x, status.SignalFreshness, ""); r == nil || r.OK || r.Code != status.CodeEntryStale {
			return fmt.Errorf("%s's entry is not reported stale", target)
		}
		if st.Decision.Action != status.ActionNone {
			return fmt.Errorf("decision %s, want none", st.Decision.Action)
		}
		if r := statuscheck.DecisionReason(st, status.GateReported, target); r == nil || r.OK {
			return fmt.Errorf("no %s reason naming %s", status.GateReported, target)
		}
		return nil
	})
	s.fig.staleAfter = st.GeneratedAt.Sub(paused)
	s.fig.stalePeriods = statuscheck.Periods(s.fig.staleAfter, period)
	s.fig.staleReason = status.Summary(*statuscheck.DecisionReason(st, status.GateReported, target))
	for _, x := range st.Hosts {
		if r := statuscheck.ReasonOf(&x, status.SignalFreshness, ""); x.Name != target && r != nil && !r.OK {
			s.fig.alsoStale = append(s.fig.alsoStale, x.Name)
		}
	}
	logStatus(t, st)
	t.Logf("%s paused: would not act %.1f s = %.1f periods later (bound %.0f): %s",
		target, s.fig.staleAfter.Seconds(), s.fig.stalePeriods, statuscheck.StaleBound, s.fig.staleReason)
	if s.fig.stalePeriods > statuscheck.StaleBound {
		t.Errorf("the pause was reported %.1f periods after it began, over the bound of %.0f; %s", s.fig.stalePeriods, statuscheck.StaleBound, loadavg())
	}

	// The pause is held for three of the checks k3s's etcd leader makes
	// of every member each 15 s (manageTickerTime), or until k3s turns the
	// condition: its code would write False/Unhealthy for a member it
	// cannot reach, but on this release it asks its own member instead
	// (docs/k3s.md), and the scenario records what k3s did. Every decision
	// meanwhile must still say it would not act.
	stopWatch := s.watchDecisions(t, st.GeneratedAt, func(st *status.Status) {
		if st.Decision.Action != status.ActionNone {
			t.Errorf("%s: decision %s %s -> %s while %s is paused", st.GeneratedAt.Format("15:04:05.000"), st.Decision.Action, st.Decision.Out, st.Decision.In, target)
		} else if r := statuscheck.DecisionReason(st, status.GateReported, target); r == nil || r.OK {
			t.Errorf("%s: no %s reason naming %s while it is paused", st.GeneratedAt.Format("15:04:05.000"), status.GateReported, target)
		}
	})
	s.waitFor(t, fmt.Sprintf("k3s to see %s paused (%s no longer True), or %v", target, k3sfleet.EtcdIsVoter, pauseHold), pauseHold+time.Minute, func(*status.Status) error {
		if time.Since(paused) > pauseHold {
			return nil
		}
		n, err := s.fleet.Admin.CoreV1().Nodes().Get(ctx, target, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if string(c.Type) == k3sfleet.EtcdIsVoter && c.Status != corev1.ConditionTrue {
				s.fig.k3sSawPause = time.Since(paused)
				return nil
			}
		}
		return fmt.Errorf("%s's %s is still True", target, k3sfleet.EtcdIsVoter)
	})
	stopWatch()
	s.fig.pausedFor = time.Since(paused)
	if err := h.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	st = s.waitFor(t, "every host fit again after the thaw", recoverTimeout, func(st *status.Status) error {
		return statuscheck.AllFit(st, hosts, s.settings)
	})
	s.fig.resumeAfter = st.GeneratedAt.Sub(resumed)
	s.fig.pauseConditions = stopConditions()
}

// probeFrozen asks the frozen server's etcd member for its status, as
// k3s's leader does every 15 s to judge a member healthy (pkg/etcd,
// manageLearners: Status at the member's first client URL), and logs what
// it answered within 5 s.
func (s *scenario) probeFrozen(t *testing.T, ctx context.Context, target string) {
	t.Helper()
	cli, err := s.fleet.Etcd()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ml, err := cli.MemberList(cctx)
	if err != nil {
		t.Logf("etcd member list while %s is frozen: %v", target, err)
		return
	}
	for _, m := range ml.Members {
		if !strings.HasPrefix(m.Name, target+"-") {
			continue
		}
		for _, u := range m.ClientURLs {
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			began := time.Now()
			st, err := cli.Status(sctx, u)
			scancel()
			if err != nil {
				t.Logf("frozen %s's member %s (client URLs %v): Status at %s failed after %.1f s: %v", target, m.Name, m.ClientURLs, u, time.Since(began).Seconds(), err)
			} else {
				t.Logf("frozen %s's member %s (client URLs %v): Status at %s answered in %.1f s by member %x", target, m.Name, m.ClientURLs, u, time.Since(began).Seconds(), st.Header.MemberId)
			}
		}
	}
}

// watchCondition records each change of a Node's EtcdIsVoter condition
// until the returned function is called, which returns them.
func (s *scenario) watchCondition(t *testing.T, ctx context.Context, node string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(done)
		last := ""
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			n, err := s.fleet.Admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err == nil {
				for _, c := range n.Status.Conditions {
					if string(c.Type) != k3sfleet.EtcdIsVoter {
						continue
					}
					now := fmt.Sprintf("%s/%s (%q) since %s", c.Status, c.Reason, c.Message, c.LastTransitionTime.UTC().Format("15:04:05"))
					if now != last {
						last = now
						mu.Lock()
						seen = append(seen, fmt.Sprintf("+%.0f s %s", time.Since(began).Seconds(), now))
						mu.Unlock()
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	stop := func() []string {
		once.Do(func() { cancel(); <-done })
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
	t.Cleanup(func() { stop() })
	return stop
}

// relabel marks the standby ineligible as the README tells an operator to:
// its drop-in rendered again with --eligible=false, and its k3s agent
// restarted. k3s sets its node-label entries on the Node at every start,
// never removing one (pkg/agent/run.go, updateMutableLabels), so the label
// must turn from "true" to "false", written by k3s, and the controller must
// read the standby as eligible no more.
func (s *scenario) relabel(t *testing.T, ctx context.Context) {
	t.Helper()
	h := s.fleet.Host(standby)
	path := h.File(dropInDir + "/" + dropInName)
	if err := os.WriteFile(path, s.render(t, ctx, false, false), 0o644); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := h.RestartK3s(); err != nil {
		t.Fatal(err)
	}
	label := s.settings.EligibleLabel
	var manager string
	err := poll(ctx, 2*time.Minute, func() error {
		n, err := s.fleet.Admin.CoreV1().Nodes().Get(ctx, standby, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v := n.Labels[label]; v != "false" {
			return fmt.Errorf("%s's label %s=%q", standby, label, v)
		}
		for _, mf := range n.ManagedFields {
			if mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:`+label+`"`) {
				manager = mf.Manager
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after the drop-in turned %s ineligible and its k3s restarted: %v\n%s", standby, err, h.K3s().Tail(20))
	}
	s.fig.relabelled = time.Since(restarted)
	t.Logf("%s: k3s set %s=false %.1f s after it was restarted (field manager %q)", standby, label, s.fig.relabelled.Seconds(), manager)
	st := s.waitFor(t, "the controller to read the standby ineligible", slowTimeout, func(st *status.Status) error {
		x := statuscheck.HostOf(st, standby)
		if x != nil && (x.Eligible || x.Role != status.RoleOther) {
			return fmt.Errorf("%s reads role %s, eligible %v", standby, x.Role, x.Eligible)
		}
		if c := statuscheck.DecisionReason(st, status.StepCandidate, standby); c != nil && c.OK {
			return fmt.Errorf("%s is still a fit candidate", standby)
		}
		return nil
	})
	if x := statuscheck.HostOf(st, standby); x != nil {
		t.Logf("the controller reads %s as role %s, eligible %v, %.1f s after the restart", standby, x.Role, x.Eligible, st.GeneratedAt.Sub(restarted).Seconds())
	} else {
		t.Logf("the controller lists %s no more, %.1f s after the restart", standby, st.GeneratedAt.Sub(restarted).Seconds())
	}
}

// loadavg is the machine's load as /proc/loadavg gives it, for a timing
// failure's message: the scenario judges real latencies and is meant to
// run alone (hack/timed-tests.sh), and a healthy link read slow on a busy
// machine holds the attribution rule back.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return fmt.Sprintf("load average unknown (%v)", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "load average unknown"
	}
	return fmt.Sprintf("load average %s %s %s on %d cores (1, 5, 15 minutes)", f[0], f[1], f[2], runtime.NumCPU())
}
