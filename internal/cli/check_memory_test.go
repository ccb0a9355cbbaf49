package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	if code != ExitOK && code != ExitUnfit {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		memory.Reading
		Judged checkVerdict `json:"judged"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	r := got.Reading
	if fit := r.MemAvailableBytes >= 2<<30; (got.Judged.Verdict == checkFit) != fit || (code == ExitOK) != fit {
		t.Errorf("%d bytes available judged %+v with exit %d, want fit (exit 0) exactly when at least 2 GiB", r.MemAvailableBytes, got.Judged, code)
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
	if code != ExitOK && code != ExitUnfit {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"mem_total      ", " GiB (", "mem_available  ", "% of total)", "verdict        ", "limit basis    storage_quota_bytes 2 GiB: etcd's backend is memory-mapped"} {
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

// MemAvailable is held to the storage quota, at least: fit at it, unfit a
// KiB under (the kernel's kB), exit 3; the quota is a setting.
func TestCheckMemoryAtTheQuota(t *testing.T) {
	for _, c := range []struct {
		availableKiB uint64
		quota        string
		code         int
		verdict      string
	}{
		{2 << 20, "", ExitOK, "fit: memory_available: 2.00 GiB, must be at least 2.00 GiB"},
		{2<<20 - 1, "", ExitUnfit, "unfit: memory_available: 2.00 GiB, must be at least 2.00 GiB"},
		{2<<20 + 1, "", ExitOK, "fit: "},
		{3 << 20, "4294967296", ExitUnfit, "unfit: memory_available: 3.00 GiB, must be at least 4.00 GiB"},
	} {
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
			t.Fatal(err)
		}
		meminfo := fmt.Sprintf("MemTotal:       16384000 kB\nMemFree:         1000000 kB\nMemAvailable:   %8d kB\n", c.availableKiB)
		if err := os.WriteFile(filepath.Join(root, "proc/meminfo"), []byte(meminfo), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"--host-root", root}
		if c.quota != "" {
			args = append(args, "--storage-quota-bytes", c.quota)
		}
		code, out, errs := mainMemory(args...)
		if code != c.code || !strings.Contains(out, "verdict        "+c.verdict) {
			t.Errorf("%d kB available, quota %q: exit %d, stderr %q, output:\n%s\nwant %d and %q", c.availableKiB, c.quota, code, errs, out, c.code, c.verdict)
		}
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
