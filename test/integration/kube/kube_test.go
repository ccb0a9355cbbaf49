package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/fleet-role/fleet-role/internal/entry"
	"github.com/fleet-role/fleet-role/internal/k3snode"
	"github.com/fleet-role/fleet-role/internal/kube"
	"github.com/fleet-role/fleet-role/internal/probe"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/kit/kubefake"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
	"github.com/fleet-role/fleet-role/lab/run/apiserver"
	"github.com/fleet-role/fleet-role/lab/run/apiserver/apiservertest"
)

const ns = "kube-test"

// backend is one implementation of ConfigMaps with a way to create one, as
// the manifests do at install.
type backend struct {
	name   string
	cms    kube.ConfigMaps
	create func(t *testing.T, name string)
	// writer returns the ConfigMaps writer i acts through: on the real
	// server a client holding a token of writer i's own ServiceAccount.
	writer func(t *testing.T, i int) kube.ConfigMaps
}

func memBackend() backend {
	m := kubefake.NewConfigMaps()
	return backend{
		name: "memory",
		cms:  m,
		create: func(t *testing.T, name string) {
			if err := m.Create(name, nil); err != nil {
				t.Fatal(err)
			}
		},
		writer: func(*testing.T, int) kube.ConfigMaps { return m },
	}
}

func realBackend(t *testing.T, s *apiserver.Server) (backend, kubernetes.Interface) {
	admin, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewClientForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return backend{
		name: "apiserver",
		cms:  c.ConfigMaps(ns),
		create: func(t *testing.T, name string) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		writer: func(t *testing.T, i int) kube.ConfigMaps {
			return writerClient(t, s, admin, i)
		},
	}, admin
}

// writerClient makes ServiceAccount writer-i, allowed to get and patch only
// the ConfigMap "shared", and a client holding a token of its own.
func writerClient(t *testing.T, s *apiserver.Server, admin kubernetes.Interface, i int) kube.ConfigMaps {
	ctx := context.Background()
	name := fmt.Sprintf("writer-%d", i)
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{"shared"}, Verbs: []string{"get", "patch"},
		}},
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}},
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := s.TokenFor(ctx, ns, name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.NewClientForConfig(s.TokenConfig(tok))
	if err != nil {
		t.Fatal(err)
	}
	return c.ConfigMaps(ns)
}

// TestKube runs every ConfigMaps and Nodes test against the real API server
// (on real etcd) and against lab/kit/kubefake's in-memory doubles, which must
// agree.
func TestKube(t *testing.T) {
	s := apiservertest.Start(t)
	real, admin := realBackend(t, s)
	for _, b := range []backend{real, memBackend()} {
		t.Run(b.name+"/semantics", func(t *testing.T) { testSemantics(t, b) })
		t.Run(b.name+"/concurrent", func(t *testing.T) { testConcurrent(t, b) })
	}
	t.Run("nodes", func(t *testing.T) { testNodes(t, s, admin) })
	t.Run("record informer", func(t *testing.T) { testRecordInformer(t, s, admin) })
	t.Run("node informer", func(t *testing.T) { testNodeInformer(t, s, admin) })
	t.Run("node informer selectors", func(t *testing.T) { testNodeSelectors(t, s, admin) })
	t.Run("settings informer", func(t *testing.T) { testSettingsInformer(t, s, admin) })
}

func ptr(s string) *string { return &s }

// step is one call and what it must give; want is the data afterwards.
type step struct {
	key   string
	value *string
	err   error // nil, kube.ErrNotFound, kube.ErrTooLarge or kube.ErrInvalid
	want  map[string]string
}

