// Command fleet-role-image writes fleet-role's image (or, with -pause, the
// pause image) built from this checkout, with no Docker and no registry.
// For this machine's platform it writes the tarball `docker save` writes,
// which `ctr -n k8s.io images import FILE` and `docker load` read:
//
//	go run ./lab/cmd/fleet-role-image -o fleet-role.tar
//
// With -platforms it writes one image index of those platforms, an OCI
// image layout in a tar (`ctr images import`, `docker load` of Docker 25 or
// later, `skopeo copy oci-archive:FILE docker://REGISTRY/...`):
//
//	go run ./lab/cmd/fleet-role-image -platforms all -o fleet-role-oci.tar
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/fleet-role/fleet-role/lab/kit/image"
)

func main() {
	out := flag.String("o", "fleet-role.tar", "the tarball to write")
	tag := flag.String("tag", "ghcr.io/fleet-role/fleet-role:dev", "the image's name")
	pause := flag.Bool("pause", false, "build the pause image instead (tag it with -tag)")
	root := flag.String("root", ".", "the checkout to build from")
	version := flag.String("version", "", "stamp this release version into the binary (v0.1.0); empty: the version Go stamps from the checkout")
	platforms := flag.String("platforms", "", `write one OCI image index of these platforms, comma-separated (for example linux/amd64,linux/arm64,linux/arm/v7), or "all" for `+names(image.Platforms))
	flag.Parse()
	spec := image.FleetRole
	if *pause {
		spec = image.Pause
	}
	var err error
	if *version != "" {
		if spec, err = image.Versioned(spec, *version); err != nil {
			fmt.Fprintln(os.Stderr, "fleet-role-image: -version:", err)
			os.Exit(2)
		}
	}
	if *platforms == "" {
		err = image.Build(context.Background(), *root, spec, *tag, *out)
	} else {
		var ps []image.Platform
		if ps, err = parse(*platforms); err == nil {
			err = image.BuildIndex(context.Background(), *root, spec, ps, *tag, *out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet-role-image:", err)
		os.Exit(1)
	}
	fmt.Println(*out)
}

func parse(s string) ([]image.Platform, error) {
	if s == "all" {
		return image.Platforms, nil
	}
	var ps []image.Platform
	for _, f := range strings.Split(s, ",") {
		p, err := image.ParsePlatform(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("-platforms: %w", err)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func names(ps []image.Platform) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
