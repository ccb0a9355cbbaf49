package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleet-role/fleet-role/internal/memory"
)

func mainMemory(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(append([]string{"check", "memory"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCheckMemoryThisHost(t *testing.T) {
	code, out, errs := mainMemory("--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r memory.Reading
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	want, err := memory.ReadMeminfo("/")
	if err != nil {
		t.Fatal(err)
	}
	if r.MemTotalBytes != want.TotalBytes || r.MemAvailableBytes == 0 || r.MemAvailableBytes > r.MemTotalBytes {
		t.Errorf("%+v; MemTotal is %d B", r, want.TotalBytes)
	}
	if _, err := os.Stat("/proc/pressure/memory"); (err == nil) != (r.PSI != nil) {
		t.Errorf("psi %+v, stat /proc/pressure/memory: %v", r.PSI, err)
	}

	code, out, errs = mainMemory()
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"mem_total      ", " GiB (", "mem_available  ", "% of total)"} {
		if !strings.Contains(out, want) {
			t.Errorf("human output lacks %q:\n%s", want, out)
		}
	}
	if r.PSI != nil && (!strings.Contains(out, "psi some       avg10 ") || !strings.Contains(out, "psi full       avg10 ")) {
		t.Errorf("human output lacks the PSI lines:\n%s", out)
	}
}

// A host without PSI, through --host-root: null in JSON, "absent" to read.
func TestCheckMemoryNoPSI(t *testing.T) {
	root := "../memory/testdata/nopsi"
	code, out, errs := mainMemory("--host-root", root, "--json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &fields); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if string(fields["psi"]) != "null" {
		t.Errorf("psi %s, want null", fields["psi"])
	}
	if string(fields["mem_total_bytes"]) != "25276510208" {
		t.Errorf("mem_total_bytes %s, want the fixture's 24684092 kB = 25276510208 B", fields["mem_total_bytes"])
	}
	code, out, _ = mainMemory("--host-root", root)
	if code != ExitOK || !strings.Contains(out, "psi            absent") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestCheckMemoryFailures(t *testing.T) {
	empty := t.TempDir()
	bad := t.TempDir()
	if err := os.MkdirAll(filepath.Join(bad, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "proc/meminfo"), []byte("MemTotal: 1 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no proc", []string{"--host-root", empty}, ExitFail, "read " + filepath.Join(empty, "proc/meminfo")},
		{"malformed meminfo", []string{"--host-root", bad}, ExitFail, "parse " + filepath.Join(bad, "proc/meminfo") + ": no MemAvailable line"},
		{"empty host root", []string{"--host-root", ""}, ExitUsage, "--host-root is empty"},
		{"argument", []string{"now"}, ExitUsage, `unknown command "now"`},
		{"unknown flag", []string{"--interval", "1s"}, ExitUsage, "unknown flag: --interval"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := mainMemory(c.args...)
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errs, c.code, c.want)
			}
			if out != "" {
				t.Errorf("printed a reading on failure: %q", out)
			}
		})
	}
}
