package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/record"
)

// Records is how a probe keeps its own record (internal/record): one
// ConfigMap per recording host, named after the host's node.
type Records interface {
	// Get returns the entry text of node's record; an error wrapping
	// ErrNotFound when node has no record.
	Get(ctx context.Context, node string) (string, error)
	// Put writes entry as the record of owner's node: a JSON merge patch of
	// data.entry alone when the record exists (the record's other fields
	// are the admission policy's to hold), or a create of the whole record
	// when it does not.
	Put(ctx context.Context, owner record.Owner, entry string) error
	// Delete removes node's record; a record that is absent is no error.
	Delete(ctx context.Context, node string) error
}

// RecordSource lists every record of the namespace, for the controller.
type RecordSource interface {
	// List returns the records and their tails (ConfigMaps carrying
	// record.AnySelector), sorted by name. The objects are shared with a
	// cache: read only.
	List(ctx context.Context) ([]*corev1.ConfigMap, error)
}

// Records returns the probe records of namespace, in the entry layout.
func (c *Client) Records(namespace string) Records {
	return NewRecordsFor(c.ConfigMapClient(namespace), namespace)
}

// RecordsInLayout returns the probe records of namespace, written in the
// tail layout whenever l says the controller reads it (docs/records.md,
// "Layouts").
func (c *Client) RecordsInLayout(namespace string, l Layout) Records {
	return &clientRecords{c: c.ConfigMapClient(namespace), ns: namespace, layout: &l}
}

// NewRecordsFor returns the probe records of namespace through cms, the
// ConfigMap client of that namespace: a Client's, or a whole clientset's
// where a test or the bench holds one. They are written in the entry
// layout, or, with l, in the tail layout whenever l says so.
func NewRecordsFor(cms ConfigMapClient, namespace string, l ...Layout) Records {
	r := &clientRecords{c: cms, ns: namespace}
	if len(l) > 0 {
		r.layout = &l[0]
	}
	return r
}

// Layout says when a probe writes its record in the tail layout.
type Layout struct {
	// Format is the highest layout the controller reads
	// (record.FormatAnnotation on its Lease); record.FormatEntry when it
	// cannot be read.
	Format func(ctx context.Context) int
	// RetryAfter is how many writes the probe keeps to the entry layout
	// after the API server refused one in the tail layout (an admission
	// policy that predates it): the probe's window, in periods, so that it
	// tries again once a window.
	RetryAfter int
	// CheckEvery: Format is read at least once every CheckEvery writes (a
	// window, and every write in the entry layout, read it first):
	// entry_unchanged in periods, so that a controller that no longer
	// reads the tail layout (rolled back) finds records it cannot read for
	// no longer than it would find one stale. 0 or 1 reads it before every
	// write.
	CheckEvery int
}

type clientRecords struct {
	c      ConfigMapClient
	ns     string
	layout *Layout

	mu sync.Mutex
	w  record.Writer
	// refusedFor counts down the writes kept to the entry layout after a
	// refusal of the tail layout.
	refusedFor int
	// tail: a tail may exist, written by this writer or found at Get.
	tail bool
	// unchecked counts the writes since Format was last read.
	unchecked int
}

func (r *clientRecords) Get(ctx context.Context, node string) (string, error) {
	name := record.Name(node)
	cm, err := r.c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get record %s/%s: %w", r.ns, name, classify(err))
	}
	var tail *corev1.ConfigMap
	if tn, ok := record.TailName(node); ok && len(cm.BinaryData) > 0 {
		tail, err = r.c.Get(ctx, tn, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			tail, err = nil, nil
		}
		if err != nil {
			return "", fmt.Errorf("get record %s/%s: %w", r.ns, tn, classify(err))
		}
		r.mu.Lock()
		r.tail = true
		r.mu.Unlock()
	}
	_, text, err := record.Assemble(cm, tail)
	if err != nil {
		return "", fmt.Errorf("get record %s/%s: %w", r.ns, name, err)
	}
	return text, nil
}

