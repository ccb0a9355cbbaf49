package fsync

import (
	"strings"
	"testing"
)

// ParseFio reads the p99 and the count from fio 3.33's JSON, past any notes
// fio prints before it, and refuses output without them.
func TestParseFio(t *testing.T) {
	good := `note: both iodepth >= 1 and synchronous I/O engine are selected
{"jobs":[{"sync":{"lat_ns":{"N":10029,"percentile":{"50.000000":180224,"99.000000":317440}}}}]}`
	r, err := ParseFio([]byte(good))
	if err != nil || r.Syncs != 10029 || r.P99Seconds != 317440e-9 {
		t.Fatalf("ParseFio = %+v, %v; want 10029 syncs, p99 317.44µs", r, err)
	}
	for _, bad := range []string{
		`{"jobs":[]}`,
		`{"jobs":[{"sync":{"lat_ns":{"N":3,"percentile":{"50.000000":1}}}}]}`,
		`not json`,
	} {
		if _, err := ParseFio([]byte(bad)); err == nil || !strings.Contains(err.Error(), "fio") {
			t.Errorf("ParseFio(%q) = %v, want an error naming fio", bad, err)
		}
	}
}
