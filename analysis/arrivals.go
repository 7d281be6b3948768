package analysis

import "slices"

// arrivals measures the arrival process from request starts that come
// nearly in time order (a reader merges files in time order; replay results
// are written as they complete): the newest reorderWindow starts wait in a
// heap and leave it oldest first, so the gaps between consecutive starts
// are those of the sorted starts as long as no row is more than
// reorderWindow rows out of place. A start older than one already released
// counts as a gap of 0 (Late). While the starts come in order (a
// recording's always do) the window is a queue, not a heap: the oldest
// pending start is the first, and the heap would release the same starts.
type arrivals struct {
	pending  endHeap // starts not yet released, ns: in order from head on, or a heap once a start came out of order
	head     int     // the oldest pending start while in order
	heap     bool    // pending is a heap (from index 0)
	last     int64   // the last released start
	released bool
	gaps     dist
	late     int64
	n        int64
	min, max int64
}

// reorderWindow is how many starts wait to be put in order (32 KiB): a
// reader yields rows in time order, replay results are written sorted
// within row groups.
const reorderWindow = 1 << 12

func (s *arrivals) add(b *exactBudget, ts int64) {
	if s.n == 0 || ts < s.min {
		s.min = ts
	}
	if s.n == 0 || ts > s.max {
		s.max = ts
	}
	s.n++
	if !s.heap && len(s.pending) > s.head && ts < s.pending[len(s.pending)-1] {
		// Out of order: from now on a heap. The pending starts in order
		// are a valid heap as they are.
		s.pending = append(s.pending[:0], s.pending[s.head:]...)
		s.head, s.heap = 0, true
	}
	if s.heap {
		s.pending.push(ts)
		if s.pending.Len() > reorderWindow {
			next := s.pending[0]
			s.pending.pop()
			s.release(b, &s.gaps, next)
		}
		return
	}
	s.pending = append(s.pending, ts)
	if len(s.pending)-s.head > reorderWindow {
		next := s.pending[s.head]
		s.head++
		s.release(b, &s.gaps, next)
		if s.head >= reorderWindow {
			s.pending = append(s.pending[:0], s.pending[s.head:]...)
			s.head = 0
		}
	}
}

// holds reports whether adding starts ts (a run's, in turn) would count
// against a budget nothing but exact gaps, one a start at most, and gaps
// in bins their sketch has, so that it can be added in any order beside
// other distributions (addRequests): the starts come in order, their
// gaps are exact values already or every gap they release falls in a bin
// the sketch holds.
func (s *arrivals) holds(ts []int64) bool {
	if s.heap || !s.released || s.gaps.n == 0 {
		return false
	}
	pending := s.pending[s.head:]
	if len(pending) > 0 && len(ts) > 0 && ts[0] < pending[len(pending)-1] {
		return false
	}
	for i := 1; i < len(ts); i++ {
		if ts[i] < ts[i-1] {
			return false
		}
	}
	sk := s.gaps.sk
	if sk == nil {
		return true
	}
	// The starts released are the first of the pending ones and ts, as
	// many as leave reorderWindow pending.
	last := s.last
	for i := range len(pending) + len(ts) - reorderWindow {
		var x int64
		if i < len(pending) {
			x = pending[i]
		} else {
			x = ts[i-len(pending)]
		}
		if gap := x - last; gap > 0 && uint(sketchBin(uint64(gap))-sk.pos.offset) >= uint(len(sk.pos.counts)) {
			return false
		}
		last = max(last, x)
	}
	return true
}

func (s *arrivals) release(b *exactBudget, gaps *dist, ts int64) {
	if s.released {
		gap := ts - s.last
		if gap < 0 {
			s.late++
			gap = 0
		}
		gaps.add(b, gap)
	}
	if !s.released || ts > s.last {
		s.last = ts
	}
	s.released = true
}

// interArrival returns the gaps between consecutive starts, the pending
// ones included, leaving s as it was.
func (s *arrivals) interArrival() *dist {
	tail := *s // a copy: releasing the pending starts must not change s
	gaps := merged(&s.gaps)
	pending := slices.Clone(s.pending[s.head:])
	slices.Sort(pending)
	var unbounded exactBudget
	unbounded.limit = 1<<63 - 1
	if !gaps.exact() {
		unbounded.limit = 0
	}
	for _, ts := range pending {
		tail.release(&unbounded, gaps, ts)
	}
	return gaps
}
