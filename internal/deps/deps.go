//go:build tools

// Package deps pins the modules fleet-role is built from, so that `go mod
// tidy` keeps them while the packages that import them are being written.
package deps

import (
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_model/go"
	_ "github.com/prometheus/common/expfmt"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/pkg/v3/proxy"
	_ "golang.org/x/sys/unix"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/yaml"
)
