// Package memory reads how much memory a host has, how much of it is
// available, and how long its tasks have stalled waiting for memory (PSI):
// etcd's backend is memory-mapped, so a voter that runs short of memory
// pages under load and misses its heartbeats.
//
// ParseMeminfo and ParsePSI are pure parsers over readers; Read is the thin
// reader of a host under a host root, so that a DaemonSet can read the
// host's /proc mounted at /host. A kernel without memory PSI is reported as
// absent (a nil PSI, JSON null), never as zero pressure.
package memory

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrNoPSI says the kernel exposes no memory pressure: built without
// CONFIG_PSI (no /proc/pressure), or booted with psi=0 (the file is there
// but reading it fails with EOPNOTSUPP, as on Raspberry Pi OS).
var ErrNoPSI = errors.New("no memory PSI on this kernel")

// maxFileBytes bounds a read of meminfo or a pressure file. Both are a
// single seq_file page on today's kernels (meminfo about 1.5 KiB, a
// pressure file under 200 bytes); a file 16 times a page is not one of them.
const maxFileBytes = 16 * 4096

// Meminfo holds the two figures of /proc/meminfo fleet-role judges by.
type Meminfo struct {
	TotalBytes     uint64 // MemTotal: usable RAM, less what the kernel reserved at boot
	AvailableBytes uint64 // MemAvailable: what a new workload can get without swapping
}

// PSILine is one line of a pressure file: the share of wall time in which
// tasks stalled on memory, averaged over 10, 60 and 300 s, and the total
// stall time since boot.
type PSILine struct {
	Avg10  float64 `json:"avg10"` // percent
	Avg60  float64 `json:"avg60"` // percent
	Avg300 float64 `json:"avg300"`
	// TotalUs is cumulative, in microseconds: the probe takes its change
	// per period, so it is kept exact (a float64 would round it after 2^53
	// µs, and JSON carries it as an integer).
	TotalUs uint64 `json:"total_us"`
}

// PSI is /proc/pressure/memory: "some" is time in which at least one task
// stalled on memory, "full" time in which every non-idle task did at once.
type PSI struct {
	Some PSILine `json:"some"`
	Full PSILine `json:"full"`
}

// Reading is one memory reading of a host.
type Reading struct {
	MemTotalBytes     uint64 `json:"mem_total_bytes"`
	MemAvailableBytes uint64 `json:"mem_available_bytes"`
	PSI               *PSI   `json:"psi"` // nil when the kernel has no memory PSI
}

// Read takes a memory reading of the host whose root file system is at
// hostRoot ("/" for this host): <hostRoot>/proc/meminfo and
// <hostRoot>/proc/pressure/memory. PSI that the kernel does not provide is
// nil; any other failure to read either file is an error.
func Read(hostRoot string) (Reading, error) {
	mi, err := ReadMeminfo(hostRoot)
	if err != nil {
		return Reading{}, err
	}
	r := Reading{MemTotalBytes: mi.TotalBytes, MemAvailableBytes: mi.AvailableBytes}
	psi, err := ReadPSI(hostRoot)
	switch {
	case err == nil:
		r.PSI = &psi
	case errors.Is(err, ErrNoPSI):
	default:
		return Reading{}, err
	}
	return r, nil
}

// ReadMeminfo reads <hostRoot>/proc/meminfo.
func ReadMeminfo(hostRoot string) (Meminfo, error) {
	p := filepath.Join(hostRoot, "proc/meminfo")
	b, err := readBounded(p)
	if err != nil {
		return Meminfo{}, err
	}
	mi, err := ParseMeminfo(strings.NewReader(b))
	if err != nil {
		return Meminfo{}, fmt.Errorf("parse %s: %w", p, err)
	}
	return mi, nil
}

// ReadPSI reads <hostRoot>/proc/pressure/memory. It returns an error wrapping
// ErrNoPSI when the kernel provides none.
func ReadPSI(hostRoot string) (PSI, error) {
	p := filepath.Join(hostRoot, "proc/pressure/memory")
	b, err := readBounded(p)
	if err != nil {
		if psiAbsent(err) {
			return PSI{}, fmt.Errorf("%w: %v", ErrNoPSI, err)
		}
		return PSI{}, err
	}
	psi, err := ParsePSI(strings.NewReader(b))
	if err != nil {
		return PSI{}, fmt.Errorf("parse %s: %w", p, err)
	}
	return psi, nil
}

