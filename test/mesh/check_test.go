package mesh

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// canI is one question to the API server's authorizer.
type canI struct {
	sa, verb, resource string
	want               bool
}

// rbacDesign is what the design lets each ServiceAccount do, and what it
// must not: both read the Nodes and change none; each writes only its own
// ConfigMap, named, and can create none (RBAC's resourceNames cannot
// restrict create, so the manifests create the ConfigMaps); neither reads
// secrets.
func rbacDesign() []canI {
	var qs []canI
	for _, sa := range []string{probeSA, controllerSA} {
		qs = append(qs,
			canI{sa, "get", "nodes", true},
			canI{sa, "list", "nodes", true},
			canI{sa, "patch", "nodes", false},
			canI{sa, "update", "nodes", false},
			canI{sa, "delete", "nodes", false},
			canI{sa, "get", "secrets", false},
			canI{sa, "list", "secrets", false},
			canI{sa, "create", "configmaps", false},
			canI{sa, "list", "configmaps", false},
		)
	}
	return append(qs,
		canI{probeSA, "get", "configmaps/fleet-role-probe", true},
		canI{probeSA, "patch", "configmaps/fleet-role-probe", true},
		canI{probeSA, "delete", "configmaps/fleet-role-probe", false},
		canI{probeSA, "get", "configmaps/fleet-role-status", false},
		canI{probeSA, "patch", "configmaps/fleet-role-status", false},
		canI{controllerSA, "get", "configmaps/fleet-role-probe", true},
		canI{controllerSA, "patch", "configmaps/fleet-role-probe", false},
		canI{controllerSA, "get", "configmaps/fleet-role-status", true},
		canI{controllerSA, "patch", "configmaps/fleet-role-status", true},
		canI{controllerSA, "delete", "configmaps/fleet-role-status", false},
	)
}

// checkRBAC asks `kubectl auth can-i` as each ServiceAccount, against the
// live API server, every question of the design.
func (m *mesh) checkRBAC(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := m.settings.Namespace
	for _, q := range rbacDesign() {
		as := "system:serviceaccount:" + ns + ":" + q.sa
		cmd := exec.CommandContext(ctx, m.kubectlBin, "--kubeconfig", m.adminKC,
			"auth", "can-i", q.verb, q.resource, "-n", ns, "--as", as)
		out, err := cmd.Output()
		answer := strings.TrimSpace(string(out))
		// can-i exits 0 for yes and 1 for no; anything else is a failure
		// to ask.
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1 && answer == "no") {
			t.Fatalf("kubectl auth can-i %s %s --as %s: %v: %s", q.verb, q.resource, as, err, out)
		}
		if got := answer == "yes"; got != q.want {
			t.Errorf("%s can %s %s: %q, want %v", q.sa, q.verb, q.resource, answer, q.want)
		}
	}
}

// snapshot is what fleet-role must never change: the etcd membership, the
// Nodes, and every object the API server stores (by its etcd key and the
// revision it was last written at).
type snapshot struct {
	members []member
	nodes   map[string]nodeView
	keys    map[string]int64
}

type member struct {
	ID        uint64
	Name      string
	PeerURLs  []string
	IsLearner bool
}

type nodeView struct {
	Labels, Annotations map[string]string
	Taints              []corev1.Taint
	ResourceVersion     string
}

func (m *mesh) snapshot(t *testing.T) snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := m.etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	var s snapshot
	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatalf("etcd member list: %v", err)
	}
	for _, x := range ml.Members {
		s.members = append(s.members, member{x.ID, x.Name, slices.Sorted(slices.Values(x.PeerURLs)), x.IsLearner})
	}
	slices.SortFunc(s.members, func(a, b member) int { return strings.Compare(a.Name, b.Name) })

	nodes, err := m.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.nodes = map[string]nodeView{}
	for _, n := range nodes.Items {
		s.nodes[n.Name] = nodeView{n.Labels, n.Annotations, n.Spec.Taints, n.ResourceVersion}
	}

	resp, err := cli.Get(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("etcd keys: %v", err)
	}
	s.keys = map[string]int64{}
	for _, kv := range resp.Kvs {
		s.keys[string(kv.Key)] = kv.ModRevision
	}
	return s
}

// housekeeping are the keys the API server writes by itself while it runs:
// its identity lease in kube-system and its peer-server lease, each renewed
// every 10 s. No fleet-role component may touch them (RBAC above), and the
// audit log shows every write the components made.
var housekeeping = []string{"/registry/leases/kube-system/", "/registry/peerserverleases/"}

