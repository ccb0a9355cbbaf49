package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"

	"github.com/fleet-role/fleet-role/internal/record"
)

// The controller's leader election holds a coordination.k8s.io/v1 Lease,
// as Kubernetes' own controllers do. client-go's leaderelection package
// would do it, but it (its resourcelock) links client-go's whole clientset,
// whose scheme registers every API group at start-up: 9.3 to 9.8 MiB of
// resident memory and 13 MB of executable in every fleet-role process, the
// probe on every node included (docs/performance.md). So the Lease is
// called here as ConfigMaps and Nodes are (core.go): this package's typed
// client (typed.go) over a scheme that knows coordination/v1 alone, and the
// election (internal/controller/leader.go) follows client-go's algorithm.

var (
	leaseScheme = runtime.NewScheme()
	leaseCodecs = serializer.NewCodecFactory(leaseScheme)
	leaseParams = runtime.NewParameterCodec(leaseScheme)
)

func leaseClient(rc rest.Interface, namespace string) *typed[*coordinationv1.Lease, *coordinationv1.LeaseList] {
	return newTyped("leases", rc, leaseParams, namespace,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} }, func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} })
}

func init() {
	// coordination/v1's types, and meta/v1's options and Status in its
	// version.
	utilruntime.Must(coordinationv1.AddToScheme(leaseScheme))
}

// ErrConflict: the object changed since the resourceVersion a write was
// conditioned on (409 Conflict).
var ErrConflict = errors.New("conflict")

// LeaseRecord is what a Lease says of its holder, as client-go's
// LeaderElectionRecord does.
type LeaseRecord struct {
	Holder        string
	LeaseDuration time.Duration
	AcquireTime   time.Time
	RenewTime     time.Time
	Transitions   int32
	// RecordFormat is the highest record layout the holder reads
	// (record.FormatAnnotation); 0 when the Lease does not say, as a
	// release before the tail layout writes it.
	RecordFormat int
}

// Leases reads and writes one namespace's Leases.
type Leases interface {
	// Get returns the Lease's record and resourceVersion; an error
	// wrapping ErrNotFound when there is none.
	Get(ctx context.Context, name string) (LeaseRecord, string, error)
	// Create makes the Lease; an error wrapping ErrConflict when it exists.
	Create(ctx context.Context, name string, r LeaseRecord) (string, error)
	// Update replaces the Lease's record when its resourceVersion is still
	// rv; an error wrapping ErrConflict otherwise.
	Update(ctx context.Context, name string, r LeaseRecord, rv string) (string, error)
}

// Leases returns the Leases of namespace.
func (c *Client) Leases(namespace string) (Leases, error) {
	rc, err := newREST(c.cfg, coordinationv1.SchemeGroupVersion, "/apis", leaseScheme, leaseCodecs)
	if err != nil {
		return nil, err
	}
	return &clientLeases{ns: namespace, c: leaseClient(rc, namespace)}, nil
}

type clientLeases struct {
	ns string
	c  *typed[*coordinationv1.Lease, *coordinationv1.LeaseList]
}

func (l *clientLeases) Get(ctx context.Context, name string) (LeaseRecord, string, error) {
	o, err := l.c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return LeaseRecord{}, "", fmt.Errorf("get lease %s/%s: %w", l.ns, name, leaseError(err))
	}
	r := recordOf(o.Spec)
	r.RecordFormat, _ = strconv.Atoi(o.Annotations[record.FormatAnnotation])
	return r, o.ResourceVersion, nil
}

// leaseMeta is a Lease's metadata as the election writes it: the holder's
// record layout says itself at every write (record.FormatAnnotation), and a
// write without it (an older release's) drops it.
func leaseMeta(ns, name, rv string, r LeaseRecord) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: rv}
	if r.RecordFormat > 0 {
		m.Annotations = map[string]string{record.FormatAnnotation: strconv.Itoa(r.RecordFormat)}
	}
	return m
}

func (l *clientLeases) Create(ctx context.Context, name string, r LeaseRecord) (string, error) {
	o, err := l.c.Create(ctx, &coordinationv1.Lease{ObjectMeta: leaseMeta(l.ns, name, "", r), Spec: specOf(r)},
		metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return "", fmt.Errorf("create lease %s/%s: %w", l.ns, name, leaseError(err))
	}
	return o.ResourceVersion, nil
}

func (l *clientLeases) Update(ctx context.Context, name string, r LeaseRecord, rv string) (string, error) {
	o, err := l.c.Update(ctx, &coordinationv1.Lease{ObjectMeta: leaseMeta(l.ns, name, rv, r), Spec: specOf(r)},
		metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return "", fmt.Errorf("update lease %s/%s: %w", l.ns, name, leaseError(err))
	}
	return o.ResourceVersion, nil
}

func leaseError(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return classify(err)
}

func recordOf(s coordinationv1.LeaseSpec) LeaseRecord {
	var r LeaseRecord
	if s.HolderIdentity != nil {
		r.Holder = *s.HolderIdentity
	}
	if s.LeaseDurationSeconds != nil {
		r.LeaseDuration = time.Duration(*s.LeaseDurationSeconds) * time.Second
	}
	if s.AcquireTime != nil {
		r.AcquireTime = s.AcquireTime.Time
	}
	if s.RenewTime != nil {
		r.RenewTime = s.RenewTime.Time
	}
	if s.LeaseTransitions != nil {
		r.Transitions = *s.LeaseTransitions
	}
	return r
}

