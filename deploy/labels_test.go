package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/kit/testkit"
	"github.com/fleet-role/fleet-role/lab/run/apiserver/apiservertest"
)

// hardened are the label keys docs/install.md recommends: under
// node-restriction.kubernetes.io/, which a kubelet may not set on itself.
var hardened = struct{ eligible, pinned string }{
	settings.NodeRestrictionPrefix + "fleet-role-voter-eligible",
	settings.NodeRestrictionPrefix + "fleet-role-voter-pinned",
}

// The README's install is the hardened one: its sed, run by the real sed on
// the shipped manifest, changes the two label keys of the settings and no
// other line, to the keys TestLabelsAnAdminSets shows a node cannot set on
// itself, which the README's kubectl label then sets.
func TestReadmeInstallsTheHardenedKeys(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^sed '([^']+)' deploy/fleet-role\.yaml >`).FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README has no line sed '...' deploy/fleet-role.yaml > (its hardened install)")
	}
	out, err := exec.Command("sed", "-e", string(m[1]), rendered).Output()
	if err != nil {
		t.Fatalf("sed %q: %v", m[1], err)
	}
	shipped, err := os.ReadFile(rendered)
	if err != nil {
		t.Fatal(err)
	}
	before, after := strings.Split(string(shipped), "\n"), strings.Split(string(out), "\n")
	if len(before) != len(after) {
		t.Fatalf("the README's sed made %d lines of %d", len(after), len(before))
	}
	var changed []string
	for i := range before {
		if before[i] != after[i] {
			changed = append(changed, strings.TrimSpace(after[i]))
		}
	}
	want := []string{"eligible_label: " + hardened.eligible, "pinned_label: " + hardened.pinned}
	if !slices.Equal(changed, want) {
		t.Errorf("the README's sed changed the lines %q, want exactly %q", changed, want)
	}
	s := settingsOf(t, docsOf(t, stripHeader(out)))
	if s.EligibleLabel != hardened.eligible || s.PinnedLabel != hardened.pinned || len(s.SelfSetLabels()) > 0 {
		t.Errorf("with the README's sed the settings name eligible %q and pinned %q (a node sets %q on itself), want %q and %q",
			s.EligibleLabel, s.PinnedLabel, s.SelfSetLabels(), hardened.eligible, hardened.pinned)
	}
	for _, key := range []string{hardened.eligible + "=true", hardened.pinned + "=false"} {
		if !bytes.Contains(readme, []byte(key)) {
			t.Errorf("the README's kubectl label does not set %s", key)
		}
	}
}

// A compromised node, acting with its kubelet's identity (the user
// system:node:NAME in the group system:nodes, which is what NodeRestriction
// judges), on the real API server with NodeRestriction enabled as k3s
// enables it: it can mark itself eligible and pinned with the default keys
// (fleet-role.io/, which k3s's --node-label sets), and cannot with the
// hardened keys, which an administrator sets on it. It cannot mark another
// node with either.
func TestLabelsAnAdminSets(t *testing.T) {
	s := apiservertest.Start(t, "--enable-admission-plugins=NodeRestriction")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{node1, node2} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The kubelet's own permission to update its Node (the Node authorizer
	// gives it on k3s; RBAC here), so that admission alone decides.
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-node-self"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch", "update"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "test-node-self"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-node-self"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:nodes"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC reads the binding from its informer: wait until it is in force
	// (a busy machine's API server takes a moment), so that a refusal
	// below is admission's, never a binding not yet seen.
	testkit.Eventually(t, time.Minute, func() error {
		r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:node:" + node1, Groups: []string{"system:nodes", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Name: node1}}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !r.Status.Allowed {
			return fmt.Errorf("the binding test-node-self is not in force yet: %s", r.Status.Reason)
		}
		return nil
	})
	cfg := s.AdminConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:node:" + node1, Groups: []string{"system:nodes", "system:authenticated"}}
	kubelet, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defaults := settings.Defaults()
	label := func(c kubernetes.Interface, node, key string) error {
		patch := `{"metadata":{"labels":{"` + key + `":"true"}}}`
		_, err := c.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	for _, tc := range []struct {
		who    string
		c      kubernetes.Interface
		node   string
		key    string
		admit  bool
		reason string // what the refusal must say
	}{
		{"the kubelet", kubelet, node1, defaults.EligibleLabel, true, ""},
		{"the kubelet", kubelet, node1, defaults.PinnedLabel, true, ""},
		{"the kubelet", kubelet, node1, hardened.eligible, false, "is not allowed to modify labels: " + hardened.eligible},
		{"the kubelet", kubelet, node1, hardened.pinned, false, "is not allowed to modify labels: " + hardened.pinned},
		{"the kubelet", kubelet, node2, defaults.EligibleLabel, false, "node \"" + node1 + "\" is not allowed to modify node \"" + node2 + "\""},
		{"the kubelet", kubelet, node2, hardened.eligible, false, "node \"" + node1 + "\" is not allowed to modify node \"" + node2 + "\""},
		{"the admin", admin, node1, hardened.eligible, true, ""},
		{"the admin", admin, node2, hardened.pinned, true, ""},
	} {
		err := label(tc.c, tc.node, tc.key)
		switch {
		case tc.admit && err != nil:
			t.Errorf("%s labelling %s %s=true: %v, want it admitted", tc.who, tc.node, tc.key, err)
		case !tc.admit && err == nil:
			t.Errorf("%s labelled %s %s=true: want it refused", tc.who, tc.node, tc.key)
		case !tc.admit && !strings.Contains(err.Error(), tc.reason):
			t.Errorf("%s labelling %s %s=true: %v, want the refusal to say %q", tc.who, tc.node, tc.key, err, tc.reason)
		default:
			t.Logf("%s labels %s %s=true: %v", tc.who, tc.node, tc.key, errOrAdmitted(err))
		}
	}
	// Once the admin has set it, the kubelet cannot take it off either.
	err = func() error {
		patch := `{"metadata":{"labels":{"` + hardened.eligible + `":null}}}`
		_, err := kubelet.CoreV1().Nodes().Patch(ctx, node1, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}()
	if err == nil || !strings.Contains(err.Error(), "is not allowed to modify labels") {
		t.Errorf("the kubelet removing %s from its own node: %v, want it refused", hardened.eligible, err)
	}
}

func errOrAdmitted(err error) string {
	if err == nil {
		return "admitted"
	}
	return err.Error()
}