// psiAbsent tells a kernel without memory PSI from a failure to read it.
func psiAbsent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EOPNOTSUPP)
}

func readBounded(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, unwrapPath(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	if len(b) > maxFileBytes {
		return "", fmt.Errorf("read %s: longer than %d bytes", p, maxFileBytes)
	}
	return string(b), nil
}

// ParseMeminfo reads MemTotal and MemAvailable from /proc/meminfo, whose
// lines read "MemTotal:       24684092 kB" (kB meaning KiB). Both must be
// present, once each, in kB; other lines are not looked at.
func ParseMeminfo(r io.Reader) (Meminfo, error) {
	want := map[string]*uint64{}
	var mi Meminfo
	want["MemTotal"] = &mi.TotalBytes
	want["MemAvailable"] = &mi.AvailableBytes
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		key, rest, ok := strings.Cut(sc.Text(), ":")
		dst, wanted := want[key]
		if !ok || !wanted {
			continue
		}
		if seen[key] {
			return Meminfo{}, fmt.Errorf("line %d: %s appears twice", n, key)
		}
		seen[key] = true
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return Meminfo{}, fmt.Errorf("line %d: %s is %q, want a number of kB", n, key, strings.TrimSpace(rest))
		}
		kib, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return Meminfo{}, fmt.Errorf("line %d: %s: %w", n, key, err)
		}
		if kib > math.MaxUint64/1024 {
			return Meminfo{}, fmt.Errorf("line %d: %s %d kB overflows 64 bits of bytes", n, key, kib)
		}
		*dst = kib * 1024
	}
	if err := sc.Err(); err != nil {
		return Meminfo{}, fmt.Errorf("line %d: %w", n+1, err)
	}
	for _, k := range []string{"MemTotal", "MemAvailable"} {
		if !seen[k] {
			// MemAvailable came with Linux 3.14; older kernels are not served.
			return Meminfo{}, fmt.Errorf("no %s line", k)
		}
	}
	return mi, nil
}

// ParsePSI reads a pressure file's "some" and "full" lines, each
// "avg10=0.00 avg60=0.00 avg300=0.00 total=0". Both lines and all four
// fields must be there; fields a later kernel may add are not looked at.
func ParsePSI(r io.Reader) (PSI, error) {
	var psi PSI
	lines := map[string]*PSILine{"some": &psi.Some, "full": &psi.Full}
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		dst, ok := lines[f[0]]
		if !ok {
			return PSI{}, fmt.Errorf("line %d: %q is neither some nor full", n, f[0])
		}
		if seen[f[0]] {
			return PSI{}, fmt.Errorf("line %d: %s appears twice", n, f[0])
		}
		seen[f[0]] = true
		if err := parsePSILine(f[1:], dst); err != nil {
			return PSI{}, fmt.Errorf("line %d (%s): %w", n, f[0], err)
		}
	}
	if err := sc.Err(); err != nil {
		return PSI{}, fmt.Errorf("line %d: %w", n+1, err)
	}
	for _, k := range []string{"some", "full"} {
		if !seen[k] {
			return PSI{}, fmt.Errorf("no %s line", k)
		}
	}
	return psi, nil
}

func parsePSILine(fields []string, dst *PSILine) error {
	avgs := map[string]*float64{"avg10": &dst.Avg10, "avg60": &dst.Avg60, "avg300": &dst.Avg300}
	seen := map[string]bool{}
	for _, kv := range fields {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("%q is not key=value", kv)
		}
		if seen[k] {
			return fmt.Errorf("%s appears twice", k)
		}
		seen[k] = true
		if k == "total" {
			t, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("total: %w", err)
			}
			dst.TotalUs = t
			continue
		}
		p, ok := avgs[k]
		if !ok {
			continue
		}
		a, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		// A share of wall time, printed 0.00 to 100.00; not a number or
		// below zero is not the kernel's.
		if math.IsNaN(a) || math.IsInf(a, 0) || a < 0 {
			return fmt.Errorf("%s=%s is not a percentage", k, v)
		}
		*p = a
	}
	for _, k := range []string{"avg10", "avg60", "avg300", "total"} {
		if !seen[k] {
			return fmt.Errorf("no %s", k)
		}
	}
	return nil
}

// unwrapPath drops an *fs.PathError's own "open PATH" so that the error names
// the path once; errors.Is still sees the errno beneath.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
