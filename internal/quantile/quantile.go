// Package quantile holds the two tail rules every fleet-role limit is judged
// by: the nearest-rank percentile of a window of samples, and the quantile of
// a merged Prometheus histogram as histogram_quantile computes it.
//
// The nearest-rank rule is why the window is at least 1/(1-p) samples: with
// 100 samples the p99 is the 99th smallest, so one outlier in a window is
// forgiven and two are not; with fewer samples the p99 would be the maximum.
package quantile

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// rankEpsilon keeps p*n from landing one rank high through floating point
// (0.99*100 may be 99.00000000000001).
const rankEpsilon = 1e-9

// Rank is the 1-based nearest rank of the p-quantile among n values:
// ceil(p*n), at least 1.
func Rank(p float64, n int) int {
	r := int(math.Ceil(p*float64(n) - rankEpsilon))
	if r < 1 {
		r = 1
	}
	if r > n {
		r = n
	}
	return r
}

// MinCount is the fewest values whose nearest-rank p-quantile is not their
// maximum: the smallest n with Rank(p, n) < n, which is ceil(1/(1-p))
// without floating point's off-by-one (1/(1-0.99) is 100.00000000000009).
// It is 0 for a p outside (0, 1), and math.MaxInt for one so close to 1 that
// no count fits an int.
func MinCount(p float64) int {
	if !(p > 0 && p < 1) {
		return 0
	}
	est := 1 / (1 - p)
	if est > 1<<40 {
		return math.MaxInt
	}
	n := int(math.Round(est))
	if n < 2 {
		n = 2
	}
	for Rank(p, n) >= n {
		n++
	}
	for n > 2 && Rank(p, n-1) < n-1 {
		n--
	}
	return n
}

// High returns the nearest-rank p-quantile of values (the high tail: the
// value at rank ceil(p*n) in ascending order). It does not modify values.
// ok is false when values is empty.
func High(values []float64, p float64) (v float64, ok bool) {
	if len(values) == 0 {
		return 0, false
	}
	// The k-th largest, k = n - rank + 1: with a tail percentile k is a
	// handful (2 at p99 of 100), found in one pass without a sort.
	k := len(values) - Rank(p, len(values)) + 1
	if k <= selectMost {
		return kth(values, k, true), true
	}
	return HighSorted(sortedCopy(values), p)
}

// HighForgiving is High of values taken from a window whose tail forgives
// forgiven samples (the window less the rank of p among its samples), when
// some samples of the window lack the figure: the rank is at most
// len(values) - forgiven, so that the values present forgive as many
// outliers as the full window would. High alone would forgive none among
// fewer values than the window needs (nine of a ten-sample window at p90 is
// their largest), and one stall seen in one sample, beside a sample that
// took no reading, would turn the tail. With forgiven or fewer values it is
// High: there is nothing left to forgive them against.
func HighForgiving(values []float64, p float64, forgiven int) (v float64, ok bool) {
	n := len(values)
	if n == 0 {
		return 0, false
	}
	rank := Rank(p, n)
	if n > forgiven && rank > n-forgiven {
		rank = n - forgiven
	}
	k := n - rank + 1
	if k <= selectMost {
		return kth(values, k, true), true
	}
	sorted := sortedCopy(values)
	return sorted[rank-1], true
}

// HighSorted is High of values already in ascending order, read in place:
// a caller that asks several questions of one column sorts it once.
func HighSorted(sorted []float64, p float64) (v float64, ok bool) {
	if len(sorted) == 0 {
		return 0, false
	}
	return sorted[Rank(p, len(sorted))-1], true
}

// Low returns the mirror of High for a signal whose bad tail is low (free
// memory): the value at rank n-ceil(p*n)+1 in ascending order, so that it
// forgives as many outliers at the bottom as High does at the top.
func Low(values []float64, p float64) (v float64, ok bool) {
	if len(values) == 0 {
		return 0, false
	}
	k := len(values) - Rank(p, len(values)) + 1 // the k-th smallest
	if k <= selectMost {
		return kth(values, k, false), true
	}
	return LowSorted(sortedCopy(values), p)
}

// LowSorted is Low of values already in ascending order, read in place.
func LowSorted(sorted []float64, p float64) (v float64, ok bool) {
	if len(sorted) == 0 {
		return 0, false
	}
	return sorted[len(sorted)-Rank(p, len(sorted))], true
}

