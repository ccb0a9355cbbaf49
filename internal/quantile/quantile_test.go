package quantile

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRankAtTheWindow(t *testing.T) {
	// The window rule: at n = 1/(1-p) the p-quantile is no longer the max.
	for _, tc := range []struct {
		p    float64
		n    int
		want int
	}{
		{0.99, 100, 99}, {0.99, 99, 99}, {0.99, 101, 100}, {0.99, 1, 1},
		{0.9, 10, 9}, {0.9, 9, 9}, {0.5, 3, 2}, {0.999, 1000, 999},
	} {
		if got := Rank(tc.p, tc.n); got != tc.want {
			t.Errorf("Rank(%v, %d) = %d, want %d", tc.p, tc.n, got, tc.want)
		}
	}
}

func TestHighForgivesOneOutlierInAHundred(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[i] = 1
	}
	v[17] = 50
	if got, _ := High(v, 0.99); got != 1 {
		t.Fatalf("one outlier: p99 = %v, want 1", got)
	}
	v[42] = 40
	if got, _ := High(v, 0.99); got != 40 {
		t.Fatalf("two outliers: p99 = %v, want 40 (the smaller outlier)", got)
	}
	if v[17] != 50 || v[42] != 40 {
		t.Fatal("High reordered its input")
	}
	if _, ok := High(nil, 0.99); ok {
		t.Fatal("High of nothing reported ok")
	}
}

func TestLowMirrorsHigh(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[i] = 100
	}
	v[3] = 1
	if got, _ := Low(v, 0.99); got != 100 {
		t.Fatalf("one low outlier: low tail = %v, want 100", got)
	}
	v[4] = 2
	if got, _ := Low(v, 0.99); got != 2 {
		t.Fatalf("two low outliers: low tail = %v, want 2", got)
	}
}

func TestHistogramQuantileLikePrometheus(t *testing.T) {
	// Bounds 1,2,4 and +Inf; 100 observations.
	h := Histogram{Bounds: []float64{1, 2, 4}, Counts: []uint64{50, 40, 9, 1}}
	// rank 99 lands at the end of the (2,4] bucket: exactly 4.
	if got, _ := h.Quantile(0.99); math.Abs(got-4) > 1e-12 {
		t.Fatalf("p99 = %v, want 4", got)
	}
	// rank 50: end of the first bucket.
	if got, _ := h.Quantile(0.5); math.Abs(got-1) > 1e-12 {
		t.Fatalf("p50 = %v, want 1", got)
	}
	// rank 70: halfway through (1,2].
	if got, _ := h.Quantile(0.7); math.Abs(got-1.5) > 1e-12 {
		t.Fatalf("p70 = %v, want 1.5", got)
	}
	// rank 99.5 is in +Inf: the highest finite bound.
	if got, _ := h.Quantile(0.995); got != 4 {
		t.Fatalf("p99.5 = %v, want 4", got)
	}
	if _, ok := (Histogram{Bounds: []float64{1}, Counts: []uint64{0, 0}}).Quantile(0.99); ok {
		t.Fatal("empty histogram reported a quantile")
	}
}

