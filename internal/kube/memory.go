package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// MemConfigMaps is an in-memory ConfigMaps with the API server's semantics:
// a missing ConfigMap is ErrNotFound, a key must be a valid ConfigMap key, a
// write that would take the data past MaxConfigMapDataBytes is refused and
// leaves the data as it was. Safe for concurrent use.
type MemConfigMaps struct {
	mu   sync.Mutex
	maps map[string]map[string]string
}

// NewMemConfigMaps returns an empty store: no ConfigMap exists until Create.
func NewMemConfigMaps() *MemConfigMaps {
	return &MemConfigMaps{maps: map[string]map[string]string{}}
}

// Create makes ConfigMap name with a copy of data, as `kubectl apply` of the
// manifests does at install. It refuses a name that exists, and data the
// server would refuse.
func (m *MemConfigMaps) Create(name string, data map[string]string) error {
	cp := make(map[string]string, len(data))
	for k, v := range data {
		cp[k] = v
	}
	if err := validateData(name, cp); err != nil {
		return fmt.Errorf("create configmap %s: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.maps[name]; ok {
		return fmt.Errorf("create configmap %s: already exists", name)
	}
	m.maps[name] = cp
	return nil
}

// Get implements ConfigMaps.
func (m *MemConfigMaps) Get(ctx context.Context, name string) (map[string]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get configmap %s: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.maps[name]
	if !ok {
		return nil, fmt.Errorf("get configmap %s: %w", name, notFound(name))
	}
	cp := make(map[string]string, len(data))
	for k, v := range data {
		cp[k] = v
	}
	return cp, nil
}

// PatchKey implements ConfigMaps.
func (m *MemConfigMaps) PatchKey(ctx context.Context, name, key string, value *string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("patch configmap %s key %s: %w", name, key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.maps[name]
	if !ok {
		return fmt.Errorf("patch configmap %s key %s: %w", name, key, notFound(name))
	}
	// Like the server, validate the object the patch would produce, and
	// keep the old one when it is refused.
	next := make(map[string]string, len(data)+1)
	for k, v := range data {
		next[k] = v
	}
	if value == nil {
		delete(next, key)
	} else {
		next[key] = *value
	}
	if err := validateData(name, next); err != nil {
		return fmt.Errorf("patch configmap %s key %s: %w", name, key, err)
	}
	m.maps[name] = next
	return nil
}

func notFound(name string) error {
	return fmt.Errorf("%w: configmaps %q not found", ErrNotFound, name)
}

// validateData checks what the API server's ValidateConfigMap checks of the
// data, with errors worded as the server words them.
func validateData(name string, data map[string]string) error {
	var bad []string
	size := 0
	for k, v := range data {
		for _, msg := range validation.IsConfigMapKey(k) {
			bad = append(bad, fmt.Sprintf("data[%s]: Invalid value: %q: %s", k, k, msg))
		}
		size += len(v)
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("%w: ConfigMap %q is invalid: %s", ErrInvalid, name, strings.Join(bad, ", "))
	}
	if size > MaxConfigMapDataBytes {
		return fmt.Errorf("%w: ConfigMap %q is invalid: []: Too long: may not be more than %d bytes (the data would hold %d)",
			ErrTooLarge, name, MaxConfigMapDataBytes, size)
	}
	return nil
}

// MemNodes is an in-memory Nodes; Set replaces the whole list. Safe for
// concurrent use.
type MemNodes struct {
	mu    sync.Mutex
	nodes []corev1.Node
}

// Set replaces the Nodes with copies of nodes.
func (n *MemNodes) Set(nodes ...corev1.Node) {
	cp := make([]corev1.Node, len(nodes))
	for i := range nodes {
		nodes[i].DeepCopyInto(&cp[i])
	}
	n.mu.Lock()
	n.nodes = cp
	n.mu.Unlock()
}

// List implements Nodes: copies, sorted by name as the API server returns them.
func (n *MemNodes) List(ctx context.Context) ([]corev1.Node, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]corev1.Node, len(n.nodes))
	for i := range n.nodes {
		n.nodes[i].DeepCopyInto(&out[i])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Interface checks.
var (
	_ ConfigMaps = (*MemConfigMaps)(nil)
	_ Nodes      = (*MemNodes)(nil)
	_ ConfigMaps = (*clientConfigMaps)(nil)
	_ Nodes      = clientNodes{}
)
