// Command kube-controller-manager is the real Kubernetes controller manager,
// built from the module proxy in a module of its own (as kube-apiserver is)
// so that its pins never touch fleet-role's go.mod. deploy's tests run only
// its validatingadmissionpolicy-status-controller, which type-checks an
// admission policy's expressions and writes status.typeChecking.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