func TestHistogramAdd(t *testing.T) {
	var h Histogram
	if err := h.Add(Histogram{Bounds: []float64{1, 2}, Counts: []uint64{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	if err := h.Add(Histogram{Bounds: []float64{1, 2}, Counts: []uint64{1, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if h.Count() != 8 || h.Counts[2] != 4 {
		t.Fatalf("merged = %+v", h)
	}
	if err := h.Add(Histogram{Bounds: []float64{1, 3}, Counts: []uint64{1, 0, 1}}); err == nil {
		t.Fatal("merging different bounds succeeded")
	}
	if err := (Histogram{Bounds: []float64{2, 1}, Counts: []uint64{0, 0, 0}}).Validate(); err == nil {
		t.Fatal("descending bounds validated")
	}
}

// High and Low (selected in one pass for a shallow tail, sorted otherwise)
// read the rank of the sorted column, and so do the sorted forms, in place:
// at the edges of the tail too (one value, an outlier just inside and
// outside it, the deepest rank selected and one past it).
func TestSortedFormsAgree(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	cases := [][]float64{{5}, {3, 1, 2}, {9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, nil, {math.Inf(1), 1, math.Inf(1)}}
	for _, n := range []int{16, 17, 100, 1000} {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(rnd.IntN(50)) // repeats, as real columns have
		}
		cases = append(cases, v)
	}
	for _, values := range cases {
		for _, p := range []float64{0, 0.5, 0.8, 0.84, 0.85, 0.9, 0.95, 0.98, 0.99, 0.999, 1} {
			s := slices.Clone(values)
			slices.Sort(s)
			before := slices.Clone(values)
			h, hok := High(values, p)
			l, lok := Low(values, p)
			hs, hsok := HighSorted(s, p)
			ls, lsok := LowSorted(s, p)
			if h != hs || hok != hsok || l != ls || lok != lsok || !slices.Equal(values, before) {
				t.Fatalf("%d values at p%v: High %v %v, HighSorted %v %v; Low %v %v, LowSorted %v %v", len(values), p, h, hok, hs, hsok, l, lok, ls, lsok)
			}
			if len(s) > 0 && (hs != s[Rank(p, len(s))-1] || ls != s[len(s)-Rank(p, len(s))]) {
				t.Fatalf("%d values at p%v: the sorted forms read %v and %v", len(values), p, hs, ls)
			}
		}
	}
}

// MinCount is the smallest n whose nearest-rank p-quantile is not the
// maximum: at n the rank is under n, at n-1 it is not.
func TestMinCount(t *testing.T) {
	for _, c := range []struct {
		p    float64
		want int
	}{{0.99, 100}, {0.95, 20}, {0.9, 10}, {0.5, 2}, {0.999, 1000}, {0, 0}, {1, 0}, {-0.5, 0}} {
		got := MinCount(c.p)
		if got != c.want {
			t.Errorf("MinCount(%v) = %d, want %d", c.p, got, c.want)
			continue
		}
		if got > 2 && (Rank(c.p, got) >= got || Rank(c.p, got-1) < got-1) {
			t.Errorf("MinCount(%v) = %d: rank at n %d, at n-1 %d", c.p, got, Rank(c.p, got), Rank(c.p, got-1))
		}
	}
}

// HighForgiving forgives as many outliers among fewer values as the full
// window forgives: nine values of a ten-sample window at p90 forgive one
// and not two, where High takes their largest; with as many values as the
// window or more it is High; with no more values than are forgiven it is
// High (their largest). Above selectMost from the top it sorts, and agrees.
func TestHighForgiving(t *testing.T) {
	nine := []float64{1, 1, 1, 1, 1, 1, 1, 1, 9}
	if v, _ := High(nine, 0.9); v != 9 {
		t.Fatalf("High of nine at p90: %v, want their largest", v)
	}
	if v, ok := HighForgiving(nine, 0.9, 1); !ok || v != 1 {
		t.Fatalf("one outlier in nine, one forgiven: %v", v)
	}
	two := []float64{1, 1, 1, 1, 1, 1, 1, 8, 9}
	if v, _ := HighForgiving(two, 0.9, 1); v != 8 {
		t.Fatalf("two outliers in nine, one forgiven: %v, want 8", v)
	}
	ten := append(slices.Clone(two), 1)
	if a, b := HighForgiving(ten, 0.9, 1); a != 8 || !b {
		t.Fatalf("a full window: %v", a)
	}
	if v, _ := HighForgiving([]float64{9}, 0.9, 1); v != 9 {
		t.Fatalf("one value, one forgiven: %v, want it", v)
	}
	if _, ok := HighForgiving(nil, 0.9, 1); ok {
		t.Fatal("no values gave a tail")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	big := make([]float64, 5000)
	for i := range big {
		big[i] = rng.Float64()
	}
	// At p99 of a 10,000-sample window, 100 are forgiven: the 4,900th of
	// 5,000, past selectMost from the top.
	v, _ := HighForgiving(big, 0.99, 100)
	if sorted := slices.Sorted(slices.Values(big)); v != sorted[4899] {
		t.Fatalf("5,000 values, 100 forgiven: %v, want %v", v, sorted[4899])
	}
}
