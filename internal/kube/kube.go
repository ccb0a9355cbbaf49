// Package kube holds fleet-role's Kubernetes adapters: the small interfaces
// the probe, the controller and the demo use (ConfigMaps, Records and
// RecordSource, Nodes) and their client-go implementation, over a core/v1
// client of its own (core.go) and informers for the records and the Nodes.
// Their in-memory doubles, with the API server's semantics that matter
// here, are in lab/kit/kubefake, outside the product.
package kube

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
)

// Errors the implementations return (the client-go one here, the doubles of
// lab/kit/kubefake), tested with errors.Is. The client-go implementation wraps
// the API server's own error as well, so apierrors' predicates (IsNotFound,
// IsInvalid, IsForbidden) keep working on it.
var (
	// ErrNotFound: the ConfigMap does not exist.
	ErrNotFound = errors.New("not found")
	// ErrTooLarge: the write would take the ConfigMap's data past the 1 MiB
	// a ConfigMap holds, or the request past the server's body limit
	// (docs/facts.md, "Kubernetes limits").
	ErrTooLarge = errors.New("too large")
	// ErrInvalid: the server refused the write for another reason, such as
	// a key that is not a valid ConfigMap key.
	ErrInvalid = errors.New("invalid")
	// ErrForbidden: RBAC or an admission policy refused the request.
	ErrForbidden = errors.New("forbidden")
)

// IsRefused reports whether the API server refused a write for what it
// holds or who made it (too large, invalid, forbidden), rather than failing
// to take it (unreachable, timed out): sending the same write again will be
// refused again.
func IsRefused(err error) bool {
	return errors.Is(err, ErrTooLarge) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrForbidden)
}

// ConfigMaps reads and writes the data of ConfigMaps in one namespace.
type ConfigMaps interface {
	// Get returns a copy of the ConfigMap's data (never nil); an error
	// wrapping ErrNotFound when the ConfigMap does not exist.
	Get(ctx context.Context, name string) (map[string]string, error)
	// PatchKey sets data[key] to *value, or removes the key when value is
	// nil, with a JSON merge patch {"data":{key:value}} and no
	// resourceVersion: it changes only that key, so writers of different
	// keys never conflict (docs/facts.md, "Kubernetes limits"). Removing a key
	// that is absent succeeds. The ConfigMap must exist (ErrNotFound).
	PatchKey(ctx context.Context, name, key string, value *string) error
}

// Nodes lists the cluster's Nodes.
type Nodes interface {
	List(ctx context.Context) ([]corev1.Node, error)
}

// Interface checks.
var (
	_ ConfigMaps = (*clientConfigMaps)(nil)
	_ Nodes      = clientNodes{}
)
