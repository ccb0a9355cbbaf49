// Package apiservertest starts, for one test, a real etcd member and a real
// kube-apiserver on it, both stopped when the test ends. A missing binary
// fails the test (testenv); it never skips.
package apiservertest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/run/apiserver"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
)

// startTimeout bounds etcd's and the API server's start together: about 5 s
// on an idle 2-core machine, several times that while other tests run.
const startTimeout = 2 * time.Minute

// Start runs one etcd member and a kube-apiserver on it, and stops both in
// t.Cleanup (the API server first). extraArgs are appended to the API
// server's flags (an admission plugin a test needs, say).
func Start(t testing.TB, extraArgs ...string) *apiserver.Server {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	etcd, err := etcdproc.Start(ctx, etcdproc.Config{
		Binary:  testenv.Etcd(t),
		Dir:     filepath.Join(dir, "etcd"),
		Members: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Stop)
	began := time.Now()
	s, err := apiserver.Start(ctx, apiserver.Config{
		Binary:      testenv.KubeAPIServer(t),
		EtcdServers: []string{etcd.Members[0].ClientURL},
		Dir:         filepath.Join(dir, "apiserver"),
		ExtraArgs:   extraArgs,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver ready at %s in %.1f s", s.URL, time.Since(began).Seconds())
	t.Cleanup(s.Stop)
	return s
}
