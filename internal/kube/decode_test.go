package kube

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// churnLabels is the label count of a Node churned by an attacker holding
// its kubelet's credentials: NodeRestriction lets a node set any label of
// its own but the node-restriction.kubernetes.io/ ones, and a Node of 5,000
// labels of 60 bytes is about 300 KB, a fifth of etcd's request limit.
const churnLabels = 5000

func churnedNode(labels int) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "agent-1", UID: "00000000-0000-4000-8000-000000000001",
		ResourceVersion: "12345", Labels: map[string]string{}}}
	for i := range labels {
		n.Labels[fmt.Sprintf("churn.example.com/label-%05d", i)] = fmt.Sprintf("value-%020d", i)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.9"}}
	return n
}

// BenchmarkNodeEventDecode is what each watch event of a churned Node costs
// a process that watches Nodes, before its view keeps a handful of labels:
// the decode of the whole Node, in JSON and in protobuf, the two encodings
// the API server serves core/v1 in.
func BenchmarkNodeEventDecode(b *testing.B) {
	n := churnedNode(churnLabels)
	n.APIVersion, n.Kind = "v1", "Node"
	for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		info, ok := runtime.SerializerInfoForMediaType(coreCodecs.SupportedMediaTypes(), mediaType)
		if !ok {
			b.Fatalf("no serializer for %s", mediaType)
		}
		enc := coreCodecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
		raw, err := runtime.Encode(enc, n)
		if err != nil {
			b.Fatal(err)
		}
		dec := coreCodecs.UniversalDeserializer()
		b.Run(mediaType, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				obj, _, err := dec.Decode(raw, nil, &corev1.Node{})
				if err != nil {
					b.Fatal(err)
				}
				if len(obj.(*corev1.Node).Labels) != churnLabels {
					b.Fatal("labels lost")
				}
			}
		})
	}
}
