//go:build linux

package netlab_test

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/fleet-role/fleet-role/lab/fault/netlab"
)

// Three etcd members, each in its own host with k3s's timing and its metrics
// on the host's own 127.0.0.1:2381, a kube-apiserver in the root namespace
// on the lab's root address, and one member's links slowed by 150 ms. It has
// no output comment, so `go test` compiles it but does not run it.
func Example_etcdMesh() {
	ctx := context.Background()
	lab, err := netlab.New(ctx, netlab.Config{
		Hosts:       []string{"server-1", "server-2", "server-3", "standby"},
		ConnectRoot: true, // the kube-apiserver below runs in the root namespace
	})
	if err != nil {
		panic(err)
	}
	defer lab.Close() // after stopping every process started in the hosts

	var cluster, clients []string
	for _, h := range lab.Hosts[:3] {
		cluster = append(cluster, h.Name+"=http://"+h.AddrPort(2380))
		clients = append(clients, "http://"+h.AddrPort(2379))
	}
	var members []*exec.Cmd
	for _, h := range lab.Hosts[:3] {
		cmd := h.Command(ctx, "etcd",
			"--name", h.Name,
			"--data-dir", "/tmp/"+h.Namespace,
			"--heartbeat-interval", "500", "--election-timeout", "5000",
			"--listen-peer-urls", "http://"+h.AddrPort(2380),
			"--initial-advertise-peer-urls", "http://"+h.AddrPort(2380),
			"--listen-client-urls", "http://"+h.AddrPort(2379),
			"--advertise-client-urls", "http://"+h.AddrPort(2379),
			"--listen-metrics-urls", "http://127.0.0.1:2381", // the host's own loopback
			"--initial-cluster", strings.Join(cluster, ","))
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		members = append(members, cmd) // cmd.Process.Signal(syscall.SIGSTOP) pauses a member
	}
	apiserver := exec.CommandContext(ctx, "kube-apiserver",
		"--etcd-servers", strings.Join(clients, ","),
		"--bind-address", lab.RootAddr.String(), // reachable from the hosts, and only there
		"--advertise-address", lab.RootAddr.String())
	_ = apiserver

	// The test process reads a member's metrics through the host's loopback.
	h := lab.Host("server-2")
	metrics := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: h.Dial}}
	_, _ = metrics.Get("http://127.0.0.1:2381/metrics")

	// Every packet to and from server-2 is held 150 ms: its peer round trips
	// and connects gain 300 ms.
	if err := lab.SetDelay("server-2", 150*time.Millisecond); err != nil {
		panic(err)
	}
	fmt.Println(lab.Stats().Dropped)
	for _, m := range members {
		m.Process.Kill()
		m.Wait()
	}
}
