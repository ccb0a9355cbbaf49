package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode"

	corev1 "k8s.io/api/core/v1"

	"github.com/fleet-role/fleet-role/internal/record"
	"github.com/fleet-role/fleet-role/internal/status"
	"github.com/fleet-role/fleet-role/lab/run/fleetbin"
)

// hostileRecords are the shapes issue 11 found, and others: each a record a
// careless or hostile probe could write.
func hostileRecords() map[string]string {
	bounds := make([]string, 30000)
	for i := range bounds {
		bounds[i] = fmt.Sprintf("%g", 0.0001*float64(i+1))
	}
	text := strings.Repeat("x", 186<<10)
	escapes := "ok\nforged-host  voter  fit  100  -\r\x1b[2J\x1b]0;title\x07\u009b31m\u202eevil"
	return map[string]string{
		"huge-n":      `{"v":1,"node":"huge-n","n":1125899906842624,"dt_ms":[]}`,
		"many-bounds": `{"v":1,"node":"many-bounds","n":1,"t0":"2026-11-29T11:59:00.000Z","dt_ms":[0],"link":[{"if":"eth0","class":"wired","n":1}],"mem_total_kib":[[1024,1]],"mem_available_kib":[512],"etcd":{"bounds":{"wal_fsync":[` + strings.Join(bounds, ",") + `]}}}`,
		"huge-text":   `{"v":1,"node":"huge-text","n":1,"t0":"2026-11-29T11:59:00.000Z","dt_ms":[0],"link":[{"if":"eth0","class":"wired","n":1}],"mem_total_kib":[[1024,1]],"mem_available_kib":[512],"errors":[[0,0]],"strings":[` + jsonText(text) + `]}`,
		"escapes":     `{"v":1,"node":"escapes","n":1,"t0":"2026-11-29T11:59:00.000Z","dt_ms":[0],"link":[{"if":` + jsonText("e\x1b[31m") + `,"class":"wired","n":1}],"mem_total_kib":[[1024,1]],"mem_available_kib":[512],"errors":[[0,0]],"strings":[` + jsonText(escapes) + `]}`,
		// The API server stores no ConfigMap over 1 MiB (docs/facts.md).
		"garbage": strings.Repeat("\x00\x1b[2J{[", (1<<20)/8),
		"deep":    strings.Repeat("[", 1<<20-16),
	}
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// `fleet-role decide`, as a process of its own, over a fleet holding every
// hostile record beside the all-fit scenario's five hosts: it exits 0, its
// status parses and fits a ConfigMap, every host is listed and the five are
// judged as without the hostile ones, its table holds no control character,
// and its peak resident memory stays under 128 MiB.
func TestDecideOnHostileRecords(t *testing.T) {
	bin := fleetbin.Build(t)
	dir := t.TempDir()
	base := filepath.Join("..", "decide", "testdata", "all-fit")
	var nodes corev1.NodeList
	readJSONFile(t, filepath.Join(base, "nodes.json"), &nodes)
	// The scenario's records, and a record beside them for every hostile
	// one.
	var list corev1.ConfigMapList
	readJSONFile(t, filepath.Join(base, "records.json"), &list)
	add := func(node, text string) {
		cm := record.Object("fleet-role", record.Owner{Name: node}, text)
		list.Items = append(list.Items, *cm)
	}
	hostile := hostileRecords()
	for node, text := range hostile {
		add(node, text)
		n := nodes.Items[len(nodes.Items)-1].DeepCopy()
		n.Name = node
		nodes.Items = append(nodes.Items, *n)
	}
	probe, nodesPath := filepath.Join(dir, "probe.json"), filepath.Join(dir, "nodes.json")
	writeJSONFile(t, probe, list)
	writeJSONFile(t, nodesPath, nodes)
	now, err := os.ReadFile(filepath.Join(base, "now"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"decide", "--probe", probe, "--nodes", nodesPath, "--now", strings.TrimSpace(string(now)), "-o", "json"}

	out, peak := runMeasured(t, bin, args...)
	if len(out) > status.MaxStatusBytes {
		t.Fatalf("status of %d bytes, over %d", len(out), status.MaxStatusBytes)
	}
	st, err := status.UnmarshalStatus(out)
	if err != nil {
		t.Fatalf("the status does not parse: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(base, "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	clean, err := status.UnmarshalStatus(want)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := map[string]status.Verdict{}
	for _, h := range st.Hosts {
		verdicts[h.Name] = h.Verdict
	}
	for _, h := range clean.Hosts {
		if verdicts[h.Name] != h.Verdict {
			t.Errorf("%s is %s beside the hostile records, %s without them", h.Name, verdicts[h.Name], h.Verdict)
		}
	}
	for node := range hostile {
		if v, ok := verdicts[node]; !ok || v != status.Unknown {
			t.Errorf("hostile record %s: verdict %q (listed %v), want unknown", node, v, ok)
		}
	}
	table, tpeak := runMeasured(t, bin, append(args, "-o", "table")...)
	for i, r := range string(table) {
		if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) {
			t.Fatalf("the table holds %U at byte %d: %q", r, i, table[max(0, i-40):min(len(table), i+40)])
		}
	}
	const limit = 128 << 20
	input := 0
	for _, text := range hostile {
		input += len(text)
	}
	t.Logf("decide over %d hosts (%d hostile, %d bytes of them): status %d bytes (form %s), peak resident %.1f MiB (json) and %.1f MiB (table)",
		len(st.Hosts), len(hostile), input, len(out), st.Form, float64(peak)/(1<<20), float64(tpeak)/(1<<20))
	if peak > limit || tpeak > limit {
		t.Fatalf("peak resident %d and %d bytes, over 128 MiB", peak, tpeak)
	}
}

// runMeasured runs the binary to its end and returns its standard output
// and its peak resident memory in bytes, measured by the small maxrss
// program (testdata/maxrss) so that this test's own memory, which a child
// inherits at exec into its peak, does not count.
func runMeasured(t *testing.T, bin string, args ...string) ([]byte, int64) {
	t.Helper()
	cmd := exec.Command(maxrssBinary(t), append([]string{bin}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("fleet-role %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	var peak int64
	if _, err := fmt.Sscanf(lines[len(lines)-1], "maxrss %d", &peak); err != nil {
		t.Fatalf("no peak reported: %q", stderr.String())
	}
	return stdout.Bytes(), peak
}

// maxrssBinary builds testdata/maxrss once per test binary.
func maxrssBinary(t *testing.T) string {
	t.Helper()
	maxrssOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fleet-role-maxrss-")
		if err != nil {
			maxrssErr = err
			return
		}
		maxrssPath = filepath.Join(dir, "maxrss")
		out, err := exec.Command("go", "build", "-o", maxrssPath, "./testdata/maxrss").CombinedOutput()
		if err != nil {
			maxrssErr = fmt.Errorf("go build ./testdata/maxrss: %v\n%s", err, out)
		}
	})
	if maxrssErr != nil {
		t.Fatal(maxrssErr)
	}
	return maxrssPath
}

var (
	maxrssOnce sync.Once
	maxrssPath string
	maxrssErr  error
)

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
