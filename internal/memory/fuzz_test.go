package memory

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// seedFiles adds every fixture named name under testdata as a seed.
func seedFiles(f *testing.F, name string) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*", "proc", name))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no %s fixtures: %v", name, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
}

// FuzzParseMeminfo: any text is refused or gives whole KiB figures.
func FuzzParseMeminfo(f *testing.F) {
	seedFiles(f, "meminfo")
	for _, s := range []string{
		"", "MemTotal: 1 kB\nMemAvailable: 1 kB\n", "MemTotal: 18014398509481983 kB\nMemAvailable: 0 kB",
		"MemTotal: 18014398509481984 kB\nMemAvailable: 0 kB", "MemTotal: 1 kB\nMemTotal: 1 kB", "MemTotal:\x00 1 kB",
		"MemTotal: -1 kB\nMemAvailable: 1 kB", "MemTotal: " + strings.Repeat("9", 70000) + " kB",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		mi, err := ParseMeminfo(strings.NewReader(text))
		if err != nil {
			return
		}
		if mi.TotalBytes%1024 != 0 || mi.AvailableBytes%1024 != 0 {
			t.Fatalf("%+v: not whole KiB", mi)
		}
	})
}

// FuzzParsePSI: any text is refused or gives percentages that are numbers
// at least 0.
func FuzzParsePSI(f *testing.F) {
	seedFiles(f, "pressure/memory")
	for _, s := range []string{
		"", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"some avg10=NaN avg60=0 avg300=0 total=0\nfull avg10=0 avg60=0 avg300=0 total=0",
		"some avg10=1e999 avg60=0 avg300=0 total=18446744073709551616\n", "some total=1 total=2", "full\nfull",
		"some avg10=0 avg60=0 avg300=0 total=0 extra=x\nfull avg10=0 avg60=0 avg300=0 total=0\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		psi, err := ParsePSI(strings.NewReader(text))
		if err != nil {
			return
		}
		for _, l := range []PSILine{psi.Some, psi.Full} {
			for _, a := range []float64{l.Avg10, l.Avg60, l.Avg300} {
				if math.IsNaN(a) || math.IsInf(a, 0) || a < 0 {
					t.Fatalf("%+v: a share of time that is not one", psi)
				}
			}
		}
	})
}
