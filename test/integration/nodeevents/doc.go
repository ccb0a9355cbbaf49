// Package nodeevents records internal/nodeevents's Events on a real
// kube-apiserver and reads them with kubectl describe node.
package nodeevents
