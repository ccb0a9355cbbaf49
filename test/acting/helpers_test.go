package acting

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/lab/fleets/k3sfleet"
	"github.com/fleet-role/fleet-role/lab/kit/quorumwatch"
)

// errNoMember: the host has no etcd member.
var errNoMember = errors.New("no etcd member")

// members is etcd's member list, read through any voter.
func (h *harness) members() ([]*pb.Member, error) {
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	ml, err := h.etcd.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd's member list: %w", err)
	}
	return ml.Members, nil
}

// memberOn is host name's member, or errNoMember.
func (h *harness) memberOn(name string) (*pb.Member, error) {
	ms, err := h.members()
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if k3sfleet.MemberOn(m, h.f.Host(name)) {
			return m, nil
		}
	}
	return nil, fmt.Errorf("%s: %w", name, errNoMember)
}

// memberHosts names the hosts that hold a member, sorted; a member on no
// host of the fleet fails the test.
func (h *harness) memberHosts() []string {
	h.t.Helper()
	ms, err := h.members()
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		found := false
		for _, host := range h.f.Hosts {
			if k3sfleet.MemberOn(m, host) {
				out = append(out, host.Name)
				found = true
			}
		}
		if !found {
			h.t.Fatalf("etcd member %s (%x, peers %v) is on no host of the fleet", m.Name, m.ID, m.PeerURLs)
		}
	}
	slices.Sort(out)
	return out
}

// leader names the host whose member leads, by the members' own statuses.
func (h *harness) leader() string {
	h.t.Helper()
	var name string
	h.wait("a member that reports itself leader", leaderTimeout, func() error {
		ms, err := h.members()
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.IsLearner || len(m.ClientURLs) == 0 {
				continue
			}
			ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
			st, err := h.etcd.Status(ctx, m.ClientURLs[0])
			cancel()
			if err != nil || st.Leader != st.Header.MemberId {
				continue
			}
			for _, host := range h.f.Hosts {
				if k3sfleet.MemberOn(m, host) {
					name = host.Name
					return nil
				}
			}
		}
		return errors.New("no member reports itself leader")
	})
	return name
}

// moveLeader moves etcd's leadership from host from's member to host
// to's, with MoveLeader on from's own member (only the leader takes it), as
// the actuator on from does, and waits until to leads.
func (h *harness) moveLeader(from, to string) {
	h.t.Helper()
	m, err := h.memberOn(to)
	if err != nil {
		h.t.Fatal(err)
	}
	cli, err := h.f.Etcd(from)
	if err != nil {
		h.t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
	defer cancel()
	began := time.Now()
	if _, err := cli.MoveLeader(ctx, m.ID); err != nil {
		h.t.Fatalf("move etcd's leadership from %s to %s: %v", from, to, err)
	}
	h.wait(to+" leading", leaderTimeout, func() error {
		if l := h.leader(); l != to {
			return fmt.Errorf("%s leads", l)
		}
		return nil
	})
	h.t.Logf("moved etcd's leadership from %s to %s in %.2f s", from, to, time.Since(began).Seconds())
}

// node is the Node named name.
func (h *harness) node(name string) (*corev1.Node, error) {
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	n, err := h.f.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("Node %s: %w", name, err)
	}
	return n, nil
}

// voterCondition says why Node name's EtcdIsVoter condition is not
// status, or nil.
func (h *harness) voterCondition(name string, status corev1.ConditionStatus) error {
	n, err := h.node(name)
	if err != nil {
		return err
	}
	for _, c := range n.Status.Conditions {
		if string(c.Type) == k3sfleet.EtcdIsVoter {
			if c.Status != status {
				return fmt.Errorf("%s's %s is %s/%s", name, k3sfleet.EtcdIsVoter, c.Status, c.Reason)
			}
			return nil
		}
	}
	return fmt.Errorf("%s's Node has no %s condition", name, k3sfleet.EtcdIsVoter)
}

