package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/fleet-role/fleet-role/internal/controller"
	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/kit/auditlog"
)

// canI is one question to the API server's authorizer, in fleet-role's
// namespace unless ns names another.
type canI struct {
	sa, verb, resource string
	want               bool
	ns                 string
}

// rbacDesign is what deploy/base/rbac.yaml lets each ServiceAccount do, and
// what it must not: both list and watch the Nodes (their informers) and may
// neither get nor change one; neither reads a Secret or reaches another namespace's
// ConfigMaps. The probe gets, creates, patches and deletes ConfigMaps of
// the records' namespace (RBAC cannot restrict create by name nor bind a
// name to the writer's node: the admission policy does, checkAdmission and
// checkAudit below) and lists none; in fleet-role's own namespace it may
// write nothing, so that the status and the settings are out of its reach
// by RBAC alone. The controller lists and watches the records (its
// informer, by label) and writes none, and gets and patches
// fleet-role-status alone, by name.
func rbacDesign() []canI {
	var qs []canI
	for _, sa := range []string{probeSA, controllerSA} {
		qs = append(qs,
			canI{sa: sa, verb: "list", resource: "nodes", want: true},
			canI{sa: sa, verb: "get", resource: "nodes"},
			canI{sa: sa, verb: "watch", resource: "nodes", want: true},
			canI{sa: sa, verb: "patch", resource: "nodes"},
			canI{sa: sa, verb: "update", resource: "nodes"},
			canI{sa: sa, verb: "delete", resource: "nodes"},
			canI{sa: sa, verb: "get", resource: "secrets"},
			canI{sa: sa, verb: "list", resource: "secrets"},
			canI{sa: sa, verb: "update", resource: "configmaps"},
			canI{sa: sa, verb: "deletecollection", resource: "configmaps"},
			canI{sa: sa, verb: "update", resource: "configmaps", ns: recordsNS},
			canI{sa: sa, verb: "deletecollection", resource: "configmaps", ns: recordsNS},
			canI{sa: sa, verb: "get", resource: "configmaps", ns: "kube-system"},
			canI{sa: sa, verb: "list", resource: "configmaps", ns: "kube-system"},
			canI{sa: sa, verb: "create", resource: "configmaps", ns: "default"},
			canI{sa: sa, verb: "patch", resource: "configmaps", ns: "default"},
		)
	}
	return append(qs,
		canI{sa: probeSA, verb: "get", resource: "configmaps/voter-1", want: true, ns: recordsNS},
		canI{sa: probeSA, verb: "create", resource: "configmaps", want: true, ns: recordsNS},
		canI{sa: probeSA, verb: "patch", resource: "configmaps/voter-1", want: true, ns: recordsNS},
		canI{sa: probeSA, verb: "delete", resource: "configmaps/voter-1", want: true, ns: recordsNS},
		canI{sa: probeSA, verb: "list", resource: "configmaps", ns: recordsNS},
		canI{sa: probeSA, verb: "watch", resource: "configmaps", ns: recordsNS},
		canI{sa: probeSA, verb: "create", resource: "configmaps"},
		canI{sa: probeSA, verb: "patch", resource: "configmaps/fleet-role-status"},
		canI{sa: probeSA, verb: "delete", resource: "configmaps/fleet-role-status"},
		canI{sa: probeSA, verb: "patch", resource: "configmaps/fleet-role-settings"},
		canI{sa: probeSA, verb: "get", resource: "configmaps/voter-1"},
		canI{sa: controllerSA, verb: "list", resource: "configmaps", want: true, ns: recordsNS},
		canI{sa: controllerSA, verb: "watch", resource: "configmaps", want: true, ns: recordsNS},
		canI{sa: controllerSA, verb: "list", resource: "configmaps"},
		canI{sa: controllerSA, verb: "patch", resource: "configmaps/voter-1", ns: recordsNS},
		canI{sa: controllerSA, verb: "create", resource: "configmaps", ns: recordsNS},
		canI{sa: controllerSA, verb: "get", resource: "configmaps/fleet-role-status", want: true},
		canI{sa: controllerSA, verb: "patch", resource: "configmaps/fleet-role-status", want: true},
		canI{sa: controllerSA, verb: "update", resource: "configmaps/fleet-role-status"},
		canI{sa: controllerSA, verb: "delete", resource: "configmaps/fleet-role-status"},
		canI{sa: controllerSA, verb: "create", resource: "configmaps"},
		canI{sa: controllerSA, verb: "get", resource: "configmaps/voter-1"},
		canI{sa: controllerSA, verb: "patch", resource: "configmaps/voter-1"},
		canI{sa: controllerSA, verb: "delete", resource: "configmaps/voter-1"},
		canI{sa: controllerSA, verb: "get", resource: "configmaps/fleet-role-settings"},
	)
}

