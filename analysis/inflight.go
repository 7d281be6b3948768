package analysis

import "slices"

// inFlight counts the requests in flight for peak in flight: it holds the
// end times (ns) of the requests started so far less those a later start
// found ended, as a min-heap of them would (end drops every end ≤ a start,
// start adds one), but in buckets of flightBucket ns: ends in the next
// flightSlots buckets sit unsorted in a ring of slots, the current bucket's
// sorted, so a start costs a bucket index and an append instead of a heap's
// sift-down over every request in flight. Ends further out wait in a heap
// (late) and enter the ring as it reaches them; ends of buckets the ring has
// passed (a start out of time order) go to another (early).
type inFlight struct {
	slots   [flightSlots][]int64 // slot(b): the ends in bucket b, low ≤ b < low+flightSlots
	low     int64                // the current bucket: slot(low) is sorted from head on
	head    int                  // ends of the current bucket already dropped
	inRing  int                  // ends held in slots
	started bool                 // low is set
	early   endHeap              // ends in buckets below low
	late    endHeap              // ends in buckets from low+flightSlots on
}

const (
	flightBucketBits = 20 // buckets of 2^20 ns (about 1 ms)
	flightSlots      = 1 << 11
	flightSpan       = flightSlots << flightBucketBits // about 2.1 s: longer requests pass through late
)

func flightBucketOf(t int64) int64 { return t >> flightBucketBits } // floor, for negative t too

func (f *inFlight) slot(b int64) *[]int64 { return &f.slots[b&(flightSlots-1)] }

// len is how many requests are in flight.
func (f *inFlight) len() int { return f.inRing + len(f.early) + len(f.late) }

// end drops every end ≤ t.
func (f *inFlight) end(t int64) {
	b := flightBucketOf(t)
	if !f.started {
		f.low, f.started = b, true
	}
	if b > f.low {
		f.advance(b)
	}
	for len(f.early) > 0 && f.early[0] <= t {
		f.early.pop()
	}
	if b == f.low {
		cur := *f.slot(f.low)
		for f.head < len(cur) && cur[f.head] <= t {
			f.head++
			f.inRing--
		}
	}
}

// advance makes b (> low) the current bucket: the buckets before it are
// dropped whole (every end in them is before b's start), the late ends
// the ring now reaches enter it, and b's ends are sorted.
func (f *inFlight) advance(b int64) {
	cur := f.slot(f.low) // holds the ends dropped from it too, before head
	f.inRing -= len(*cur) - f.head
	*cur = (*cur)[:0]
	for k := f.low + 1; k < b && k < f.low+flightSlots && f.inRing > 0; k++ {
		s := f.slot(k)
		f.inRing -= len(*s)
		*s = (*s)[:0]
	}
	f.low, f.head = b, 0
	for len(f.late) > 0 && flightBucketOf(f.late[0]) < b+flightSlots {
		e := f.late[0]
		f.late.pop()
		if flightBucketOf(e) >= b { // else it ended before b: dropped
			s := f.slot(flightBucketOf(e))
			*s = append(*s, e)
			f.inRing++
		}
	}
	slices.Sort(*f.slot(b))
}

// start adds a request ending at e (≥ its start, which end was called
// with).
func (f *inFlight) start(e int64) {
	b := flightBucketOf(e)
	switch {
	case !f.started || b < f.low:
		f.early.push(e)
		return
	case b >= f.low+flightSlots:
		f.late.push(e)
		return
	}
	s := f.slot(b)
	if b == f.low { // keep the current bucket sorted
		i, _ := slices.BinarySearch((*s)[f.head:], e)
		*s = slices.Insert(*s, f.head+i, e)
	} else {
		*s = append(*s, e)
	}
	f.inRing++
}
