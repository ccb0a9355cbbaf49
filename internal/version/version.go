// Package version says which build of fleet-role is running: its version,
// the commit it was built from, the Go that built it and the platform it
// runs on, for `fleet-role version`, `--version` and the fleet_role_build_info
// metric of every component.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version is set by a release build (-ldflags "-X
// github.com/fleet-role/fleet-role/internal/version.version=v1.2.3"). Left
// empty, the version is the one the Go toolchain stamped into the binary
// from the checkout it was built in (a tag, or a pseudo-version of the
// commit, "+dirty" when the tree had changes), and "(devel)" when it had
// none to stamp (a build outside a Git checkout).
var version string

// Info is one build's identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns this binary's Info, read from its build information.
func Get() Info {
	return of(version, readBuildInfo(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func readBuildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

// of derives the Info from what the build stamped: pure, so that a test can
// give it every case.
func of(set string, bi *debug.BuildInfo, goVersion, goos, goarch string) Info {
	info := Info{Version: set, Commit: "unknown", GoVersion: goVersion, Platform: goos + "/" + goarch}
	if bi == nil {
		if info.Version == "" {
			info.Version = "(devel)"
		}
		return info
	}
	if info.Version == "" {
		info.Version = bi.Main.Version
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		case "GOARM":
			// linux/arm/v7, as image platforms name it.
			if goarch == "arm" {
				info.Platform += "/v" + s.Value
			}
		}
	}
	if modified && info.Commit != "unknown" {
		info.Commit += "-dirty"
	}
	return info
}

// String is the one line `fleet-role --version` prints.
func (i Info) String() string {
	return fmt.Sprintf("fleet-role %s (commit %s, %s, %s)", i.Version, i.Commit, i.GoVersion, i.Platform)
}

// Collector is the fleet_role_build_info gauge: 1, with the build's Info as
// its labels, as Kubernetes components export kubernetes_build_info, so
// that a query can tell which version each pod runs mid-rollout.
func Collector() prometheus.Collector {
	i := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fleet_role_build_info",
		Help: "1, labelled with this process's build: version, commit, Go version and platform.",
		ConstLabels: prometheus.Labels{
			"version": i.Version, "commit": i.Commit, "goversion": i.GoVersion, "platform": i.Platform,
		},
	})
	g.Set(1)
	return g
}
