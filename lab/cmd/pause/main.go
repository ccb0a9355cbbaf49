// Command pause is the sandbox process of every pod test/pods runs: the
// first process of the pod, which holds its namespaces open, reaps the
// children it inherits as PID 1, and exits 0 on SIGTERM or SIGINT, as
// registry.k8s.io/pause does. It is built statically into an image by
// lab/kit/image, so that containerd needs no registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
