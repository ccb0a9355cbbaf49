// The four Kubernetes commands the tests run (kube-apiserver,
// kube-controller-manager, kube-scheduler, the kubelet), as one multicall
// binary compiled inside k3s's own source tree (hack/tools.sh copies main.go
// there): k3s embeds the same four commands' packages, so building them in its
// module, with its tags and flags, reuses every package the k3s build has
// compiled and costs one link. This go.mod only keeps the folder out of
// fleet-role's module; it is never built from here.
module fleet-role.local/tools/kube

go 1.26
