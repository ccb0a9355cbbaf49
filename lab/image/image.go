// Package image builds fleet-role's container image from the checkout, in
// Go, with no Docker engine and no registry: the binary is built statically
// as the Dockerfile builds it, laid into one layer with what the Dockerfile's
// distroless base gives a static binary, and written as an image tarball
// (`docker save` form) that `ctr images import` loads. It builds the pause
// image a test's containerd runs as every pod's sandbox the same way.
//
// It is harness: test/pods runs the image it builds as real pods. The
// Dockerfile stays the release's way to build the image for anyone with
// Docker; FleetRole below is held to the same contents by this package's
// tests, which parse the Dockerfile, so that neither drifts from the other.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Spec is one image: a static Go binary built from a main package of the
// checkout, the files beside it, and the image's configuration.
type Spec struct {
	// Package is the main package built, relative to the module root.
	Package string
	// BuildEnv are the environment settings of the build beside GOOS and
	// GOARCH (CGO_ENABLED=0: a static binary for a base with no C library).
	BuildEnv []string
	// BuildFlags are the go build flags before -o.
	BuildFlags []string
	// Path is where the binary sits in the image.
	Path string
	// User is the image's USER, "UID:GID".
	User string
	// Entrypoint is the image's ENTRYPOINT.
	Entrypoint []string
	// Env is the image's environment (PATH, as the base sets it, so that an
	// entrypoint named without a directory is found).
	Env []string
	// Files are the other files of the image, by path.
	Files []File
}

// File is one entry of an image's layer beside the binary.
type File struct {
	Path     string
	Mode     int64 // permission bits
	Dir      bool
	UID, GID int
	Body     string
}

// FleetRole is the Dockerfile's image, built in Go: the same static build of
// ./cmd/fleet-role at /usr/local/bin/fleet-role, user 65532 (distroless's
// nonroot), entrypoint fleet-role, and no shell. Of the distroless
// static-debian12:nonroot base it carries what a static binary running as
// nonroot reads: /etc/passwd and /etc/group naming root, nobody and nonroot
// (as the base's do), nonroot's home, and /tmp. It leaves out the base's CA
// certificates and time zone data, which fleet-role does not read (its only
// TLS peer is the API server, trusted through the ServiceAccount's CA file).
var FleetRole = Spec{
	Package:  "./cmd/fleet-role",
	BuildEnv: []string{"CGO_ENABLED=0"},
	// -buildvcs=true, whatever GOFLAGS says: the binary names the commit
	// of the checkout it was built in (`fleet-role version`, the
	// fleet_role_build_info metric).
	BuildFlags: []string{"-trimpath", "-buildvcs=true", "-ldflags=-s -w"},
	Path:       "/usr/local/bin/fleet-role",
	User:       "65532:65532",
	Entrypoint: []string{"fleet-role"},
	Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
	Files:      distrolessNonroot,
}

// distrolessNonroot is what gcr.io/distroless/static-debian12:nonroot gives
// a static binary beside its CA certificates and time zone data.
var distrolessNonroot = []File{
	{Path: "/etc", Mode: 0o755, Dir: true},
	{Path: "/etc/passwd", Mode: 0o644, Body: "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
	{Path: "/etc/group", Mode: 0o644, Body: "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n"},
	{Path: "/home", Mode: 0o755, Dir: true},
	{Path: "/home/nonroot", Mode: 0o700, Dir: true, UID: 65532, GID: 65532},
	{Path: "/tmp", Mode: 0o1777, Dir: true},
}

// Reach is test/pods' attacker image (./lab/image/reach): the probe's pod
// template run with it shows what a compromised probe could read of the
// node's other processes. Nothing else in it: the pod sets the user.
var Reach = Spec{
	Package:    "./lab/image/reach",
	BuildEnv:   []string{"CGO_ENABLED=0"},
	BuildFlags: []string{"-trimpath", "-ldflags=-s -w"},
	Path:       "/reach",
	User:       "65534:65534",
	Entrypoint: []string{"/reach"},
}

// Pause is the sandbox image of test/pods' containerd: every pod's first
// process, which holds the pod's namespaces, reaps orphans and exits on
// SIGTERM (./lab/image/pause), as registry.k8s.io/pause does.
var Pause = Spec{
	Package:    "./lab/image/pause",
	BuildEnv:   []string{"CGO_ENABLED=0"},
	BuildFlags: []string{"-trimpath", "-ldflags=-s -w"},
	Path:       "/pause",
	User:       "65535:65535", // as registry.k8s.io/pause runs
	Entrypoint: []string{"/pause"},
}

// Build compiles spec's binary from the module at root for this machine's
// architecture and writes the image, tagged tag (e.g.
// ghcr.io/fleet-role/fleet-role:latest), to the tarball out.
func Build(ctx context.Context, root string, spec Spec, tag, out string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image tag %q: %w", tag, err)
	}
	dir, err := os.MkdirTemp("", "fleet-role-image-")
	if err != nil {
		return fmt.Errorf("build %s: %w", spec.Package, err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, path.Base(spec.Path))
	args := append(append([]string{"build"}, spec.BuildFlags...), "-o", bin, spec.Package)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH), spec.BuildEnv...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("read the built %s: %w", spec.Package, err)
	}
	img, err := Image(spec, binary)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return fmt.Errorf("write image %s to %s: %w", tag, out, err)
	}
	return nil
}

// epoch dates every entry of a layer, so that one binary gives one digest.
var epoch = time.Unix(0, 0).UTC()

// Image is spec's image holding binary: one layer, the configuration of the
// spec, for linux on this machine's architecture.
func Image(spec Spec, binary []byte) (v1.Image, error) {
	layerTar, err := layer(spec, binary)
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", spec.Path, err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", spec.Path, err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "fleet-role lab/image " + spec.Package, Created: v1.Time{Time: epoch}}})
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", spec.Path, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", spec.Path, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config.User = spec.User
	cf.Config.Entrypoint = append([]string(nil), spec.Entrypoint...)
	cf.Config.Env = append([]string(nil), spec.Env...)
	cf.Config.WorkingDir = "/"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", spec.Path, err)
	}
	return img, nil
}

// layer is the tar of the spec's files, the binary's directories and the
// binary (root-owned, 0755, as COPY leaves it).
func layer(spec Spec, binary []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	write := func(f File) error {
		name := strings.TrimPrefix(f.Path, "/")
		h := &tar.Header{Name: name, Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: epoch, Format: tar.FormatPAX}
		if f.Dir {
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err := io.WriteString(tw, f.Body)
		seen[f.Path] = true
		return err
	}
	for _, f := range spec.Files {
		if err := write(f); err != nil {
			return nil, err
		}
	}
	var parents []string
	for d := path.Dir(spec.Path); d != "/"; d = path.Dir(d) {
		parents = append([]string{d}, parents...)
	}
	for _, d := range parents {
		if !seen[d] {
			if err := write(File{Path: d, Mode: 0o755, Dir: true}); err != nil {
				return nil, err
			}
		}
	}
	if err := write(File{Path: spec.Path, Mode: 0o755, Body: string(binary)}); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
