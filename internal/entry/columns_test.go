package entry

import (
	"strings"
	"testing"
)

// wide lets a column in the tests below be as long as it likes.
var wide = colLimit{max: 1 << 20}

// The hand reader of the numeric columns takes what encoding/json would take
// for an integer, at and past each bound, and names the field when it
// refuses.
func TestColumnsReadIntegersAtTheirBounds(t *testing.T) {
	ints, err := readInts("f", []byte(` [ -9223372036854775808 , 9223372036854775807, 0, -0 ] `), wide)
	if err != nil || len(ints) != 4 || ints[0] != -1<<63 || ints[1] != 1<<63-1 || ints[2] != 0 || ints[3] != 0 {
		t.Fatalf("ints at their bounds: %v, %v", ints, err)
	}
	uints, err := readUints("f", []byte(`[18446744073709551615,0]`), wide)
	if err != nil || uints[0] != 1<<64-1 || uints[1] != 0 {
		t.Fatalf("uints at their bounds: %v, %v", uints, err)
	}
	opt, err := readOptInts("f", []byte(`[null,5,null,7]`), wide)
	if err != nil || opt[0] != nil || *opt[1] != 5 || opt[2] != nil || *opt[3] != 7 {
		t.Fatalf("optional ints: %v, %v", opt, err)
	}
	hists, err := readOptUintArrays("f", []byte(`[null,[1,2,3,4],[]]`), wide, wide)
	if err != nil || hists[0] != nil || len(*hists[1]) != 4 || len(*hists[2]) != 0 {
		t.Fatalf("optional arrays: %v, %v", hists, err)
	}
	if got, err := readInts("f", []byte(`null`), wide); got != nil || err != nil {
		t.Fatalf("null column: %v, %v", got, err)
	}
	for _, c := range []struct {
		read func() error
		want string
	}{
		{func() error { _, err := readInts("dt_ms", []byte(`[9223372036854775808]`), wide); return err }, "dt_ms: element 0 does not fit an int64"},
		{func() error { _, err := readInts("dt_ms", []byte(`[-9223372036854775809]`), wide); return err }, "dt_ms: element 0 does not fit an int64"},
		{func() error { _, err := readUints("kib", []byte(`[18446744073709551616]`), wide); return err }, "kib: element 0 does not fit 64 bits"},
		{func() error { _, err := readUints("kib", []byte(`[1,-1]`), wide); return err }, "kib: element 1: -1 is not a whole number"},
		{func() error { _, err := readInts("dt_ms", []byte(`[1.5]`), wide); return err }, "dt_ms: element 0 is not a whole number"},
		{func() error { _, err := readInts("dt_ms", []byte(`[1e3]`), wide); return err }, "dt_ms: element 0 is not a whole number"},
		{func() error { _, err := readInts("dt_ms", []byte(`[null]`), wide); return err }, "dt_ms: element 0 is not a number"},
		{func() error { _, err := readInts("dt_ms", []byte(`{"a":1}`), wide); return err }, "dt_ms: want an array"},
		{func() error { _, err := readOptUintArrays("wal", []byte(`[[1,null]]`), wide, wide); return err }, "element 0: wal: element 1 is not a number"},
	} {
		if err := c.read(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
}
