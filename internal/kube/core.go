package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// fleet-role calls core/v1 for ConfigMaps, Nodes, Endpoints and Events (and
// coordination/v1 for its Lease, lease.go). client-go's typed core/v1 client would do, but it decodes through
// client-go's scheme (k8s.io/client-go/kubernetes/scheme), which imports and
// registers every API group's types at start-up: about 8 MiB of a process's
// resident memory and 11 MB of its executable, measured (docs/performance.md).
// So the client here is this package's typed client (typed.go: the requests
// of client-go's generic typed client, gentype, what the generated clients
// are made of) over a scheme that knows core/v1 alone.

var (
	coreScheme = runtime.NewScheme()
	coreCodecs = serializer.NewCodecFactory(coreScheme)
	coreParams = runtime.NewParameterCodec(coreScheme)
)

func init() {
	// core/v1's types, and meta/v1's options and Status in its version.
	utilruntime.Must(corev1.AddToScheme(coreScheme))
}

// ConfigMapClient is what this package calls of a ConfigMap client:
// client-go's typed ConfigMapInterface has these methods, so a test or the
// bench may pass a whole clientset's (clientset.CoreV1().ConfigMaps(ns)).
type ConfigMapClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.ConfigMap, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// nodeLister is what this package calls of a Node client.
type nodeLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// newCoreREST is a REST client for core/v1 as client-go's generated one is
// configured (its setConfigDefaults), with the core/v1 scheme.
func newCoreREST(cfg *rest.Config) (rest.Interface, error) {
	return newREST(cfg, corev1.SchemeGroupVersion, "/api", coreScheme, coreCodecs)
}

// newREST is a REST client for one group version, with a scheme that knows
// that group alone.
func newREST(cfg *rest.Config, gv schema.GroupVersion, apiPath string, scheme *runtime.Scheme, codecs serializer.CodecFactory) (rest.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &gv
	cfg.APIPath = apiPath
	cfg.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(scheme, codecs).WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes %s client: %w", gv, err)
	}
	return rc, nil
}

func configMapClient(rc rest.Interface, namespace string) ConfigMapClient {
	return newTyped("configmaps", rc, coreParams, namespace,
		func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} })
}

func nodeClient(rc rest.Interface) *typed[*corev1.Node, *corev1.NodeList] {
	return newTyped("nodes", rc, coreParams, "",
		func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} })
}
