package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fleet-role/fleet-role/internal/acting"
)

// Client settings. Each component makes a request or two a period (the
// probe one patch of its record, the controller at most one patch of the
// status; both read the Nodes, and the controller the records, from
// informers' caches), so client-go's default rate (5 per second, bursts of
// 10) is far above need; the timeout bounds one request so that an API server
// that accepts and never answers costs a loop at most this long, not forever.
// The informers' watches go through a client without it (Client.watch).
const (
	clientQPS       = 5
	clientBurst     = 10
	clientTimeout   = acting.APIRequestTimeout
	fieldManager    = "fleet-role"
	clientUserAgent = "fleet-role"
)

// Client is the client-go implementation of ConfigMaps, Nodes and Records,
// on the core/v1 client of core.go.
type Client struct {
	cfg *rest.Config
	rc  rest.Interface
	// watch is rc without the client's timeout, for the informers: the
	// timeout bounds a whole response, and would cut each watch after it.
	watch rest.Interface
	// rewatch, when set, is how long each informer's watch lasts before
	// it is made anew (Rewatch).
	rewatch time.Duration
}

// Rewatch makes every informer made by c from now on end each watch after
// d (the API server ends it; at least a second) and make it anew, rather
// than after client-go's 5 to 10 minutes. On k3s every server's API server
// stands behind the kubernetes Service, and a server whose etcd member was
// removed serves no more events until k3s restarts there (seen on real
// k3s, test/acting): a swap removes one by design, so what acts watches
// with it. A new watch goes through the Service again, to another server.
//
// Each list and watch is then also bounded on this side, at d and the
// client's request timeout more: a stopped API server may not even answer
// a watch's end, and an informer whose list or watch never returns is
// stuck for good (seen on real k3s: the leaving voter's actuator, its
// watch on its own API server, never saw the settle command).
func (c *Client) Rewatch(d time.Duration) error {
	wcfg := rest.CopyConfig(c.cfg)
	wcfg.Timeout = max(d, time.Second) + clientTimeout
	w, err := newCoreREST(wcfg)
	if err != nil {
		return err
	}
	c.watch, c.rewatch = w, d
	return nil
}

// rewatched is lw with its watches bounded by c.rewatch, when set.
func (c *Client) rewatched(lw *cache.ListWatch) *cache.ListWatch {
	if c.rewatch <= 0 {
		return lw
	}
	secs := max(int64(1), int64(c.rewatch/time.Second))
	w := lw.WatchFuncWithContext
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.TimeoutSeconds = &secs
		return w(ctx, o)
	}
	return lw
}

// Config is the configuration the client was made with (its rate, timeout
// and user agent set), for a test or the bench that needs a client of its
// own with the same identity.
func (c *Client) Config() *rest.Config { return rest.CopyConfig(c.cfg) }

// ConfigMapClient is the ConfigMap client of namespace, for what this
// package does not wrap.
func (c *Client) ConfigMapClient(namespace string) ConfigMapClient {
	return configMapClient(c.rc, namespace)
}

// NewClient connects with the kubeconfig at kubeconfigPath, or with the
// pod's in-cluster configuration (its ServiceAccount token) when the path is
// empty.
func NewClient(kubeconfigPath string) (*Client, error) {
	return NewClientWith(kubeconfigPath, nil)
}

// NewClientWith is NewClient with tune applied to the configuration first
// (RedialAfterFailure, say); nil for none.
func NewClientWith(kubeconfigPath string, tune func(*rest.Config)) (*Client, error) {
	var cfg *rest.Config
	var err error
	if kubeconfigPath == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration: %w", err)
		}
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfigPath)
		if err != nil {
			return nil, fmt.Errorf("read kubeconfig %s: %w", kubeconfigPath, err)
		}
	}
	if tune != nil {
		tune(cfg)
	}
	return NewClientForConfig(cfg)
}

// RedialAfterFailure makes cfg's client speak HTTP/1.1 and never reuse a
// connection that carried a failed request, so that the next request
// dials anew through the kubernetes Service. On k3s every server's API
// server stands behind that Service, and a swap removes one server's etcd
// member (the leaving voter's; an abort's newcomer's), after which that
// API server serves nothing until k3s restarts there: it holds a request
// until it times out, or answers it at once with an error. The host's own
// kube-proxy can no longer update its rules, so they still name it.
//   - An HTTP/2 connection that landed on it (it still answers pings)
//     carried every request into it for as long as it lived: on real k3s
//     both controllers lost their Lease so and the swap stopped.
//   - An HTTP/1.1 connection kept alive did the same when the broken
//     server answered with errors: an aborting newcomer's actuator sent
//     every request for minutes into its own host's stopped API server
//     and never read its last command.
//   - One request a connection cured that, but every request then paid a
//     TCP and TLS handshake: over a voter's slowed path (600 ms a round
//     trip) the controller's Lease renewals took past their deadline and
//     the Lease flapped for a minute and a half.
//
// So a connection is kept while its requests succeed, and dropped after a
// request that timed out (Go closes it) or was answered with a server
// error (5xx): the next request finds the transport's idle connections
// closed, that one among them, and dials anew.
func RedialAfterFailure(cfg *rest.Config) {
	cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &redialAfterFailure{rt: rt} })
}

