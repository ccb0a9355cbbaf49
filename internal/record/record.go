// Package record defines a probe's record: the ConfigMap, one per recording
// host, that holds that host's window of samples (an entry in the wire format
// of docs/entry.md) in the records' namespace (settings.RecordsNamespace:
// fleet-role-records), which holds nothing else.
//
// One object per host, rather than one key per host in a shared ConfigMap,
// because Kubernetes stores a ConfigMap as one etcd value: every write of a
// shared object rewrites every host's window, so the bytes fleet-role writes
// to the etcd it judges would grow with the square of the fleet, a slow etcd
// leader would make every probe's write wait and conflict, and RBAC cannot
// bind a key to a node. A record is named after its node, so that the
// admission policy in deploy/ can hold each probe, by the node its token is
// bound to, to its own record (docs/records.md).
package record

import (
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleet-role/fleet-role/internal/entry"
)

// The labels every record carries and only records carry, so that
// `kubectl get cm -l fleet-role.io/record=probe` lists them and the
// controller's informer watches nothing else. The admission policy requires
// exactly these labels.
const (
	Label      = "fleet-role.io/record"
	LabelValue = "probe"
	// Selector selects the records of a namespace.
	Selector = Label + "=" + LabelValue
	// PartOfLabel is the app.kubernetes.io label every fleet-role object
	// carries.
	PartOfLabel = "app.kubernetes.io/part-of"
	PartOf      = "fleet-role"
	// DataKey is the record's one data key.
	DataKey = "entry"
)

// NodeNameClaim is the key under which a ServiceAccount token bound to a Pod
// carries the node the Pod runs on, in the authenticated user's extra
// (Kubernetes 1.30 and later). The admission policy reads it.
const NodeNameClaim = "authentication.kubernetes.io/node-name"

// Name is the name of node's record: the node's name itself. A node name is a
// DNS subdomain of at most 253 characters, exactly what a ConfigMap name may
// be, so the mapping is the identity: it needs no truncation or hash, it is
// one to one, and the admission policy can check it in CEL with one
// comparison (CEL has no hash function to check a hashed name with). A node
// whose name is that of one of fleet-role's other ConfigMaps in the same
// namespace (fleet-role-status, fleet-role-settings, kube-root-ca.crt)
// cannot record: the policy refuses to let a probe touch an object that is
// not a record, and the status says so.
func Name(node string) string { return node }

// Labels returns the labels of a record.
func Labels() map[string]string {
	return map[string]string{Label: LabelValue, PartOfLabel: PartOf}
}

// Owner is the Node a record belongs to: the garbage collector deletes the
// record when its Node is deleted (a namespaced dependent may have a
// cluster-scoped owner).
type Owner struct {
	Name string
	UID  types.UID
}

// OwnerReference is the one ownerReference a record carries. Neither
// controller nor blockOwnerDeletion is set: the record does not control its
// Node, and blocking the Node's deletion would need the probe to be allowed
// to update the Node's finalizers.
func (o Owner) OwnerReference() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: o.Name, UID: o.UID}
}

// Object is node's record holding entry, as the probe creates it. An owner
// without a UID (the demo's hosts, which are no Nodes of the cluster) gets
// no owner reference: the garbage collector would delete a record whose
// owner does not exist.
func Object(namespace string, owner Owner, entry string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(owner.Name),
			Namespace: namespace,
			Labels:    Labels(),
		},
		Data: map[string]string{DataKey: entry},
	}
	if owner.UID != "" {
		cm.OwnerReferences = []metav1.OwnerReference{owner.OwnerReference()}
	}
	return cm
}

// WindowObject is node's record in the tail layout holding the packed
// window, as the probe creates it.
func WindowObject(namespace string, owner Owner, window []byte) *corev1.ConfigMap {
	cm := Object(namespace, owner, "")
	cm.Data, cm.BinaryData = nil, map[string][]byte{WindowKey: window}
	return cm
}

// TailObject is node's tail holding the packed tail, as the probe creates
// it: named TailName (the caller has checked that there is one), labelled
// and owned as the record is.
func TailObject(namespace string, owner Owner, tail []byte) *corev1.ConfigMap {
	cm := Object(namespace, owner, "")
	cm.Name = Name(owner.Name) + TailSuffix
	cm.Labels = TailLabels()
	cm.Data, cm.BinaryData = nil, map[string][]byte{TailKey: tail}
	return cm
}

