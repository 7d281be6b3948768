package analysis

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestInFlightMatchesHeap checks inFlight against the min-heap of ends it
// replaces, on starts in order and out of it, requests shorter than a
// bucket and longer than the ring, gaps longer than the ring and negative
// times: the count in flight after every request must be the heap's.
func TestInFlightMatchesHeap(t *testing.T) {
	const ms = int64(time.Millisecond)
	cases := []struct {
		name     string
		gap      func(r *rand.Rand) int64 // from one start to the next
		duration func(r *rand.Rand) int64
	}{
		{"in order", func(r *rand.Rand) int64 { return r.Int64N(ms / 2) }, func(r *rand.Rand) int64 { return r.Int64N(800 * ms) }},
		{"out of order", func(r *rand.Rand) int64 { return r.Int64N(4*ms) - 2*ms }, func(r *rand.Rand) int64 { return r.Int64N(300 * ms) }},
		{"far out of order", func(r *rand.Rand) int64 { return r.Int64N(8000*ms) - 4000*ms }, func(r *rand.Rand) int64 { return r.Int64N(3000 * ms) }},
		{"long requests", func(r *rand.Rand) int64 { return r.Int64N(5 * ms) }, func(r *rand.Rand) int64 { return r.Int64N(60_000 * ms) }},
		{"sub-bucket requests", func(r *rand.Rand) int64 { return r.Int64N(ms / 8) }, func(r *rand.Rand) int64 { return r.Int64N(ms) }},
		{"equal times", func(r *rand.Rand) int64 { return r.Int64N(2) * ms }, func(r *rand.Rand) int64 { return r.Int64N(3) * ms }},
		{"idle gaps", func(r *rand.Rand) int64 {
			if r.IntN(500) == 0 {
				return r.Int64N(600_000 * ms)
			}
			return r.Int64N(ms)
		}, func(r *rand.Rand) int64 { return r.Int64N(5000 * ms) }},
	}
	for _, tc := range cases {
		for _, t0 := range []int64{1_764_000_000 * int64(time.Second), -5000 * ms} {
			t.Run(tc.name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(1, uint64(t0)))
				var f inFlight
				var h endHeap
				start := t0
				for i := range 200_000 {
					start += tc.gap(r)
					end := start + tc.duration(r)
					for h.Len() > 0 && h[0] <= start {
						h.pop()
					}
					h.push(end)
					f.end(start)
					f.start(end)
					if f.len() != h.Len() {
						t.Fatalf("request %d (start %d, end %d): %d in flight, the heap has %d", i, start, end, f.len(), h.Len())
					}
				}
			})
		}
	}
}
