package analysis

import (
	"math"
	"math/bits"
	"slices"
)

// Histogram counts a latency metric in fixed log-spaced bins (20 per
// decade from 10µs to 1000s), the same for every run so two runs overlay.
// Only the bins from the first to the last non-empty one are kept: bin i
// counts values in [Edges[i], Edges[i+1]).
type Histogram struct {
	Edges  []int64 `json:"edges_ns"` // bin edges (ns), one more than Counts; empty when no value was counted
	Counts []int64 `json:"counts"`   // values per bin
}

const (
	histMin     = 10_000 // 10µs, ns
	histPerDec  = 20
	histDecades = 8
)

// histEdges are the fixed bin edges, ns; values below the first land in the
// first bin, above the last in the last.
var histEdges = func() []int64 {
	e := make([]int64, histPerDec*histDecades+1)
	for i := range e {
		e[i] = int64(math.Round(histMin * math.Pow(10, float64(i)/histPerDec)))
	}
	return e
}()

// histSliceFirst[k<<histSliceBits | j] is the first edge above the lower
// end of the j-th of 2^histSliceBits equal slices of [2^k, 2^(k+1)): a
// slice (at most 6.25 % of its octave) is narrower than a bin (12 %), so
// histBin finds a bin by a lookup and at most a step or two instead of a
// binary search over every edge.
var histSliceFirst = func() []uint8 {
	first := make([]uint8, 64<<histSliceBits)
	for k := histSliceBits; k < 63; k++ {
		for j := range 1 << histSliceBits {
			lower := int64(1<<histSliceBits+j) << (k - histSliceBits)
			i, _ := slices.BinarySearch(histEdges, lower+1) // first edge > lower
			first[k<<histSliceBits|j] = uint8(i)
		}
	}
	return first
}()

const histSliceBits = 4

// histBin returns the bin of v: the last edge ≤ v, the first bin below the
// first edge and the last bin from the last edge on.
func histBin(v int64) int {
	if v < histEdges[0] {
		return 0
	}
	if v >= histEdges[len(histEdges)-1] {
		return len(histEdges) - 2
	}
	k := bits.Len64(uint64(v)) - 1 // 2^k ≤ v < 2^(k+1), k ≥ 13 above the first edge
	i := int(histSliceFirst[k<<histSliceBits|int(uint64(v)>>(k-histSliceBits)&(1<<histSliceBits-1))])
	for histEdges[i] <= v {
		i++
	}
	return i - 1
}

// histogramOfDist bins a count distribution of µs values.
func histogramOfDist(d *countDist) Histogram {
	counts := make([]int64, len(histEdges)-1)
	d.each(func(v, c int64) { counts[histBin(v*1000)] += c })
	return trimHist(counts)
}

func trimHist(counts []int64) Histogram {
	lo, hi := -1, -1
	for i, c := range counts {
		if c > 0 {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	if lo < 0 {
		return Histogram{Edges: []int64{}, Counts: []int64{}}
	}
	return Histogram{Edges: slices.Clone(histEdges[lo : hi+2]), Counts: slices.Clone(counts[lo : hi+1])}
}