func (r *clientRecords) Put(ctx context.Context, owner record.Owner, entry string) error {
	if r.layout == nil {
		return r.put(ctx, record.Object(r.ns, owner, entry), map[string]any{"data": map[string]string{record.DataKey: entry}})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, named := record.TailName(owner.Name); !named || r.refusedFor > 0 {
		r.refusedFor = max(0, r.refusedFor-1)
		return r.putEntry(ctx, owner, entry)
	}
	// Without a snapshot of its own the writer's plan is a window: the
	// layout is read first, so that a probe kept to the entry layout packs
	// nothing.
	if !r.w.HasSnapshot() {
		r.unchecked = 0
		if r.layout.Format(ctx) < record.FormatTail {
			return r.putEntry(ctx, owner, entry)
		}
	}
	p := r.w.Plan(entry)
	if r.w.HasSnapshot() && (p.Kind != record.KindTail || r.unchecked+1 >= r.layout.CheckEvery) {
		r.unchecked = 0
		if r.layout.Format(ctx) < record.FormatTail {
			return r.putEntry(ctx, owner, entry)
		}
	} else {
		r.unchecked++
	}
	var err error
	switch p.Kind {
	case record.KindEntry:
		err = r.putEntry(ctx, owner, entry)
	case record.KindWindow:
		err = r.put(ctx, record.WindowObject(r.ns, owner, p.Packed),
			map[string]any{"data": nil, "binaryData": map[string][]byte{record.WindowKey: p.Packed}})
	case record.KindTail:
		r.tail = true
		err = r.put(ctx, record.TailObject(r.ns, owner, p.Packed), map[string]any{"binaryData": map[string][]byte{record.TailKey: p.Packed}})
	}
	if err == nil {
		r.w.Wrote(p)
		return nil
	}
	r.w.Forget()
	if IsRefused(err) && p.Kind != record.KindEntry {
		// An admission policy that predates the tail layout, or a node
		// named as this one's tail: the entry layout, which it admits,
		// for a window.
		r.refusedFor = r.layout.RetryAfter
		return r.putEntry(ctx, owner, entry)
	}
	return err
}

// putEntry writes the record in the entry layout and removes a tail that
// may be left, which no reader reads beside it. Called with r.mu held.
func (r *clientRecords) putEntry(ctx context.Context, owner record.Owner, entry string) error {
	r.w.Forget()
	err := r.put(ctx, record.Object(r.ns, owner, entry), map[string]any{"data": map[string]string{record.DataKey: entry}, "binaryData": nil})
	if err != nil || !r.tail {
		return err
	}
	if tn, ok := record.TailName(owner.Name); ok {
		if err := r.c.Delete(ctx, tn, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil // left for the next write in the entry layout
		}
	}
	r.tail = false
	return nil
}

// put writes obj with a JSON merge patch of body when it exists (the
// record's other fields are the admission policy's to hold), or creates
// obj when it does not.
func (r *clientRecords) put(ctx context.Context, obj *corev1.ConfigMap, body map[string]any) error {
	err := r.patch(ctx, obj.Name, body)
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	_, err = r.c.Create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		// Made between the patch and the create (a probe restarted while
		// its previous pod was still writing): patch what is there.
		return r.patch(ctx, obj.Name, body)
	}
	if err != nil {
		return fmt.Errorf("create record %s/%s: %w", r.ns, obj.Name, classify(err))
	}
	return nil
}

func (r *clientRecords) patch(ctx context.Context, name string, body map[string]any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("patch record %s/%s: %w", r.ns, name, err)
	}
	_, err = r.c.Patch(ctx, name, types.MergePatchType, b,
		metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("patch record %s/%s: %w", r.ns, name, classify(err))
	}
	return nil
}

func (r *clientRecords) Delete(ctx context.Context, node string) error {
	names := []string{record.Name(node)}
	if tn, ok := record.TailName(node); ok && r.layout != nil {
		names = append(names, tn)
	}
	for _, name := range names {
		err := r.c.Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete record %s/%s: %w", r.ns, name, classify(err))
		}
	}
	r.mu.Lock()
	r.w.Forget()
	r.tail = false
	r.mu.Unlock()
	return nil
}

