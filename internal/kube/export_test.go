package kube

import corev1 "k8s.io/api/core/v1"

// CachedEntryBytes is the size of the data the informer's cache holds of
// the record name (0 when it holds none, or no such record).
func CachedEntryBytes(i *RecordInformer, name string) int {
	n := 0
	for _, obj := range i.inf.GetStore().List() {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == name {
			for _, v := range cm.Data {
				n += len(v)
			}
		}
	}
	return n
}
