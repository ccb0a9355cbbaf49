package pods

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/statuspage"
)

// checkPage holds that the Service fleet-role reaches the leader's status
// page through the API server's service proxy (the path docs/operators.md
// gives for kubectl proxy): its Endpoints, which the install makes empty,
// name the Pod that holds the Lease, and the page answers 200, which only
// a leader's does. The leader's Pod deleted, the next leader's page is
// reached within the Lease's release and a retry period or two.
func (s *scenario) checkPage(t *testing.T, ctx context.Context) {
	first := s.pageOf(t, ctx, "")
	t0 := time.Now()
	if err := s.c.Admin.CoreV1().Pods(namespace).Delete(ctx, first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next := s.pageOf(t, ctx, first)
	t.Logf("the leader's Pod %s deleted: the Service reached %s's page %.1f s later", first, next, time.Since(t0).Seconds())
}

// pageOf waits for the Service's Endpoints to name a Pod other than not
// that holds the Lease, and for its page to answer 200 through the
// Service, and returns the Pod's name.
func (s *scenario) pageOf(t *testing.T, ctx context.Context, not string) string {
	t.Helper()
	var pod string
	err := poll(ctx, podsTimeout, func() error {
		ep, err := s.c.Admin.CoreV1().Endpoints(namespace).Get(ctx, "fleet-role", metav1.GetOptions{})
		if err != nil {
			return err
		}
		named := kube.PageAddressOf(ep).Pod
		if named == "" {
			return fmt.Errorf("the Service's Endpoints name no one Pod: %+v", ep.Subsets)
		}
		if named == not {
			return fmt.Errorf("the Service's Endpoints still name %s", not)
		}
		lease, err := s.c.Admin.CoordinationV1().Leases(namespace).Get(ctx, controller.LeaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		// The holder's identity is its Pod's name and a suffix.
		if h := lease.Spec.HolderIdentity; h == nil || !strings.HasPrefix(*h, named+"_") {
			return fmt.Errorf("the Endpoints name %s, the Lease's holder is %v", named, lease.Spec.HolderIdentity)
		}
		body, err := s.c.Admin.CoreV1().Services(namespace).ProxyGet("http", "fleet-role", kube.PagePortName, statuspage.Path, nil).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("GET %s through the Service: %w (%.200s)", statuspage.Path, err, body)
		}
		if !bytes.Contains(body, []byte("<html")) {
			return fmt.Errorf("the page through the Service is no HTML page: %.200s", body)
		}
		pod = named
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}
