package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/run/apiserver/apiservertest"
)

// The Helm chart, deploy/chart, is deploy/fleet-role.yaml (the kustomize
// base rendered) with the image and the settings made values: generated
// from it (chartFiles), so that the two cannot drift, and held equal to it
// object for object by the real helm.

const chartDir = "chart"

// hardenedLabels are the chart's default label keys: keys a node cannot set
// on itself (docs/install.md, Mark the hosts).
var hardenedLabels = map[string]string{
	"eligible_label": "node-restriction.kubernetes.io/fleet-role-voter-eligible",
	"pinned_label":   "node-restriction.kubernetes.io/fleet-role-voter-pinned",
}

// fixedSettings are the settings the chart does not offer: the namespaces
// and the status ConfigMap are named throughout the manifest (RBAC, the
// admission policy, every object's namespace), and apply only at a restart.
var fixedSettings = []string{"namespace", "status_configmap"}

var (
	imageLine   = regexp.MustCompile(`^(\s+image: )ghcr\.io/fleet-role/fleet-role:(\S+)$`)
	settingLine = regexp.MustCompile(`^(    )([a-z_]+): ("[^"]*"|\S+)(\s+#.*)?$`)
	integer     = regexp.MustCompile(`^[0-9]+$`)
)

// chartFiles generates the chart from the rendered manifest: its
// template, its values and Chart.yaml.
func chartFiles(manifest []byte) (map[string][]byte, error) {
	var tmpl, values strings.Builder
	values.WriteString(`# fleet-role's chart values (docs/install.md, Install with Helm). The chart is
# deploy/fleet-role.yaml with these in it, generated from it: a test renders
# both with the real helm and holds them equal, object for object.
image:
  repository: ghcr.io/fleet-role/fleet-role
  # Empty: the chart's appVersion, the release's own tag.
  tag: ""
# The settings both components read: deploy/base/settings.yaml says each,
# docs/limits.md its basis. The label keys are ones a node cannot set on
# itself (docs/install.md, Mark the hosts). The namespaces (fleet-role, and
# fleet-role-records for the probes' records) and the status ConfigMap
# (fleet-role-status) are named throughout the manifest and are not values.
settings:
`)
	tmpl.WriteString("# fleet-role, generated from deploy/fleet-role.yaml by `go test ./deploy -run TestChartIsGenerated -update`\n" +
		"# (deploy/render.sh runs it). Do not edit: change deploy/base and run deploy/render.sh.\n")
	body := stripHeader(manifest)
	var tag string
	inSettings := false
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		if strings.Contains(line, "{{") {
			return nil, fmt.Errorf("the manifest holds %q, which helm would read as a template", line)
		}
		switch {
		case line == "  settings.yaml: |":
			inSettings = true
		case inSettings && !strings.HasPrefix(line, "    "):
			inSettings = false
		}
		if m := imageLine.FindStringSubmatch(line); m != nil {
			if tag != "" && m[2] != tag {
				return nil, fmt.Errorf("the manifest names image tags %s and %s", tag, m[2])
			}
			tag = m[2]
			line = m[1] + `{{ printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) | quote }}`
		}
		if m := settingLine.FindStringSubmatch(line); inSettings && m != nil && !slices.Contains(fixedSettings, m[2]) {
			key, value := m[2], m[3]
			ref := ".Values.settings." + key
			switch {
			case strings.HasPrefix(value, `"`):
				ref += " | quote"
			case integer.MatchString(value):
				// Helm reads a number in the values as a float, which
				// prints a large one in an exponent.
				ref += " | int64"
			}
			line = m[1] + key + ": {{ " + ref + " }}" + m[4]
			if h, ok := hardenedLabels[key]; ok {
				value = h
			}
			fmt.Fprintf(&values, "  %s: %s\n", key, value)
			seen[key] = true
		}
		tmpl.WriteString(line + "\n")
	}
	for _, k := range settings.Keys() {
		if !seen[k] && !slices.Contains(fixedSettings, k) {
			return nil, fmt.Errorf("the settings file in the manifest does not set %s, so the chart would not offer it", k)
		}
	}
	if tag == "" {
		return nil, fmt.Errorf("the manifest names no image ghcr.io/fleet-role/fleet-role")
	}
	chart := fmt.Sprintf(`# fleet-role's Helm chart, generated with its template from deploy/fleet-role.yaml
# (docs/install.md, Install with Helm).
apiVersion: v2
name: fleet-role
description: Measures each k3s host's fitness to hold an etcd vote, and names the swap of an unfit voter for a fit standby.
type: application
version: %s
appVersion: %q
`, strings.TrimPrefix(tag, "v"), tag)
	return map[string][]byte{
		"Chart.yaml":                []byte(chart),
		"values.yaml":               []byte(values.String()),
		"templates/fleet-role.yaml": []byte(tmpl.String()),
	}, nil
}

