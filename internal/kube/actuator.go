package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/fleet-role/fleet-role/internal/acting"
	"github.com/fleet-role/fleet-role/internal/record"
)

// What the actuator (internal/actuator) reads and writes: the journal,
// watched by its one name; the controller's Lease, read; its own record,
// written whole; its own Node, read once for the record's owner.

// JournalInformer watches the journal ConfigMap (acting.JournalConfigMap):
// a list and a watch selected by its name, so that RBAC can grant it by
// that name alone and the actuator hears of a command the moment the
// controller writes it. A poll would not do as well: each step's deadline
// counts from the controller's write of its command (prewrite's is two
// sample periods, docs/acting.md), so every poll interval would be spent
// from it, on every eligible host, while a watch of one ConfigMap that
// changes a few times a swap costs nothing between swaps.
type JournalInformer struct {
	informer
	changed chan struct{}
}

// NewJournalInformer makes the informer of namespace's journal; Run runs it.
// The actuator's client watches with Rewatch: the leaving voter's own API
// server stops serving events once its member is removed, and the command
// that fixes it (settle) is that host's actuator's to see.
func (c *Client) NewJournalInformer(namespace string) *JournalInformer {
	lw := c.rewatched(configMapListWatch(configMapClient(c.watch, namespace), func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", acting.JournalConfigMap).String()
	}))
	inf := cache.NewSharedIndexInformerWithOptions(lw, &corev1.ConfigMap{}, cache.SharedIndexInformerOptions{})
	ji := &JournalInformer{informer: informer{inf: inf, what: "journal"}, changed: make(chan struct{}, 1)}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { ji.notify() },
		UpdateFunc: func(any, any) { ji.notify() },
		DeleteFunc: func(any) { ji.notify() },
	})
	utilruntime.Must(err)
	return ji
}

func (ji *JournalInformer) notify() {
	select {
	case ji.changed <- struct{}{}:
	default: // one pending signal stands for any number: Journal reads the latest
	}
}

// Run runs the informer until ctx is done, and signals Changed once more
// when its first list has synced (an absent ConfigMap makes no event).
func (ji *JournalInformer) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ji.inf.RunWithContext(ctx)
	}()
	if cache.WaitForCacheSync(ctx.Done(), ji.inf.HasSynced) {
		ji.notify()
	}
	<-done
	return nil
}

// Changed receives after each change the informer sees.
func (ji *JournalInformer) Changed() <-chan struct{} { return ji.changed }

// Journal is the journal the cache holds: nil when there is no ConfigMap or
// no document in it; synced false until the first list has arrived.
func (ji *JournalInformer) Journal() (*acting.Journal, bool, error) {
	if !ji.inf.HasSynced() {
		return nil, false, nil
	}
	for _, obj := range ji.inf.GetStore().List() {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok || cm.Name != acting.JournalConfigMap {
			continue
		}
		raw := cm.Data[acting.JournalKey]
		if raw == "" {
			return nil, true, nil
		}
		j, err := acting.UnmarshalJournal([]byte(raw))
		if err != nil {
			return nil, true, fmt.Errorf("configmap %s/%s at resourceVersion %s: %w", cm.Namespace, cm.Name, cm.ResourceVersion, err)
		}
		return j, true, nil
	}
	return nil, true, nil
}

// LeaseTerm reads one Lease's leaseTransitions: the controller's term.
type LeaseTerm struct {
	Leases Leases
	Name   string
}

// Term is the Lease's leaseTransitions; found false when there is no Lease.
func (l LeaseTerm) Term(ctx context.Context) (int32, bool, error) {
	r, _, err := l.Leases.Get(ctx, l.Name)
	if errors.Is(err, ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return r.Transitions, true, nil
}

// ActuatorRecordLabels are the labels of an actuator's record, and all it
// carries: the admission policy requires exactly these.
func ActuatorRecordLabels() map[string]string {
	return map[string]string{record.Label: acting.ActuatorRecordLabel, record.PartOfLabel: record.PartOf}
}

// ActuatorRecordObject is node's actuator record holding r: named
// acting.ActuatorRecordName(node), labelled ActuatorRecordLabels, owned by
// its Node alone (neither controller nor blockOwnerDeletion, as a probe's
// record is), one data key, no annotations.
func ActuatorRecordObject(namespace string, owner record.Owner, r acting.Report) (*corev1.ConfigMap, error) {
	name, err := acting.ActuatorRecordName(owner.Name)
	if err != nil {
		return nil, err
	}
	if owner.UID == "" {
		return nil, fmt.Errorf("actuator record of node %s: no Node UID to own it", owner.Name)
	}
	doc, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("actuator record of node %s: %w", owner.Name, err)
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       namespace,
			Labels:          ActuatorRecordLabels(),
			OwnerReferences: []metav1.OwnerReference{owner.OwnerReference()},
		},
		Data: map[string]string{acting.ReportKey: string(doc)},
	}, nil
}

