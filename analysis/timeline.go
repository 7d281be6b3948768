package analysis

import (
	"math"
	"time"
)

// timeline is what an Analyzer keeps of the requests' order in time alone:
// the run's span, concurrency, inter-token gaps, output tokens per second
// and prefix sharing. It shares no state with the rest of the Analyzer
// (the exact budget, frames and groups), so that AddDataset can add the
// same rows to the rest on a goroutine of its own (metricsPipe).
type timeline struct {
	minStart   int64 // earliest t_sched
	maxEnd     int64 // latest request end
	sumE2E     float64
	inflight   inFlight
	peakFlight int
	tokensSec  secondSums // second since epoch → output tokens

	// ITL gaps, µs: per event (itl) and per token (itlToken) agree for
	// streams whose every event carries one token, so those gaps are
	// counted once (itlEven) and only other streams' gaps twice, as events
	// (itlSpread) and shared among their tokens (itlSpreadToken). itl() and
	// itlToken() put them together.
	itlEven, itlSpread, itlSpreadToken countDist

	prefix prefixCounter
}

func newTimeline(maxPrefixBlocks int) timeline {
	return timeline{
		minStart:  math.MaxInt64,
		maxEnd:    math.MinInt64,
		tokensSec: secondSums{m: map[int64]float64{}},
		prefix:    prefixCounter{max: maxPrefixBlocks},
	}
}

// timed is what a timeline reads of an admitted, identified observation,
// but for its slices.
type timed struct {
	sched, send     int64 // ns since the epoch
	e2e, ttfb, ttft int64 // ns, missing when unknown (and for failed requests)
	outTokens       int32
	ok              bool
}

func (o *observation) timed() timed {
	return timed{
		sched: o.sched, send: o.send,
		e2e: o.lat[colE2E], ttfb: o.lat[colTTFB], ttft: o.lat[colTTFT],
		outTokens: o.outTokens, ok: o.ok,
	}
}

// add adds one request, with its gaps between token events (µs) and its
// prefix hashes.
func (t *timeline) add(o *timed, itlUs []int32, prefix []int64) {
	if len(prefix) > 0 {
		t.prefix.add(prefix)
	}
	t.minStart = min(t.minStart, o.sched)
	end := o.send
	if e := o.e2e; e > 0 {
		end = o.send + e
		t.sumE2E += float64(e)
	} else if ttfb := o.ttfb; ttfb > 0 {
		end = o.send + ttfb
	}
	t.maxEnd = max(t.maxEnd, end)

	t.inflight.end(o.send)
	t.inflight.start(end)
	t.peakFlight = max(t.peakFlight, t.inflight.len())

	if !o.ok {
		return
	}
	// Per-token ITL: when usage reports more tokens than there are token
	// events, each gap is shared evenly by the tokens of its event.
	if n := len(itlUs); n > 0 && o.outTokens > int32(n+1) {
		perEvent := float64(o.outTokens) / float64(n+1)
		k := int64(math.Round(perEvent))
		for _, g := range itlUs {
			if g >= 0 {
				t.itlSpread.add(int64(g), 1)
				t.itlSpreadToken.add(int64(math.Round(float64(g)/perEvent)), k)
			}
		}
	} else {
		t.itlEven.addEach(itlUs)
	}
	// Output tokens over time: spread evenly over the token events when
	// their times are known, else all at the end.
	if o.outTokens <= 0 {
		return
	}
	ttft := o.ttft
	if ttft <= 0 {
		t.tokensSec.add(floorDiv(end, int64(time.Second)), float64(o.outTokens))
		return
	}
	t.tokensSec.addEvents(o.send+ttft, itlUs, float64(o.outTokens)/float64(len(itlUs)+1))
}

// itl is the distribution of the gaps between token events, µs.
func (t *timeline) itl() *countDist { return sumCounts(&t.itlEven, &t.itlSpread) }

// itlToken is the distribution of the gaps between tokens, µs: an event's
// gap shared evenly by its tokens.
func (t *timeline) itlToken() *countDist { return sumCounts(&t.itlEven, &t.itlSpreadToken) }

// secondSums sums values per second with the sums of the latest seconds
// held in a small ring outside the map: a stream's token events fall in
// the few seconds after its start, and starts come in time order, so most
// additions skip the map. A second lives in one place at a time (its ring
// slot or the map), so each second receives the same additions in the
// same order as a plain map would.
type secondSums struct {
	m      map[int64]float64
	recent [secondRing]heldSecond // by sec mod secondRing
	// fractional: a value added was not a whole number, so sums depend on
	// the order of additions (addEvents adds one by one from then on).
	fractional bool
}

// secondRing is how many seconds secondSums holds outside its map: more
// than a stream usually spans, few enough to stay in a cache line or two.
const secondRing = 16

// heldSecond is one second's sum while it is in secondSums' ring.
type heldSecond struct {
	sec  int64
	sum  float64
	held bool
}

func (s *secondSums) add(sec int64, v float64) {
	s.fractional = s.fractional || v != math.Trunc(v)
	if h := &s.recent[uint64(sec)%secondRing]; h.held && h.sec == sec {
		h.sum += v
		return
	}
	s.hold(sec, v)
}

// hold puts second sec in its ring slot, with v added to what the map
// held for it, moving the slot's second to the map (apart from add, so
// that add is inlined into the per-event loop).
func (s *secondSums) hold(sec int64, v float64) {
	h := &s.recent[uint64(sec)%secondRing]
	if h.held {
		s.m[h.sec] = h.sum
	}
	*h = heldSecond{sec: sec, sum: s.m[sec] + v, held: true}
}

// addEvents adds per to the second of each of a stream's token events:
// the first at t (ns since the epoch), each later one gaps[i] µs after the
// one before. While every value added is a whole number (one token an
// event, the common case) every sum is exact, so a second's events are
// counted and added in one step, which gives the sums event by event
// additions would.
func (s *secondSums) addEvents(t int64, gaps []int32, per float64) {
	const second = int64(time.Second)
	sec := floorDiv(t, second)
	if s.fractional || per != math.Trunc(per) {
		s.add(sec, per)
		for _, g := range gaps {
			t += int64(g) * 1000
			if t < sec*second || t >= (sec+1)*second { // most events stay in the second
				sec = floorDiv(t, second)
			}
			s.add(sec, per)
		}
		return
	}
	for {
		lo := sec * second
		n := 0 // gaps whose events stay in sec
		for ; n < len(gaps); n++ {
			next := t + int64(gaps[n])*1000
			if uint64(next-lo) >= uint64(second) { // not lo ≤ next < lo+1s
				break
			}
			t = next
		}
		s.add(sec, float64(n+1)*per)
		if n == len(gaps) {
			return
		}
		t += int64(gaps[n]) * 1000
		gaps = gaps[n+1:]
		sec = floorDiv(t, second)
	}
}

// all returns the sums by second.
func (s *secondSums) all() map[int64]float64 {
	for i := range s.recent {
		if h := &s.recent[i]; h.held {
			s.m[h.sec] = h.sum
			h.held = false
		}
	}
	return s.m
}
