package analysis

import "slices"

// arrivals measures the arrival process from request starts that come
// nearly in time order (a reader merges files in time order; replay results
// are written as they complete): the newest reorderWindow starts wait in a
// heap and leave it oldest first, so the gaps between consecutive starts
// are those of the sorted starts as long as no row is more than
// reorderWindow rows out of place. A start older than one already released
// counts as a gap of 0 (Late).
type arrivals struct {
	pending  endHeap // starts not yet released, ns
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
	s.pending.push(ts)
	if s.pending.Len() > reorderWindow {
		next := s.pending[0]
		s.pending.pop()
		s.release(b, &s.gaps, next)
	}
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
	pending := slices.Clone(s.pending)
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
