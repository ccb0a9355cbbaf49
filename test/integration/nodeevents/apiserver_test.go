package nodeevents

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/nodeevents"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// On a real API server with deploy/fleet-role.yaml applied, the controller's
// ServiceAccount records an Event on a Node whose verdict changed, and
// `kubectl describe node` shows it: in namespace default, where the API
// server admits an Event on a Node and describe looks, its repeat counted
// by the recorder rather than written again.
func TestDescribeNodeShowsTheEvents(t *testing.T) {
	c := testkit.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var nodes []corev1.Node
	for _, name := range []string{"voter-1", "voter-2", "voter-3"} {
		n, err := c.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, *n)
	}
	sink, err := c.Client(t, testkit.ControllerSA).EventSink()
	if err != nil {
		t.Fatal(err)
	}
	r := nodeevents.Start(sink, kube.EventComponent, nil, nil)
	defer r.Stop()
	prev := statusOf(none, host("voter-1", status.RoleVoter, status.Fit), host("voter-2", status.RoleVoter, status.Fit), host("voter-3", status.RoleVoter, status.Fit))
	cur := statusOf(held(status.CodeCooldownRunning, "the voter set changed 5m ago"), host("voter-1", status.RoleVoter, status.Fit), host("voter-2", status.RoleVoter, status.Unfit), unknownHost("voter-3"))
	r.Observe(prev, cur, nodes)

	kubectl, kc := testenv.Kubectl(t), c.Kubeconfig(t, "")
	describe := func() (string, error) {
		out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kc, "describe", "node", "voter-2").CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("kubectl describe node voter-2: %v\n%s", err, out)
		}
		_, events, ok := strings.Cut(string(out), "\nEvents:")
		if !ok {
			return "", fmt.Errorf("no Events section:\n%s", out)
		}
		return events, nil
	}
	want := []string{"Warning", nodeevents.ReasonSwapHeld, "fleet-role-controller",
		"fleet-role would swap no voter: step gate_cooldown holds it back: the voter set changed 5m ago; fleet-role judges this voter unfit (was fit): peer_rtt voter-1: 401.4ms, must be at most 100ms"}
	var events string
	testkit.Eventually(t, time.Minute, func() (err error) {
		if events, err = describe(); err != nil {
			return err
		}
		// describe wraps nothing but may pad columns: compare words.
		flat := strings.Join(strings.Fields(events), " ")
		for _, w := range want {
			if !strings.Contains(flat, w) {
				return fmt.Errorf("kubectl describe node voter-2 lacks %q in its Events:%s", w, events)
			}
		}
		return nil
	})
	t.Logf("kubectl describe node voter-2, Events:%s", events)

	// The same change recorded again: the recorder counts it on the same
	// Event (describe says x2) rather than writing a second.
	r.Observe(prev, cur, nodes)
	testkit.Eventually(t, time.Minute, func() (err error) {
		if events, err = describe(); err != nil {
			return err
		}
		if !strings.Contains(events, "(x2 over") {
			return fmt.Errorf("the repeat is not counted on the Event:%s", events)
		}
		return nil
	})
	list, err := c.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=voter-2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Count != 2 || list.Items[0].InvolvedObject.UID != nodes[1].UID || list.Items[0].Source.Component != "fleet-role-controller" {
		t.Fatalf("events on voter-2 in namespace default: %+v, want one counted twice, on the Node's UID", list.Items)
	}
	// voter-3's reason carries a record's hostile text: the API server
	// holds it escaped, and describe prints no control character of it.
	testkit.Eventually(t, time.Minute, func() error {
		l, err := c.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=voter-3"})
		if err != nil {
			return err
		}
		if len(l.Items) != 1 {
			return fmt.Errorf("%d events on voter-3, want 1", len(l.Items))
		}
		if m, want := l.Items[0].Message, status.Printable(hostile); !strings.Contains(m, want) || strings.ContainsAny(m, "\x1b\n\u202e") {
			return fmt.Errorf("the event on voter-3 holds %q, want the text escaped as %q", m, want)
		}
		return nil
	})
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", kc, "describe", "node", "voter-3").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl describe node voter-3: %v\n%s", err, out)
	}
	if _, ev, _ := strings.Cut(string(out), "\nEvents:"); !strings.Contains(ev, `\x1b[2J\nNormal`) || strings.ContainsAny(ev, "\x1b\u202e") || strings.Contains(ev, "\nNormal  Fit  node/voter-9") {
		t.Errorf("kubectl describe node voter-3 prints the record's text unescaped, or not at all:%s", ev)
	}

	// voter-1 did not change: nothing on it.
	if others, err := c.Admin.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=voter-1"}); err != nil || len(others.Items) != 0 {
		t.Fatalf("events on voter-1: %v %v, want none", others, err)
	}
}
