package controller

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
)

// On the real API server with the install's RBAC: a status ConfigMap
// deleted under a leader is made anew by it, with its labels and a decision
// newer than the last, by a server-side apply that RBAC grants by name; the
// controller's token may not create it, or any other ConfigMap, by a POST. A
// leader whose term starts with the status gone makes it too.
func TestDeletedStatusIsMadeAnew(t *testing.T) {
	c := testkit.Start(t)
	s := testkit.Settings(t, 200*time.Millisecond)
	c.AddNodes(t, testkit.Node{Name: "server-1", Voter: true, Eligible: true, Address: "127.0.14.1"})
	startProbe(t, c, s, "server-1", &testkit.Sampler{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := controller.Election{Namespace: s.Namespace, Name: controller.LeaseName,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond}

	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig(t, testkit.ControllerSA))
	if err != nil {
		t.Fatal(err)
	}
	asController, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := c.Admin.CoreV1().ConfigMaps(s.Namespace)
	deleteStatus := func() time.Time {
		t.Helper()
		if err := cms.Delete(ctx, s.StatusConfigMap, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete the status: %v", err)
		}
		return time.Now()
	}
	// remade waits for the status to be back, made by the controller, with
	// a decision generated after since.
	remade := func(since time.Time, what string) {
		t.Helper()
		var cm *corev1.ConfigMap
		testkit.Eventually(t, time.Minute, func() error {
			var err error
			if cm, err = cms.Get(ctx, s.StatusConfigMap, metav1.GetOptions{}); err != nil {
				return err
			}
			st, err := status.UnmarshalStatus([]byte(cm.Data[status.StatusKey]))
			if err != nil {
				return fmt.Errorf("the status made anew: %w", err)
			}
			if !st.GeneratedAt.After(since) || st.Writer == nil || st.Writer.Identity != "a" {
				return fmt.Errorf("the status holds a decision of %s by %+v, want one by a after %s", st.GeneratedAt, st.Writer, since)
			}
			return nil
		})
		if !maps.Equal(cm.Labels, kube.StatusLabels()) || len(cm.Data) != 1 {
			t.Errorf("the status made anew carries labels %v and %d keys, want the install's %v and status.json alone", cm.Labels, len(cm.Data), kube.StatusLabels())
		}
		t.Logf("%s: the status was made anew %.2f s later, as resourceVersion %s", what, time.Since(since).Seconds(), cm.ResourceVersion)
	}

	// Gone before the term starts.
	gone := deleteStatus()
	// A POST create carries no name for RBAC to match: refused, for the
	// status as for any other ConfigMap of the namespace.
	for _, name := range []string{s.StatusConfigMap, "not-the-status"} {
		_, err := asController.CoreV1().ConfigMaps(s.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("the controller's token creates ConfigMap %s by a POST: %v, want forbidden", name, err)
		}
	}
	r := startReplica(t, c, s, e, "a", false, nil)
	remade(gone, "deleted before the term")
	if err := r.leads(t); err != nil {
		t.Error(err)
	}

	// Gone in the middle of a term.
	gone = deleteStatus()
	remade(gone, "deleted while a led")
	if err := readyErr(r.ctrl); err != nil {
		t.Errorf("the leader is not ready after it made the status anew: %v", err)
	}
}