// checkRBAC asks `kubectl auth can-i` as each ServiceAccount, against the
// live API server, every question of the design.
func (m *mesh) checkRBAC(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, q := range rbacDesign() {
		as := "system:serviceaccount:" + m.settings.Namespace + ":" + q.sa
		ns := cmp.Or(q.ns, m.settings.Namespace)
		cmd := exec.CommandContext(ctx, m.kubectlBin, "--kubeconfig", m.adminKC,
			"auth", "can-i", q.verb, q.resource, "-n", ns, "--as", as)
		out, err := cmd.Output()
		answer := strings.TrimSpace(string(out))
		// can-i exits 0 for yes and 1 for no; anything else is a failure
		// to ask.
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1 && answer == "no") {
			fatalf(t, "kubectl auth can-i %s %s --as %s: %v: %s", q.verb, q.resource, as, err, out)
		}
		if got := answer == "yes"; got != q.want {
			errorf(t, "%s can %s %s in %s: %q, want %v", q.sa, q.verb, q.resource, ns, answer, q.want)
		}
	}
}

// checkRecords holds the records as the probes left them: one per host,
// named after its node, carrying the record labels, owned by its Node (by
// UID), and in the tail layout (docs/records.md, "Layouts": the elected
// controller's Lease says it reads it) with a tail labelled and owned
// alike that reads with it; and no other ConfigMap carrying the label.
func (m *mesh) checkRecords(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := m.admin.CoreV1().ConfigMaps(m.settings.RecordsNamespace()).List(ctx, metav1.ListOptions{LabelSelector: record.AnySelector})
	if err != nil {
		fatal(t, err)
	}
	tails := map[string]*corev1.ConfigMap{}
	for i := range l.Items {
		if cm := &l.Items[i]; record.IsTail(cm) {
			tails[record.NodeOf(cm)] = cm
		}
	}
	var got []string
	var window, packed, whole int
	for i := range l.Items {
		cm := &l.Items[i]
		if record.IsTail(cm) {
			continue
		}
		got = append(got, cm.Name)
		node, text, err := record.Assemble(cm, tails[cm.Name])
		if err != nil {
			errorf(t, "record %s: %v", cm.Name, err)
			continue
		}
		n, err := m.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			errorf(t, "record %s: its Node: %v", cm.Name, err)
			continue
		}
		want := []metav1.OwnerReference{record.Owner{Name: n.Name, UID: n.UID}.OwnerReference()}
		if !reflect.DeepEqual(cm.OwnerReferences, want) {
			errorf(t, "record %s: ownerReferences %+v, want %+v", cm.Name, cm.OwnerReferences, want)
		}
		if !reflect.DeepEqual(cm.Labels, record.Labels()) {
			errorf(t, "record %s: labels %v, want %v", cm.Name, cm.Labels, record.Labels())
		}
		tail := tails[cm.Name]
		if len(cm.BinaryData[record.WindowKey]) == 0 || tail == nil {
			errorf(t, "record %s: in the entry layout (data keys %d, tail %v), though the elected controller reads the tail layout", cm.Name, len(cm.Data), tail != nil)
			continue
		}
		if !reflect.DeepEqual(tail.OwnerReferences, want) || !reflect.DeepEqual(tail.Labels, record.TailLabels()) {
			errorf(t, "tail %s: ownerReferences %+v labels %v, want %+v and %v", tail.Name, tail.OwnerReferences, tail.Labels, want, record.TailLabels())
		}
		window++
		packed += len(cm.BinaryData[record.WindowKey])
		whole += len(text)
	}
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(m.hosts)); !slices.Equal(got, want) {
		errorf(t, "records %v, want one per host %v", got, want)
	} else {
		t.Logf("records %s: each named after its node, labelled %s, owned by its Node; %d in the tail layout, their windows %d bytes packed, %d whole",
			strings.Join(got, ", "), record.Selector, window, packed, whole)
	}
}