// RecordInformer is the controller's view of the records: a shared informer
// that lists and watches the ConfigMaps carrying record.AnySelector in one
// namespace, so that a decision reads a local cache rather than the API
// server, and a record's write costs one watch event, not a list.
type RecordInformer struct {
	informer
	lister listersv1.ConfigMapNamespaceLister
	// markers counts, per record, the versions the watch delivered that
	// were a probe's withheld marker (Markers).
	mu      sync.Mutex
	markers map[string]uint64
}

// NewRecordInformer makes the informer; Run runs it. It is built on the
// core/v1 client alone, as client-go's generated ConfigMap informer is,
// without the informer factory, which links every API group's.
func (c *Client) NewRecordInformer(namespace string) *RecordInformer {
	return c.NewRecordInformerHolding(namespace, nil)
}

// CanVote says whether a node's host could take a vote (a voter, or a host
// marked eligible), and whether the caller knows the node at all.
type CanVote func(node string) (canVote, known bool)

// NewRecordInformerHolding is NewRecordInformer that holds the entry of a
// record only while canVote does not say its node is known and could not
// vote: the others are counted with their size (Unheld) and their entries
// dropped as they arrive, so that a fleet of Nodes no vote could go to,
// each with a record at the cap, costs the cache a few hundred bytes each
// (docs/performance.md, Bounded cost). A node not yet known (the Node
// informer not synced) is held: a record dropped wrongly would read as
// missing until its next write. Nil canVote holds every record.
func (c *Client) NewRecordInformerHolding(namespace string, canVote CanVote) *RecordInformer {
	lw := configMapListWatch(configMapClient(c.watch, namespace), func(o *metav1.ListOptions) { o.LabelSelector = record.AnySelector })
	inf := cache.NewSharedIndexInformerWithOptions(c.rewatched(lw), &corev1.ConfigMap{}, cache.SharedIndexInformerOptions{
		Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
	// Set before the informer runs, which is the only time it takes one.
	utilruntime.Must(inf.SetTransform(func(obj any) (any, error) {
		// client-go may hand an object already transformed back to the
		// transform: what it dropped stays dropped, its size kept.
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			if _, dropped := cm.Annotations[unheldAnnotation]; dropped {
				return cm, nil
			}
		}
		view, err := recordView(obj)
		if cm, ok := view.(*corev1.ConfigMap); ok && err == nil && canVote != nil {
			if can, known := canVote(record.NodeOf(cm)); known && !can {
				unheld(cm)
			}
		}
		return view, err
	}))
	ri := &RecordInformer{
		informer: informer{inf: inf, what: "records"},
		lister:   listersv1.NewConfigMapLister(inf.GetIndexer()).ConfigMaps(namespace),
		markers:  map[string]uint64{},
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    ri.sawVersion,
		UpdateFunc: func(_, obj any) { ri.sawVersion(obj) },
		// A record gone takes its count with it, so that the counts are
		// bounded by the records there are, not every name ever seen.
		DeleteFunc: ri.forget,
	})
	utilruntime.Must(err)
	return ri
}

// unheldAnnotation marks, in the cache alone, a record whose entry was
// dropped (its node could not vote), with the entry's size in bytes.
const unheldAnnotation = "fleet-role.io/unheld-bytes"

// unheld drops cm's entry and notes its size: cm is the cache's own view.
func unheld(cm *corev1.ConfigMap) {
	n := 0
	for _, v := range cm.Data {
		n += len(v)
	}
	for _, v := range cm.BinaryData {
		n += len(v)
	}
	cm.Data, cm.BinaryData = nil, nil
	cm.Annotations = map[string]string{unheldAnnotation: strconv.Itoa(n)}
}

// Unheld returns the records the cache counts and does not hold, by node,
// with their entries' sizes in bytes (decide.Input.Unheld).
func (i *RecordInformer) Unheld() map[string]int {
	out := map[string]int{}
	for _, obj := range i.inf.GetStore().List() {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		if v, ok := cm.Annotations[unheldAnnotation]; ok {
			n, _ := strconv.Atoi(v)
			out[record.NodeOf(cm)] += n
		}
	}
	return out
}