// compareSnapshots holds that nothing changed between before and after but
// fleet-role's two ConfigMaps (and the API server's own leases), and that
// both ConfigMaps were written.
func (m *mesh) compareSnapshots(t *testing.T, before, after snapshot) {
	t.Helper()
	if !reflect.DeepEqual(before.members, after.members) {
		t.Errorf("the etcd member list changed:\nbefore %+v\nafter  %+v", before.members, after.members)
	} else {
		t.Logf("etcd member list unchanged: %+v", after.members)
	}
	if len(before.nodes) != len(hosts) {
		t.Errorf("%d nodes before, want %d", len(before.nodes), len(hosts))
	}
	if !reflect.DeepEqual(before.nodes, after.nodes) {
		t.Errorf("the Nodes changed:\nbefore %+v\nafter  %+v", before.nodes, after.nodes)
	} else {
		t.Logf("%d Nodes unchanged (labels, annotations, taints, resourceVersion)", len(after.nodes))
	}

	ours := map[string]bool{}
	for _, cm := range append([]string{m.settings.StatusConfigMap}, hosts...) {
		ours["/registry/configmaps/"+m.settings.Namespace+"/"+cm] = false
	}
	var changed, house []string
	for k, rev := range after.keys {
		if before.keys[k] == rev {
			continue
		}
		switch {
		case isKey(ours, k):
			ours[k] = true
		case slices.ContainsFunc(housekeeping, func(p string) bool { return strings.HasPrefix(k, p) }):
			house = append(house, k)
		default:
			changed = append(changed, k)
		}
	}
	for k := range before.keys {
		if _, ok := after.keys[k]; !ok {
			changed = append(changed, k+" (deleted)")
		}
	}
	slices.Sort(changed)
	if len(changed) > 0 {
		t.Errorf("objects other than fleet-role's two ConfigMaps changed in the cluster:\n  %s", strings.Join(changed, "\n  "))
	}
	for k, written := range ours {
		if !written {
			t.Errorf("%s was never written", k)
		}
	}
	t.Logf("of %d objects stored, written during the scenario: fleet-role's two ConfigMaps, and the API server's own %s",
		len(after.keys), strings.Join(house, ", "))
}

func isKey(m map[string]bool, k string) bool {
	_, ok := m[k]
	return ok
}

// auditEvent is the part of an audit.k8s.io/v1 Event this test reads.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// checkAudit reads the API server's audit log: every write either
// ServiceAccount made is a patch of its own ConfigMap, each made some, and
// the API server refused none of their requests.
func (m *mesh) checkAudit(t *testing.T) {
	t.Helper()
	f, err := os.Open(m.audit)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	defer f.Close()
	ns := m.settings.Namespace
	own := map[string]string{
		"system:serviceaccount:" + ns + ":" + probeSA:      "(its node's record)", // TODO(mesh): records
		"system:serviceaccount:" + ns + ":" + controllerSA: m.settings.StatusConfigMap,
	}
	writes := map[string]int{}
	requests := map[string]int{}
	serverErrors := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log line: %v", err)
		}
		cm, ok := own[e.User.Username]
		if !ok || e.Stage != "ResponseComplete" {
			continue
		}
		requests[e.User.Username]++
		what := e.Verb
		if e.ObjectRef != nil {
			what = fmt.Sprintf("%s %s %s/%s", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name)
		}
		// A 4xx is the API server refusing the request (RBAC, an invalid
		// or conflicting write); a 5xx is its own trouble, only counted.
		if e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 && e.ResponseStatus.Code < 500 {
			t.Errorf("%s: the API server refused %s (%d)", e.User.Username, what, e.ResponseStatus.Code)
		}
		if e.ResponseStatus != nil && e.ResponseStatus.Code >= 500 {
			serverErrors[e.User.Username]++
		}
		if !slices.Contains(writeVerbs, e.Verb) {
			continue
		}
		r := e.ObjectRef
		if e.Verb != "patch" || r == nil || r.Resource != "configmaps" || r.Namespace != ns || r.Name != cm || r.Subresource != "" {
			t.Errorf("%s wrote something other than ConfigMap %s/%s: %s", e.User.Username, ns, cm, what)
			continue
		}
		writes[e.User.Username]++
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("audit log: %v", err)
	}
	for user, cm := range own {
		if writes[user] == 0 {
			t.Errorf("%s never patched %s", user, cm)
		}
		t.Logf("%s: %d requests (%d failed in the API server), %d writes, every one a patch of ConfigMap %s/%s",
			user, requests[user], serverErrors[user], writes[user], ns, cm)
	}
}