// holdsVote says why host name does not hold its vote now, or nil: its
// member a voter that reports a leader, its Node named by k3s and its
// EtcdIsVoter condition True.
func (h *harness) holdsVote(name string) error {
	m, err := h.memberOn(name)
	if err != nil {
		return err
	}
	if m.IsLearner {
		return fmt.Errorf("%s is a learner", m.Name)
	}
	if len(m.ClientURLs) == 0 {
		return fmt.Errorf("%s has no client URL", m.Name)
	}
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	st, err := h.etcd.Status(ctx, m.ClientURLs[0])
	cancel()
	if err != nil {
		return fmt.Errorf("%s's status: %w", m.Name, err)
	}
	if st.Leader == 0 {
		return fmt.Errorf("%s reports no leader", m.Name)
	}
	n, err := h.node(name)
	if err != nil {
		return err
	}
	if n.Annotations[nodeNameAnnotation] != m.Name {
		return fmt.Errorf("%s's Node is annotated %s %q, its member is %s", name, nodeNameAnnotation, n.Annotations[nodeNameAnnotation], m.Name)
	}
	return h.voterCondition(name, corev1.ConditionTrue)
}

// writeDropIn writes fleet-role's drop-in on host name as the actuator
// does: the whole file, through a temporary file renamed over it.
func (h *harness) writeDropIn(name, text string) {
	h.t.Helper()
	path := h.f.Host(name).File(acting.DropInPath)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := writeFile(path, text); err != nil {
		h.t.Fatalf("write %s on %s: %v", acting.DropInPath, name, err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != text {
		h.t.Fatalf("%s on %s reads %q (%v), want %q", acting.DropInPath, name, b, err, text)
	}
	h.t.Logf("%s: %s now says %q", name, acting.DropInPath, text)
}

// writeFile writes text to path through a temporary file in the same
// directory renamed over it: k3s reading its drop-ins at a start sees the
// old text or the new, never half.
func writeFile(path, text string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing to remove
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// restart asks the lab for a k3s restart on host name through the restart
// protocol (k3sfleet.RestartRequestFile), as internal/actuator's file
// restarter does, and waits for the done token.
func (h *harness) restart(name, token string) {
	h.t.Helper()
	host := h.f.Host(name)
	req := host.File(filepath.Join(k3sfleet.LabDir, k3sfleet.RestartRequestFile))
	done := host.File(filepath.Join(k3sfleet.LabDir, k3sfleet.RestartDoneFile))
	if err := k3sfleet.WriteToken(req, token); err != nil {
		h.t.Fatalf("request a k3s restart on %s: %v", name, err)
	}
	h.wait(name+"'s k3s restarted (token "+token+")", restartTimeout, func() error {
		b, err := os.ReadFile(done)
		if err != nil {
			return err
		}
		if got := string(b); got != token+"\n" {
			return fmt.Errorf("done token %q", got)
		}
		return nil
	})
}

// judge holds the observer's figures to the design's invariants.
func (h *harness) judge(fig quorumwatch.Figures) {
	t := h.t
	t.Helper()
	if fig.Acked == 0 {
		t.Errorf("the observer's writer had no write acknowledged")
	}
	if fig.Lost > 0 {
		t.Errorf("%d acknowledged writes lost (last acknowledged %d, read back %d)", fig.Lost, fig.LastAcked, fig.ReadBack)
	}
	if fig.ReadBack < fig.LastAcked {
		t.Errorf("the writer's ConfigMap read back %d, below the last acknowledged %d", fig.ReadBack, fig.LastAcked)
	}
	if fig.MaxLearners > 1 {
		t.Errorf("%d learners at once", fig.MaxLearners)
	}
	if fig.MaxInFlight > 1 {
		t.Errorf("%d membership changes in flight at once", fig.MaxInFlight)
	}
	if fig.RemovesBesideLearner > 0 {
		t.Errorf("%d removals beside a learner", fig.RemovesBesideLearner)
	}
	if fig.LongestLeaderless > electionTimeout {
		t.Errorf("fewer than a quorum of voters reported a leader for %.0f ms, longer than one election timeout (%v, k3s's)",
			float64(fig.LongestLeaderless)/float64(time.Millisecond), electionTimeout)
	}
	if fig.Samples == 0 || fig.LongestGap > 5*time.Second {
		t.Errorf("the observer sampled %d times with a longest gap of %v: it did not watch throughout", fig.Samples, fig.LongestGap)
	}
}
