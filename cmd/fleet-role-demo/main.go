// Command fleet-role-demo runs the whole fleet-role pipeline on this
// machine: real etcd members, each its own process, the real probe and
// controller, a fault on one voter, and the swap the controller would make.
// It is the bench's, not the product's: fleet-role itself (cmd/fleet-role)
// links nothing that starts etcd or builds tools. The command lives in
// lab/fleets/demo.
package main

import (
	"os"

	"github.com/fleet-role/fleet-role/lab/fleets/demo"
)

func main() {
	os.Exit(demo.Main(os.Args[1:], os.Stdout, os.Stderr))
}
