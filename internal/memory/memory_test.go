package memory

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
)

// This machine's own /proc: MemTotal must be what sysinfo(2) says, to the
// byte, and MemAvailable a part of it.
func TestReadThisHost(t *testing.T) {
	r, err := Read("/")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("this host: total %d B, available %d B, psi %+v", r.MemTotalBytes, r.MemAvailableBytes, r.PSI)
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	if want := uint64(si.Totalram) * uint64(si.Unit); r.MemTotalBytes != want {
		t.Errorf("MemTotal %d B, sysinfo says %d B", r.MemTotalBytes, want)
	}
	if r.MemAvailableBytes == 0 || r.MemAvailableBytes > r.MemTotalBytes {
		t.Errorf("MemAvailable %d B of %d B", r.MemAvailableBytes, r.MemTotalBytes)
	}

	// PSI is there exactly when the kernel serves the file.
	_, statErr := os.Stat("/proc/pressure/memory")
	if (statErr == nil) != (r.PSI != nil) {
		t.Fatalf("stat /proc/pressure/memory: %v, yet PSI %+v", statErr, r.PSI)
	}
	if r.PSI == nil {
		return
	}
	// Stall totals only grow.
	again, err := ReadPSI("/")
	if err != nil {
		t.Fatal(err)
	}
	if again.Some.TotalUs < r.PSI.Some.TotalUs || again.Full.TotalUs < r.PSI.Full.TotalUs {
		t.Errorf("totals went down: %+v then %+v", *r.PSI, again)
	}
	if r.PSI.Full.TotalUs > r.PSI.Some.TotalUs {
		t.Errorf("full stall %d µs exceeds some stall %d µs: every full stall is also a some stall", r.PSI.Full.TotalUs, r.PSI.Some.TotalUs)
	}
}

