package status

import (
	"fmt"
	"math"
	"testing"
)

// The byte sizes are written without fmt, as fmt writes them: the status's
// texts must not change with how they are made.
func TestBytesAsFmt(t *testing.T) {
	values := []float64{0, math.Copysign(0, -1), 1e-9, -1e-9, 0.0004, -0.0004, 0.0005, -0.0005, 0.12345, -0.98765, 1, 12.3456,
		-3.5, 1023, 1024, 1536.5, 1 << 20, 3.75 * (1 << 30), 5 << 40, -2048, math.NaN(), 1e300}
	for _, v := range values {
		want := fmt.Sprintf("%.0f B", v)
		for _, u := range []struct {
			size float64
			name string
		}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
			if math.Abs(v) >= u.size {
				want = fmt.Sprintf("%.2f %s", v/u.size, u.name)
				break
			}
		}
		if got := formatBytes(v); got != want {
			t.Errorf("formatBytes(%v) = %q, fmt writes %q", v, got, want)
		}
	}
}
