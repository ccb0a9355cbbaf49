package record_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleet-role/fleet-role/internal/record"
)

// longestNode is a node name of 253 characters, the most a DNS subdomain
// (and so a Node's name) may have: labels of 63 joined by dots.
func longestNode() string {
	l := strings.Repeat("a", 63)
	n := l + "." + l + "." + l + "." + strings.Repeat("b", 61)
	return n
}

// A record is named after its node, the longest node name included: the
// name is a valid ConfigMap name at 253 characters.
func TestNameIsTheNodeUpToTheLongest(t *testing.T) {
	for _, node := range []string{"a", "k3s-server-01.fleet.example.internal", longestNode()} {
		name := record.Name(node)
		if name != node {
			t.Errorf("record of %q is named %q", node, name)
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			t.Errorf("record name of %d characters is not a valid ConfigMap name: %v", len(name), msgs)
		}
	}
	if n := len(longestNode()); n != validation.DNS1123SubdomainMaxLength {
		t.Fatalf("longest node name has %d characters, want %d", n, validation.DNS1123SubdomainMaxLength)
	}
	// One over the longest is no Node name, and so no record is made of it.
	if msgs := validation.IsDNS1123Subdomain(longestNode() + "b"); len(msgs) == 0 {
		t.Error("a 254-character name passed as a DNS subdomain")
	}
}

// The object the probe creates is exactly what the admission policy
// admits: its labels, one data key, an owner reference to its Node (not a
// controller, not blocking), and nothing else.
func TestObjectShape(t *testing.T) {
	cm := record.Object("fleet-role", record.Owner{Name: "node-a", UID: "uid-1"}, "{}")
	if cm.Name != "node-a" || cm.Namespace != "fleet-role" {
		t.Fatalf("named %s/%s", cm.Namespace, cm.Name)
	}
	if len(cm.Labels) != 2 || cm.Labels[record.Label] != record.LabelValue || cm.Labels[record.PartOfLabel] != record.PartOf {
		t.Errorf("labels %v", cm.Labels)
	}
	if len(cm.Data) != 1 || cm.Data[record.DataKey] != "{}" || len(cm.BinaryData) != 0 || len(cm.Annotations) != 0 || len(cm.Finalizers) != 0 {
		t.Errorf("data %v binaryData %v annotations %v finalizers %v", cm.Data, cm.BinaryData, cm.Annotations, cm.Finalizers)
	}
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "uid-1"}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0] != want {
		t.Errorf("owner references %+v, want [%+v]", cm.OwnerReferences, want)
	}
	// Without a UID (the demo's hosts are no Nodes) there is no owner:
	// the garbage collector would delete a record whose owner is absent.
	if cm := record.Object("fleet-role", record.Owner{Name: "node-a"}, "{}"); len(cm.OwnerReferences) != 0 {
		t.Errorf("an owner without a UID gave %+v", cm.OwnerReferences)
	}
}

func TestRead(t *testing.T) {
	good := func() *corev1.ConfigMap {
		return record.Object("fleet-role", record.Owner{Name: "node-a", UID: "u"}, `{"v":1}`)
	}
	node, text, err := record.Read(good())
	if err != nil || node != "node-a" || text != `{"v":1}` {
		t.Fatalf("Read: %q %q %v", node, text, err)
	}
	for _, c := range []struct {
		name string
		mod  func(*corev1.ConfigMap)
		want string
	}{
		{"no label", func(cm *corev1.ConfigMap) { delete(cm.Labels, record.Label) }, "not a probe record"},
		{"another label value", func(cm *corev1.ConfigMap) { cm.Labels[record.Label] = "other" }, "not a probe record"},
		{"binaryData", func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"x": nil} }, "binaryData.x; a record holds"},
		{"two keys", func(cm *corev1.ConfigMap) { cm.Data["extra"] = "" }, "data.extra; a record holds"},
		{"no key", func(cm *corev1.ConfigMap) { cm.Data = nil }, "holds neither data.entry nor binaryData.window"},
		{"another key", func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"other": ""} }, "data.other; a record holds"},
		{"another node's owner", func(cm *corev1.ConfigMap) { cm.OwnerReferences[0].Name = "node-b" }, `owned by Node "node-b"`},
	} {
		cm := good()
		c.mod(cm)
		_, _, err := record.Read(cm)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		if c.want == "not a probe record" && !errors.Is(err, record.ErrNotRecord) {
			t.Errorf("%s: %v is not ErrNotRecord", c.name, err)
		}
	}
}

// ReadAll keeps the records' entries, names the malformed ones with why,
// and passes over a ConfigMap that is no record (the status, the settings).
func TestReadAll(t *testing.T) {
	good := record.Object("fleet-role", record.Owner{Name: "node-a", UID: "u"}, "{}")
	bad := record.Object("fleet-role", record.Owner{Name: "node-b", UID: "u"}, "{}")
	bad.Data["extra"] = ""
	status := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fleet-role-status"}, Data: map[string]string{"status.json": "{}"}}
	entries, unreadable := record.ReadAll([]*corev1.ConfigMap{good, bad, status})
	if len(entries) != 1 || entries["node-a"] != "{}" {
		t.Errorf("entries %v", entries)
	}
	if len(unreadable) != 1 || !strings.Contains(unreadable["node-b"], "data.extra; a record holds") {
		t.Errorf("unreadable %v", unreadable)
	}
}
