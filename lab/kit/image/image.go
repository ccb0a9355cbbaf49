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
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
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

// versionPattern is a release version: v, then major.minor.patch, then an
// optional pre-release (v0.1.0, v1.2.0-rc.1), as Go modules and image tags
// both take it.
var versionPattern = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.]+)?$`)

// Versioned is spec with version stamped into its binary as the release's
// (internal/version reads it; `fleet-role version` prints it), as
// hack/release.sh builds the binaries and the image.
func Versioned(spec Spec, version string) (Spec, error) {
	if !versionPattern.MatchString(version) {
		return Spec{}, fmt.Errorf("version %q: want v, then major.minor.patch and an optional pre-release (v0.1.0, v1.2.0-rc.1)", version)
	}
	flags := slices.Clone(spec.BuildFlags)
	i := slices.IndexFunc(flags, func(f string) bool { return strings.HasPrefix(f, "-ldflags=") })
	stamp := "-X github.com/fleet-role/fleet-role/internal/version.version=" + version
	if i < 0 {
		flags = append(flags, "-ldflags="+stamp)
	} else {
		flags[i] += " " + stamp
	}
	spec.BuildFlags = flags
	return spec, nil
}

// Reach is test/pods' attacker image (./lab/cmd/reach): the probe's pod
// template run with it shows what a compromised probe could read of the
// node's other processes. Nothing else in it: the pod sets the user.
var Reach = Spec{
	Package:    "./lab/cmd/reach",
	BuildEnv:   []string{"CGO_ENABLED=0"},
	BuildFlags: []string{"-trimpath", "-ldflags=-s -w"},
	Path:       "/reach",
	User:       "65534:65534",
	Entrypoint: []string{"/reach"},
}

// Pause is the sandbox image of test/pods' containerd: every pod's first
// process, which holds the pod's namespaces, reaps orphans and exits on
// SIGTERM (./lab/cmd/pause), as registry.k8s.io/pause does.
var Pause = Spec{
	Package:    "./lab/cmd/pause",
	BuildEnv:   []string{"CGO_ENABLED=0"},
	BuildFlags: []string{"-trimpath", "-ldflags=-s -w"},
	Path:       "/pause",
	User:       "65535:65535", // as registry.k8s.io/pause runs
	Entrypoint: []string{"/pause"},
}

// Platform is one platform of an image, as OCI names it: linux/arm64,
// linux/arm/v7.
type Platform struct {
	OS, Arch, Variant string
}

func (p Platform) String() string {
	if p.Variant == "" {
		return p.OS + "/" + p.Arch
	}
	return p.OS + "/" + p.Arch + "/" + p.Variant
}

// Platforms are the platforms fleet-role's image is built for: amd64
// servers and laptops, arm64 boards (a Raspberry Pi 4 or 5 on a 64-bit
// OS), and 32-bit ARM (Raspberry Pi OS's armhf, ARMv7). k3s ships for the
// same three.
var Platforms = []Platform{
	{OS: "linux", Arch: "amd64"},
	{OS: "linux", Arch: "arm64"},
	{OS: "linux", Arch: "arm", Variant: "v7"},
}

// Host is the platform of this machine, the one Build builds for.
func Host() Platform {
	p := Platform{OS: "linux", Arch: runtime.GOARCH}
	if p.Arch == "arm" {
		p.Variant = "v7"
	}
	return p
}

// ParsePlatform reads "os/arch" or "os/arch/variant", for one of the
// platforms Go builds and this package knows how to name (Platforms).
func ParsePlatform(s string) (Platform, error) {
	f := strings.Split(s, "/")
	if len(f) < 2 || len(f) > 3 {
		return Platform{}, fmt.Errorf("platform %q: want os/arch or os/arch/variant, as linux/arm64 or linux/arm/v7", s)
	}
	p := Platform{OS: f[0], Arch: f[1]}
	if len(f) == 3 {
		p.Variant = f[2]
	}
	if slices.Contains(Platforms, p) {
		return p, nil
	}
	names := make([]string, len(Platforms))
	for i, q := range Platforms {
		names[i] = q.String()
	}
	return Platform{}, fmt.Errorf("platform %q: fleet-role's image is built for %s", s, strings.Join(names, ", "))
}

// goEnv is the environment of a go build for p: an ARM variant is GOARM's
// figure (v7: GOARM=7).
func (p Platform) goEnv() []string {
	env := []string{"GOOS=" + p.OS, "GOARCH=" + p.Arch}
	if p.Arch == "arm" && p.Variant != "" {
		env = append(env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	return env
}

// Build compiles spec's binary from the module at root for this machine's
// architecture and writes the image, tagged tag (e.g.
// ghcr.io/fleet-role/fleet-role:v0.1.0), to the tarball out, in the form
// `docker save` writes and `ctr images import` and `docker load` read.
func Build(ctx context.Context, root string, spec Spec, tag, out string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image tag %q: %w", tag, err)
	}
	img, err := BuildImage(ctx, root, spec, Host())
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return fmt.Errorf("write image %s to %s: %w", tag, out, err)
	}
	return nil
}

// BuildImage compiles spec's binary from the module at root for p and
// returns its image.
func BuildImage(ctx context.Context, root string, spec Spec, p Platform) (v1.Image, error) {
	dir, err := os.MkdirTemp("", "fleet-role-image-")
	if err != nil {
		return nil, fmt.Errorf("build %s for %s: %w", spec.Package, p, err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, path.Base(spec.Path))
	args := append(append([]string{"build"}, spec.BuildFlags...), "-o", bin, spec.Package)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	// GOARM unset first: one inherited from the caller would change an
	// arm build's variant behind its name.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOARM=") })
	cmd.Env = append(append(env, p.goEnv()...), spec.BuildEnv...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s go %s: %w\n%s", strings.Join(p.goEnv(), " "), strings.Join(args, " "), err, b)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("read the built %s: %w", spec.Package, err)
	}
	return ImageFor(spec, binary, p)
}

// BuildIndex compiles spec's binary for each platform and writes one image
// index of them, named tag, to out as an OCI image layout in a tar (the
// form `ctr images import`, `docker load` of Docker 25 and later, and
// `skopeo copy oci-archive:` read; a registry takes it with `crane push` or
// `skopeo copy`). Each platform's image is the same spec as Build's. Built
// twice from one checkout, the file is the same to the byte: every date is
// the epoch, every listing sorted, and the Go build reproducible
// (-trimpath, the commit from the checkout).
func BuildIndex(ctx context.Context, root string, spec Spec, platforms []Platform, tag, out string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image tag %q: %w", tag, err)
	}
	if len(platforms) == 0 {
		return fmt.Errorf("image index %s: no platform", tag)
	}
	idx := v1.ImageIndex(empty.Index)
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := BuildImage(ctx, root, spec, p)
		if err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				MediaType: types.OCIManifestSchema1,
				Platform:  &v1.Platform{OS: p.OS, Architecture: p.Arch, Variant: p.Variant},
			},
		})
	}
	dir, err := os.MkdirTemp("", "fleet-role-index-")
	if err != nil {
		return fmt.Errorf("image index %s: %w", tag, err)
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image index %s: %w", tag, err)
	}
	// The layout's own index names the image: containerd and Docker read
	// io.containerd.image.name (the whole reference); the OCI annotation
	// holds the tag, as the image layout specification has it.
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          ref.Name(),
		"org.opencontainers.image.ref.name": ref.TagStr(),
	})); err != nil {
		return fmt.Errorf("image index %s: %w", tag, err)
	}
	if err := tarDir(dir, out); err != nil {
		return fmt.Errorf("write image index %s to %s: %w", tag, out, err)
	}
	return nil
}

// tarDir writes the files under dir to the tar out, sorted, dated the
// epoch, owned by root, so that the same files make the same tar.
func tarDir(dir, out string) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	}); err != nil {
		return err
	}
	slices.Sort(paths)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range paths {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return errors.Join(err, f.Close())
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return errors.Join(err, f.Close())
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case fi.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		case fi.Mode().IsRegular():
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, fi.Size()
		default:
			return errors.Join(fmt.Errorf("%s: not a file or a directory", p), f.Close())
		}
		if err := tw.WriteHeader(h); err != nil {
			return errors.Join(err, f.Close())
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return errors.Join(err, f.Close())
			}
			if _, err := tw.Write(b); err != nil {
				return errors.Join(err, f.Close())
			}
		}
	}
	if err := tw.Close(); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

// epoch dates every entry of a layer, so that one binary gives one digest.
var epoch = time.Unix(0, 0).UTC()

// Image is spec's image holding binary: one layer, the configuration of the
// spec, for linux on this machine's architecture.
func Image(spec Spec, binary []byte) (v1.Image, error) {
	return ImageFor(spec, binary, Host())
}

// ImageFor is spec's image holding binary, built for p: one layer, the
// configuration of the spec, p's platform.
func ImageFor(spec Spec, binary []byte, p Platform) (v1.Image, error) {
	layerTar, err := layer(spec, binary)
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", spec.Path, err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", spec.Path, err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: l, History: v1.History{CreatedBy: "fleet-role lab/kit/image " + spec.Package, Created: v1.Time{Time: epoch}}})
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", spec.Path, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", spec.Path, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Arch, p.Variant
	cf.Created = v1.Time{Time: epoch}
	cf.Config.User = spec.User
	cf.Config.Entrypoint = append([]string(nil), spec.Entrypoint...)
	cf.Config.Env = append([]string(nil), spec.Env...)
	cf.Config.WorkingDir = "/"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", spec.Path, err)
	}
	// OCI media types, so that the image sits in an OCI index as its own
	// kind (a Docker manifest list holds Docker manifests).
	return mutate.MediaType(mutate.ConfigMediaType(img, types.OCIConfigJSON), types.OCIManifestSchema1), nil
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