func specOf(r LeaseRecord) coordinationv1.LeaseSpec {
	// A Lease counts whole seconds; a shorter duration would read as none.
	secs := int32(max(1, (r.LeaseDuration+time.Second-1)/time.Second))
	at, renew := metav1.NewMicroTime(r.AcquireTime), metav1.NewMicroTime(r.RenewTime)
	holder, transitions := r.Holder, r.Transitions
	return coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &at, RenewTime: &renew, LeaseTransitions: &transitions}
}

// StatusStore reads the status ConfigMap with its resourceVersion and
// writes one key of it on the condition that it has not changed since: a
// controller that lost its lease and writes late finds the status written
// by the one that holds it, and its write fails.
type StatusStore interface {
	// Read returns the ConfigMap's data and resourceVersion.
	Read(ctx context.Context, name string) (map[string]string, string, error)
	// PatchKeyAt sets data[key] with a JSON merge patch that carries rv as
	// its precondition; it returns the new resourceVersion, or an error
	// wrapping ErrConflict when the ConfigMap is no longer at rv.
	PatchKeyAt(ctx context.Context, name, key, value, rv string) (string, error)
	// Create makes the ConfigMap anew, found deleted, holding data[key]
	// alone and the install's labels, and returns its resourceVersion.
	Create(ctx context.Context, name, key, value string) (string, error)
}

// StatusLabels are the labels the install gives the status ConfigMap
// (deploy/base/configmaps.yaml and the kustomization's part-of), which a
// status made anew carries too.
func StatusLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": "fleet-role", "app.kubernetes.io/part-of": "fleet-role"}
}

// StatusStore returns the status store of namespace.
func (c *Client) StatusStore(namespace string) StatusStore {
	return &clientStatus{c: configMapClient(c.rc, namespace), ns: namespace}
}

type clientStatus struct {
	c  ConfigMapClient
	ns string
}

func (s *clientStatus) Read(ctx context.Context, name string) (map[string]string, string, error) {
	cm, err := s.c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("get configmap %s/%s: %w", s.ns, name, classify(err))
	}
	data := make(map[string]string, len(cm.Data))
	for k, v := range cm.Data {
		data[k] = v
	}
	return data, cm.ResourceVersion, nil
}

func (s *clientStatus) PatchKeyAt(ctx context.Context, name, key, value, rv string) (string, error) {
	// A merge patch that sets metadata.resourceVersion is applied only to
	// that version of the object: the API server answers 409 otherwise.
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]string{"resourceVersion": rv},
		"data":     map[string]string{key: value},
	})
	if err != nil {
		return "", fmt.Errorf("patch configmap %s/%s key %s: %w", s.ns, name, key, err)
	}
	cm, err := s.c.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	if apierrors.IsConflict(err) {
		return "", fmt.Errorf("patch configmap %s/%s key %s at resourceVersion %s: %w: %w", s.ns, name, key, rv, ErrConflict, err)
	}
	if err != nil {
		return "", fmt.Errorf("patch configmap %s/%s key %s: %w", s.ns, name, key, classify(err))
	}
	return cm.ResourceVersion, nil
}

// Create makes the status anew with a server-side apply. An apply that
// creates is authorized as a create of that name, so that RBAC can grant
// it by name (resourceNames); a POST create carries no name to authorize,
// and granting it would let the controller's token create any ConfigMap of
// the namespace, a probe's record among them. The apply is forced: a status
// made by another in the meantime (the installer applying again, or a
// leader deposed a moment ago) gets this key, and the next conditioned
// write reads it again.
func (s *clientStatus) Create(ctx context.Context, name, key, value string) (string, error) {
	body, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": s.ns, "labels": StatusLabels()},
		"data":     map[string]string{key: value},
	})
	if err != nil {
		return "", fmt.Errorf("create configmap %s/%s: %w", s.ns, name, err)
	}
	force := true
	cm, err := s.c.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: fieldManager, Force: &force})
	if err != nil {
		return "", fmt.Errorf("create configmap %s/%s by server-side apply: %w", s.ns, name, classify(err))
	}
	return cm.ResourceVersion, nil
}

// RecordFormat returns what a probe reads of the record layout the
// controller reads: record.FormatAnnotation on the Lease name of namespace,
// read from the API server's cache (resourceVersion 0: no read of etcd).
// A Lease that cannot be read, or says nothing, says record.FormatEntry,
// which every release reads.
func (c *Client) RecordFormat(namespace, name string) (func(ctx context.Context) int, error) {
	rc, err := newREST(c.cfg, coordinationv1.SchemeGroupVersion, "/apis", leaseScheme, leaseCodecs)
	if err != nil {
		return nil, err
	}
	leases := leaseClient(rc, namespace)
	return func(ctx context.Context) int {
		o, err := leases.Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
		if err != nil {
			return record.FormatEntry
		}
		f, err := strconv.Atoi(o.Annotations[record.FormatAnnotation])
		if err != nil || f < record.FormatEntry {
			return record.FormatEntry
		}
		return f
	}, nil
}
