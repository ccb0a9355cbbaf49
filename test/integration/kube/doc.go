// Package kube holds internal/kube's clients and informers, and the
// in-memory fakes of lab/kit/kubefake beside them, to a real kube-apiserver.
package kube