func testSemantics(t *testing.T, b backend) {
	ctx := context.Background()
	max := kubefake.MaxDataBytes
	long253 := strings.Repeat("k", 253) // the longest valid key
	cases := []struct {
		name  string
		steps []step
	}{
		{"set, add, remove, remove absent, empty value", []step{
			{key: "a", value: ptr("1"), want: map[string]string{"a": "1"}},
			{key: "b", value: ptr("2"), want: map[string]string{"a": "1", "b": "2"}},
			{key: "a", value: ptr("3"), want: map[string]string{"a": "3", "b": "2"}},
			{key: "a", value: nil, want: map[string]string{"b": "2"}},
			{key: "absent", value: nil, want: map[string]string{"b": "2"}},
			{key: "e", value: ptr(""), want: map[string]string{"b": "2", "e": ""}},
		}},
		{"invalid keys are refused and change nothing", []step{
			{key: "node-1", value: ptr("x"), want: map[string]string{"node-1": "x"}},
			{key: "a/b", value: ptr("x"), err: kube.ErrInvalid, want: map[string]string{"node-1": "x"}},
			{key: long253 + "k", value: ptr("x"), err: kube.ErrInvalid, want: map[string]string{"node-1": "x"}},
			{key: long253, value: ptr("x"), want: map[string]string{"node-1": "x", long253: "x"}},
		}},
		{"1 MiB of values: at, just over, just under", []step{
			{key: "big", value: ptr(strings.Repeat("x", max)), want: map[string]string{"big": strings.Repeat("x", max)}},
			{key: "one", value: ptr("y"), err: kube.ErrTooLarge, want: map[string]string{"big": strings.Repeat("x", max)}},
			{key: "big", value: ptr(strings.Repeat("z", max)), want: map[string]string{"big": strings.Repeat("z", max)}},
			{key: "big", value: ptr(strings.Repeat("x", max-2)), want: map[string]string{"big": strings.Repeat("x", max-2)}},
			{key: "one", value: ptr("y"), want: map[string]string{"big": strings.Repeat("x", max-2), "one": "y"}},
			{key: "one", value: ptr("yy"), want: map[string]string{"big": strings.Repeat("x", max-2), "one": "yy"}},
			{key: "one", value: ptr("yyy"), err: kube.ErrTooLarge, want: map[string]string{"big": strings.Repeat("x", max-2), "one": "yy"}},
			// Keys do not count toward the limit, only values.
			{key: long253, value: ptr(""), want: map[string]string{"big": strings.Repeat("x", max-2), "one": "yy", long253: ""}},
		}},
		{"a request past 3 MiB is refused as too large", []step{
			{key: "huge", value: ptr(strings.Repeat("x", 3<<20+1)), err: kube.ErrTooLarge, want: map[string]string{}},
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := "sem-" + strconv.Itoa(i)
			if _, err := b.cms.Get(ctx, name); !errors.Is(err, kube.ErrNotFound) {
				t.Fatalf("get before create: %v, want ErrNotFound", err)
			}
			if err := b.cms.PatchKey(ctx, name, "a", ptr("1")); !errors.Is(err, kube.ErrNotFound) {
				t.Fatalf("patch before create: %v, want ErrNotFound", err)
			}
			b.create(t, name)
			got, err := b.cms.Get(ctx, name)
			if err != nil || got == nil || len(got) != 0 {
				t.Fatalf("get after create = %v, %v; want an empty, non-nil map", got, err)
			}
			for j, s := range c.steps {
				err := b.cms.PatchKey(ctx, name, s.key, s.value)
				if s.err == nil && err != nil {
					t.Fatalf("step %d (%.20s): %v", j, s.key, err)
				}
				if s.err != nil && !errors.Is(err, s.err) {
					t.Fatalf("step %d (%.20s): %v, want %v", j, s.key, err, s.err)
				}
				if errors.Is(err, kube.ErrTooLarge) != (s.err == kube.ErrTooLarge) {
					t.Fatalf("step %d: errors.Is(%v, ErrTooLarge) = %v", j, err, errors.Is(err, kube.ErrTooLarge))
				}
				if err != nil {
					t.Logf("step %d refused: %.200s", j, err)
				}
				got, err := b.cms.Get(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, s.want) {
					t.Fatalf("step %d: data has keys %v, want %v (or values differ)", j, keys(got), keys(s.want))
				}
			}
		})
	}
}

