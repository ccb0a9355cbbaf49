// Package internal is the product's room: the packages compiled into the
// fleet-role binary the image ships (probe, controller, check, decide,
// render k3s-config, status) and nothing that starts etcd, an API server or
// a kubelet, builds tools or makes network namespaces, which is lab's.
// cmd/fleet-role's dependency test holds the binary to it.
package internal
