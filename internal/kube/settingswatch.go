package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/fleet-role/fleet-role/internal/settings"
)

// SettingsInformer watches one ConfigMap, the settings (fleet-role-settings):
// a list and a watch selected by its name, so that the API server sends
// nothing of the records and the status beside it, and RBAC can grant it by
// that name alone.
type SettingsInformer struct {
	informer
	name    string
	changed chan struct{}
}

// NewSettingsInformer makes the informer of ConfigMap name in namespace;
// Run runs it. Changed signals after each change it sees.
func (c *Client) NewSettingsInformer(namespace, name string) *SettingsInformer {
	lw := configMapListWatch(configMapClient(c.watch, namespace), func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
	inf := cache.NewSharedIndexInformerWithOptions(lw, &corev1.ConfigMap{}, cache.SharedIndexInformerOptions{})
	si := &SettingsInformer{informer: informer{inf: inf, what: "settings"}, name: name, changed: make(chan struct{}, 1)}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { si.notify() },
		UpdateFunc: func(any, any) { si.notify() },
		DeleteFunc: func(any) { si.notify() },
	})
	utilruntime.Must(err)
	return si
}

func (si *SettingsInformer) notify() {
	select {
	case si.changed <- struct{}{}:
	default: // one pending signal stands for any number: Current reads the latest
	}
}

// Run runs the informer until ctx is done, and signals Changed once more
// when its first list has synced. The first list's add is handed out
// before the informer counts itself synced, so a reader woken by it can
// find Current not ok yet and nothing more would wake it; and a ConfigMap
// absent at start makes no event at all.
func (si *SettingsInformer) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		si.inf.RunWithContext(ctx)
	}()
	if cache.WaitForCacheSync(ctx.Done(), si.inf.HasSynced) {
		si.notify()
	}
	<-done
	return nil
}

// Changed receives after each change of the ConfigMap the informer sees
// (its first list included); Current says what it is now.
func (si *SettingsInformer) Changed() <-chan struct{} { return si.changed }

// Current is the ConfigMap as the cache holds it; ok is false until the
// informer's first list has arrived.
func (si *SettingsInformer) Current() (v settings.Version, ok bool) {
	if !si.inf.HasSynced() {
		return settings.Version{}, false
	}
	for _, obj := range si.inf.GetStore().List() {
		cm, isCM := obj.(*corev1.ConfigMap)
		if !isCM || cm.Name != si.name {
			continue
		}
		data, has := cm.Data[settings.ConfigMapKey]
		return settings.Version{Data: []byte(data), ResourceVersion: cm.ResourceVersion, Absent: !has}, true
	}
	return settings.Version{Absent: true}, true
}
