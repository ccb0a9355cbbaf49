// k3s's server and agent and the four Kubernetes commands the tests run
// (kube-apiserver, kube-controller-manager, kube-scheduler, the kubelet), as
// one multicall binary compiled inside k3s's own source tree (hack/tools.sh
// copies main.go there), with k3s's tags and flags: k3s embeds the four
// commands' packages, so the test command compiles Kubernetes once and links
// once. This go.mod only keeps the folder out of fleet-role's module; it is
// never built from here.
module fleet-role.local/tools/k3s

go 1.26