func keys(m map[string]string) []string {
	var k []string
	for key, v := range m {
		k = append(k, fmt.Sprintf("%.20s(%d)", key, len(v)))
	}
	sort.Strings(k)
	return k
}

// testConcurrent has writers patch their own keys of one ConfigMap at the
// same time for many rounds, each value holding every round written so far
// as a probe's window does, and checks after every write that nothing was
// lost: its own key reads back, and no other writer's key ever goes back.
func testConcurrent(t *testing.T, b backend) {
	const writers, rounds = 8, 40
	ctx := context.Background()
	b.create(t, "shared")
	clients := make([]kube.ConfigMaps, writers)
	for i := range clients {
		clients[i] = b.writer(t, i)
	}
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, key := clients[i], fmt.Sprintf("node-%d", i)
			seen := map[string]int{} // other keys' round counts last seen
			var window []string
			for r := 1; r <= rounds; r++ {
				window = append(window, strconv.Itoa(r))
				v := strings.Join(window, ",")
				if err := c.PatchKey(ctx, "shared", key, &v); err != nil {
					errs <- fmt.Errorf("%s round %d: %w", key, r, err)
					return
				}
				data, err := c.Get(ctx, "shared")
				if err != nil {
					errs <- fmt.Errorf("%s round %d: %w", key, r, err)
					return
				}
				if data[key] != v {
					errs <- fmt.Errorf("%s round %d: read back %q", key, r, data[key])
					return
				}
				for k, val := range data {
					n := len(strings.Split(val, ","))
					if n < seen[k] {
						errs <- fmt.Errorf("%s round %d: %s went back from %d rounds to %d", key, r, k, seen[k], n)
						return
					}
					seen[k] = n
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	elapsed := time.Since(began)
	data, err := b.cms.Get(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	var full []string
	for r := 1; r <= rounds; r++ {
		full = append(full, strconv.Itoa(r))
	}
	for i := range writers {
		if got := data[fmt.Sprintf("node-%d", i)]; got != strings.Join(full, ",") {
			t.Errorf("node-%d ends with %q", i, got)
		}
	}
	if len(data) != writers {
		t.Errorf("%d keys, want %d", len(data), writers)
	}
	t.Logf("%s: %d writers x %d rounds = %d patches and %d gets in %.2f s (%.0f patch+get pairs/s)",
		b.name, writers, rounds, writers*rounds, writers*rounds, elapsed.Seconds(), float64(writers*rounds)/elapsed.Seconds())
}

func testNodes(t *testing.T, s *apiserver.Server, admin kubernetes.Interface) {
	ctx := context.Background()
	var nodes []corev1.Node
	for _, n := range []string{"server-b", "agent-a", "server-a"} {
		node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"fleet-role.io/voter-eligible": "true"}}}
		if _, err := admin.CoreV1().Nodes().Create(ctx, &node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, node)
	}
	c, err := kube.NewClientForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	mem := &kubefake.Nodes{}
	mem.Set(nodes...)
	nodes[0].Labels["changed"] = "after Set"
	for name, n := range map[string]kube.Nodes{"apiserver": c.Nodes(), "memory": mem} {
		got, err := n.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, g := range got {
			names = append(names, g.Name)
			if _, ok := g.Labels["changed"]; ok {
				t.Errorf("%s: a change to the caller's Node after Set reached the store", name)
			}
			if g.Labels["fleet-role.io/voter-eligible"] != "true" {
				t.Errorf("%s: %s lost its label", name, g.Name)
			}
		}
		if want := []string{"agent-a", "server-a", "server-b"}; !reflect.DeepEqual(names, want) {
			t.Errorf("%s: List = %v, want %v", name, names, want)
		}
	}
	// A ServiceAccount with no binding is refused, and the error says so.
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := s.TokenFor(ctx, ns, "nobody", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	nobody, err := kube.NewClientForConfig(s.TokenConfig(tok))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nobody.Nodes().List(ctx); !apierrors.IsForbidden(err) {
		t.Errorf("list nodes with no binding: %v, want Forbidden", err)
	}
}

// The record informer's cache holds what record.Read reads of each record
// and no more: the record it lists reads as the one written, without the
// managedFields and annotations the server holds, after the first list and
// after a watch event alike.
func testRecordInformer(t *testing.T, s *apiserver.Server, admin kubernetes.Interface) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "recorded"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj := record.Object(ns, record.Owner{Name: node.Name, UID: node.UID}, "first")
	obj.Annotations = map[string]string{"note": strings.Repeat("x", 1000)}
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, obj, metav1.CreateOptions{FieldManager: "writer"}); err != nil {
		t.Fatal(err)
	}
	held, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, obj.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(held.ManagedFields) == 0 {
		t.Fatal("the server holds no managedFields for the record: the test would show nothing")
	}
	c, err := kube.NewWatchClientForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	inf := c.NewRecordInformer(ns)
	go inf.Run(ctx)
	if err := inf.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	check := func(want string) bool {
		t.Helper()
		l, err := inf.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(l) != 1 {
			t.Fatalf("the informer lists %d records, want 1", len(l))
		}
		cm := l[0]
		if len(cm.ManagedFields) != 0 || len(cm.Annotations) != 0 || cm.UID != "" {
			t.Errorf("the cache holds %d managedFields, %d annotations and UID %q of the record, want none", len(cm.ManagedFields), len(cm.Annotations), cm.UID)
		}
		if cm.Namespace != ns || cm.ResourceVersion == "" || !record.IsRecord(cm) ||
			len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != node.UID {
			t.Errorf("the cache lost what the cache or record.Read needs: namespace %q, resourceVersion %q, labels %v, ownerReferences %v",
				cm.Namespace, cm.ResourceVersion, cm.Labels, cm.OwnerReferences)
		}
		n, text, err := record.Read(cm)
		if err != nil || n != node.Name {
			t.Fatalf("record.Read of the cached record: node %q, %v", n, err)
		}
		return text == want
	}
	if !check("first") {
		t.Fatal("the first list does not hold the record's entry")
	}
	if err := kube.NewRecordsFor(admin.CoreV1().ConfigMaps(ns), ns).Put(ctx, record.Owner{Name: node.Name, UID: node.UID}, "second"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !check("second") {
		if time.Now().After(deadline) {
			t.Fatal("the informer never saw the record's second entry within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A withheld marker overwritten at once by a record of samples (as
	// another probe's token may with the admission policy off): the cache
	// ends holding the samples, and Markers counts the marker all the same.
	// A record of samples, and a marker naming another node, count nothing.
	marker, err := entry.Encode(entry.Entry{Node: node.Name, Withheld: "the API server admitted, as a dry run, ..."})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := entry.Encode(entry.Entry{Node: "someone-else", Withheld: "not this record's"})
	if err != nil {
		t.Fatal(err)
	}
	recs := kube.NewRecordsFor(admin.CoreV1().ConfigMaps(ns), ns)
	owner := record.Owner{Name: node.Name, UID: node.UID}
	for _, text := range []string{foreign, marker, "third"} {
		if err := recs.Put(ctx, owner, text); err != nil {
			t.Fatal(err)
		}
	}
	deadline = time.Now().Add(30 * time.Second)
	for !check("third") {
		if time.Now().After(deadline) {
			t.Fatal("the informer never saw the record's third entry within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := inf.Markers(); got[node.Name] != 1 || len(got) != 1 {
		t.Fatalf("markers %v after one marker overwritten at once, want %s: 1", got, node.Name)
	}

	// Holding only the records of nodes that could vote: a known node that
	// could not is counted with its entry's size and not held, one not
	// known (yet) is held.
	big := strings.Repeat("x", 150_000)
	for _, name := range []string{"cannot-vote", "not-known"} {
		n, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := recs.Put(ctx, record.Owner{Name: n.Name, UID: n.UID}, big); err != nil {
			t.Fatal(err)
		}
	}
	holding := c.NewRecordInformerHolding(ns, func(node string) (bool, bool) {
		switch node {
		case "cannot-vote":
			return false, true
		case "not-known":
			return false, false
		}
		return true, true
	})
	go holding.Run(ctx)
	if err := holding.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := holding.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, cm := range l {
		listed = append(listed, cm.Name)
	}
	if !slices.Equal(listed, []string{"not-known", node.Name}) {
		t.Errorf("the holding informer lists %v, want [not-known %s]", listed, node.Name)
	}
	if got := holding.Unheld(); len(got) != 1 || got["cannot-vote"] != len(big) {
		t.Errorf("unheld %v, want cannot-vote: %d", got, len(big))
	}
	if n := holding.CachedBytes("cannot-vote"); n != 0 {
		t.Errorf("the cache holds %d bytes of cannot-vote's record, want none", n)
	}
	if n := holding.CachedBytes("not-known"); n != len(big) {
		t.Errorf("the cache holds %d bytes of not-known's record, want %d", n, len(big))
	}

	// A record deleted takes its marker count with it.
	if err := recs.Delete(ctx, node.Name); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		if _, ok := inf.Markers()[node.Name]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the marker count of the deleted record %s is still kept after 30s: %v", node.Name, inf.Markers())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The settings informer wakes a reader that waits on Changed alone (as
// livesettings.Follower does) for every state of its ConfigMap: absent at
// start (no event at all, only the first list), created, changed, its key
// removed and the ConfigMap deleted; another ConfigMap beside it is not
// what Current reads.
func testSettingsInformer(t *testing.T, s *apiserver.Server, admin kubernetes.Interface) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const name = "settings-watched"
	c, err := kube.NewWatchClientForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	inf := c.NewSettingsInformer(ns, name)
	go inf.Run(ctx)
	// seen waits, woken by Changed alone, for Current to pass check.
	seen := func(what string, check func(settings.Version) bool) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case <-inf.Changed():
				if v, ok := inf.Current(); ok && check(v) {
					return
				}
			case <-timeout:
				v, ok := inf.Current()
				t.Fatalf("%s: not seen within 30s of waiting on Changed; Current is %+v (ok %v)", what, v, ok)
			}
		}
	}
	seen("absent at start", func(v settings.Version) bool { return v.Absent })

	cms := admin.CoreV1().ConfigMaps(ns)
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-beside"}, Data: map[string]string{settings.ConfigMapKey: "window: 99\n"}}
	if _, err := cms.Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{settings.ConfigMapKey: "window: 20\n"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holds := func(data, rv string) func(settings.Version) bool {
		return func(v settings.Version) bool {
			return !v.Absent && string(v.Data) == data && v.ResourceVersion == rv
		}
	}
	seen("created", holds("window: 20\n", cm.ResourceVersion))
	cm.Data[settings.ConfigMapKey] = "window: 30\n"
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen("changed", holds("window: 30\n", cm.ResourceVersion))
	delete(cm.Data, settings.ConfigMapKey)
	if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen("its key removed", func(v settings.Version) bool { return v.Absent && v.ResourceVersion == cm.ResourceVersion })
	if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	seen("deleted", func(v settings.Version) bool { return v.Absent && v.ResourceVersion == "" })
}

// The Node informer's cache holds the view it was made with of each Node (a
// kubelet's images and the server's field sets gone), after the first list
// and after watch events; it follows a label change and a deletion, and its
// watch is not cut by the client's timeout, which bounds a whole response.
func testNodeInformer(t *testing.T, s *apiserver.Server, admin kubernetes.Interface) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k := testkit.Node{Name: "kubelet-1", Voter: true, Address: "127.0.5.1", PeerAddress: "127.0.9.1:12380"}.Kubelet(time.Now(), time.Now())
	created, err := admin.CoreV1().Nodes().Create(ctx, k, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = k.Status
	if _, err := admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const doomed = "kubelet-2" // deleted while the informer watches
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: doomed}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	held, err := admin.CoreV1().Nodes().Get(ctx, k.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(held.ManagedFields) == 0 || len(held.Status.Images) != testkit.KubeletImages {
		t.Fatalf("the server holds %d managedFields and %d images of the Node: the test would show nothing", len(held.ManagedFields), len(held.Status.Images))
	}

	// A timeout far under a watch's length: were it to bound the watch,
	// the informer would open a new one each second.
	cfg := s.AdminConfig()
	cfg.Timeout = time.Second
	var mu sync.Mutex
	watches := 0
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Query().Get("watch") == "true" && strings.HasSuffix(r.URL.Path, "/nodes") {
				mu.Lock()
				watches++
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	}
	c, err := kube.NewClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := settings.Defaults()
	view := kube.NodeView(st, probe.PeerAddressAnnotation)
	inf := c.NewNodeInformer(view)
	if _, err := inf.List(ctx); err == nil {
		t.Fatal("the informer lists Nodes before it has run: an empty cache would read as no Nodes at all")
	}
	go inf.Run(ctx)
	if err := inf.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	cached := func() (map[string]corev1.Node, []string) {
		t.Helper()
		l, err := inf.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]corev1.Node{}
		var names []string
		for _, n := range l {
			m[n.Name] = n
			names = append(names, n.Name)
		}
		return m, names
	}
	m, names := cached()
	all, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range all.Items {
		want = append(want, n.Name)
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("the informer lists %v, the server %v", names, want)
	}
	got := m[k.Name]
	held, err = admin.CoreV1().Nodes().Get(ctx, k.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, *view(held)) {
		t.Fatalf("the cache holds\n%+v\nwant the view of the server's Node\n%+v", got, *view(held))
	}
	if len(got.Status.Images) != 0 || len(got.ManagedFields) != 0 || got.Annotations[probe.PeerAddressAnnotation] != "127.0.9.1:12380" {
		t.Fatalf("the cached Node keeps %d images and %d managedFields, and peer address %q", len(got.Status.Images), len(got.ManagedFields), got.Annotations[probe.PeerAddressAnnotation])
	}
	wholeJSON, _ := json.Marshal(held)
	viewJSON, _ := json.Marshal(got)
	t.Logf("the Node as the server holds it: %d bytes of JSON; its view in the cache: %d", len(wholeJSON), len(viewJSON))

	// Two client timeouts pass; then a label change and a deletion arrive
	// by the watch.
	time.Sleep(2500 * time.Millisecond)
	body := []byte(`{"metadata":{"labels":{"` + st.EligibleLabel + `":"true"}}}`)
	if _, err := admin.CoreV1().Nodes().Patch(ctx, k.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().Nodes().Delete(ctx, doomed, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, _ := cached()
		_, listed := m[doomed]
		if m[k.Name].Labels[st.EligibleLabel] == "true" && !listed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 30s the informer did not see the label (%v) or the deletion (%s still listed: %v)", m[k.Name].Labels, doomed, listed)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	n := watches
	mu.Unlock()
	if n != 1 {
		t.Errorf("the informer opened %d watches of the Nodes in more than 2 s with a 1 s client timeout, want 1: the timeout cuts its watch", n)
	}
}

// testNodeSelectors: the informer made with kube.NodeSelectors holds the
// Nodes that could vote, each once, and never receives a change of a Node
// none selects: an agent's labels churned 200 times reach no view, where
// the same churn of an eligible Node reaches it at every change. Its
// lists and watches arrive in protobuf.
func testNodeSelectors(t *testing.T, s *apiserver.Server, admin kubernetes.Interface) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := settings.Defaults()
	const server, eligible, agent = "sel-server", "sel-eligible", "sel-agent"
	for name, labels := range map[string]map[string]string{
		server:   {k3snode.EtcdRoleLabel: "true", st.EligibleLabel: "true"},
		eligible: {st.EligibleLabel: "true"},
		agent:    {"kubernetes.io/os": "linux"},
	} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := s.AdminConfig()
	var mu sync.Mutex
	media := map[string]int{} // response media types of the Nodes' lists and watches
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && strings.HasSuffix(r.URL.Path, "/nodes") {
				mu.Lock()
				media[strings.SplitN(resp.Header.Get("Content-Type"), ";", 2)[0]]++
				mu.Unlock()
			}
			return resp, err
		})
	}
	c, err := kube.NewClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	viewed := map[string]int{} // the views made, by Node
	view := kube.NodeView(st)
	inf := c.NewNodeInformer(func(n *corev1.Node) *corev1.Node {
		mu.Lock()
		viewed[n.Name]++
		mu.Unlock()
		return view(n)
	}, kube.NodeSelectors(st)...)
	if inf.HasSynced() {
		t.Fatal("the informer says it has synced before it ran")
	}
	go inf.Run(ctx)
	if err := inf.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		t.Helper()
		l, err := inf.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range l {
			if strings.HasPrefix(n.Name, "sel-") {
				out = append(out, n.Name)
			}
		}
		return out
	}
	if got := names(); !reflect.DeepEqual(got, []string{eligible, server}) {
		t.Fatalf("the informer lists %v, want [%s %s]: each Node that could vote, once", got, eligible, server)
	}
	if _, ok := inf.Get(agent); ok {
		t.Fatalf("the informer holds %s, which no selector selects", agent)
	}
	// The churn unthrottled by the client's default 5 requests a second.
	ccfg := s.AdminConfig()
	ccfg.QPS, ccfg.Burst = -1, 0
	churner, err := kubernetes.NewForConfig(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	churn := func(name string, n int) {
		t.Helper()
		for i := range n {
			body := fmt.Sprintf(`{"metadata":{"labels":{"churn.example.com/count":"%d"}}}`, i)
			if _, err := churner.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const changes = 200
	churn(agent, changes)
	churn(eligible, changes)
	// The eligible Node's last change arrives; by then the agent's, made
	// before it, would have too.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n, ok := inf.Get(eligible); ok && n.ResourceVersion != "" {
			if cur, err := admin.CoreV1().Nodes().Get(ctx, eligible, metav1.GetOptions{}); err == nil && cur.ResourceVersion == n.ResourceVersion {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("within 30 s the informer did not see the eligible Node's last change")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	seenAgent, seenEligible := viewed[agent], viewed[eligible]
	mu.Unlock()
	if seenAgent != 0 {
		t.Errorf("%d changes of %s, which no selector selects, reached the process", seenAgent, agent)
	}
	if seenEligible < changes {
		t.Errorf("%d of %d changes of %s reached the view", seenEligible, changes, eligible)
	}
	// A Node labelled eligible comes in; unlabelled, it goes.
	body := []byte(`{"metadata":{"labels":{"` + st.EligibleLabel + `":"true"}}}`)
	if _, err := admin.CoreV1().Nodes().Patch(ctx, agent, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor := func(want []string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for got := names(); !reflect.DeepEqual(got, want); got = names() {
			if time.Now().After(deadline) {
				t.Fatalf("within 30 s the informer lists %v, want %v", got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor([]string{agent, eligible, server})
	body = []byte(`{"metadata":{"labels":{"` + st.EligibleLabel + `":null}}}`)
	if _, err := admin.CoreV1().Nodes().Patch(ctx, agent, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor([]string{eligible, server})
	mu.Lock()
	defer mu.Unlock()
	if len(media) != 1 || media["application/vnd.kubernetes.protobuf"] == 0 {
		t.Errorf("the Nodes' lists and watches arrived as %v, want protobuf alone", media)
	}
	t.Logf("%d changes of an agent's labels reached no view; %d of an eligible Node's reached %d views; responses by media type %v",
		changes, changes, seenEligible, media)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
