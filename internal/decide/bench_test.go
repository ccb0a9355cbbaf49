package decide_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleet-role/fleet-role/internal/cli"
	"github.com/fleet-role/fleet-role/internal/decide"
	"github.com/fleet-role/fleet-role/internal/settings"
	"github.com/fleet-role/fleet-role/internal/status"
)

// bigFleet is five voters and hosts-5 standbys, all recording a full window.
func bigFleet(hosts int) *gFleet {
	f := &gFleet{s: settings.Defaults(), now: baseNow, slow: map[[2]string]float64{}}
	for i := range hosts {
		h := &gHost{name: fmt.Sprintf("host-%03d", i), eligible: yes(), pinned: no(), voter: i < 5}
		f.hosts = append(f.hosts, h)
	}
	f.s.TargetVoters, f.s.MaxServers = 5, 7
	f.slow[pairOf("host-000", "host-001")] = 0.4 // one slow link, so that a swap is planned
	return f
}

// BenchmarkDecide is one decision over a full window of every recording
// host: the controller's work each period.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{5, 50, 500} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			f := bigFleet(n)
			in := f.input(b, settled(f, 2*time.Hour))
			var size int
			for _, raw := range in.Entries {
				size += len(raw)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime(b)
			for b.Loop() {
				st := decide.Decide(in)
				if len(st.Hosts) != n {
					b.Fatalf("%d hosts judged", len(st.Hosts))
				}
			}
			// The process's CPU time (user+sys, the collector's included)
			// beside the wall time: on a machine busy with other work the
			// wall time counts the waits for a core, the CPU time only the
			// decision's own work.
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(size), "entry-bytes/op")
		})
	}
}

// cpuTime is the process's user+sys CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A large fleet decides as the small ones do: the slow voter pair is found
// and a standby is named.
func TestDecideAtScale(t *testing.T) {
	f := bigFleet(50)
	st := decideSteady(f.input(t, settled(f, 2*time.Hour)))
	if st.Decision.Action != status.ActionSwap || (st.Decision.Out != "host-000" && st.Decision.Out != "host-001") {
		t.Fatalf("decision %+v", st.Decision)
	}
}

