package entry

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
)

// A column is a reading every sample has, written as one array across the
// samples: the entry object's columns run over all n of them, the etcd
// object's over those that have etcd data. entryColumns and etcdColumns are the only
// place a column is described: Encode, the reader, the size checks, the
// decoder and the reflective oracle all walk them, so that a new reading of
// this shape is its field in Sample or EtcdSample, an entry below, and its
// worst value in WorstCase (TestWorstCaseFillsEveryColumn fails without it,
// since the record cap is that entry's size).
//
// Readings of other shapes (times, links, connects by voter, error texts,
// histograms) have readers of their own in read.go and decode.go.

// entryColumns are the entry object's columns, in the order Encode writes
// them: after connect_fail, before errors. A new one goes last.
var entryColumns = [...]column[Sample]{
	kibColumn("mem_total_kib", formRuns, func(s *Sample) *uint64 { return &s.MemTotalBytes }),
	kibColumn("mem_available_kib", formEach, func(s *Sample) *uint64 { return &s.MemAvailableBytes }),
	microsColumn("mem_full_stall_us", func(s *Sample) **float64 { return &s.MemFullStallSeconds }),
	microsColumn("wakeup_late_us", func(s *Sample) **float64 { return &s.WakeupLateSeconds }),
}

// etcdColumns are the etcd object's columns, in the order Encode writes
// them. A new one goes last.
var etcdColumns = [...]column[EtcdSample]{
	flagColumn("is_leader", func(x *EtcdSample) *bool { return &x.IsLeader }),
	flagColumn("is_learner", func(x *EtcdSample) *bool { return &x.IsLearner }),
	flagColumn("has_leader", func(x *EtcdSample) *bool { return &x.HasLeader }),
	intColumn("connected_peers", func(x *EtcdSample) *int { return &x.ConnectedPeers }),
	intColumn("known_peers", func(x *EtcdSample) *int { return &x.KnownPeers }),
	// The decision adds up the changes of the window.
	countColumn("leader_changes", formRuns, true, func(x *EtcdSample) *uint64 { return &x.LeaderChanges }),
	kibColumn("db_size_kib", formEach, func(x *EtcdSample) *uint64 { return &x.DBSizeBytes }),
	countColumn("quota_bytes", formRuns, false, func(x *EtcdSample) *uint64 { return &x.QuotaBytes }),
}

// etcdColumnsBeforeHists is how many of etcdColumns version 1 writes
// between member_id and the histograms (wal_fsync, backend_commit,
// peer_rtt); the rest follow peer_rtt. The order is the format's bytes, in
// every record already written.
const etcdColumnsBeforeHists = 6

// form is how a column is written.
type form int

const (
	// formRuns is [value, count] runs whose counts add up to the rows: a
	// reading that seldom changes.
	formRuns form = iota
	// formEach is a whole number a row.
	formEach
	// formMicros is a whole number of microseconds or null a row, read as
	// seconds (null: no figure); a column with no figure is left out, so
	// that entries written before it read as never measured.
	formMicros
)

// bytesPerKiB: the format writes byte counts in KiB (docs/entry.md: the
// kernel reports memory in kB, etcd's database grows in 4 KiB pages).
const bytesPerKiB = 1024

// column describes one column: its key, its form, and the field of a row
// it carries.
type column[S any] struct {
	name string
	form form
	kind kind
	// sum: the window's values must add up within 64 bits, as the decision
	// adds them up.
	sum bool
	// The row's field, as kind (or, for formMicros, form) says: one is set.
	u    func(*S) *uint64   // kindKiB, kindCount
	n    func(*S) *int      // kindInt
	flag func(*S) *bool     // kindFlag
	secs func(*S) **float64 // formMicros; nil: no figure that row
}

// kind is what a column's field holds, and so how it is written and the
// largest value it may have.
type kind int

const (
	kindKiB   kind = iota // bytes, written in whole KiB (rounded down)
	kindCount             // a count of 64 bits
	kindInt               // a count held in an int
	kindFlag              // a bool, written 0 or 1
)

// kindLimits are the largest value of each kind and the rule it comes
// from: Encode refuses to write a larger one and the decoder to read it.
// formMicros columns are held to maxMicros instead.
var kindLimits = [...]struct {
	most uint64
	why  string
}{
	kindKiB:   {math.MaxUint64 / bytesPerKiB, "KiB of a byte count of 64 bits"},
	kindCount: {math.MaxUint64, "64 bits"},
	kindInt:   {math.MaxInt32, "an int on the 32-bit hosts fleet-role runs on (arm/v7)"},
	kindFlag:  {1, "a flag is 0 or 1"},
}

func (c *column[S]) most() uint64 { return kindLimits[c.kind].most }