// redialAfterFailure closes the idle connections of its transport before
// the first request after a server error's response: the connection that
// carried it went back to the idle pool once its body was read, and is
// not reused.
type redialAfterFailure struct {
	rt     http.RoundTripper
	failed atomic.Bool
}

func (r *redialAfterFailure) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.failed.Swap(false) {
		utilnet.CloseIdleConnectionsFor(r.rt)
	}
	res, err := r.rt.RoundTrip(req)
	if err == nil && res.StatusCode >= http.StatusInternalServerError {
		r.failed.Store(true)
	}
	return res, err
}

// WrappedRoundTripper lets client-go reach the transport below (to cancel
// a request, to close its idle connections).
func (r *redialAfterFailure) WrappedRoundTripper() http.RoundTripper { return r.rt }

// NewClientForConfig connects with cfg, setting the rate and timeout above
// where cfg leaves them unset.
func NewClientForConfig(cfg *rest.Config) (*Client, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = clientQPS, clientBurst
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = clientTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = clientUserAgent
	}
	// Answers in protobuf too where the API server serves it (every
	// core/v1 and coordination/v1 type), JSON else; requests keep sending
	// JSON (a merge patch is JSON by definition). Each write of a probe's
	// record is answered with the whole object, and decoding it as JSON
	// was a tenth of the probe's CPU a sample (BenchmarkProbeSample's
	// profile); protobuf decodes it in about a quarter of that
	// (BenchmarkNodeEventDecode, for a Node).
	if cfg.AcceptContentTypes == "" {
		cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	rc, err := newCoreREST(cfg)
	if err != nil {
		return nil, err
	}
	wcfg := rest.CopyConfig(cfg)
	wcfg.Timeout = 0
	// The informers' lists and watches in protobuf as well (cfg says so
	// now): every watch event is decoded whole before a view keeps a part.
	watch, err := newCoreREST(wcfg)
	if err != nil {
		return nil, err
	}
	return &Client{cfg: cfg, rc: rc, watch: watch}, nil
}

// NewWatchClientForConfig is NewClientForConfig without the client's
// timeout, which would cut a watch's long response: each watch request is
// bounded by the server's timeoutSeconds instead.
func NewWatchClientForConfig(cfg *rest.Config) (*Client, error) {
	c, err := NewClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	c.cfg.Timeout = 0
	c.rc = c.watch
	return c, nil
}

// ConfigMaps returns the ConfigMaps of namespace.
func (c *Client) ConfigMaps(namespace string) ConfigMaps {
	return &clientConfigMaps{c: configMapClient(c.rc, namespace), ns: namespace}
}

// Nodes returns the cluster's Nodes.
func (c *Client) Nodes() Nodes { return clientNodes{c: nodeClient(c.rc)} }

type clientConfigMaps struct {
	c  ConfigMapClient
	ns string
}

func (m *clientConfigMaps) Get(ctx context.Context, name string) (map[string]string, error) {
	cm, err := m.c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get configmap %s/%s: %w", m.ns, name, classify(err))
	}
	data := make(map[string]string, len(cm.Data))
	for k, v := range cm.Data {
		data[k] = v
	}
	return data, nil
}

func (m *clientConfigMaps) PatchKey(ctx context.Context, name, key string, value *string) error {
	body, err := json.Marshal(map[string]map[string]*string{"data": {key: value}})
	if err != nil {
		return fmt.Errorf("patch configmap %s/%s key %s: %w", m.ns, name, key, err)
	}
	_, err = m.c.Patch(ctx, name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("patch configmap %s/%s key %s: %w", m.ns, name, key, classify(err))
	}
	return nil
}

// classify adds this package's sentinel to an API error, keeping the API
// error in the chain.
func classify(err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case apierrors.IsRequestEntityTooLargeError(err), isFieldTooLong(err):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	case apierrors.IsInvalid(err):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: %w", ErrForbidden, err)
	}
	return err
}

// isFieldTooLong recognises the API server's refusal of a ConfigMap whose
// data passes the limit: 422 Invalid with a FieldValueTooLong cause.
func isFieldTooLong(err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil {
		return false
	}
	for _, c := range st.Status().Details.Causes {
		if c.Type == metav1.CauseTypeTooLong {
			return true
		}
	}
	return false
}

type clientNodes struct{ c nodeLister }

func (n clientNodes) List(ctx context.Context) ([]corev1.Node, error) {
	// ResourceVersion "0" is served from the API server's watch cache, as a
	// kubelet's informers are: a list right after a write otherwise waits
	// for the cache to catch up (94 ms against 1.2 ms, measured) and reads
	// etcd once per list. Labels a period old are fine here. (The commands
	// read the Nodes from a NodeInformer; this list is the tests' and the
	// bench's.)
	l, err := n.c.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return l.Items, nil
}
