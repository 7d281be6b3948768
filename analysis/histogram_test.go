package analysis

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// histBin's table lookup must place every value where a binary search over
// the edges does: on and beside every edge, across every magnitude, at the
// extremes.
func TestHistBinMatchesSearch(t *testing.T) {
	search := func(v int64) int {
		i := sort.Search(len(histEdges), func(i int) bool { return histEdges[i] > v })
		return min(max(i-1, 0), len(histEdges)-2)
	}
	vals := []int64{math.MinInt64, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}
	for _, e := range histEdges {
		vals = append(vals, e-1, e, e+1)
	}
	for k := range 63 {
		vals = append(vals, 1<<k-1, 1<<k, 1<<k+1)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		vals = append(vals, int64(math.Exp(rng.Float64()*30)))
	}
	for _, v := range vals {
		if got, want := histBin(v), search(v); got != want {
			t.Fatalf("histBin(%d) = %d, binary search says %d", v, got, want)
		}
	}
}
