package testkit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/settings"
)

// CompressedTime are the settings substitutions of the scenarios that run
// deploy/fleet-role.yaml as real pods (LocalManifest): a 2 s period and a
// window of 20 at the p95 (window >= 1/(1-p)) rather than 15 s and 100 at
// the p99, so that a full window takes 40 s rather than 25 minutes.
var CompressedTime = [][2]string{
	{"tail_percentile: 0.99 ", "tail_percentile: 0.95 "},
	{"window: 100 ", "window: 20 "},
	{"sample_period: 15s ", "sample_period: 2s "},
}

// PodToken reads the ServiceAccount token a kubelet issued to pod, from the
// pod's projected volume under the kubelet's root directory as this
// process sees it.
func PodToken(t testing.TB, kubeletRoot string, pod *corev1.Pod) string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(kubeletRoot, "pods", string(pod.UID), "volumes", "kubernetes.io~projected", "kube-api-access-*", "token"))
	if err != nil || len(matches) != 1 {
		t.Fatalf("the token of pod %s under the kubelet's root %s: %v %v", pod.Name, kubeletRoot, matches, err)
	}
	tok, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(tok))
}

// CheckProbePodToken holds that the admission policy of the records holds
// for the token a kubelet issued to the probe pod on node (cfg holds it):
// the token is the probe's ServiceAccount bound to the pod and its node; it
// may patch its own record in the records' namespace, and may neither
// create the record of other (a Node, by name and UID: the admission
// policy) nor patch or delete the status in namespace (RBAC). Each write
// is a server-side dry run, so nothing is stored.
func CheckProbePodToken(t testing.TB, ctx context.Context, cfg *rest.Config, namespace, recordsNamespace string, pod *corev1.Pod, other record.Owner) {
	t.Helper()
	node := pod.Spec.NodeName
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := who.Status.UserInfo
	if u.Username != "system:serviceaccount:"+namespace+":"+ProbeSA || !one(u.Extra[record.NodeNameClaim], node) ||
		!one(u.Extra["authentication.kubernetes.io/pod-name"], pod.Name) {
		t.Errorf("the kubelet-issued token is %s with extra %v: want the probe's ServiceAccount bound to pod %s on node %s", u.Username, u.Extra, pod.Name, node)
	} else {
		t.Logf("the kubelet issued the probe pod on %s a token for %s carrying %s=%s", node, u.Username, record.NodeNameClaim, node)
	}
	cms, own := cs.CoreV1().ConfigMaps(recordsNamespace), cs.CoreV1().ConfigMaps(namespace)
	dry := []string{metav1.DryRunAll}
	otherRecord := record.Object(recordsNamespace, other, "admission check")
	ownPatch := fmt.Sprintf(`{"data":{%q:%q}}`, record.DataKey, "admission check")
	attempts := []struct {
		what    string
		allowed bool
		do      func() error
	}{
		{"patch its own record " + node, true, func() error {
			_, err := cms.Patch(ctx, record.Name(node), types.MergePatchType, []byte(ownPatch), metav1.PatchOptions{DryRun: dry})
			return err
		}},
		{"create the record of " + other.Name, false, func() error {
			_, err := cms.Create(ctx, otherRecord, metav1.CreateOptions{DryRun: dry})
			return err
		}},
		{"patch fleet-role-status", false, func() error {
			_, err := own.Patch(ctx, "fleet-role-status", types.MergePatchType, []byte(`{"data":{"status.json":"{}"}}`), metav1.PatchOptions{DryRun: dry})
			return err
		}},
		{"delete fleet-role-status", false, func() error {
			return own.Delete(ctx, "fleet-role-status", metav1.DeleteOptions{DryRun: dry})
		}},
	}
	for _, a := range attempts {
		err := a.do()
		switch {
		case a.allowed && err != nil:
			t.Errorf("the probe pod's token could not %s: %v", a.what, err)
		case a.allowed:
			t.Logf("the probe pod's token may %s (dry run)", a.what)
		case err == nil:
			t.Errorf("the API server let the probe pod's token %s", a.what)
		case !apierrors.IsForbidden(err):
			t.Errorf("the probe pod's token asked to %s: %v, want Forbidden (the admission policy for a record, RBAC for the status)", a.what, err)
		default:
			t.Logf("the probe pod's token may not %s: %v", a.what, err)
		}
	}
}

func one(vals authenticationv1.ExtraValue, want string) bool {
	return len(vals) == 1 && vals[0] == want
}

// AppliedSettings reads the settings as a cluster holds them (the
// settings.yaml of fleet-role-settings in namespace), through a file in
// dir, as the pods read them, and validates them.
func AppliedSettings(t testing.TB, ctx context.Context, admin kubernetes.Interface, namespace, dir string) settings.Settings {
	t.Helper()
	cm, err := admin.CoreV1().ConfigMaps(namespace).Get(ctx, "fleet-role-settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "settings.yaml")
	if err := os.WriteFile(p, []byte(cm.Data["settings.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := settings.ReadFile(p, settings.Defaults())
	if err == nil {
		err = st.Validate()
	}
	if err != nil {
		t.Fatalf("the applied settings: %v", err)
	}
	return st
}