// IsRecord reports whether cm carries the record label.
func IsRecord(cm *corev1.ConfigMap) bool {
	return cm != nil && cm.Labels[Label] == LabelValue
}

// ErrNotRecord is returned by Read for a ConfigMap that is not a record.
var ErrNotRecord = errors.New("not a probe record")

// Read returns the node a record belongs to and its entry text, as if it
// had no tail: the text of data.entry, or the packed snapshot of a record
// in the tail layout, unpacked. It checks the shape the admission policy
// enforces, so that a record written around the policy (by an
// administrator, or on a cluster without it) is reported rather than
// trusted: the record label, one data key or one binaryData key, and an
// owner reference to the Node of the record's name when it has one.
func Read(cm *corev1.ConfigMap) (node, entry string, err error) {
	node, entry, _, err = read(cm, MaxEntryBytes)
	return node, entry, err
}

// read is Read, unpacking at most limit bytes, and the packed snapshot
// when the record is in the tail layout.
func read(cm *corev1.ConfigMap, limit int) (node, entry string, window []byte, err error) {
	if !IsRecord(cm) {
		return "", "", nil, fmt.Errorf("configmap %s: %w (no label %s)", cm.Name, ErrNotRecord, Selector)
	}
	node = cm.Name
	if err := ownedByItsNode(cm, node); err != nil {
		return node, "", nil, fmt.Errorf("record %w", err)
	}
	for k := range cm.Data {
		if k != DataKey {
			return node, "", nil, fmt.Errorf("record %s: data.%s; a record holds data.%s or binaryData.%s alone", cm.Name, k, DataKey, WindowKey)
		}
	}
	for k := range cm.BinaryData {
		if k != WindowKey {
			return node, "", nil, fmt.Errorf("record %s: binaryData.%s; a record holds data.%s or binaryData.%s alone", cm.Name, k, DataKey, WindowKey)
		}
	}
	// data.entry beside a window is an older probe's write over the tail
	// layout (a release before it, rolled back to): data.entry is the
	// newer.
	if text, ok := cm.Data[DataKey]; ok {
		return node, text, nil, nil
	}
	window, ok := cm.BinaryData[WindowKey]
	if !ok {
		return node, "", nil, fmt.Errorf("record %s: holds neither data.%s nor binaryData.%s", cm.Name, DataKey, WindowKey)
	}
	text, err := unpackLimited(window, limit)
	if err != nil {
		return node, "", nil, fmt.Errorf("record %s: binaryData.%s: %w", cm.Name, WindowKey, err)
	}
	return node, text, window, nil
}

func ownedByItsNode(cm *corev1.ConfigMap, node string) error {
	for _, o := range cm.OwnerReferences {
		if o.Kind == "Node" && o.Name != node {
			return fmt.Errorf("%s: owned by Node %q, not the node it is named after", cm.Name, o.Name)
		}
	}
	return nil
}

// Assemble returns the node a record belongs to and the entry text its
// window reads as: Read's, extended by tail when the record is in the tail
// layout and tail extends its snapshot (Merge). A tail of an older
// snapshot (the probe wrote a new one and no tail since) is passed over; a
// nil tail is none.
func Assemble(rec, tail *corev1.ConfigMap) (node, entry string, err error) {
	return assemble(rec, tail, MaxEntryBytes)
}

// assemble is Assemble, unpacking and merging no more than limit bytes of
// entry: a reader that knows the record cap (the controller) decodes no
// more than it would of data.entry, whatever a packed window says.
func assemble(rec, tail *corev1.ConfigMap, limit int) (node, entry string, err error) {
	node, text, window, err := read(rec, limit)
	if err != nil || window == nil || tail == nil {
		return node, text, err
	}
	if err := ownedByItsNode(tail, node); err != nil {
		return node, "", fmt.Errorf("tail %w", err)
	}
	if len(tail.Data) != 0 || len(tail.BinaryData) != 1 || tail.BinaryData[TailKey] == nil {
		return node, "", fmt.Errorf("tail %s: holds other than binaryData.%s alone", tail.Name, TailKey)
	}
	base, drop, tailText, err := unpackTailLimited(tail.BinaryData[TailKey], limit)
	if err != nil {
		return node, "", fmt.Errorf("tail %s: %w", tail.Name, err)
	}
	if base != Base(window) {
		return node, text, nil
	}
	merged, err := Merge(text, drop, tailText)
	if err != nil {
		return node, "", fmt.Errorf("tail %s: %w", tail.Name, err)
	}
	if len(merged) > limit {
		return node, "", fmt.Errorf("tail %s: the window and its tail read as %d bytes, over %d", tail.Name, len(merged), limit)
	}
	return node, merged, nil
}