// get is row's value as the format writes it. A negative int wraps past
// most, which refuses it.
func (c *column[S]) get(row *S) uint64 {
	switch c.kind {
	case kindKiB:
		return *c.u(row) / bytesPerKiB
	case kindInt:
		return uint64(*c.n(row))
	case kindFlag:
		return b2u(*c.flag(row))
	}
	return *c.u(row)
}

// kibColumn is a byte count, written in whole KiB.
func kibColumn[S any](name string, f form, field func(*S) *uint64) column[S] {
	return column[S]{name: name, form: f, kind: kindKiB, u: field}
}

// countColumn is a count of 64 bits.
func countColumn[S any](name string, f form, sum bool, field func(*S) *uint64) column[S] {
	return column[S]{name: name, form: f, kind: kindCount, sum: sum, u: field}
}

// intColumn is a count held in an int, in runs.
func intColumn[S any](name string, field func(*S) *int) column[S] {
	return column[S]{name: name, form: formRuns, kind: kindInt, n: field}
}

// flagColumn is a bool, in runs.
func flagColumn[S any](name string, field func(*S) *bool) column[S] {
	return column[S]{name: name, form: formRuns, kind: kindFlag, flag: field}
}

// microsColumn is an optional duration in seconds, written in whole
// microseconds.
func microsColumn[S any](name string, field func(*S) **float64) column[S] {
	return column[S]{name: name, form: formMicros, secs: field}
}

// colData is a column as the wire form holds it, in its column's form.
type colData struct {
	runs []pair   // formRuns
	vals []uint64 // formEach
	opt  []*int64 // formMicros; nil when the column is left out
}

// columnNamed is the index in cols of the column named key, -1 if none.
func columnNamed[S any](cols []column[S], key string) int {
	for k := range cols {
		if cols[k].name == key {
			return k
		}
	}
	return -1
}

// sampleAt is the sample index of row j: at[j], or j itself when the rows
// are the samples (at nil).
func sampleAt(at []int, j int) int {
	if at == nil {
		return j
	}
	return at[j]
}

// refuse is the error for row j's value v past the column's most.
func (c *column[S]) refuse(field string, at []int, j int, v uint64) error {
	shown := strconv.FormatUint(v, 10)
	if c.kind == kindInt {
		shown = strconv.FormatInt(int64(v), 10) // as the int it was
	}
	limit := kindLimits[c.kind]
	return fmt.Errorf("%s: sample %d: %s is not from 0 to %d (%s)", field, sampleAt(at, j), shown, limit.most, limit.why)
}

// encodeColumns writes the columns of rows into data, naming fields after
// prefix; at holds each row's sample index (nil: the rows are the
// samples).
func encodeColumns[S any](cols []column[S], data []colData, prefix string, rows []*S, at []int) error {
	n := len(rows)
	for k := range cols {
		c, d := &cols[k], &data[k]
		field := prefix + c.name
		if c.form == formMicros {
			for j, row := range rows {
				v := *c.secs(row)
				if v == nil {
					continue
				}
				us, err := microsAt(*v, func() string { return fmt.Sprintf("sample %d: %s", sampleAt(at, j), field) })
				if err != nil {
					return err
				}
				if d.opt == nil {
					d.opt = make([]*int64, n)
				}
				d.opt[j] = &us
			}
			continue
		}
		vals, most := make([]uint64, n), c.most()
		for j, row := range rows {
			if vals[j] = c.get(row); vals[j] > most {
				return c.refuse(field, at, j, vals[j])
			}
		}
		if c.form == formEach {
			d.vals = vals
		} else if d.runs = runsOf(vals); d.runs == nil {
			d.runs = []pair{}
		}
	}
	return nil
}

