// Command etcd is etcd's own server, built from the pinned module so that
// fleet-role's tests and demo run against the real thing (one process per
// member: members embedded in one process share a metrics registry).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
