package version

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestOf(t *testing.T) {
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261202150000-fa6dd20abcde+dirty"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "fa6dd20abcdef"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		name, set string
		bi        *debug.BuildInfo
		arch      string
		want      Info
	}{
		{"a release build: the version set, the commit stamped", "v1.2.3",
			&debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}},
			"amd64", Info{"v1.2.3", "abc", "go1.26.8", "linux/amd64"}},
		{"a build in a changed checkout", "", stamped, "arm64",
			Info{"v0.0.0-20261202150000-fa6dd20abcde+dirty", "fa6dd20abcdef-dirty", "go1.26.8", "linux/arm64"}},
		{"arm names its version as image platforms do", "",
			&debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}, Settings: []debug.BuildSetting{{Key: "GOARM", Value: "7"}}},
			"arm", Info{"v1.0.0", "unknown", "go1.26.8", "linux/arm/v7"}},
		{"a build outside a checkout", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "amd64",
			Info{"(devel)", "unknown", "go1.26.8", "linux/amd64"}},
		{"no build information at all", "", nil, "amd64", Info{"(devel)", "unknown", "go1.26.8", "linux/amd64"}},
	} {
		if got := of(c.set, c.bi, "go1.26.8", "linux", c.arch); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// The gauge is 1 and carries this build's Info.
func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "fleet_role_build_info" || len(mfs[0].GetMetric()) != 1 || mfs[0].GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("gathered %v, want fleet_role_build_info 1", mfs)
	}
	labels := map[string]string{}
	for _, l := range mfs[0].GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	i := Get()
	if labels["version"] != i.Version || labels["commit"] != i.Commit || labels["goversion"] != i.GoVersion || labels["platform"] != i.Platform {
		t.Errorf("labels %v, want %+v", labels, i)
	}
	if !strings.HasPrefix(i.String(), "fleet-role "+i.Version+" (commit ") {
		t.Errorf("String %q", i.String())
	}
}
