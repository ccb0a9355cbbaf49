package entry

import (
	"strings"
	"testing"
)

// wide lets a column in the tests below be as long as it likes.
var wide = Limits{MaxSamples: 1 << 20, MaxBounds: 1 << 10}

// at is a reader over text with wide limits.
func at(text string) *reader { return &reader{s: text, l: wide, n: -1} }

// The reader of the numeric columns takes what encoding/json would take
// for an integer, at and past each bound, and names the field when it
// refuses.
func TestColumnsReadIntegersAtTheirBounds(t *testing.T) {
	ints, err := at(` [ -9223372036854775808 , 9223372036854775807, 0, -0 ] `).ints("f")
	if err != nil || len(ints) != 4 || ints[0] != -1<<63 || ints[1] != 1<<63-1 || ints[2] != 0 || ints[3] != 0 {
		t.Fatalf("ints at their bounds: %v, %v", ints, err)
	}
	uints, err := at(`[18446744073709551615,0]`).uints("f")
	if err != nil || uints[0] != 1<<64-1 || uints[1] != 0 {
		t.Fatalf("uints at their bounds: %v, %v", uints, err)
	}
	opt, err := at(`[null,5,null,7]`).optInts("f")
	if err != nil || opt[0] != nil || *opt[1] != 5 || opt[2] != nil || *opt[3] != 7 {
		t.Fatalf("optional ints: %v, %v", opt, err)
	}
	hists, err := at(`[null,[1,2,3,4],[]]`).hists("f")
	if err != nil || hists[0] != nil || len(*hists[1]) != 4 || len(*hists[2]) != 0 {
		t.Fatalf("optional arrays: %v, %v", hists, err)
	}
	if got, err := at(`null`).ints("f"); got != nil || err != nil {
		t.Fatalf("null column: %v, %v", got, err)
	}
	for _, c := range []struct {
		read func() error
		want string
	}{
		{func() error { _, err := at(`[9223372036854775808]`).ints("dt_ms"); return err }, "dt_ms: element 0 does not fit an int64"},
		{func() error { _, err := at(`[-9223372036854775809]`).ints("dt_ms"); return err }, "dt_ms: element 0 does not fit an int64"},
		{func() error { _, err := at(`[18446744073709551616]`).uints("kib"); return err }, "kib: element 0 does not fit 64 bits"},
		{func() error { _, err := at(`[1,-1]`).uints("kib"); return err }, "kib: element 1: -1 is not a whole number"},
		{func() error { _, err := at(`[1.5]`).ints("dt_ms"); return err }, "dt_ms: element 0 is not a whole number"},
		{func() error { _, err := at(`[1e3]`).ints("dt_ms"); return err }, "dt_ms: element 0 is not a whole number"},
		{func() error { _, err := at(`[null]`).ints("dt_ms"); return err }, "dt_ms: element 0 is not a number"},
		{func() error { _, err := at(`{"a":1}`).ints("dt_ms"); return err }, "dt_ms: want an array"},
		{func() error { _, err := at(`[[1,null]]`).hists("wal"); return err }, "element 0: wal: element 1 is not a number"},
	} {
		if err := c.read(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}
