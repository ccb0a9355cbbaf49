package kube

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"

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
//
// It holds only the Nodes its label selectors select, one list and watch
// each: a Node none selects never reaches the process. Every watch event
// is decoded whole before the view keeps a few fields of it, and a node's
// kubelet credentials may set any label of its own Node but the
// node-restriction.kubernetes.io/ ones, as often as the API server admits:
// an agent's Node of thousands of labels, churned, would cost each probe
// and the controller a decode of it at every change (docs/security.md).
type NodeInformer struct {
	parts []nodeWatch
}

// nodeWatch is the informer of one selector.
type nodeWatch struct {
	informer
	lister listersv1.NodeLister
}

// NewNodeInformer makes the informer; Run runs it. view is what the cache
// keeps of each Node (NodeView): it is applied to every Node the
// list and the watch deliver, before the cache stores it. selectors are
// label selectors (NodeSelectors); the informer holds the Nodes any
// of them selects, and with none, every Node.
func (c *Client) NewNodeInformer(view func(*corev1.Node) *corev1.Node, selectors ...string) *NodeInformer {
	if len(selectors) == 0 {
		selectors = []string{""}
	}
	i := &NodeInformer{}
	for _, sel := range selectors {
		i.parts = append(i.parts, c.nodeWatch(view, sel))
	}
	return i
}

func (c *Client) nodeWatch(view func(*corev1.Node) *corev1.Node, selector string) nodeWatch {
	nodes := nodeClient(c.watch)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return nodes.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformerWithOptions(c.rewatched(lw), &corev1.Node{}, cache.SharedIndexInformerOptions{})
	// Set before the informer runs, which is the only time it takes one.
	// Anything that is no Node (the cache's tombstone of a Node deleted
	// while a watch was down) passes unchanged.
	utilruntime.Must(inf.SetTransform(func(obj any) (any, error) {
		if n, ok := obj.(*corev1.Node); ok {
			return view(n), nil
		}
		return obj, nil
	}))
	what := "nodes"
	if selector != "" {
		what = "nodes (" + selector + ")"
	}
	return nodeWatch{informer: informer{inf: inf, what: what}, lister: listersv1.NewNodeLister(inf.GetIndexer())}
}

// Run runs every selector's informer until ctx is done, and returns once
// all have stopped.
func (i *NodeInformer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, p := range i.parts {
		wg.Go(func() { _ = p.Run(ctx) })
	}
	wg.Wait()
	return nil
}

// WaitForSync waits until every selector's first list has arrived or ctx
// is done.
func (i *NodeInformer) WaitForSync(ctx context.Context) error {
	for _, p := range i.parts {
		if err := p.WaitForSync(ctx); err != nil {
			return err
		}
	}
	return nil
}

// HasSynced says whether every selector's first list has arrived.
func (i *NodeInformer) HasSynced() bool {
	for _, p := range i.parts {
		if !p.inf.HasSynced() {
			return false
		}
	}
	return true
}

// Get is node's cached view, and whether the cache holds it: read only.
func (i *NodeInformer) Get(node string) (*corev1.Node, bool) {
	var found *corev1.Node
	for _, p := range i.parts {
		if n, err := p.lister.Get(node); err == nil && (found == nil || newer(n, found)) {
			found = n
		}
	}
	return found, found != nil
}

// newer says whether a is a later version of the same Node than b. Two
// selectors' watches may hold one Node at versions a moment apart; the
// later is the one to read. A resourceVersion is opaque to clients in
// general, but the API server's are etcd revisions: a larger one is later.
func newer(a, b *corev1.Node) bool {
	ra, errA := strconv.ParseUint(a.ResourceVersion, 10, 64)
	rb, errB := strconv.ParseUint(b.ResourceVersion, 10, 64)
	return errA == nil && errB == nil && ra > rb
}

// List implements Nodes: the cached views, sorted by name as the API server
// lists them. They share their labels, annotations and lists with the
// cache: read only. Until every selector's first list has arrived it
// returns an error.
func (i *NodeInformer) List(ctx context.Context) ([]corev1.Node, error) {
	byName := map[string]*corev1.Node{}
	for _, p := range i.parts {
		if err := p.synced(ctx); err != nil {
			return nil, err
		}
		l, err := p.lister.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", p.what, err)
		}
		for _, n := range l {
			if old, ok := byName[n.Name]; !ok || newer(n, old) {
				byName[n.Name] = n
			}
		}
	}
	out := make([]corev1.Node, 0, len(byName))
	for _, n := range byName {
		out = append(out, *n)
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
