package hack

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The tools built from the module proxy (hack/tools.sh) compile many of
// this module's own dependencies: the Kubernetes API types and client, gRPC,
// protobuf. Go's build cache keys each compile by its package's source and
// its dependencies' compiled output, so a package compiled for this
// module's go vet is reused by the helm and Prometheus builds, and theirs by
// each other, only when every module below it is at the same version in all
// of them. TestToolModulesShareVersions holds that: every module providing a
// package to two of the builds is at one version in their go.mod files. In a
// cold run that is 33 of helm's 47 MB of Go source and 36 of Prometheus' 56
// compiled once, not three times (docs/testing.md).
func TestToolModulesShareVersions(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	builds := []struct {
		name, dir string
		args      []string
	}{
		{"go.mod", root, []string{"-test", "./..."}},
		{"tools/helm/go.mod", filepath.Join(root, "tools/helm"), []string{"helm.sh/helm/v4/cmd/helm"}},
		// As hack/tools.sh builds them.
		{"tools/promtool/go.mod", filepath.Join(root, "tools/promtool"), []string{"-tags=remove_all_sd", "github.com/prometheus/prometheus/cmd/promtool", "github.com/prometheus/prometheus/cmd/prometheus"}},
	}
	// versions[module][go.mod] is the version that build compiles the
	// module's packages at.
	versions := map[string]map[string]string{}
	for _, b := range builds {
		args := append([]string{"list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}"}, b.args...)
		cmd := exec.Command("go", args...)
		cmd.Dir = b.dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), b.dir, err, stderr.String())
		}
		n := 0
		for _, line := range strings.Split(string(out), "\n") {
			path, version, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			if versions[path] == nil {
				versions[path] = map[string]string{}
			}
			versions[path][b.name] = version
			n++
		}
		if n == 0 {
			t.Fatalf("go %s in %s listed no package of another module", strings.Join(args, " "), b.dir)
		}
	}
	var apart []string
	shared := 0
	for path, by := range versions {
		if len(by) < 2 {
			continue
		}
		shared++
		seen := map[string]bool{}
		for _, v := range by {
			seen[v] = true
		}
		if len(seen) == 1 {
			continue
		}
		var at []string
		for gomod, v := range by {
			at = append(at, fmt.Sprintf("%s in %s", v, gomod))
		}
		sort.Strings(at)
		apart = append(apart, fmt.Sprintf("%s: %s", path, strings.Join(at, ", ")))
	}
	sort.Strings(apart)
	if len(apart) > 0 {
		t.Errorf("%d of the %d modules whose packages two builds compile are at different versions, so each build compiles them and everything above them again: go get the highest in the others\n  %s",
			len(apart), shared, strings.Join(apart, "\n  "))
	}
	// The sharing this test guards is worth guarding only while the builds
	// share a good part of their modules.
	if shared < 50 {
		t.Errorf("the builds share %d modules; this test expects the tools to compile many of this module's (was it pointed at the wrong builds?)", shared)
	}
	t.Logf("%d modules provide packages to two or more of the builds, each at one version", shared)
}
