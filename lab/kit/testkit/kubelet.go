package testkit

import (
	"fmt"
	"time"

	"github.com/fleet-role/fleet-role/internal/k3snode"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeletImages is how many images a kubelet reports in a Node's status at
// most (its nodeStatusMaxImages, 50 by default).
const KubeletImages = 50

// Kubelet is the Node as a k3s host's kubelet and k3s itself report it on
// top of Object: what a real Node carries that fleet-role reads nothing of
// (its images, every condition, more addresses, its capacity and system
// information, k3s's annotations and the other labels), so that a test can
// hold that a view of the Node decides as the whole one does and keeps none
// of the rest. Voters also carry k3s's EtcdIsVoter condition, True since
// voterSince, its heartbeat last written by k3s at beat.
func (n Node) Kubelet(voterSince, beat time.Time) *corev1.Node {
	k := n.Object()
	for key, v := range map[string]string{
		"beta.kubernetes.io/arch":          "amd64",
		"beta.kubernetes.io/instance-type": "k3s",
		"beta.kubernetes.io/os":            "linux",
		"kubernetes.io/arch":               "amd64",
		"kubernetes.io/os":                 "linux",
		"node.kubernetes.io/instance-type": "k3s",
	} {
		k.Labels[key] = v
	}
	for key, v := range map[string]string{
		"alpha.kubernetes.io/provided-node-ip":                   n.Address,
		"flannel.alpha.coreos.com/backend-data":                  `{"VNI":1,"VtepMAC":"26:0b:64:5d:1c:8e"}`,
		"flannel.alpha.coreos.com/backend-type":                  "vxlan",
		"flannel.alpha.coreos.com/kube-subnet-manager":           "true",
		"flannel.alpha.coreos.com/public-ip":                     n.Address,
		"k3s.io/hostname":                                        n.Name,
		"k3s.io/internal-ip":                                     n.Address,
		"k3s.io/node-args":                                       `["server","--cluster-init","--node-label","fleet-role.io/voter-eligible=true"]`,
		"k3s.io/node-config-hash":                                "7QJ4V2ZK3Y5QF6XK3LQ2J7WZ6V5Q4X3R2T1Y0U9I8O7P6A5S4D3F",
		"node.alpha.kubernetes.io/ttl":                           "0",
		"volumes.kubernetes.io/controller-managed-attach-detach": "true",
	} {
		k.Annotations[key] = v
	}
	st := &k.Status
	// An ExternalIP listed first, and a dual-stack host's second InternalIP:
	// peers use the first InternalIP.
	st.Addresses = append([]corev1.NodeAddress{{Type: corev1.NodeExternalIP, Address: "192.0.2.10"}}, st.Addresses...)
	st.Addresses = append(st.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::10"})
	since := metav1.NewTime(voterSince.Add(-time.Hour))
	for _, c := range []struct {
		t      corev1.NodeConditionType
		status corev1.ConditionStatus
		reason string
	}{
		{corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"},
		{corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"},
		{corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"},
		{corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"},
	} {
		st.Conditions = append(st.Conditions, corev1.NodeCondition{
			Type: c.t, Status: c.status, Reason: c.reason, Message: "kubelet says " + c.reason,
			LastHeartbeatTime: since, LastTransitionTime: since,
		})
	}
	if n.Voter {
		st.Conditions = append(st.Conditions, corev1.NodeCondition{
			Type: k3snode.EtcdIsVoterCondition, Status: corev1.ConditionTrue, Reason: "MemberNotLearner",
			Message:           "Node is a voting member of the etcd cluster",
			LastHeartbeatTime: metav1.NewTime(beat), LastTransitionTime: metav1.NewTime(voterSince),
		})
	}
	for i := range KubeletImages {
		st.Images = append(st.Images, corev1.ContainerImage{
			Names: []string{
				fmt.Sprintf("registry.example.com/fleet/app-%02d@sha256:%064x", i, i),
				fmt.Sprintf("registry.example.com/fleet/app-%02d:v1.%d.0", i, i),
			},
			SizeBytes: int64(10+i) << 20,
		})
	}
	st.Capacity = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	st.Allocatable = st.Capacity
	st.NodeInfo = corev1.NodeSystemInfo{
		MachineID: "0123456789abcdef0123456789abcdef", KernelVersion: "6.1.0-28-amd64",
		OSImage: "Debian GNU/Linux 12 (bookworm)", ContainerRuntimeVersion: "containerd://1.7.23-k3s2",
		KubeletVersion: "v1.34.2+k3s1", OperatingSystem: "linux", Architecture: "amd64",
	}
	st.DaemonEndpoints.KubeletEndpoint.Port = 10250
	return k
}
