package analysis

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The gaps between consecutive starts are those of the sorted starts
// whether the starts come in order (the queue), shuffled within the reorder
// window (the heap, from the first start out of order on) or in order
// again after a shuffle; a start older than one already released is a gap
// of 0 and counted late.
func TestArrivalsGapsOfSortedStarts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sorted := make([]int64, 3*reorderWindow+500)
	for i := range sorted {
		sorted[i] = int64(i) * 1000
		if i > 0 {
			sorted[i] = sorted[i-1] + rng.Int64N(5000) // equal starts too
		}
	}
	shuffledFrom := func(from int) []int64 {
		s := slices.Clone(sorted) // blocks reversed: no start more than a block out of place
		for i := from; i < len(s) && i < from+2*reorderWindow; i += reorderWindow / 4 {
			slices.Reverse(s[i:min(i+reorderWindow/4, len(s))])
		}
		return s
	}
	want := func(starts []int64) []int64 {
		s := slices.Sorted(slices.Values(starts))
		var gaps []int64
		for i := 1; i < len(s); i++ {
			gaps = append(gaps, s[i]-s[i-1])
		}
		slices.Sort(gaps)
		return gaps
	}
	for _, tc := range []struct {
		name   string
		starts []int64
	}{
		{"in order", sorted},
		{"shuffled at the start", shuffledFrom(0)},
		{"shuffled after the window filled", shuffledFrom(2 * reorderWindow)},
		{"shorter than the window", sorted[:reorderWindow/2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s arrivals
			b := &exactBudget{limit: 1 << 30}
			for _, ts := range tc.starts {
				s.add(b, ts)
			}
			got := s.interArrival()
			got.sort()
			if !slices.Equal(got.vals, want(tc.starts)) || s.late != 0 {
				t.Fatalf("gaps differ from the sorted starts' (late %d)", s.late)
			}
		})
	}
	t.Run("late start", func(t *testing.T) {
		var s arrivals
		b := &exactBudget{limit: 1 << 30}
		for _, ts := range sorted {
			s.add(b, ts)
		}
		s.add(b, -1) // older than every released start
		got := s.interArrival()
		got.sort()
		if s.late != 1 || got.n != int64(len(sorted)) || got.vals[0] != 0 {
			t.Fatalf("late %d, %d gaps, smallest %d", s.late, got.n, got.vals[0])
		}
	})
}

// endHeap's minimum is always the smallest value pushed and not popped,
// through interleaved pushes and pops of random and repeated values.
func TestEndHeapMin(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var h endHeap
	var ref []int64
	for i := range 20_000 {
		if len(ref) == 0 || rng.IntN(3) > 0 {
			v := rng.Int64N(1000)
			h.push(v)
			ref = append(ref, v)
		} else {
			h.pop()
			ref = ref[1:]
		}
		slices.Sort(ref)
		if h.Len() != len(ref) || (len(ref) > 0 && h[0] != ref[0]) {
			t.Fatalf("step %d: heap of %d with min %v, want %d with min %v", i, h.Len(), h[:min(1, h.Len())], len(ref), ref[:min(1, len(ref))])
		}
	}
}
