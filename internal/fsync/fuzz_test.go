package fsync

import (
	"math"
	"testing"
)

// FuzzParseFio: any output is refused or gives a p99 that is a number and
// the count fio printed.
func FuzzParseFio(f *testing.F) {
	for _, s := range []string{
		`note: both iodepth >= 1 and synchronous I/O engine are selected
{"jobs":[{"sync":{"lat_ns":{"N":10029,"percentile":{"50.000000":180224,"99.000000":317440}}}}]}`,
		`{"jobs":[]}`, `{"jobs":[{},{}]}`, `not json`, `{`, `{"jobs":[{"sync":{"lat_ns":{"N":-1,"percentile":{"99.000000":1e308}}}}]}`,
		`{"jobs":[{"sync":{"lat_ns":{"N":1,"percentile":{"99.000000":"NaN"}}}}]}`, `notes {"jobs":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := ParseFio(out)
		if err != nil {
			return
		}
		if math.IsNaN(r.P99Seconds) || math.IsInf(r.P99Seconds, 0) {
			t.Fatalf("%+v: p99 is not a number of seconds", r)
		}
	})
}
