package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// DecideRun is one line of BenchmarkDecide's output.
type DecideRun struct {
	Hosts   int
	NsPerOp float64
	// CPUNsPerOp is the benchmark process's CPU time (user+sys, the
	// collector's included) per decision: the decision's own work, which
	// on a machine busy with other work the wall time overstates.
	CPUNsPerOp  float64
	AllocsPerOp float64
	BytesPerOp  float64
	EntryBytes  float64 // the entries one decision reads
}

// DecideBench runs internal/decide's own BenchmarkDecide (five voters, the
// rest standbys, a full window each, with the fleet generator its golden
// tests use) count times and returns every line.
func DecideBench(ctx context.Context, root string, count int) ([]DecideRun, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkDecide$", "-benchmem",
		"-count", strconv.Itoa(count), "./internal/decide")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", cmd, err, out)
	}
	return ParseDecideBench(out)
}

var benchLine = regexp.MustCompile(`^BenchmarkDecide/hosts=(\d+)(?:-\d+)?\s+\d+\s+(.*)$`)

// ParseDecideBench reads `go test -bench` output lines of BenchmarkDecide.
func ParseDecideBench(out []byte) ([]DecideRun, error) {
	var runs []DecideRun
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		r := DecideRun{}
		r.Hosts, _ = strconv.Atoi(m[1])
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: %w", sc.Text(), err)
			}
			switch f[i+1] {
			case "ns/op":
				r.NsPerOp = v
			case "cpu-ns/op":
				r.CPUNsPerOp = v
			case "allocs/op":
				r.AllocsPerOp = v
			case "B/op":
				r.BytesPerOp = v
			case "entry-bytes/op":
				r.EntryBytes = v
			}
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no BenchmarkDecide lines in:\n%s", out)
	}
	return runs, nil
}

// Footprint is the size of full-window entries at the worst values a real
// host gives, as internal/entry's TestWindowFitsBudget builds them, and the
// record cap at the shipped settings it holds them under.
type Footprint struct {
	// Bytes by case: "standby, 3 voters", "standby, 5 voters",
	// "voter, 3 voters", "voter, 5 voters".
	Bytes map[string]int
	// Cap is a record's cap at the shipped settings (window 100,
	// max_servers 5): entry.WorstCaseBytes.
	Cap int
}

// EntryFootprint runs internal/entry's TestWindowFitsBudget, whose
// worst-case window generator is the one the record cap is held against,
// and reads the sizes it logs.
func EntryFootprint(ctx context.Context, root string) (Footprint, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^TestWindowFitsBudget$", "-v", "-count=1", "./internal/entry")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return Footprint{}, fmt.Errorf("%s: %w\n%s", cmd, err, out)
	}
	return ParseFootprint(out)
}

var footprintLine = regexp.MustCompile(`((?:standby|voter), \d voters): (\d+) bytes \(record cap (\d+)\)`)

// ParseFootprint reads the sizes TestWindowFitsBudget logs.
func ParseFootprint(out []byte) (Footprint, error) {
	f := Footprint{Bytes: map[string]int{}}
	for _, m := range footprintLine.FindAllSubmatch(out, -1) {
		f.Bytes[string(m[1])], _ = strconv.Atoi(string(m[2]))
		f.Cap, _ = strconv.Atoi(string(m[3]))
	}
	for _, k := range []string{"standby, 3 voters", "standby, 5 voters", "voter, 3 voters", "voter, 5 voters"} {
		if _, ok := f.Bytes[k]; !ok {
			return f, fmt.Errorf("TestWindowFitsBudget logged no size for %q:\n%s", k, out)
		}
	}
	return f, nil
}

// Largest is the largest of the footprint's entries, and its case.
func (f Footprint) Largest() (name string, bytes int) {
	for k, b := range f.Bytes {
		if b > bytes || b == bytes && k < name {
			name, bytes = k, b
		}
	}
	return name, bytes
}