// columnSizes holds each run column to the n samples (each run covers at
// least one), before anything is built from it.
func columnSizes[S any](cols []column[S], data []colData, n int) error {
	for k := range cols {
		if cols[k].form == formRuns {
			if err := perSample(cols[k].name, len(data[k].runs), n); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeColumns sets the fields of rows from the columns in data, holding
// each value to its column's rules; at holds each row's sample index for
// errors (nil: the rows are the samples). A formMicros column's seconds
// are cut from a (nil: afresh).
func decodeColumns[S any](cols []column[S], data []colData, rows []S, at []int, a *arena) error {
	for k := range cols {
		c, d := &cols[k], &data[k]
		var err error
		switch c.form {
		case formRuns:
			err = c.decodeRuns(d.runs, rows, at)
		case formEach:
			err = c.decodeEach(d.vals, rows, at)
		case formMicros:
			err = c.decodeMicros(d.opt, rows, a)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeRuns walks the runs straight into the rows, without expanding them
// into a column first.
func (c *column[S]) decodeRuns(runs []pair, rows []S, at []int) error {
	var total uint64
	j, most := 0, c.most()
	for i, r := range runs {
		if r[1] == 0 {
			return fmt.Errorf("%s: run %d has count 0", c.name, i)
		}
		if r[1] > uint64(len(rows)-j) {
			return fmt.Errorf("%s: runs cover more than %d samples", c.name, len(rows))
		}
		if r[0] > most {
			return c.refuse(c.name, at, j, r[0])
		}
		end := j + int(r[1])
		for k := j; c.sum && k < end; k++ {
			if err := c.add(&total, at, k, r[0]); err != nil {
				return err
			}
		}
		c.put(rows[j:end], runs[i][:1])
		j = end
	}
	if j != len(rows) {
		return fmt.Errorf("%s: runs cover %d samples, want %d", c.name, j, len(rows))
	}
	return nil
}

func (c *column[S]) decodeEach(vals []uint64, rows []S, at []int) error {
	if err := checkLen(c.name, len(vals), len(rows)); err != nil {
		return err
	}
	var total uint64
	most := c.most()
	for j, v := range vals {
		if v > most {
			return c.refuse(c.name, at, j, v)
		}
		if c.sum {
			if err := c.add(&total, at, j, v); err != nil {
				return err
			}
		}
	}
	c.put(rows, vals)
	return nil
}

// put sets the field of each row to its value, held to most already:
// vals[j], or vals[0] in every row when one value covers them all (a run).
// The kind is settled once a column, not once a row.
func (c *column[S]) put(rows []S, vals []uint64) {
	step := 1
	if len(vals) == 1 {
		step = 0
	}
	switch c.kind {
	case kindKiB:
		for j := range rows {
			*c.u(&rows[j]) = vals[j*step] * bytesPerKiB
		}
	case kindCount:
		for j := range rows {
			*c.u(&rows[j]) = vals[j*step]
		}
	case kindInt:
		for j := range rows {
			*c.n(&rows[j]) = int(vals[j*step])
		}
	case kindFlag:
		for j := range rows {
			*c.flag(&rows[j]) = vals[j*step] == 1
		}
	}
}

// add adds row j's value v to the window's total of a sum column.
func (c *column[S]) add(total *uint64, at []int, j int, v uint64) error {
	var carry uint64
	if *total, carry = bits.Add64(*total, v, 0); carry != 0 {
		return fmt.Errorf("%s: sample %d: the window's values add up past 2^64-1", c.name, sampleAt(at, j))
	}
	return nil
}

// decodeMicros reads an optional column of microseconds (nil: no column,
// a nil element: no figure that row) into seconds.
func (c *column[S]) decodeMicros(col []*int64, rows []S, a *arena) error {
	if col == nil {
		return nil
	}
	if err := checkLen(c.name, len(col), len(rows)); err != nil {
		return err
	}
	var vals []float64
	for j, us := range col {
		if us == nil {
			continue
		}
		if err := nonNegative(c.name, j, *us); err != nil {
			return err
		}
		if vals == nil {
			vals = take(a, floats, len(rows)) // one backing array, not one a row
		}
		vals[j] = seconds(*us)
		*c.secs(&rows[j]) = &vals[j]
	}
	return nil
}

// writeColumns writes the columns in data as fields of the object o is
// writing, each "name":[values]; a formMicros column with no figure is
// left out, as encoding/json's omitempty would.
func writeColumns[S any](o *objectWriter, cols []column[S], data []colData) {
	b, comma := o.out.AvailableBuffer(), !o.opened()
	for k := range cols {
		d := &data[k]
		if cols[k].form == formMicros && d.opt == nil {
			continue
		}
		b = appendKey(b, comma, cols[k].name)
		comma = true
		b = append(b, '[')
		switch cols[k].form {
		case formRuns:
			for i, p := range d.runs {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, '[')
				b = strconv.AppendUint(b, p[0], 10)
				b = append(b, ',')
				b = strconv.AppendUint(b, p[1], 10)
				b = append(b, ']')
			}
		case formEach:
			for i, v := range d.vals {
				if i > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendUint(b, v, 10)
			}
		case formMicros:
			for i, v := range d.opt {
				if i > 0 {
					b = append(b, ',')
				}
				if v == nil {
					b = append(b, "null"...)
				} else {
					b = strconv.AppendInt(b, *v, 10)
				}
			}
		}
		b = append(b, ']')
	}
	o.out.Write(b)
}

// appendKey starts a field, after a comma if it is not the object's first.
// Field names are plain (plainName): they need no escaping.
func appendKey(b []byte, comma bool, name string) []byte {
	if comma {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}
