// Command kube-apiserver is the real Kubernetes API server, built from the
// module proxy in tools/kube, a module of its own so that its pins never touch
// fleet-role's go.mod. Tests run it on a real etcd with RBAC on.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
