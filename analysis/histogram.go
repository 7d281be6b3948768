package analysis

import (
	"math"
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

func histBin(v int64) int {
	i, _ := slices.BinarySearch(histEdges, v+1) // first edge > v
	return min(max(i-1, 0), len(histEdges)-2)
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
