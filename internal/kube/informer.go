package kube

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// informer is what the records' and the Nodes' informers share: running,
// and telling whether the first list has arrived.
type informer struct {
	inf  cache.SharedIndexInformer
	what string // "records", "nodes": for errors
}

// Run runs the informer until ctx is done, and returns once it has stopped:
// a component runs it as one of its parts (internal/cli), so that its
// shutdown waits for it. An informer does not fail: a list or watch the API
// server refuses is retried, and WaitForSync and List say meanwhile that
// the first list has not arrived.
func (i informer) Run(ctx context.Context) error {
	i.inf.RunWithContext(ctx)
	return nil
}

// WaitForSync waits until the first list has arrived or ctx is done.
func (i informer) WaitForSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), i.inf.HasSynced) {
		return fmt.Errorf("%s informer did not sync: %w", i.what, context.Cause(ctx))
	}
	return nil
}

// synced is nil once the first list has arrived: until then a reader gets
// an error rather than an empty cache, which would read as no records or
// no Nodes at all.
func (i informer) synced(ctx context.Context) error {
	if i.inf.HasSynced() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fmt.Errorf("list %s: the informer has not synced its first list yet", i.what)
}

// NodeInformer is a component's view of the Nodes: one list and then a
// watch, so that a period reads a local cache instead of listing every Node
// of the cluster (each probe once a period, the controller once a
// decision: a list whole, its size set by other hosts' kubelets), and a
// cache that keeps of each Node only the view it is made with.
type NodeInformer struct {
	informer
	lister listersv1.NodeLister
}

// NewNodeInformer makes the informer; Run runs it. view is what the cache
// keeps of each Node (decide.NodeView): it is applied to every Node the
// list and the watch deliver, before the cache stores it.
func (c *Client) NewNodeInformer(view func(*corev1.Node) *corev1.Node) *NodeInformer {
	nodes := nodeClient(c.watch)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return nodes.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(lw, &corev1.Node{}, cache.SharedIndexInformerOptions{})
	// Set before the informer runs, which is the only time it takes one.
	// Anything that is no Node (the cache's tombstone of a Node deleted
	// while a watch was down) passes unchanged.
	utilruntime.Must(inf.SetTransform(func(obj any) (any, error) {
		if n, ok := obj.(*corev1.Node); ok {
			return view(n), nil
		}
		return obj, nil
	}))
	return &NodeInformer{informer: informer{inf: inf, what: "nodes"}, lister: listersv1.NewNodeLister(inf.GetIndexer())}
}

// Get is node's cached view, and whether the cache holds it: read only.
func (i *NodeInformer) Get(node string) (*corev1.Node, bool) {
	n, err := i.lister.Get(node)
	return n, err == nil
}

// List implements Nodes: the cached views, sorted by name as the API server
// lists them. They share their labels, annotations and lists with the
// cache: read only. Until the first list has arrived it returns an error.
func (i *NodeInformer) List(ctx context.Context) ([]corev1.Node, error) {
	if err := i.synced(ctx); err != nil {
		return nil, err
	}
	l, err := i.lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	out := make([]corev1.Node, len(l))
	for j, n := range l {
		out[j] = *n
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

var _ Nodes = (*NodeInformer)(nil)

// configMapListWatch lists and watches the ConfigMaps of cms that select
// narrows each request to (by label, by name).
func configMapListWatch(cms ConfigMapClient, selected func(*metav1.ListOptions)) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			selected(&o)
			return cms.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			selected(&o)
			return cms.Watch(ctx, o)
		},
	}
}
