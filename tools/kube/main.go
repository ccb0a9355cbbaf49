// Command kube is the real Kubernetes kube-apiserver, kube-controller-manager,
// kube-scheduler and kubelet in one binary, the way k3s embeds them: it runs
// the command its name starts with (hack/tools.sh links each name to it).
//
// It is compiled inside k3s's source tree (hack/tools.sh), so that its
// Kubernetes is k3s's own (github.com/k3s-io/kubernetes, the version k3s
// ships) and every package is shared with the k3s build: the test command
// compiles Kubernetes once, not twice.
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	_ "time/tzdata" // for CronJob Time Zone support, as kube-controller-manager's own main

	"github.com/spf13/cobra"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as each command's own main
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics, as each command's own main
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric, as each command's own main
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// commands, by the name a link to this binary carries (with any suffix, such
// as the version hack/tools.sh appends).
var commands = map[string]func() *cobra.Command{
	"kube-apiserver":          apiServer,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	// k3s's fork gives the scheduler a stop channel, which k3s closes when
	// it stops; here it closes on SIGTERM or SIGINT, as upstream's
	// scheduler command stops.
	"kube-scheduler": func() *cobra.Command { return scheduler.NewSchedulerCommand(genericapiserver.SetupSignalHandler()) },
	// The kubelet runs on a context no signal ends, as this repository's
	// own kubelet command always has: SIGTERM ends it at once, and the
	// harness stops it that way.
	"kubelet": func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
}

// apiServer is the API server's command as upstream's main runs it. k3s's
// fork makes its signal context inside the command but runs the server on
// the command's own context, which k3s sets and which is otherwise never
// done: on SIGTERM the server would not shut down and the harness would
// wait out its grace to kill it. So the command runs on a context that
// SIGTERM and SIGINT end (the fork's own handler still exits on a second
// signal). Its stop channel, which the fork takes and does not read, never
// closes.
func apiServer() *cobra.Command {
	cmd := apiserver.NewAPIServerCommand(make(chan struct{}))
	ctx, _ := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT) // for the life of the process
	cmd.SetContext(ctx)
	return cmd
}

func main() {
	name := filepath.Base(os.Args[0])
	for prefix, command := range commands {
		if name == prefix || strings.HasPrefix(name, prefix+"-") {
			os.Exit(cli.Run(command()))
		}
	}
	names := slices.Sorted(maps.Keys(commands))
	fmt.Fprintf(os.Stderr, "%s: run it by one of its names (%s), as a link\n", name, strings.Join(names, ", "))
	os.Exit(2)
}