// TestChartIsGenerated: deploy/chart is what chartFiles makes of
// deploy/fleet-role.yaml (regenerate with -update, which deploy/render.sh
// runs).
func TestChartIsGenerated(t *testing.T) {
	manifest, err := os.ReadFile(rendered)
	if err != nil {
		t.Fatal(err)
	}
	files, err := chartFiles(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		path := filepath.Join(chartDir, name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("deploy/%s is not what deploy/fleet-role.yaml generates (%v): run deploy/render.sh", path, err)
		}
	}
}

// helmTemplate renders the chart with the real helm and returns its
// objects by kind/namespace/name.
func helmTemplate(t *testing.T, args ...string) map[string]map[string]any {
	t.Helper()
	cmd := exec.Command(testenv.Helm(t), append([]string{"template", "fleet-role", chartDir, "--namespace", "kube-system"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return objectsOf(t, out)
}

// objectsOf parses a stream of YAML documents into objects keyed by
// kind/namespace/name.
func objectsOf(t *testing.T, stream []byte) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(stream), -1) {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(d), &o); err != nil {
			t.Fatalf("parse %.200s: %v", d, err)
		}
		if len(o) == 0 {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		key := fmt.Sprintf("%v/%v/%v", o["kind"], meta["namespace"], meta["name"])
		if _, dup := out[key]; dup {
			t.Fatalf("two objects %s", key)
		}
		out[key] = o
	}
	return out
}

// settingsFile is the settings.yaml of the ConfigMap fleet-role-settings.
func settingsFile(t *testing.T, objs map[string]map[string]any) string {
	t.Helper()
	cm := objs["ConfigMap/fleet-role/fleet-role-settings"]
	data, _ := cm["data"].(map[string]any)
	text, ok := data[settings.ConfigMapKey].(string)
	if !ok {
		t.Fatalf("no %s in ConfigMap fleet-role-settings", settings.ConfigMapKey)
	}
	return text
}

// The chart, rendered by the real helm with the label keys the kustomize
// base ships, is deploy/fleet-role.yaml object for object, the settings
// file byte for byte; with its own values it differs in the label keys
// alone, which are the hardened ones; the image and the settings are
// values.
func TestChartRendersTheManifest(t *testing.T) {
	kustomized := objectsOf(t, withoutHeader(t))
	shipped := settings.Defaults()
	same := helmTemplate(t, "--set", "settings.eligible_label="+shipped.EligibleLabel, "--set", "settings.pinned_label="+shipped.PinnedLabel)
	if len(same) != len(kustomized) {
		t.Errorf("the chart renders %d objects, the manifest holds %d", len(same), len(kustomized))
	}
	for key, want := range kustomized {
		if got, ok := same[key]; !ok {
			t.Errorf("the chart does not render %s", key)
		} else if !reflect.DeepEqual(got, want) {
			g, _ := yaml.Marshal(got)
			w, _ := yaml.Marshal(want)
			t.Errorf("the chart renders %s otherwise than the manifest:\n--- chart\n%s\n--- manifest\n%s", key, g, w)
		}
	}

	// Its defaults: the hardened label keys, the rest as shipped.
	defaults := helmTemplate(t)
	text := settingsFile(t, defaults)
	s, err := settings.Parse([]byte(text), settings.Defaults())
	if err != nil {
		t.Fatalf("the chart's settings file: %v\n%s", err, text)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("the chart's default settings do not validate: %v", err)
	}
	want := shipped
	want.EligibleLabel, want.PinnedLabel = hardenedLabels["eligible_label"], hardenedLabels["pinned_label"]
	if s != want {
		t.Errorf("the chart's default settings %+v, want the shipped ones with the hardened label keys %+v", s, want)
	}
	if self := s.SelfSetLabels(); len(self) > 0 {
		t.Errorf("the chart's default label keys %v are ones a node may set on itself", self)
	}

	// Values: the image, and a setting of each kind (a duration, a float,
	// a large integer, a quoted string).
	set := helmTemplate(t, "--set", "image.repository=registry.example/fleet-role", "--set", "image.tag=v9.9.9",
		"--set", "settings.sample_period=30s", "--set", "settings.tail_percentile=0.995",
		"--set", "settings.storage_quota_bytes=8589934592", "--set", "settings.acting=plan")
	s, err = settings.Parse([]byte(settingsFile(t, set)), settings.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if s.SamplePeriod != 30*time.Second || s.TailPercentile != 0.995 || s.StorageQuotaBytes != 8589934592 || s.Acting != settings.ActingPlan {
		t.Errorf("settings from values: sample_period %v, tail_percentile %v, storage_quota_bytes %d, acting %s; want 30s, 0.995, 8589934592, plan",
			s.SamplePeriod, s.TailPercentile, s.StorageQuotaBytes, s.Acting)
	}
	images := 0
	for key, o := range set {
		b, _ := yaml.Marshal(o)
		for _, m := range regexp.MustCompile(`image: (\S+)`).FindAllStringSubmatch(string(b), -1) {
			images++
			if m[1] != "registry.example/fleet-role:v9.9.9" {
				t.Errorf("%s: image %s, want registry.example/fleet-role:v9.9.9", key, m[1])
			}
		}
	}
	if images != 3 {
		t.Errorf("%d images rendered, want the controller's and the probe's two", images)
	}
}

// The chart installed with the real helm on the real API server (the
// release in kube-system, as k3s's HelmChart installs one; its objects in
// namespace fleet-role, which it makes): every object of the manifest is
// there, the settings with the hardened keys; helm uninstall removes them.
func TestChartInstalls(t *testing.T) {
	helm := testenv.Helm(t)
	s := apiservertest.Start(t)
	kc := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := s.Kubeconfig(kc, ""); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(helm, append(args, "--kubeconfig", kc)...).CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Logf("%s", run("install", "fleet-role", chartDir, "--namespace", "kube-system"))
	admin, err := kubernetes.NewForConfig(s.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm, err := admin.CoreV1().ConfigMaps("fleet-role").Get(ctx, "fleet-role-settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := settings.Parse([]byte(cm.Data[settings.ConfigMapKey]), settings.Defaults())
	if err != nil || got.EligibleLabel != hardenedLabels["eligible_label"] {
		t.Errorf("installed settings: eligible_label %q (%v), want %s", got.EligibleLabel, err, hardenedLabels["eligible_label"])
	}
	var dep *appsv1.Deployment
	if dep, err = admin.AppsV1().Deployments("fleet-role").Get(ctx, "fleet-role", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+chartAppVersion(t)) {
		t.Errorf("installed controller image %s, want the chart's appVersion %s", img, chartAppVersion(t))
	}
	ns, err := admin.CoreV1().Namespaces().Get(ctx, "fleet-role", metav1.GetOptions{})
	if err != nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace fleet-role %v (%v): want it made with the install's Pod Security labels", ns.Labels, err)
	}
	t.Logf("%s", run("uninstall", "fleet-role", "--namespace", "kube-system"))
	if _, err := admin.AppsV1().Deployments("fleet-role").Get(ctx, "fleet-role", metav1.GetOptions{}); err == nil {
		t.Error("the Deployment is still there after helm uninstall")
	}
	if ns, err := admin.CoreV1().Namespaces().Get(ctx, "fleet-role", metav1.GetOptions{}); err == nil && ns.DeletionTimestamp == nil {
		t.Errorf("namespace fleet-role is not being deleted after helm uninstall: %v", ns.Status)
	}
}

func chartAppVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.AppVersion
}