// CachedBytes is how many bytes of the record of node the cache holds in
// its data: none for a record it counts and does not hold (Unheld), the
// entry's size for one it holds. Exported for the check, against a real API
// server, that a record the informer does not hold costs this process none
// of its bytes: what holding only the records of nodes that could vote is
// for (test/integration/kube).
func (i *RecordInformer) CachedBytes(node string) int {
	n := 0
	for _, obj := range i.inf.GetStore().List() {
		if cm, ok := obj.(*corev1.ConfigMap); ok && record.NodeOf(cm) == node {
			for _, v := range cm.Data {
				n += len(v)
			}
			for _, v := range cm.BinaryData {
				n += len(v)
			}
		}
	}
	return n
}

// markerBytes bounds the entries read as a possible marker: a marker holds
// no samples, its node's name (253 bytes at most) and a reason of at most
// entry.MaxTextBytes, each byte of which JSON writes in 6 at most
// (\u00XX), in a few dozen bytes of JSON around them. A record of samples
// that large is not read here.
const markerBytes = 253 + 6*entry.MaxTextBytes + 256

// sawVersion counts a version of a record that is its probe's withheld
// marker: with the admission policy off another probe may overwrite a
// marker within a period, and the controller, which decides from the cache
// twice a period, would never see it there (docs/records.md, Fail closed).
func (i *RecordInformer) sawVersion(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	text := cm.Data[record.DataKey]
	if len(text) > markerBytes || !strings.Contains(text, `"withheld"`) {
		return
	}
	e, err := entry.Decode(text)
	if err != nil || e.Withheld == "" || e.Node != cm.Name {
		return
	}
	i.mu.Lock()
	i.markers[cm.Name]++
	i.mu.Unlock()
}

// forget drops the marker count of a deleted record (or of the cache's
// tombstone of one).
func (i *RecordInformer) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		i.mu.Lock()
		delete(i.markers, cm.Name)
		i.mu.Unlock()
	}
}

// Markers returns, per record, how many of its versions the watch has
// delivered as its probe's withheld marker since the informer started:
// the controller names the hosts whose count grew since its last decision.
func (i *RecordInformer) Markers() map[string]uint64 {
	i.mu.Lock()
	defer i.mu.Unlock()
	return maps.Clone(i.markers)
}

// recordView is the part of a record the cache keeps: what record.Read
// reads (the name, the labels, the data and binaryData, the owner
// references) and what the cache itself keys and tracks by (the namespace,
// the resourceVersion). The rest (managedFields above all, a field set per
// writer that is as large as a small record's own metadata; annotations,
// the UID, timestamps) is read by nothing in the controller, and would be
// held for every record of the fleet between decisions (docs/performance.md).
// Anything that is no ConfigMap (the cache's tombstone of a record deleted
// while a watch was down) passes unchanged.
func recordView(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return obj, nil
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name:            cm.Name,
			Namespace:       cm.Namespace,
			ResourceVersion: cm.ResourceVersion,
			Labels:          cm.Labels,
			OwnerReferences: cm.OwnerReferences,
		},
		Immutable:  cm.Immutable,
		Data:       cm.Data,
		BinaryData: cm.BinaryData,
	}, nil
}

// List implements RecordSource: the records it holds (not those Unheld
// counts). Until the informer's first list has arrived it returns an error
// rather than an empty fleet, so that a controller that has just started
// never reports every host as absent.
func (i *RecordInformer) List(ctx context.Context) ([]*corev1.ConfigMap, error) {
	if err := i.synced(ctx); err != nil {
		return nil, err
	}
	all, err := i.lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	l := all[:0:0]
	for _, cm := range all {
		if _, dropped := cm.Annotations[unheldAnnotation]; !dropped {
			l = append(l, cm)
		}
	}
	sort.Slice(l, func(a, b int) bool { return l[a].Name < l[b].Name })
	return l, nil
}

// Interface checks.
var (
	_ Records      = (*clientRecords)(nil)
	_ RecordSource = (*RecordInformer)(nil)
)
