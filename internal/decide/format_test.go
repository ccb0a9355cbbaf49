package decide

import (
	"fmt"
	"math"
	"testing"
)

// The margins are written without fmt, as fmt writes them:
// the status's texts must not change with how they are made.
func TestFormatsAsFmt(t *testing.T) {
	values := []float64{0, math.Copysign(0, -1), 1e-9, -1e-9, 0.0004, -0.0004, 0.0005, -0.0005, 0.12345, -0.98765, 1, 12.3456,
		-3.5, 1023, 1024, 1536.5, 1 << 20, 3.75 * (1 << 30), 5 << 40, -2048, math.NaN(), 1e300}
	for _, v := range values {
		if got, want := formatMargin(v), fmt.Sprintf("%+.1f%%", v*100); got != want {
			t.Errorf("formatMargin(%v) = %q, fmt writes %q", v, got, want)
		}
	}
}