// ActuatorRecord is one node's actuator record in fleet-role's namespace.
type ActuatorRecord struct {
	cm    ConfigMapClient
	nodes *typed[*corev1.Node, *corev1.NodeList]
	ns    string
	node  string
	name  string
	uid   types.UID
}

// ActuatorRecord returns node's actuator record in namespace.
func (c *Client) ActuatorRecord(namespace, node string) (*ActuatorRecord, error) {
	name, err := acting.ActuatorRecordName(node)
	if err != nil {
		return nil, err
	}
	return &ActuatorRecord{cm: configMapClient(c.rc, namespace), ns: namespace, node: node, name: name,
		nodes: nodeClient(c.rc)}, nil
}

// Get is the report the record holds; nil when there is no record.
func (a *ActuatorRecord) Get(ctx context.Context) (*acting.Report, error) {
	cm, err := a.cm.Get(ctx, a.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get actuator record %s/%s: %w", a.ns, a.name, classify(err))
	}
	var r acting.Report
	if err := json.Unmarshal([]byte(cm.Data[acting.ReportKey]), &r); err != nil {
		// A record this actuator cannot read is rewritten at its next
		// report; until then it reports nothing.
		return nil, nil
	}
	return &r, nil
}

// Put makes the record hold r and nothing else: created when absent, else
// replaced whole (labels, owner, data; no annotations), conditioned on the
// resourceVersion it was read at, so that the record always has the shape
// the admission policy requires, whatever another hand left on it.
func (a *ActuatorRecord) Put(ctx context.Context, r acting.Report) error {
	if a.uid == "" {
		n, err := a.nodes.Get(ctx, a.node, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s, the owner of its actuator record: %w", a.node, classify(err))
		}
		a.uid = n.UID
	}
	want, err := ActuatorRecordObject(a.ns, record.Owner{Name: a.node, UID: a.uid}, r)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		cur, err := a.cm.Get(ctx, a.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = a.cm.Create(ctx, want, metav1.CreateOptions{FieldManager: fieldManager})
			if apierrors.IsAlreadyExists(err) && attempt == 0 {
				continue
			}
			if err != nil {
				return fmt.Errorf("create actuator record %s/%s: %w", a.ns, a.name, classify(err))
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("get actuator record %s/%s: %w", a.ns, a.name, classify(err))
		}
		_, err = a.replace(ctx, cur, want)
		if apierrors.IsConflict(err) && attempt == 0 {
			continue
		}
		if err != nil {
			return fmt.Errorf("update actuator record %s/%s: %w", a.ns, a.name, classify(err))
		}
		return nil
	}
}

// replace makes cur into cm with a JSON merge patch at cur's
// resourceVersion: the ConfigMap client this package keeps has no Update,
// and a merge patch that sets null removes what the record must not carry
// (annotations, other labels and data keys).
func (a *ActuatorRecord) replace(ctx context.Context, cur, cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
	data := map[string]any{}
	for k := range cur.Data {
		data[k] = nil
	}
	for k, v := range cm.Data {
		data[k] = v
	}
	labels := map[string]any{}
	for k := range cur.Labels {
		labels[k] = nil
	}
	for k, v := range cm.Labels {
		labels[k] = v
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": cur.ResourceVersion,
			"labels":          labels,
			"annotations":     nil,
			"ownerReferences": cm.OwnerReferences,
		},
		"data":       data,
		"binaryData": nil,
	})
	if err != nil {
		return nil, err
	}
	return a.cm.Patch(ctx, cm.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
}
