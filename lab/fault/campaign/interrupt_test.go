//go:build linux

package campaign_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/lab/fault/campaign"
	"github.com/fleet-role/fleet-role/lab/kit/testenv"
)

// TestInterruptLeavesNothing runs the campaign's command as hack/campaign.sh
// does, interrupts it (SIGINT, as Ctrl-C) while its first fault is on, and
// holds that it undoes the fault, writes the board of what ran, exits, and
// leaves nothing on the machine: no network namespace, slow disk, cgroup or
// process of its, and not its working directory. The normal end of a
// campaign is held to the same by the mesh scenario (test/mesh).
func TestInterruptLeavesNothing(t *testing.T) {
	testenv.RequireRoot(t)
	etcd, kas, kubectl := testenv.Etcd(t), testenv.KubeAPIServer(t), testenv.Kubectl(t)
	dir := t.TempDir()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, b := range []struct{ out, pkg string }{{"fleet-role", "./cmd/fleet-role"}, {"campaign", "./lab/cmd/campaign"}} {
		build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, b.out), b.pkg)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	out := filepath.Join(dir, "out")
	// The first fault of seed 1 is on a voter; any kind will do.
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "campaign"), "--seed", "1", "--faults", "1", "--out", out,
		"--fleet-role", filepath.Join(dir, "fleet-role"), "--etcd", etcd, "--kube-apiserver", kas, "--kubectl", kubectl,
		"--manifest", filepath.Join(root, "deploy", "fleet-role.yaml"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	var lines []string
	work := ""
	workRe := regexp.MustCompile(`starting a fleet of .* in (\S+)$`)
	injected := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l := sc.Text()
			lines = append(lines, l)
			if m := workRe.FindStringSubmatch(l); m != nil {
				work = m[1]
			}
			if strings.Contains(l, "fault 1/1:") {
				close(injected)
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case <-injected:
	case <-done:
		t.Fatalf("the campaign ended before its first fault:\n%s", strings.Join(lines, "\n"))
	case <-time.After(8 * time.Minute):
		t.Fatalf("no fault within 8 minutes:\n%s", strings.Join(lines, "\n"))
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-done
	err = cmd.Wait()
	log := strings.Join(lines, "\n")
	if err == nil {
		t.Errorf("an interrupted campaign exited 0:\n%s", log)
	}
	if !strings.Contains(log, "interrupted") && !strings.Contains(log, "context canceled") {
		t.Errorf("the campaign did not say it was interrupted:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(out, "scoreboard.json")); err != nil {
		t.Errorf("no board written on interrupt: %v\n%s", err, log)
	}
	if work == "" {
		t.Fatalf("the campaign named no working directory:\n%s", log)
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Errorf("its working directory %s is still there (%v)", work, err)
	}
	left, err := campaign.Leftovers(pid, "campaign", "campaign", work)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the interrupted campaign left behind:\n  %s\n%s", strings.Join(left, "\n  "), log)
	}
}
