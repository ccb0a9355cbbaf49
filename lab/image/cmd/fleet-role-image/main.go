// Command fleet-role-image writes fleet-role's image (or, with -pause, the
// pause image) built from this checkout as a tarball that
// `ctr -n k8s.io images import FILE` loads, with no Docker and no registry:
//
//	go run ./lab/image/cmd/fleet-role-image -o fleet-role.tar
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/fleet-role/fleet-role/lab/image"
)

func main() {
	out := flag.String("o", "fleet-role.tar", "the tarball to write")
	tag := flag.String("tag", "ghcr.io/fleet-role/fleet-role:latest", "the image's name")
	pause := flag.Bool("pause", false, "build the pause image instead (tag it with -tag)")
	root := flag.String("root", ".", "the checkout to build from")
	flag.Parse()
	spec := image.FleetRole
	if *pause {
		spec = image.Pause
	}
	if err := image.Build(context.Background(), *root, spec, *tag, *out); err != nil {
		fmt.Fprintln(os.Stderr, "fleet-role-image:", err)
		os.Exit(1)
	}
	fmt.Println(*out)
}
