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

// IsRecord reports whether cm carries the record label.
func IsRecord(cm *corev1.ConfigMap) bool {
	return cm != nil && cm.Labels[Label] == LabelValue
}

// ErrNotRecord is returned by Read for a ConfigMap that is not a record.
var ErrNotRecord = errors.New("not a probe record")

// Read returns the node a record belongs to and its entry text. It checks
// the shape the admission policy enforces, so that a record written around
// the policy (by an administrator, or on a cluster without it) is reported
// rather than trusted: the record label, the one data key, and an owner
// reference to the Node of the record's name when it has one.
func Read(cm *corev1.ConfigMap) (node, entry string, err error) {
	if !IsRecord(cm) {
		return "", "", fmt.Errorf("configmap %s: %w (no label %s)", cm.Name, ErrNotRecord, Selector)
	}
	node = cm.Name
	if len(cm.BinaryData) > 0 {
		return node, "", fmt.Errorf("record %s: has binaryData; a record holds only data.%s", cm.Name, DataKey)
	}
	if len(cm.Data) != 1 {
		return node, "", fmt.Errorf("record %s: %d data keys; a record holds only data.%s", cm.Name, len(cm.Data), DataKey)
	}
	text, ok := cm.Data[DataKey]
	if !ok {
		return node, "", fmt.Errorf("record %s: no data.%s", cm.Name, DataKey)
	}
	for _, o := range cm.OwnerReferences {
		if o.Kind == "Node" && o.Name != node {
			return node, "", fmt.Errorf("record %s: owned by Node %q, not the node it is named after", cm.Name, o.Name)
		}
	}
	return node, text, nil
}

// ReadAll reads records as the controller and `fleet-role decide` do: node
// name to entry text, and node name to why for the records that cannot be
// read as records. A ConfigMap that is no record is passed over.
func ReadAll(records []*corev1.ConfigMap) (entries, unreadable map[string]string) {
	entries, unreadable = map[string]string{}, map[string]string{}
	for _, cm := range records {
		node, text, err := Read(cm)
		switch {
		case errors.Is(err, ErrNotRecord):
			continue
		case err != nil:
			unreadable[node] = err.Error()
		default:
			entries[node] = text
		}
	}
	return entries, unreadable
}

// CapBytes is the largest entry a record holds at these settings: the size of
// the largest legitimate entry (entry.LimitsFor), which is also the most any
// reader decodes. The probe shrinks a window that would pass it (Fit) rather
// than have it refused.
func CapBytes(window, maxServers int) int {
	return entry.LimitsFor(window, maxServers).MaxBytes
}