// Exit codes, as status's: 2 for a bad flag, setting or input, a file that
// cannot be read included; 0 for none and 1 for a swap (the golden
// scenarios hold those); the table by default.
func TestDecideExitCodes(t *testing.T) {
	dir := filepath.Join("testdata", "all-fit")
	probe, nodes := filepath.Join(dir, "records.json"), filepath.Join(dir, "nodes.json")
	tmp := t.TempDir()
	notJSON := filepath.Join(tmp, "not.json")
	writeFile(t, notJSON, []byte("{"))
	notCM := filepath.Join(tmp, "secret.json")
	writeFile(t, notCM, []byte(`{"kind":"Secret"}`))
	badSettings := filepath.Join(tmp, "settings.yaml")
	writeFile(t, badSettings, []byte("target_voters: 4\n"))
	missing := filepath.Join(tmp, "missing.json")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"decide", "--nodes", nodes}, 2, "--probe FILE and --nodes FILE"},
		{[]string{"decide", "--probe", probe, "--nodes", nodes, "-o", "yaml"}, 2, `-o "yaml"`},
		{[]string{"decide", "--probe", probe, "--nodes", nodes, "--now", "noon"}, 2, `--now "noon"`},
		{[]string{"decide", "--probe", probe, "--nodes", nodes, "--target-voters", "4"}, 2, "target_voters = 4: must be odd"},
		{[]string{"decide", "--probe", probe, "--nodes", nodes, "--election-timeout", "5"}, 2, "want a Go duration"},
		{[]string{"decide", "--probe", probe, "--nodes", nodes, "--settings", badSettings}, 2, "target_voters = 4"},
		{[]string{"decide", "--probe", probe, "--nodes", nodes, "--settings", missing}, 2, "read settings file"},
		{[]string{"decide", "--probe", missing, "--nodes", nodes}, 2, "read --probe"},
		{[]string{"decide", "--probe", notJSON, "--nodes", nodes}, 2, "--probe " + notJSON},
		{[]string{"decide", "--probe", notCM, "--nodes", nodes}, 2, `kind "Secret"`},
		{[]string{"decide", "--probe", probe, "--nodes", notJSON}, 2, "--nodes " + notJSON},
		{[]string{"decide", "--probe", probe, "--nodes", nodes, "--previous", missing}, 2, "read --previous"},
		{[]string{"decide", "--probe", probe, "--nodes", missing}, 2, "read --nodes"},
		{[]string{"decide", "--probe", probe, "--nodes", nodes, "--previous", notCM}, 2, "--previous"},
	} {
		var out, errb bytes.Buffer
		code := cli.Main(c.args, &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.msg) {
			t.Errorf("fleet-role %s: exit %d %q, want exit %d naming %q", strings.Join(c.args, " "), code, errb.String(), c.code, c.msg)
		}
		if code != 0 && out.Len() > 0 {
			t.Errorf("fleet-role %s wrote a status on failure", strings.Join(c.args, " "))
		}
	}
	// The previous status may also be the fleet-role-status ConfigMap.
	st := readFile(t, filepath.Join(dir, "previous.json"))
	cm := mustJSON(t, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]string{status.StatusKey: string(st)}})
	prevCM := filepath.Join(tmp, "status-cm.json")
	writeFile(t, prevCM, cm)
	now := strings.TrimSpace(string(readFile(t, filepath.Join(dir, "now"))))
	got := runCLI(t, []string{"decide", "--probe", probe, "--nodes", nodes, "--previous", prevCM, "--now", now, "-o", "json"})
	if !bytes.Equal(got, readFile(t, filepath.Join(dir, "status.json"))) {
		t.Fatal("the previous status as a ConfigMap gives another decision than as status.json")
	}
	// The table by default, as status prints.
	if def := runCLI(t, []string{"decide", "--probe", probe, "--nodes", nodes, "--previous", prevCM, "--now", now}); !bytes.Equal(def, readFile(t, filepath.Join(dir, "table.txt"))) {
		t.Fatalf("decide without -o prints\n%s\nnot the table", def)
	}
	// Settings from the environment apply too.
	t.Setenv("FLEET_ROLE_WINDOW", "150")
	got = runCLI(t, []string{"decide", "--probe", probe, "--nodes", nodes, "--now", now, "-o", "json"})
	if !bytes.Contains(got, []byte(`"window": 150`)) {
		t.Fatal("FLEET_ROLE_WINDOW was not applied")
	}
	_ = os.Remove(prevCM)
}

// The status fits the status ConfigMap's 1 MiB with every host's verdict
// and the link matrix whole: at as many recording hosts as the probe
// ConfigMap held (five voters and 143 standbys at their worst sizes,
// docs/entry.md), and at the largest fleet measured, 500 recording hosts
// (the bench's five voters and 495 standbys; docs/status.md, "Size").
func TestStatusFitsConfigMap(t *testing.T) {
	for _, n := range []int{148, 500} {
		f := bigFleet(n)
		st := decide.Decide(f.input(t, settled(f, 2*time.Hour)))
		b, err := st.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := status.UnmarshalStatus(b)
		if err != nil {
			t.Fatal(err)
		}
		cells := 0
		for _, r := range back.Links {
			cells += len(r.To)
		}
		t.Logf("status of %d hosts: %d bytes, form %s, dropped %+v; %d link cells", n, len(b), back.Form, back.Dropped, cells)
		if len(b) > status.MaxStatusBytes || len(b) > 1<<20 {
			t.Fatalf("status of %d hosts: %d bytes, over %d", n, len(b), status.MaxStatusBytes)
		}
		// Each host connects to the five voters but itself.
		if len(back.Hosts) != n || cells != n*5-5 {
			t.Fatalf("%d hosts, %d link cells in form %s: want %d and %d", len(back.Hosts), cells, back.Form, n, n*5-5)
		}
	}
}
