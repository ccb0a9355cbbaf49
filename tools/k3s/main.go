// Command k3s is the k3s the tests run (its server and agent) and the four
// Kubernetes commands they run on their own (kube-apiserver,
// kube-controller-manager, kube-scheduler, the kubelet) in one multicall
// binary, compiled inside k3s's own source tree (hack/tools.sh copies this
// file there). It runs the Kubernetes command its name starts with, and k3s
// under any other name.
//
// One binary, not k3s's own cmd/server beside a second main: k3s embeds the
// same four commands' packages, so they cost nothing but their few lines
// here, and the build links once. Its k3s has only the two commands the
// tests run, `server` and `agent`, exactly as k3s's main makes them; the
// command-line tools k3s's main bundles beside them (kubectl, crictl, ctr,
// token, etcd-snapshot, secrets-encrypt, certificate, completion), which
// no test runs, are left out: about a tenth of the build's Go source.
package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	_ "time/tzdata" // for CronJob Time Zone support, as kube-controller-manager's own main

	"github.com/docker/docker/pkg/reexec"
	"github.com/k3s-io/k3s/pkg/cli/agent"
	"github.com/k3s-io/k3s/pkg/cli/cmds"
	"github.com/k3s-io/k3s/pkg/cli/server"
	"github.com/k3s-io/k3s/pkg/configfilearg"
	"github.com/k3s-io/k3s/pkg/containerd"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	urfave "github.com/urfave/cli/v2"
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

// kubeCommands, by the name a link to this binary carries (with any suffix,
// such as the version hack/tools.sh appends).
var kubeCommands = map[string]func() *cobra.Command{
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

// k3s's main (cmd/server/main.go) registers its embedded containerd for
// re-execution by name; kept, so that the server and agent find what they
// find in k3s's own binary.
func init() { reexec.Register("containerd", containerd.Main) }

func main() {
	name := filepath.Base(os.Args[0])
	for prefix, command := range kubeCommands {
		if name == prefix || strings.HasPrefix(name, prefix+"-") {
			os.Exit(cli.Run(command()))
		}
	}
	runK3s()
}

// runK3s is k3s's main (cmd/server/main.go) with its server and agent
// commands: under any other name, as k3s's own binary, so that whatever k3s
// re-executes by name finds what it finds there.
func runK3s() {
	cmd := os.Args[0]
	os.Args[0] = filepath.Base(os.Args[0])
	if reexec.Init() {
		return
	}
	os.Args[0] = cmd

	app := cmds.NewApp()
	app.DisableSliceFlagSeparator = true
	app.Commands = []*urfave.Command{
		cmds.NewServerCommand(server.Run),
		cmds.NewAgentCommand(agent.Run),
	}
	if err := app.Run(configfilearg.MustParse(os.Args)); err != nil && !errors.Is(err, context.Canceled) {
		logrus.Fatalf("Error: %v", err)
	}
}