func TestReadFixtures(t *testing.T) {
	t.Run("captured here", func(t *testing.T) {
		r, err := Read("testdata/thishost")
		if err != nil {
			t.Fatal(err)
		}
		if r.MemTotalBytes != 24684092*1024 || r.PSI == nil || *r.PSI != (PSI{}) {
			t.Errorf("%+v %+v", r, r.PSI)
		}
		b, _ := json.Marshal(r)
		if !strings.Contains(string(b), `"psi":{"some":{"avg10":0,"avg60":0,"avg300":0,"total_us":0},"full":{"avg10":0,"avg60":0,"avg300":0,"total_us":0}}`) {
			t.Errorf("JSON %s: present PSI of zero must read as zeros, not null", b)
		}
	})
	t.Run("no PSI", func(t *testing.T) {
		r, err := Read("testdata/nopsi")
		if err != nil {
			t.Fatal(err)
		}
		if r.PSI != nil {
			t.Fatalf("PSI %+v on a host without /proc/pressure", *r.PSI)
		}
		b, _ := json.Marshal(r)
		if !strings.Contains(string(b), `"psi":null`) {
			t.Errorf("JSON %s: absent PSI must be null", b)
		}
		if _, err := ReadPSI("testdata/nopsi"); !errors.Is(err, ErrNoPSI) || !strings.Contains(err.Error(), "testdata/nopsi/proc/pressure/memory") {
			t.Errorf("ReadPSI: %v, want ErrNoPSI naming the file", err)
		}
	})
	t.Run("totals beyond float64", func(t *testing.T) {
		// Synthetic figures in the kernel's format: 2^53+1 µs, which a
		// float64 rounds, and 2^64-1 µs, the most the kernel's u64 holds.
		r, err := Read("testdata/extremes")
		if err != nil {
			t.Fatal(err)
		}
		if r.PSI.Some.TotalUs != 9007199254740993 || r.PSI.Full.TotalUs != 18446744073709551615 {
			t.Errorf("totals %d, %d", r.PSI.Some.TotalUs, r.PSI.Full.TotalUs)
		}
		if r.PSI.Some.Avg10 != 12.5 || r.PSI.Some.Avg60 != 3.07 || r.PSI.Full.Avg300 != 0.22 {
			t.Errorf("averages %+v", *r.PSI)
		}
		b, _ := json.Marshal(r)
		for _, s := range []string{`"total_us":9007199254740993`, `"total_us":18446744073709551615`} {
			if !strings.Contains(string(b), s) {
				t.Errorf("JSON %s lacks %s", b, s)
			}
		}
	})
	t.Run("no meminfo", func(t *testing.T) {
		dir := t.TempDir()
		_, err := Read(dir)
		if err == nil || !strings.Contains(err.Error(), "read "+dir+"/proc/meminfo") || errors.Is(err, ErrNoPSI) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("unreadable PSI", func(t *testing.T) {
		// A pressure file that is there but cannot be read for another
		// reason (here a directory) is a failure, not absent PSI.
		dir := t.TempDir()
		if err := os.MkdirAll(dir+"/proc/pressure/memory", 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile("testdata/thishost/proc/meminfo")
		if err := os.WriteFile(dir+"/proc/meminfo", b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Read(dir)
		if err == nil || errors.Is(err, ErrNoPSI) || !strings.Contains(err.Error(), "proc/pressure/memory") {
			t.Fatalf("err %v", err)
		}
	})
}

// psi=0 on the kernel command line leaves the file in place and fails the
// read with EOPNOTSUPP: absent, as a missing file is.
func TestPSIAbsent(t *testing.T) {
	for _, c := range []struct {
		err    error
		absent bool
	}{
		{&fs.PathError{Op: "read", Path: "/proc/pressure/memory", Err: syscall.EOPNOTSUPP}, true},
		{&fs.PathError{Op: "open", Path: "/proc/pressure/memory", Err: syscall.ENOENT}, true},
		{&fs.PathError{Op: "open", Path: "/proc/pressure/memory", Err: syscall.EACCES}, false},
		{&fs.PathError{Op: "read", Path: "/proc/pressure/memory", Err: syscall.EISDIR}, false},
	} {
		if got := psiAbsent(c.err); got != c.absent {
			t.Errorf("%v: absent %v, want %v", c.err, got, c.absent)
		}
	}
}

func TestParseMeminfoMalformed(t *testing.T) {
	ok := "MemTotal:       24684092 kB\nMemFree:        21068188 kB\nMemAvailable:   23847388 kB\n"
	if mi, err := ParseMeminfo(strings.NewReader(ok)); err != nil || mi.TotalBytes != 24684092*1024 || mi.AvailableBytes != 23847388*1024 {
		t.Fatalf("%+v %v", mi, err)
	}
	for _, c := range []struct{ name, in, want string }{
		{"no available", "MemTotal: 1 kB\nMemFree: 1 kB\n", "no MemAvailable line"},
		{"no total", "MemAvailable: 1 kB\n", "no MemTotal line"},
		{"empty", "", "no MemTotal line"},
		{"pages not kB", "MemTotal: 1 pages\nMemAvailable: 1 kB\n", `line 1: MemTotal is "1 pages", want a number of kB`},
		{"no unit", "MemTotal: 1\nMemAvailable: 1 kB\n", "line 1: MemTotal"},
		{"negative", "MemTotal: 1 kB\nMemAvailable: -1 kB\n", "line 2: MemAvailable"},
		{"twice", "MemTotal: 1 kB\nMemTotal: 2 kB\nMemAvailable: 1 kB\n", "line 2: MemTotal appears twice"},
		// The largest kB count that fits in 64 bits of bytes, and one over.
		{"overflow", "MemTotal: 18014398509481984 kB\nMemAvailable: 1 kB\n", "overflows 64 bits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseMeminfo(strings.NewReader(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	mi, err := ParseMeminfo(strings.NewReader("MemTotal: 18014398509481983 kB\nMemAvailable: 0 kB\n"))
	if err != nil || mi.TotalBytes != 18014398509481983*1024 {
		t.Errorf("largest that fits: %+v %v", mi, err)
	}
}

func TestParsePSIMalformed(t *testing.T) {
	line := "avg10=0.00 avg60=0.00 avg300=0.00 total=0"
	for _, c := range []struct{ name, in, want string }{
		{"no full", "some " + line + "\n", "no full line"},
		{"empty", "", "no some line"},
		{"cpu style", "some " + line + "\nfull " + line + "\nboth " + line + "\n", `line 3: "both" is neither some nor full`},
		{"twice", "some " + line + "\nsome " + line + "\n", "line 2: some appears twice"},
		{"no total", "some avg10=0.00 avg60=0.00 avg300=0.00\nfull " + line + "\n", "line 1 (some): no total"},
		{"bad avg", "some avg10=x avg60=0.00 avg300=0.00 total=0\nfull " + line + "\n", "avg10"},
		{"negative avg", "some " + line + "\nfull avg10=-0.01 avg60=0.00 avg300=0.00 total=0\n", "avg10=-0.01 is not a percentage"},
		{"NaN avg", "some avg10=NaN avg60=0.00 avg300=0.00 total=0\nfull " + line + "\n", "not a percentage"},
		{"negative total", "some avg10=0.00 avg60=0.00 avg300=0.00 total=-1\nfull " + line + "\n", "total"},
		{"total over 64 bits", "some avg10=0.00 avg60=0.00 avg300=0.00 total=18446744073709551616\nfull " + line + "\n", "total"},
		{"no equals", "some avg10 avg60=0.00 avg300=0.00 total=0\nfull " + line + "\n", `"avg10" is not key=value`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePSI(strings.NewReader(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
		})
	}
	// Fields a later kernel may add are passed over.
	psi, err := ParsePSI(strings.NewReader("some avg10=1.00 avg60=0.00 avg300=0.00 total=7 avg3600=0.00\nfull " + line + "\n"))
	if err != nil || psi.Some.TotalUs != 7 || psi.Some.Avg10 != 1 {
		t.Errorf("%+v %v", psi, err)
	}
}