// admissionCheckAgent marks the requests checkAdmission makes, so that
// checkAudit, which holds every request the components make, leaves them out.
const admissionCheckAgent = "fleet-role-mesh/admission-check"

// checkAdmission asks the API server, as the probe of the first server with
// its Pod-bound token, for writes the admission policy must refuse (another
// node's record, a write or the deletion of the status) and for the one it
// must admit (its own record). RBAC allows all of them (rbacDesign): only
// the policy tells them apart. Each is a server-side dry run: it passes
// admission and stores nothing.
func (m *mesh) checkAdmission(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, other := m.fl.Voters[0], m.fl.Voters[1]
	cfg := m.api.TokenConfig(m.probeTokens[node])
	cfg.UserAgent = admissionCheckAgent
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fatal(t, err)
	}
	ns, rns, statusCM := m.settings.Namespace, m.settings.RecordsNamespace(), m.settings.StatusConfigMap
	cms, own := cs.CoreV1().ConfigMaps(rns), cs.CoreV1().ConfigMaps(ns)
	dry := []string{metav1.DryRunAll}
	recordOf := func(name string) *corev1.ConfigMap {
		n, err := m.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			fatal(t, err)
		}
		return record.Object(rns, record.Owner{Name: n.Name, UID: n.UID}, "mesh admission check")
	}
	statusPatch := fmt.Sprintf(`{"data":{%q:"{}"}}`, status.StatusKey)
	attempts := []struct {
		what    string
		allowed bool
		do      func() error
	}{
		{"create its own record " + record.Name(node), true, func() error {
			_, err := cms.Create(ctx, recordOf(node), metav1.CreateOptions{DryRun: dry})
			return err
		}},
		{"create the record of " + other, false, func() error {
			_, err := cms.Create(ctx, recordOf(other), metav1.CreateOptions{DryRun: dry})
			return err
		}},
		{"patch " + statusCM, false, func() error {
			_, err := own.Patch(ctx, statusCM, types.MergePatchType, []byte(statusPatch), metav1.PatchOptions{DryRun: dry})
			return err
		}},
		{"delete " + statusCM, false, func() error {
			return own.Delete(ctx, statusCM, metav1.DeleteOptions{DryRun: dry})
		}},
	}
	for _, a := range attempts {
		err := a.do()
		switch {
		case a.allowed && err != nil:
			errorf(t, "the probe on %s could not %s: %v", node, a.what, err)
		case a.allowed:
			t.Logf("the probe on %s may %s (dry run)", node, a.what)
		case err == nil:
			errorf(t, "the API server let the probe on %s %s", node, a.what)
		case !apierrors.IsForbidden(err):
			errorf(t, "the probe on %s asked to %s: %v, want Forbidden (the admission policy for a record, RBAC for the status)", node, a.what, err)
		default:
			t.Logf("the probe on %s may not %s: %v", node, a.what, err)
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
		fatal(t, err)
	}
	var s snapshot
	ml, err := cli.MemberList(ctx)
	if err != nil {
		fatalf(t, "etcd member list: %v", err)
	}
	for _, x := range ml.Members {
		s.members = append(s.members, member{x.ID, x.Name, slices.Sorted(slices.Values(x.PeerURLs)), x.IsLearner})
	}
	slices.SortFunc(s.members, func(a, b member) int { return strings.Compare(a.Name, b.Name) })

	nodes, err := m.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		fatal(t, err)
	}
	s.nodes = map[string]nodeView{}
	for _, n := range nodes.Items {
		s.nodes[n.Name] = nodeView{n.Labels, n.Annotations, n.Spec.Taints, n.ResourceVersion}
	}

	resp, err := cli.Get(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		fatalf(t, "etcd keys: %v", err)
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
// fleet-role's ConfigMaps, the status and every host's record, the
// controller's Lease and its Events on the Nodes (and the API server's own
// leases), and that each of them was written.
func (m *mesh) compareSnapshots(t *testing.T, before, after snapshot) {
	t.Helper()
	if !reflect.DeepEqual(before.members, after.members) {
		errorf(t, "the etcd member list changed:\nbefore %+v\nafter  %+v", before.members, after.members)
	} else {
		t.Logf("etcd member list unchanged: %+v", after.members)
	}
	if len(before.nodes) != len(m.hosts) {
		errorf(t, "%d nodes before, want %d", len(before.nodes), len(m.hosts))
	}
	if !reflect.DeepEqual(before.nodes, after.nodes) {
		errorf(t, "the Nodes changed:\nbefore %+v\nafter  %+v", before.nodes, after.nodes)
	} else {
		t.Logf("%d Nodes unchanged (labels, annotations, taints, resourceVersion)", len(after.nodes))
	}

	ours := map[string]bool{}
	names := []string{m.settings.StatusConfigMap}
	for _, h := range m.hosts {
		names = append(names, record.Name(h))
	}
	ours["/registry/configmaps/"+m.settings.Namespace+"/"+m.settings.StatusConfigMap] = false
	for _, cm := range names[1:] {
		ours["/registry/configmaps/"+m.settings.RecordsNamespace()+"/"+cm] = false
		// And its tail: the probes write the tail layout here (checkRecords
		// holds that they do), whose tail is written every period.
		tail, _ := record.TailName(cm)
		ours["/registry/configmaps/"+m.settings.RecordsNamespace()+"/"+tail] = false
	}
	// The Lease the controller holds while it decides (docs/status.md, One
	// writer), renewed every retry period.
	ours["/registry/leases/"+m.settings.Namespace+"/"+controller.LeaseName] = false
	// The controller's Events on the Nodes (docs/operators.md): in namespace
	// default, each named after the Node it is on.
	eventOnNode := func(k string) bool {
		name, ok := strings.CutPrefix(k, "/registry/events/default/")
		return ok && slices.ContainsFunc(m.hosts, func(h string) bool { return strings.HasPrefix(name, h+".") })
	}
	var changed, house []string
	events := 0
	for k, rev := range after.keys {
		if before.keys[k] == rev {
			continue
		}
		switch {
		case isKey(ours, k):
			ours[k] = true
		case eventOnNode(k):
			events++
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
		errorf(t, "objects other than fleet-role's status and records changed in the cluster:\n  %s", strings.Join(changed, "\n  "))
	}
	for k, written := range ours {
		if !written {
			errorf(t, "%s was never written", k)
		}
	}
	if events == 0 {
		errorf(t, "the controller recorded no Event on any Node, through a campaign that turned hosts unfit")
	}
	t.Logf("of %d objects stored, written during the scenario: fleet-role's %d ConfigMaps (%s, and the records %s with their tails) and its Lease %s, %d Events on the Nodes, and the API server's own %s",
		len(after.keys), len(ours)-1, m.settings.StatusConfigMap, strings.Join(m.hosts, ", "), controller.LeaseName, events, strings.Join(house, ", "))
}

func isKey(m map[string]bool, k string) bool {
	_, ok := m[k]
	return ok
}

// writer is one fleet-role component as the audit log names it, and the one
// ConfigMap it may write, with the verbs it writes it by.
type writer struct {
	who   string
	ns    string // the namespace of its ConfigMap
	cm    string
	verbs []string
	// tail is a second ConfigMap it may write so: a probe's tail, in the
	// tail layout (docs/records.md, "Layouts").
	tail string
}

// writerOf tells which component made e: the controller, or the probe of
// the node its token is bound to (the node-name claim in the user's extra),
// whose one ConfigMap is that node's record. ok is false for anyone else.
func (m *mesh) writerOf(e auditlog.Event) (w writer, ok bool) {
	prefix := "system:serviceaccount:" + m.settings.Namespace + ":"
	switch e.User.Username {
	case prefix + controllerSA:
		return writer{"controller", m.settings.Namespace, m.settings.StatusConfigMap, []string{"patch"}, ""}, true
	case prefix + probeSA:
		nodes := e.User.Extra[record.NodeNameClaim]
		if len(nodes) != 1 {
			return writer{who: fmt.Sprintf("probe with node claim %q", nodes)}, true
		}
		// The probe creates its record when a merge patch finds none.
		tail, _ := record.TailName(nodes[0])
		return writer{"probe on " + nodes[0], m.settings.RecordsNamespace(), record.Name(nodes[0]), []string{"create", "patch"}, tail}, true
	}
	return writer{}, false
}

// checkAudit reads the API server's audit log: every write a component made
// is one of its own ConfigMap (the controller's a patch of the status, the
// probe on node X's a create or patch of the record named X) or, the
// controller's, an Event on a Node in namespace default or its Lease; each
// made some, and the API server refused none of their requests but the
// probe's look for its record before its first write created it, the
// controller's and the probe's for the controller's Lease before the
// controller created it, the controller's status
// writes conditioned on a version a write applied late had left behind
// (409, counted), and the probe's dry runs of writes the admission policy
// refuses (which each probe made).
func (m *mesh) checkAudit(t *testing.T) {
	t.Helper()
	ns := m.settings.Namespace
	writes := map[string]int{}
	requests := map[string]int{}
	serverErrors := map[string]int{}
	notFound := map[string]int{}
	conflicts := map[string]int{}
	eventWrites, leaseWrites := 0, 0
	policyChecks, unanswered := map[string]int{}, map[string]int{}
	err := auditlog.Read(m.audit, func(e auditlog.Event) {
		w, ok := m.writerOf(e)
		if !ok || e.Stage != "ResponseComplete" || e.UserAgent == admissionCheckAgent {
			return
		}
		if w.cm == "" {
			errorf(t, "%s made a request: %s", w.who, e.Verb)
			return
		}
		requests[w.who]++
		what := e.What()
		r := e.ObjectRef
		own := r != nil && r.Resource == "configmaps" && r.Namespace == w.ns && r.Subresource == "" &&
			(r.Name == w.cm || w.tail != "" && r.Name == w.tail)
		// The controller's Events on the Nodes, created and then counted up
		// by patches (client-go's recorder), in namespace default.
		if w.who == "controller" && e.EventOnNode(m.hosts) && e.Code() < 400 {
			eventWrites++
			return
		}
		// The probe's check that the admission policy is in force
		// (docs/records.md, Fail closed): server-side dry runs, which
		// change nothing, of writes the API server must refuse (403).
		// A dry run the API server gave up on (504, its request timeout:
		// a probe starved of CPU by the voter-cpu fault, sending or reading
		// slower than the timeout) or throttled (429) is answered neither
		// way: the probe counts it as "could not tell" and asks again the
		// next period (internal/probe/policy.go), and writes no samples
		// meanwhile. Only an admission (2xx) or another answer is wrong.
		if e.DryRun() {
			switch code := e.Code(); {
			case strings.HasPrefix(w.who, "probe ") && code == 403:
				policyChecks[w.who]++
			case strings.HasPrefix(w.who, "probe ") && (code == 504 || code == 429):
				unanswered[w.who]++
			default:
				errorf(t, "%s: the API server answered a dry run with %d, not 403 Forbidden: %s", w.who, code, what)
			}
			return
		}
		// The controller runs for the Lease fleet-role (docs/security.md,
		// One writer): it reads it (404 until its first create), creates it
		// and renews it by updates.
		if w.who == "controller" && r != nil && r.Resource == "leases" && r.Namespace == ns && r.Name == controller.LeaseName && r.Subresource == "" {
			switch code := e.Code(); {
			case code == 404 && e.Verb == "get":
			case code >= 500:
				// The API server's own trouble (a machine-stall holds
				// etcd, and its reads time out), only counted.
				serverErrors[w.who]++
			case code >= 400:
				errorf(t, "controller: the API server refused %s (%d)", what, code)
			case e.Verb == "create" || e.Verb == "update":
				leaseWrites++
			case e.Verb != "get":
				errorf(t, "controller wrote its Lease by %s, not a create or update: %s", e.Verb, what)
			}
			return
		}
		// A 4xx is the API server refusing the request (RBAC, the admission
		// policy, an invalid or conflicting write); a 5xx is its own
		// trouble, only counted. The one 4xx expected: the probe's get and
		// merge patch of its record before it exists (404; a create follows).
		code := e.Code()
		switch {
		case code == 404 && own && strings.HasPrefix(w.who, "probe ") && (e.Verb == "get" || e.Verb == "patch"):
			notFound[w.who]++
		case code == 404 && strings.HasPrefix(w.who, "probe ") && e.Verb == "get" && r != nil && r.Resource == "leases" && r.Namespace == ns && r.Name == controller.LeaseName && r.Subresource == "":
			// The probe reads the record layout from the controller's
			// Lease (record.FormatAnnotation) once, at its start; a probe
			// that starts before the controller first holds the Lease
			// finds none and writes the layout every release reads.
			notFound[w.who]++
		case code == 409 && own && w.who == "controller" && e.Verb == "patch":
			// The controller writes the status on the condition that it
			// is at the resourceVersion it last wrote (docs/security.md,
			// One writer). A write the API server applied after the
			// controller stopped waiting for it (a machine stall holds
			// etcd) leaves that version behind: the next write is refused
			// 409, the controller reads the version and writes at the next
			// decision. Counted, not an error; the writes that follow it
			// are counted below.
			conflicts[w.who]++
		case code >= 400 && code < 500:
			errorf(t, "%s: the API server refused %s (%d)", w.who, what, code)
		case code >= 500:
			serverErrors[w.who]++
		}
		if !e.IsWrite() {
			return
		}
		if !own || !slices.Contains(w.verbs, e.Verb) {
			errorf(t, "%s wrote something other than a %s of ConfigMap %s/%s: %s", w.who, strings.Join(w.verbs, " or "), w.ns, w.cm, what)
			return
		}
		if code < 400 {
			writes[w.who]++
		}
	})
	if err != nil {
		fatalf(t, "%v", err)
	}
	t.Logf("controller: %d writes of Events on the Nodes in namespace default, %d of its Lease %s/%s", eventWrites, leaseWrites, ns, controller.LeaseName)
	if leaseWrites == 0 {
		errorf(t, "the controller never wrote its Lease %s/%s: it decides only while holding it", ns, controller.LeaseName)
	}
	want := map[string]writer{}
	for _, h := range m.hosts {
		tail, _ := record.TailName(h)
		want["probe on "+h] = writer{"probe on " + h, m.settings.RecordsNamespace(), record.Name(h), []string{"create", "patch"}, tail}
	}
	want["controller"] = writer{"controller", ns, m.settings.StatusConfigMap, []string{"patch"}, ""}
	for who := range requests {
		if _, ok := want[who]; !ok {
			errorf(t, "%s, not a host of the scenario, made %d requests", who, requests[who])
		}
	}
	for _, w := range slices.Sorted(maps.Keys(want)) {
		if writes[w] == 0 {
			errorf(t, "%s never wrote ConfigMap %s/%s", w, want[w].ns, want[w].cm)
		}
		if strings.HasPrefix(w, "probe ") && policyChecks[w] == 0 {
			errorf(t, "%s never checked that the admission policy is in force (no dry run refused)", w)
		}
		// An unanswered dry run is asked again a period later: more of them
		// than refused ones would be a probe that cannot tell for most of
		// the run, which its samples written would not show.
		if unanswered[w] > policyChecks[w] {
			errorf(t, "%s: %d dry runs unanswered (504 or 429) against %d refused", w, unanswered[w], policyChecks[w])
		}
		cms := want[w].ns + "/" + want[w].cm
		if want[w].tail != "" {
			cms += " or " + want[w].ns + "/" + want[w].tail
		}
		t.Logf("%s: %d requests (%d failed in the API server, %d found no record or Lease yet, %d dry runs refused, %d unanswered, %d conditional writes refused 409), %d writes, every one a %s of ConfigMap %s",
			w, requests[w], serverErrors[w], notFound[w], policyChecks[w], unanswered[w], conflicts[w], writes[w], strings.Join(want[w].verbs, " or "), cms)
	}
}
