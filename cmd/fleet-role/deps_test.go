package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/fleet-role/fleet-role/"

// banned are the packages the product binary may not link, each with
// everything under it: the bench and test harness (real etcd, the API
// server, network namespaces, the tool builder that runs go build, the
// demo), the test doubles and fixtures (the in-memory Kubernetes stores of
// lab/kit/kubefake, the sysfs trees of internal/link/linktest), where they are
// now and where they moved from (lab/), and the libraries only the harness
// needs.
var banned = []string{
	module + "lab/run/etcdproc",
	module + "lab/run/apiserver",
	module + "lab/fault/netlab",
	module + "lab/kit/toolcache",
	module + "lab/kit/testenv",
	module + "lab/kit/testkit",
	module + "lab/kit/kubefake",
	module + "internal/testkit",
	module + "internal/link/linktest",
	module + "lab/fleets/demo",
	module + "lab",
	module + "bench",
	module + "test",
	"go.etcd.io/etcd/client", // etcd's client, which brings gRPC
	"go.etcd.io/etcd/pkg",    // etcd's proxy
	"go.etcd.io/etcd/server",
	"google.golang.org/grpc",
	"go.uber.org/zap",
	"github.com/hanwen/go-fuse", // the slow disk's FUSE server (lab/fault/slowdisk)
	// client-go's fakes, and what only they and its Event recorder bring:
	// the strategic merge patch, with OpenAPI's schema code and the
	// protobuf descriptors it registers at start-up (2.8 MiB resident in
	// every process; internal/kube/typed.go, internal/nodeevents/recorder.go).
	"k8s.io/client-go/testing",
	"k8s.io/client-go/gentype",
	"k8s.io/client-go/tools/record",
	"k8s.io/apimachinery/pkg/util/strategicpatch",
	"k8s.io/apimachinery/pkg/util/managedfields",
	"k8s.io/kube-openapi/pkg/util/proto",
	"github.com/google/gnostic-models",
}

// harnessIn lists the packages of deps that banned names.
func harnessIn(deps []string) []string {
	var found []string
	for _, d := range deps {
		for _, b := range banned {
			if d == b || strings.HasPrefix(d, b+"/") {
				found = append(found, d)
				break
			}
		}
	}
	return found
}

// apiGroupsIn lists the packages of deps that bring API groups fleet-role
// never calls: anything of client-go's clientset (its scheme registers
// every group's types at start-up, its typed clients included), its
// informer factory, and the types of any group but core/v1 and
// coordination/v1 (the controller's Lease).
func apiGroupsIn(deps []string) []string {
	var found []string
	for _, d := range deps {
		group, isAPI := strings.CutPrefix(d, "k8s.io/api/")
		if d == "k8s.io/client-go/kubernetes" || strings.HasPrefix(d, "k8s.io/client-go/kubernetes/") ||
			d == "k8s.io/client-go/informers" || strings.HasPrefix(d, "k8s.io/client-go/informers/") ||
			isAPI && group != "core/v1" && group != "coordination/v1" {
			found = append(found, d)
		}
	}
	return found
}

// The product binary holds the product only. The list is the real one go
// list gives for the command.
func TestProductBinaryLinksNoHarness(t *testing.T) {
	deps := goListDeps(t, "./cmd/fleet-role")
	// The list must be this command's, not an empty or failed one.
	for _, want := range []string{"internal/probe", "internal/controller", "internal/decide", "internal/cli", "internal/kube"} {
		if !slices.Contains(deps, module+want) {
			t.Fatalf("go list -deps ./cmd/fleet-role lacks %s%s: not the product's list (%d packages)", module, want, len(deps))
		}
	}
	if found := harnessIn(deps); len(found) > 0 {
		t.Errorf("./cmd/fleet-role links %d packages of the harness or its libraries, none allowed:\n%s", len(found), strings.Join(found, "\n"))
	}
	if found := apiGroupsIn(deps); len(found) > 0 {
		t.Errorf("./cmd/fleet-role links %d packages of client-go's clientset or informer factory, or of API groups but core/v1 and coordination/v1:\n%s", len(found), strings.Join(found, "\n"))
	}
}

// The demo's command links the harness, and the check above finds it there:
// proof that the check can fail on a real list.
func TestDemoBinaryLinksTheHarness(t *testing.T) {
	found := harnessIn(goListDeps(t, "./cmd/fleet-role-demo"))
	for _, want := range []string{module + "lab/fleets/demo", module + "lab/run/etcdproc", module + "lab/kit/toolcache", module + "lab/kit/kubefake",
		"go.etcd.io/etcd/client/v3", "go.etcd.io/etcd/pkg/v3/proxy", "google.golang.org/grpc", "go.uber.org/zap",
		"k8s.io/client-go/testing", "k8s.io/client-go/gentype", "k8s.io/apimachinery/pkg/util/strategicpatch", "github.com/google/gnostic-models/openapiv2"} {
		if !slices.Contains(found, want) {
			t.Errorf("harnessIn(go list -deps ./cmd/fleet-role-demo) lacks %s; found %d: %s", want, len(found), strings.Join(found, " "))
		}
	}
}

// apiGroupsIn finds the clientset where it is linked: the API server
// harness links it.
func TestAPIGroupsInFindsTheClientset(t *testing.T) {
	found := apiGroupsIn(goListDeps(t, "./lab/run/apiserver"))
	for _, want := range []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/kubernetes/scheme",
		"k8s.io/client-go/kubernetes/typed/core/v1", "k8s.io/api/apps/v1"} {
		if !slices.Contains(found, want) {
			t.Errorf("apiGroupsIn(go list -deps ./lab/run/apiserver) lacks %s; found %d", want, len(found))
		}
	}
	if slices.Contains(found, "k8s.io/api/core/v1") {
		t.Errorf("apiGroupsIn counts k8s.io/api/core/v1, which the product calls")
	}
}

func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", pkg)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	return strings.Fields(string(out))
}