// ReadAll reads records as `fleet-role decide` does: node name to entry
// text, and node name to why for the records that cannot be read as
// records. A ConfigMap that is neither record nor tail is passed over.
func ReadAll(records []*corev1.ConfigMap) (entries, unreadable map[string]string) {
	return (*Assembler)(nil).ReadAll(records)
}

// Assembler reads records as ReadAll does, and keeps what it assembled
// from a record in the tail layout until the record or its tail changes
// (by resourceVersion): the controller reads every record twice a period,
// and each changes once. The nil Assembler keeps nothing. It is safe for
// concurrent use.
type Assembler struct {
	// Limit bounds what a record in the tail layout is unpacked and merged
	// to (0: MaxEntryBytes): the controller sets the record cap of its
	// settings, so that a packed record costs it no more to decode than
	// data.entry, which the admission policy holds to that cap.
	Limit int

	mu   sync.Mutex
	kept map[string]assembled
}

type assembled struct {
	recRV, tailRV string
	limit         int
	text, err     string
}

func (a *Assembler) limit() int {
	if a == nil || a.Limit <= 0 {
		return MaxEntryBytes
	}
	return min(a.Limit, MaxEntryBytes)
}

// ReadAll is the package's ReadAll.
func (a *Assembler) ReadAll(records []*corev1.ConfigMap) (entries, unreadable map[string]string) {
	entries, unreadable = map[string]string{}, map[string]string{}
	tails := map[string]*corev1.ConfigMap{}
	for _, cm := range records {
		if IsTail(cm) {
			tails[NodeOf(cm)] = cm
		}
	}
	seen := map[string]bool{}
	for _, cm := range records {
		if !IsRecord(cm) {
			continue
		}
		node, text, err := a.assemble(cm, tails[cm.Name])
		seen[node] = true
		if err != nil {
			unreadable[node] = err.Error()
		} else {
			entries[node] = text
		}
	}
	if a != nil {
		a.mu.Lock()
		for node := range a.kept {
			if !seen[node] {
				delete(a.kept, node)
			}
		}
		a.mu.Unlock()
	}
	return entries, unreadable
}

func (a *Assembler) assemble(rec, tail *corev1.ConfigMap) (node, text string, err error) {
	if a == nil || rec.ResourceVersion == "" || len(rec.BinaryData) == 0 {
		return assemble(rec, tail, a.limit())
	}
	k := assembled{recRV: rec.ResourceVersion, limit: a.limit()}
	if tail != nil {
		k.tailRV = tail.ResourceVersion
	}
	a.mu.Lock()
	got, ok := a.kept[rec.Name]
	a.mu.Unlock()
	if ok && got.recRV == k.recRV && got.tailRV == k.tailRV && got.limit == k.limit {
		if got.err != "" {
			return rec.Name, "", errors.New(got.err)
		}
		return rec.Name, got.text, nil
	}
	node, text, err = assemble(rec, tail, k.limit)
	k.text = text
	if err != nil {
		k.err = err.Error()
	}
	a.mu.Lock()
	if a.kept == nil {
		a.kept = map[string]assembled{}
	}
	a.kept[node] = k
	a.mu.Unlock()
	return node, text, err
}

// CapBytes is the largest entry a record holds at these settings: the size of
// the largest legitimate entry (entry.LimitsFor), which is also the most any
// reader decodes. The probe shrinks a window that would pass it (Fit) rather
// than have it refused.
func CapBytes(window, maxServers int) int {
	return entry.LimitsFor(window, maxServers).MaxBytes
}
