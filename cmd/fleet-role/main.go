// Command fleet-role measures every candidate host's fitness to hold an etcd
// vote in a k3s cluster and reports which hosts are fit, unfit or unknown,
// and the swap it would make. The commands live in internal/cli.
package main

import (
	"os"

	"github.com/fleet-role/fleet-role/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