// selectMost is the deepest rank from an end that kth finds without a
// sort: up to p85 of 100 samples, and p99 of 1,000.
const selectMost = 16

// kth returns the k-th first value of values in descending order (high) or
// ascending (1 <= k <= selectMost, k <= len(values)), keeping the k first
// seen so far in order: one pass, no allocation.
func kth(values []float64, k int, high bool) float64 {
	var buf [selectMost]float64
	top := buf[:0]
	for _, v := range values {
		if len(top) == k {
			if !before(v, top[k-1], high) {
				continue
			}
			top = top[:k-1]
		}
		i := len(top)
		top = append(top, v)
		for ; i > 0 && before(v, top[i-1], high); i-- {
			top[i] = top[i-1]
		}
		top[i] = v
	}
	return top[k-1]
}

// before orders a ahead of b: descending when high, else ascending, by
// cmp.Less. A plain function rather than a func value, so that kth's
// comparisons (a column's every value) inline.
func before(a, b float64, high bool) bool {
	if high {
		return cmp.Less(b, a)
	}
	return cmp.Less(a, b)
}

func sortedCopy(values []float64) []float64 {
	s := append([]float64(nil), values...)
	slices.Sort(s)
	return s
}

// Histogram is a Prometheus histogram as a list of buckets: Bounds are the
// finite upper bounds in ascending order, Counts the observations in each
// bucket (not cumulative), with one more entry for the +Inf bucket.
type Histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"counts"`
}

// Count is the number of observations.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// Validate reports a histogram whose shape is not one of bounds plus +Inf.
func (h Histogram) Validate() error {
	if len(h.Counts) != len(h.Bounds)+1 {
		return fmt.Errorf("histogram has %d counts for %d bounds, want bounds+1", len(h.Counts), len(h.Bounds))
	}
	for i := 1; i < len(h.Bounds); i++ {
		if !(h.Bounds[i] > h.Bounds[i-1]) {
			return fmt.Errorf("histogram bounds not ascending at %d: %g after %g", i, h.Bounds[i], h.Bounds[i-1])
		}
	}
	return nil
}

// Add merges o into h. Both must have the same bounds; a histogram with no
// buckets yet takes o's.
func (h *Histogram) Add(o Histogram) error {
	if len(h.Counts) == 0 && len(h.Bounds) == 0 {
		h.Bounds = append([]float64(nil), o.Bounds...)
		h.Counts = append([]uint64(nil), o.Counts...)
		return nil
	}
	if len(o.Counts) == 0 && len(o.Bounds) == 0 {
		return nil
	}
	if len(h.Bounds) != len(o.Bounds) || len(h.Counts) != len(o.Counts) {
		return fmt.Errorf("merge histograms: %d bounds and %d bounds differ", len(h.Bounds), len(o.Bounds))
	}
	for i, b := range o.Bounds {
		if h.Bounds[i] != b {
			return fmt.Errorf("merge histograms: bound %d is %g and %g", i, h.Bounds[i], b)
		}
	}
	for i, c := range o.Counts {
		h.Counts[i] += c
	}
	return nil
}

// Quantile returns the p-quantile as Prometheus's histogram_quantile computes
// it: the rank p*count is found in the cumulative buckets and the value
// interpolated linearly inside its bucket (from 0 for the first bucket). A
// rank in the +Inf bucket returns the highest finite bound, which is the most
// the histogram can say. ok is false when the histogram is empty.
func (h Histogram) Quantile(p float64) (v float64, ok bool) {
	total := h.Count()
	if total == 0 || len(h.Counts) != len(h.Bounds)+1 {
		return 0, false
	}
	rank := p * float64(total)
	var cum uint64
	for i, c := range h.Counts {
		before := cum
		cum += c
		if c == 0 || float64(cum) < rank {
			continue
		}
		if i == len(h.Bounds) {
			if len(h.Bounds) == 0 {
				return math.Inf(1), true
			}
			return h.Bounds[len(h.Bounds)-1], true
		}
		lower := 0.0
		if i > 0 {
			lower = h.Bounds[i-1]
		}
		upper := h.Bounds[i]
		return lower + (upper-lower)*((rank-float64(before))/float64(c)), true
	}
	return h.Bounds[len(h.Bounds)-1], true
}
