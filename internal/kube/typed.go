package kube

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// typed is a client of one resource, namespaced or not, over a REST client
// of its group: the requests client-go's generic typed client
// (k8s.io/client-go/gentype, what its generated clients are made of) makes,
// method for method and with the same signatures, so that client-go's
// typed interfaces and this package's are interchangeable. Not gentype
// itself: that package also holds the fake clients, so it imports
// client-go's testing package and through it OpenAPI's schema code and
// protobuf's descriptors, whose start-up cost every process of the one
// binary (the probe on every node) would carry: on a program that links
// only the REST client, core/v1, clientcmd and the informer cache, 2.6 MiB
// more resident alone, and 2.8 MiB with client-go's recorder (replaced by
// internal/nodeevents/recorder.go) beside it (docs/performance.md, "What
// the executable links").
type typed[T objectWithMeta, L runtime.Object] struct {
	resource  string
	rc        rest.Interface
	params    runtime.ParameterCodec
	namespace string // "" for a cluster-scoped resource
	newObject func() T
	newList   func() L
}

// objectWithMeta is an API object with its metadata: one that can be named.
type objectWithMeta interface {
	runtime.Object
	metav1.Object
}

func newTyped[T objectWithMeta, L runtime.Object](resource string, rc rest.Interface, params runtime.ParameterCodec, namespace string, newObject func() T, newList func() L) *typed[T, L] {
	return &typed[T, L]{resource: resource, rc: rc, params: params, namespace: namespace, newObject: newObject, newList: newList}
}

// on is a request of verb on this resource, in its namespace if it has one.
func (c *typed[T, L]) on(r *rest.Request) *rest.Request {
	return r.NamespaceIfScoped(c.namespace, c.namespace != "").Resource(c.resource)
}

// timeout is the request's own timeout a list or watch asks for.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

func (c *typed[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := c.newObject()
	err := c.on(c.rc.Get()).Name(name).VersionedParams(&opts, c.params).Do(ctx).Into(out)
	return out, err
}

func (c *typed[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := c.newList()
	err := c.on(c.rc.Get()).VersionedParams(&opts, c.params).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (c *typed[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.on(c.rc.Get()).VersionedParams(&opts, c.params).Timeout(timeout(opts)).Watch(ctx)
}

func (c *typed[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := c.newObject()
	err := c.on(c.rc.Post()).VersionedParams(&opts, c.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (c *typed[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := c.newObject()
	err := c.on(c.rc.Put()).Name(obj.GetName()).VersionedParams(&opts, c.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (c *typed[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.on(c.rc.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

func (c *typed[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := c.newObject()
	err := c.on(c.rc.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, c.params).Body(data).Do(ctx).Into(out)
	return out, err
}
