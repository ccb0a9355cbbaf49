// Package kubefake holds in-memory doubles of internal/kube's interfaces
// (ConfigMaps, Records and RecordSource, Nodes) with the API server's
// semantics that matter to fleet-role, and wrappers that count a store's
// calls, for the loops' tests, the demo and the bench. internal/kube's tests
// run the same cases against these doubles and a real kube-apiserver, which
// must agree.
//
// It lives in lab, outside the product: cmd/fleet-role's dependency test
// holds the fleet-role binary to never linking it.
package kubefake

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/record"
)

// MaxDataBytes is the most data the API server lets a ConfigMap hold: the
// sum of the lengths of its values, not its keys (docs/facts.md,
// "Kubernetes limits": 1 MiB; ValidateConfigMap counts values).
const MaxDataBytes = 1 << 20

// ConfigMaps is an in-memory kube.ConfigMaps with the API server's
// semantics: a missing ConfigMap is kube.ErrNotFound, a key must be a valid
// ConfigMap key, a write that would take the data past MaxDataBytes is
// refused and leaves the data as it was. Safe for concurrent use.
type ConfigMaps struct {
	mu   sync.Mutex
	maps map[string]map[string]string
}

// NewConfigMaps returns an empty store: no ConfigMap exists until Create.
func NewConfigMaps() *ConfigMaps {
	return &ConfigMaps{maps: map[string]map[string]string{}}
}

// Create makes ConfigMap name with a copy of data, as `kubectl apply` of the
// manifests does at install. It refuses a name that exists, and data the
// server would refuse.
func (m *ConfigMaps) Create(name string, data map[string]string) error {
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

// Get implements kube.ConfigMaps.
func (m *ConfigMaps) Get(ctx context.Context, name string) (map[string]string, error) {
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

// PatchKey implements kube.ConfigMaps.
func (m *ConfigMaps) PatchKey(ctx context.Context, name, key string, value *string) error {
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
	return fmt.Errorf("%w: configmaps %q not found", kube.ErrNotFound, name)
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
		return fmt.Errorf("%w: ConfigMap %q is invalid: %s", kube.ErrInvalid, name, strings.Join(bad, ", "))
	}
	if size > MaxDataBytes {
		return fmt.Errorf("%w: ConfigMap %q is invalid: []: Too long: may not be more than %d bytes (the data would hold %d)",
			kube.ErrTooLarge, name, MaxDataBytes, size)
	}
	return nil
}

// Nodes is an in-memory kube.Nodes; Set replaces the whole list. Safe for
// concurrent use.
type Nodes struct {
	mu    sync.Mutex
	nodes []corev1.Node
}

// Set replaces the Nodes with copies of nodes.
func (n *Nodes) Set(nodes ...corev1.Node) {
	cp := make([]corev1.Node, len(nodes))
	for i := range nodes {
		nodes[i].DeepCopyInto(&cp[i])
	}
	n.mu.Lock()
	n.nodes = cp
	n.mu.Unlock()
}

// List implements kube.Nodes: copies, sorted by name as the API server
// returns them.
func (n *Nodes) List(ctx context.Context) ([]corev1.Node, error) {
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

// Records is an in-memory kube.Records and kube.RecordSource with the API
// server's semantics that matter here: a record is refused past
// MaxDataBytes and leaves the old one as it was. Safe for concurrent use.
type Records struct {
	mu        sync.Mutex
	namespace string
	maps      map[string]*corev1.ConfigMap
}

// NewRecords returns an empty store for namespace.
func NewRecords(namespace string) *Records {
	return &Records{namespace: namespace, maps: map[string]*corev1.ConfigMap{}}
}

// Get implements kube.Records.
func (m *Records) Get(ctx context.Context, node string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("get record %s: %w", node, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cm, ok := m.maps[record.Name(node)]
	if !ok {
		return "", fmt.Errorf("get record %s: %w", node, notFound(record.Name(node)))
	}
	return cm.Data[record.DataKey], nil
}

// Put implements kube.Records.
func (m *Records) Put(ctx context.Context, owner record.Owner, entry string) error {
	name := record.Name(owner.Name)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put record %s: %w", name, err)
	}
	obj := record.Object(m.namespace, owner, entry)
	if err := validateData(name, obj.Data); err != nil {
		return fmt.Errorf("put record %s: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.maps[name]; ok {
		obj.OwnerReferences = old.OwnerReferences
	}
	m.maps[name] = obj
	return nil
}

// Delete implements kube.Records.
func (m *Records) Delete(ctx context.Context, node string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete record %s: %w", node, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.maps, record.Name(node))
	return nil
}

// List implements kube.RecordSource.
func (m *Records) List(ctx context.Context) ([]*corev1.ConfigMap, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*corev1.ConfigMap, 0, len(m.maps))
	for _, cm := range m.maps {
		out = append(out, cm.DeepCopy())
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// Interface checks.
var (
	_ kube.ConfigMaps   = (*ConfigMaps)(nil)
	_ kube.Nodes        = (*Nodes)(nil)
	_ kube.Records      = (*Records)(nil)
	_ kube.RecordSource = (*Records)(nil)
)
