package kube

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// The Service fleet-role reaches the status page of the controller that
// leads. Its replicas are alike to a selector, and a follower must stay
// Ready (the Deployment's roll waits for it), so the Service has no
// selector: the leader writes its own Pod's address into the Service's
// Endpoints at the start of each term, and takes it out when it stops and
// gives the Lease up. The API server's service proxy (kubectl proxy)
// reads v1 Endpoints, and kube-controller-manager mirrors those of a
// Service without a selector into EndpointSlices for kube-proxy; so the
// controller writes v1 Endpoints, deprecated for reading since Kubernetes
// 1.33 but still what both read from.

// PagePortName names the page's port in the Service and its Endpoints,
// which must agree.
const PagePortName = "http"

// PageAddress is where a controller serves its page: its Pod (namespace and
// name), the Pod's IP and the port. The zero PageAddress is none.
type PageAddress struct {
	Namespace, Pod string
	IP             string
	Port           int32
}

// IsZero is whether a names no address.
func (a PageAddress) IsZero() bool { return a == PageAddress{} }

// PageEndpoints reads and writes the Endpoints of the Service that reaches
// the leader's page.
type PageEndpoints interface {
	// Get returns the address the Endpoints name (zero when none) and
	// their resourceVersion; an error wrapping ErrNotFound when there are
	// none.
	Get(ctx context.Context, name string) (PageAddress, string, error)
	// Set makes the Endpoints name a (none when a is zero): made when rv
	// is empty, else only when their resourceVersion is still rv (an
	// error wrapping ErrConflict otherwise).
	Set(ctx context.Context, name string, a PageAddress, rv string) (string, error)
}

// PageEndpoints returns the Endpoints of namespace's Services.
func (c *Client) PageEndpoints(namespace string) (PageEndpoints, error) {
	cfg := rest.CopyConfig(c.cfg)
	// Every call to v1 Endpoints is answered with the API server's warning
	// that they are deprecated: said once here, not once a term in the log.
	cfg.WarningHandler = rest.NoWarnings{}
	rc, err := newCoreREST(cfg)
	if err != nil {
		return nil, err
	}
	return &clientEndpoints{ns: namespace, c: newTyped("endpoints", rc, coreParams, namespace,
		func() *corev1.Endpoints { return &corev1.Endpoints{} }, func() *corev1.EndpointsList { return &corev1.EndpointsList{} })}, nil
}

type clientEndpoints struct {
	ns string
	c  *typed[*corev1.Endpoints, *corev1.EndpointsList]
}

func (e *clientEndpoints) Get(ctx context.Context, name string) (PageAddress, string, error) {
	o, err := e.c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return PageAddress{}, "", fmt.Errorf("get endpoints %s/%s: %w", e.ns, name, classify(err))
	}
	return PageAddressOf(o), o.ResourceVersion, nil
}

// Set applies the Endpoints server-side: a create of that name when they
// are absent (rv empty), which RBAC grants by name, as it cannot grant a
// POST create; else conditioned on rv, which an apply takes as a
// precondition. The install makes none, so that applying it prints no
// warning of the deprecated kind.
func (e *clientEndpoints) Set(ctx context.Context, name string, a PageAddress, rv string) (string, error) {
	meta := map[string]any{"name": name, "namespace": e.ns, "labels": map[string]string{
		"app.kubernetes.io/name": "fleet-role", "app.kubernetes.io/part-of": "fleet-role"}}
	if rv != "" {
		meta["resourceVersion"] = rv
	}
	obj := map[string]any{"apiVersion": "v1", "kind": "Endpoints", "metadata": meta}
	if subsets := subsetsOf(a); subsets != nil {
		obj["subsets"] = subsets // left out, the subsets this manager applied before are removed
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("encode endpoints %s/%s: %w", e.ns, name, err)
	}
	force := true
	o, err := e.c.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
	if apierrors.IsConflict(err) {
		return "", fmt.Errorf("set endpoints %s/%s at %q: %w: %w", e.ns, name, rv, ErrConflict, err)
	}
	if err != nil {
		return "", fmt.Errorf("set endpoints %s/%s: %w", e.ns, name, classify(err))
	}
	return o.ResourceVersion, nil
}

// subsetsOf is a's one address and port, with the Pod it belongs to (the
// API server's proxy checks that the Pod holds that IP); nil when a is
// zero.
func subsetsOf(a PageAddress) []corev1.EndpointSubset {
	if a.IsZero() {
		return nil
	}
	return []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: a.IP,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: a.Namespace, Name: a.Pod}}},
		Ports: []corev1.EndpointPort{{Name: PagePortName, Port: a.Port, Protocol: corev1.ProtocolTCP}},
	}}
}

// PageAddressOf is the address o names when it names one ready address on
// one port named PagePortName, as the leader writes it; zero for anything
// else.
func PageAddressOf(o *corev1.Endpoints) PageAddress {
	if len(o.Subsets) != 1 || len(o.Subsets[0].Addresses) != 1 || len(o.Subsets[0].Ports) != 1 || o.Subsets[0].Ports[0].Name != PagePortName {
		return PageAddress{}
	}
	addr, port := o.Subsets[0].Addresses[0], o.Subsets[0].Ports[0]
	a := PageAddress{IP: addr.IP, Port: port.Port}
	if r := addr.TargetRef; r != nil && r.Kind == "Pod" {
		a.Namespace, a.Pod = r.Namespace, r.Name
	}
	return a
}
