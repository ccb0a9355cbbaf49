package image

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// dockerfile is what the test reads off the repository's Dockerfile: the
// build of the binary and the final image's contents.
type dockerfile struct {
	buildEnv   []string // NAME=VALUE settings before go build, GOOS/GOARCH/GOARM (the platform's) left out
	buildFlags []string // go build's flags before -o
	buildOut   string   // go build -o
	pkg        string   // the package built
	copyFrom   string   // the final stage's COPY --from source
	copyTo     string   // and destination
	base       string   // the final stage's FROM
	user       string
	entrypoint []string
}

// parseDockerfile reads the instructions this image depends on. It joins
// continuation lines and splits words as a shell would for the RUN line's
// go build (double quotes only: the Dockerfile uses no others).
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	var d dockerfile
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			d.base = rest // the last FROM is the final stage
			d.user, d.entrypoint, d.copyFrom, d.copyTo = "", nil, "", ""
		case "RUN":
			words := shellWords(rest)
			i := slices.Index(words, "go")
			if i < 0 || i+1 >= len(words) || words[i+1] != "build" {
				continue
			}
			// The settings before go build; RUN's own --mount flags end them.
			for j := i - 1; j >= 0 && strings.Contains(words[j], "=") && !strings.HasPrefix(words[j], "-"); j-- {
				if k, _, _ := strings.Cut(words[j], "="); k != "GOOS" && k != "GOARCH" && k != "GOARM" {
					d.buildEnv = append([]string{words[j]}, d.buildEnv...)
				}
			}
			args := words[i+2:]
			for j := 0; j < len(args); j++ {
				switch {
				case args[j] == "-o" && j+1 < len(args):
					d.buildOut = args[j+1]
					j++
				case strings.HasPrefix(args[j], "-"):
					d.buildFlags = append(d.buildFlags, args[j])
				default:
					d.pkg = args[j]
				}
			}
		case "COPY":
			words := strings.Fields(rest)
			if len(words) == 3 && strings.HasPrefix(words[0], "--from=") {
				d.copyFrom, d.copyTo = words[1], words[2]
			}
		case "USER":
			d.user = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &d.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s is not the exec (JSON) form: %v", rest, err)
			}
		}
	}
	return d
}

// shellWords splits s at unquoted spaces, dropping double quotes.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	quoted, in := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, in = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// TestFleetRoleMatchesDockerfile holds the Go definition of the image to the
// Dockerfile's: the same build, the binary at the same path, the same user
// and entrypoint, and a base with no shell.
func TestFleetRoleMatchesDockerfile(t *testing.T) {
	d := parseDockerfile(t, filepath.Join("..", "..", "..", "Dockerfile"))
	s := FleetRole
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: lab/kit/image has %q, the Dockerfile %q", what, got, want)
		}
	}
	check("build environment", s.BuildEnv, d.buildEnv)
	check("build flags", s.BuildFlags, d.buildFlags)
	check("package built", s.Package, d.pkg)
	check("binary path (COPY destination)", s.Path, d.copyTo)
	check("user", s.User, d.user)
	check("entrypoint", s.Entrypoint, d.entrypoint)
	if d.copyFrom != d.buildOut {
		t.Errorf("the Dockerfile copies %q but builds %q", d.copyFrom, d.buildOut)
	}
	// distroless/static holds no shell and no package manager; the Go
	// image holds only its listed files (TestBuild), none of them a shell.
	if !strings.HasPrefix(d.base, "gcr.io/distroless/static") || !strings.HasSuffix(d.base, ":nonroot") {
		t.Errorf("the Dockerfile's final stage is FROM %q; lab/kit/image reproduces gcr.io/distroless/static...:nonroot (no shell, user nonroot 65532): change FleetRole.Files with it", d.base)
	}
	// The user must be the one the base's /etc/passwd names nonroot.
	uid, _, _ := strings.Cut(s.User, ":")
	if !strings.Contains(s.Files[1].Body, "nonroot:x:"+uid+":") {
		t.Errorf("user %s is not nonroot in the image's /etc/passwd:\n%s", s.User, s.Files[1].Body)
	}
}

// TestParseDockerfile holds the parser to a Dockerfile that differs from the
// repository's in each field, so that a parser reading nothing cannot pass.
func TestParseDockerfile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "Dockerfile")
	text := `FROM golang AS build
# a comment
RUN --mount=type=cache,target=/x CGO_ENABLED=1 GOOS=linux GOARCH=$TARGETARCH \
    go build -ldflags="-X a=b" -o /out/x ./cmd/x
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/x /bin/x
USER 1000:1000
ENTRYPOINT ["/bin/x", "run"]
`
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := parseDockerfile(t, p)
	want := dockerfile{
		buildEnv: []string{"CGO_ENABLED=1"}, buildFlags: []string{"-ldflags=-X a=b"}, buildOut: "/out/x", pkg: "./cmd/x",
		copyFrom: "/out/x", copyTo: "/bin/x", base: "gcr.io/distroless/static-debian12:nonroot",
		user: "1000:1000", entrypoint: []string{"/bin/x", "run"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed\n%+v\nwant\n%+v", got, want)
	}
}

// TestBuild builds each image from the checkout and reads each back from
// its tarball: the listed files and nothing else (no shell), a static
// binary, the configuration of the spec.
func TestBuild(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec Spec
		tag  string
	}{
		{FleetRole, "ghcr.io/fleet-role/fleet-role:v0.0.0-test"},
		{Pause, "fleet-role.test/pause:v1"},
		{Reach, "fleet-role.test/reach:v1"},
	} {
		t.Run(filepath.Base(tc.spec.Path), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			out := filepath.Join(t.TempDir(), "image.tar")
			if err := Build(ctx, root, tc.spec, tc.tag, out); err != nil {
				t.Fatal(err)
			}
			tag, err := name.NewTag(tc.tag)
			if err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(out, &tag)
			if err != nil {
				t.Fatalf("read back %s: %v", tc.tag, err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.Config.User != tc.spec.User || !reflect.DeepEqual(cf.Config.Entrypoint, tc.spec.Entrypoint) || cf.OS != "linux" {
				t.Errorf("config: user %q entrypoint %q os %q, want %q %q linux", cf.Config.User, cf.Config.Entrypoint, cf.OS, tc.spec.User, tc.spec.Entrypoint)
			}
			tr := oneLayer(t, img)
			want := map[string]bool{tc.spec.Path: true}
			for _, f := range tc.spec.Files {
				want[f.Path] = true
			}
			for d := filepath.Dir(tc.spec.Path); d != "/"; d = filepath.Dir(d) {
				want[d] = true
			}
			for {
				h, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				p := "/" + strings.TrimSuffix(h.Name, "/")
				if !want[p] {
					t.Errorf("the image holds %s, which the spec does not list", p)
				}
				delete(want, p)
				if p != tc.spec.Path {
					continue
				}
				if h.Mode != 0o755 || h.Uid != 0 {
					t.Errorf("%s: mode %o uid %d, want 755 root-owned as COPY leaves it", p, h.Mode, h.Uid)
				}
				if err := checkStatic(tr); err != nil {
					t.Errorf("%s: %v", p, err)
				}
			}
			for p := range want {
				t.Errorf("the image lacks %s", p)
			}
		})
	}
}

// checkStatic fails unless r is an ELF executable with no interpreter: a
// static binary, which runs on a base with no C library.
func checkStatic(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	f, err := elf.NewFile(strings.NewReader(string(b)))
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("dynamically linked (has an ELF interpreter): CGO_ENABLED=0 was lost")
		}
	}
	return nil
}
