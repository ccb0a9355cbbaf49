package mesh

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/lab/fault/campaign"
	"github.com/fleet-role/fleet-role/lab/fleets/fleet"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
	"github.com/fleet-role/fleet-role/lab/run/apiserver"
	"github.com/fleet-role/fleet-role/lab/run/etcdproc"
)

// The fleet: three voters, each a network namespace with an etcd member,
// and two standbys, as the campaign runs it by default.
const (
	voters   = 3
	standbys = 2
)

// startTimeout bounds each real component's start on a loaded 2-core machine.
const startTimeout = 3 * time.Minute

// mesh is the running scenario: a lab/fleets/fleet and what the checks read of it.
type mesh struct {
	fl         *fleet.Fleet
	dir        string
	settings   settings.Settings
	etcd       *etcdproc.Cluster
	api        *apiserver.Server
	admin      kubernetes.Interface
	adminKC    string
	kubectlBin string
	audit      string
	hosts      []string
	// probeTokens are the probes' tokens, each bound to a Pod on its host's
	// node (lab/fleets/fleet issues them as the kubelet would).
	probeTokens map[string]string
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fatal(t, err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		fatalf(t, "the mesh scenario runs from test/mesh of the checkout: %v", err)
	}
	return root
}

// startMesh builds fleet-role and brings up the campaign's fleet: the lab,
// a slow disk (FUSE) under every voter's etcd data and every standby's
// fsync directory, etcd, the API server, the manifests, the Nodes and the
// probes' tokens. Everything is removed in t.Cleanup, also when a step fails.
func startMesh(t *testing.T) *mesh {
	t.Helper()
	m := &mesh{dir: t.TempDir(), kubectlBin: testenv.Kubectl(t)}
	etcdBin, kasBin := testenv.Etcd(t), testenv.KubeAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	bin := filepath.Join(m.dir, "fleet-role")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.CommandContext(ctx, "go", append(args, "./cmd/fleet-role")...)
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		fatalf(t, "go build ./cmd/fleet-role: %v\n%s", err, out)
	}

	fl, err := fleet.Start(ctx, fleet.Config{
		Dir:             filepath.Join(m.dir, "fleet"),
		Binary:          bin,
		EtcdBinary:      etcdBin,
		APIServerBinary: kasBin,
		Kubectl:         m.kubectlBin,
		Manifest:        filepath.Join(repoRoot(t), "deploy", "fleet-role.yaml"),
		Voters:          voters,
		Standbys:        standbys,
		Settings:        campaign.SettingsFor(voters),
		Prefix:          "mesh",
		MountDisk:       campaign.MountSlowDisk,
		LabNice:         campaign.LabNice,
		Logf:            t.Logf,
		StartTimeout:    startTimeout,
	})
	if err != nil {
		fatal(t, err)
	}
	t.Cleanup(func() {
		if err := fl.Close(); err != nil {
			errorf(t, "remove the fleet: %v", err)
		}
	})
	m.fl, m.settings, m.etcd, m.api, m.admin = fl, fl.Settings, fl.Etcd, fl.API, fl.Admin
	m.adminKC, m.audit, m.probeTokens, m.hosts = fl.AdminKubeconfig, fl.AuditLog(), fl.ProbeTokens, fl.Hosts
	return m
}

// ServiceAccounts of deploy/fleet-role.yaml.
const (
	probeSA      = fleet.ProbeSA
	controllerSA = fleet.ControllerSA
)

// recordsNS is the records' namespace of deploy/fleet-role.yaml (settings
// records_namespace).
var recordsNS = settings.Defaults().RecordsNamespace()
