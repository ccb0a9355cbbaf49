package entry

import (
	"math"
	"reflect"
	"slices"
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

// Every column reads back what Encode wrote, row by row, so that a column
// added to the table round-trips without a test of its own.
func TestColumnsRoundTrip(t *testing.T) {
	e := WorstCase(5, 3)
	text, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(text)
	if err != nil {
		t.Fatal(err)
	}
	for i := range e.Samples {
		for _, c := range entryColumns {
			if !c.same(&e.Samples[i], &back.Samples[i]) {
				t.Errorf("sample %d: %s does not read back", i, c.name)
			}
		}
		for _, c := range etcdColumns {
			if !c.same(e.Samples[i].Etcd, back.Samples[i].Etcd) {
				t.Errorf("sample %d: etcd.%s does not read back", i, c.name)
			}
		}
	}
}

// same reports whether row a and row b hold the same value of c, as the
// format carries it (whole KiB, whole microseconds).
func (c *column[S]) same(a, b *S) bool {
	if c.form != formMicros {
		return c.get(a) == c.get(b)
	}
	x, y := *c.secs(a), *c.secs(b)
	return x == nil && y == nil || x != nil && y != nil && math.Abs(*x-*y) < 0.5e-6
}

// The worst legitimate entry, which sets the record cap, has a value in
// every column: a column added without its worst value would leave the
// cap short of the entries that carry it.
func TestWorstCaseFillsEveryColumn(t *testing.T) {
	w, err := toWire(WorstCase(4, 3))
	if err != nil {
		t.Fatal(err)
	}
	filled := func(d colData) bool {
		for _, p := range d.runs {
			if p[0] != 0 {
				return true
			}
		}
		for _, v := range d.vals {
			if v != 0 {
				return true
			}
		}
		return d.opt != nil && !slices.Contains(d.opt, nil)
	}
	for k, c := range entryColumns {
		if !filled(w.cols[k]) {
			t.Errorf("WorstCase has no value in %s", c.name)
		}
	}
	for k, c := range etcdColumns {
		if !filled(w.Etcd.cols[k]) {
			t.Errorf("WorstCase has no value in etcd.%s", c.name)
		}
	}
}

// Each column's largest value reads, and one more is refused by an error
// naming the column: the bounds of the table hold for every column in it.
func TestColumnBounds(t *testing.T) {
	base, err := toWire(WorstCase(3, 3))
	if err != nil {
		t.Fatal(err)
	}
	// fill sets column data d of n rows to v in the first row and nothing
	// (0 or null) in the others, in form f: one value at the bound, which
	// a column that adds up its values takes too.
	fill := func(d *colData, f form, n int, v uint64) {
		switch f {
		case formRuns:
			d.runs = []pair{{v, 1}, {0, uint64(n - 1)}}
		case formEach:
			d.vals = make([]uint64, n)
			d.vals[0] = v
		case formMicros:
			us := int64(v)
			d.opt = make([]*int64, n)
			d.opt[0] = &us
		}
	}
	type bound struct {
		name, field string
		form        form
		most        uint64
		set         func(w *wire, d colData)
	}
	var bounds []bound
	most := func(f form, m uint64) uint64 {
		if f == formMicros {
			return maxMicros
		}
		return m
	}
	for k, c := range entryColumns {
		bounds = append(bounds, bound{c.name, c.name, c.form, most(c.form, c.most()), func(w *wire, d colData) { w.cols[k] = d }})
	}
	for k, c := range etcdColumns {
		bounds = append(bounds, bound{c.name, "etcd." + c.name, c.form, most(c.form, c.most()), func(w *wire, d colData) { w.Etcd.cols[k] = d }})
	}
	for _, b := range bounds {
		for _, v := range []uint64{b.most, b.most + 1} {
			if v < b.most {
				continue // no value past 64 bits to write
			}
			w := base
			etcd := *base.Etcd
			w.Etcd = &etcd
			var d colData
			fill(&d, b.form, w.N, v)
			b.set(&w, d)
			text, err := w.marshal()
			if err != nil {
				t.Fatal(err)
			}
			_, err = Decode(string(text))
			switch {
			case v == b.most && err != nil:
				t.Errorf("%s at its most, %d: %v", b.field, v, err)
			case v > b.most && (err == nil || !strings.Contains(err.Error(), b.field)):
				t.Errorf("%s at %d, past its most: %v, want an error naming it", b.field, v, err)
			}
		}
	}
}

// The objects' own fields are what entryOwnFields and etcdOwnFields count
// (maxStructKeys rests on them), and no column shares a name with one or
// has a name the reader would refuse.
func TestOwnFieldsAndColumnNames(t *testing.T) {
	names := func(parts ...any) []string {
		var out []string
		for _, p := range parts {
			typ := reflect.TypeOf(p)
			for i := range typ.NumField() {
				name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
				out = append(out, name)
			}
		}
		return out
	}
	for _, o := range []struct {
		what  string
		own   []string
		count int
		cols  []string
	}{
		{"entry", append(names(wireHead{}, wireErrors{}, wireTail{}), "etcd"), entryOwnFields, columnNames(entryColumns[:])},
		{"etcd", names(wireEtcdHead{}, wireEtcdHists{}, wireEtcdTail{}), etcdOwnFields, columnNames(etcdColumns[:])},
	} {
		if len(o.own) != o.count {
			t.Errorf("the %s object has %d fields of its own %v, counted as %d", o.what, len(o.own), o.own, o.count)
		}
		for _, c := range o.cols {
			if slices.Contains(o.own, c) || !plainName(c) {
				t.Errorf("%s column %q: a name of the object's own or not a plain field name", o.what, c)
			}
		}
	}
}

func columnNames[S any](cols []column[S]) []string {
	var out []string
	for _, c := range cols {
		out = append(out, c.name)
	}
	return out
}
