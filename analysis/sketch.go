package analysis

import (
	"math"
	"math/bits"
	"slices"
	"sort"
)

// SketchRelErr is the relative accuracy of a sketched quantile: it lies
// within ±1 % of the exact (nearest-rank) quantile of the same values, plus
// half a unit where values are whole numbers (ns, tokens, bytes) and the
// estimate is rounded.
const SketchRelErr = 0.01

// sketchGamma defines the bins: bin i holds the values v with
// γ^(i−1) < |v| ≤ γ^i, γ = (1+α)/(1−α), and stands for 2γ^i/(γ+1), which is
// within α of every value in the bin (DDSketch's logarithmic mapping,
// Masson, Rim and Lee, VLDB 2019).
var sketchGamma = (1 + SketchRelErr) / (1 - SketchRelErr)

// sketch is a mergeable quantile sketch with relative error SketchRelErr:
// counts per logarithmic bin, for positive values and (by magnitude) for
// negative ones, plus a count of zeros. Counts are integers, so merging
// shards' sketches gives exactly the sketch of all their values. Its size
// depends on the range of the values, not their number: at most about 2,200
// bins per sign for the whole int64 range, a few hundred for one latency
// metric.
type sketch struct {
	pos, neg sketchBins
	zero     int64
}

// sketchBins are dense counts for the bins offset … offset+len(counts)−1.
type sketchBins struct {
	counts []int64
	offset int
}

// sketchBounds[i] is γ^i, the upper bound of bin i, for every bin an
// integer magnitude (1 … 2^63) can fall in. sliceFirst[(63−k)<<sliceBits | j]
// is the first bin whose bound reaches the lower edge of the j-th of the
// 2^sliceBits equal slices of [2^k, 2^(k+1)) (indexed by leading zeros, not
// k: one subtraction fewer per lookup): a slice (0.4 % of its octave)
// is narrower than a bin (2 %), so finding a bin is a table lookup and one
// comparison, instead of a logarithm. The comparison is of integers:
// sketchLast[i] is the largest magnitude whose float64 is at most γ^i, so
// m > sketchLast[i] exactly when float64(m) > γ^i.
var sketchBounds, sliceFirst, sketchLast = func() ([]float64, *[64 << sliceBits]uint16, *[maxSketchBins]uint64) {
	bounds := []float64{1}
	for bounds[len(bounds)-1] < 1<<63 {
		bounds = append(bounds, math.Pow(sketchGamma, float64(len(bounds))))
	}
	if len(bounds) > maxSketchBins {
		panic("analysis: sketch bounds exceed maxSketchBins")
	}
	var first [64 << sliceBits]uint16
	for k := range 64 {
		for j := range 1 << sliceBits {
			edge := math.Ldexp(1+float64(j)/(1<<sliceBits), k)
			i, _ := slices.BinarySearch(bounds, edge)
			first[(63-k)<<sliceBits|j] = uint16(i)
		}
	}
	var last [maxSketchBins]uint64
	for i := range last {
		last[i] = math.MaxUint64
		if i >= len(bounds) || bounds[i] >= 1<<64 {
			continue
		}
		// The integers whose float64 is ≤ γ^i are 0 … last[i]: from
		// ⌊γ^i⌋, less than an ulp (≤ 2^11 below 2^64) further on.
		lo := uint64(bounds[i])
		n := uint64(sort.Search(1<<12, func(d int) bool { return float64(lo+uint64(d)) > bounds[i] }))
		last[i] = lo + n - 1
	}
	return bounds, &first, &last
}()

const (
	sliceBits     = 8
	maxSketchBins = 1 << 12 // sketchLast's length, a power of two above the bins of int64 magnitudes (about 2,200)
)

// sketchBin returns the bin of a magnitude m ≥ 1: the first i with γ^i ≥ m.
func sketchBin(m uint64) int {
	lz := bits.LeadingZeros64(m) & 63                           // m < 2^(64−lz), and 0 ≤ lz < 64 with no bounds check below
	j := m << uint(lz) >> (63 - sliceBits) & (1<<sliceBits - 1) // the sliceBits bits below the leading one: m's slice of its octave
	i := int(sliceFirst[lz<<sliceBits|int(j)])
	if m > sketchLast[i&(maxSketchBins-1)] { // one step at most: a slice is narrower than a bin (TestSketchSliceOneStep)
		i++
	}
	return i
}

// sketchValue returns the value bin i stands for.
func sketchValue(i int) float64 { return 2 * sketchBounds[i] / (sketchGamma + 1) }

// add counts v c times and returns how many cells the sketch grew by.
func (s *sketch) add(v int64, c int64) (grown int) {
	x := sampleOf(v)
	return s.addSample(&x, c)
}

// addEach counts each of vs once, as add(v, 1) for each in turn would,
// with the positive values' bins counted inline (what shedding a
// distribution's exact values mostly does).
func (s *sketch) addEach(vs []int64) {
	for _, v := range vs {
		if v > 0 {
			if i := sketchBin(uint64(v)); !s.pos.countHeld(i) {
				s.pos.add(i, 1)
			}
			continue
		}
		s.add(v, 1)
	}
}

// addSample counts x c times and returns how many cells the sketch grew by.
func (s *sketch) addSample(x *sample, c int64) (grown int) {
	switch {
	case x.v > 0:
		return s.pos.add(x.bin, c)
	case x.v < 0:
		return s.neg.add(x.bin, c)
	}
	s.zero += c
	return 0
}

// sample is a value on its way into distributions, with its magnitude's
// sketch bin: a request's latency goes to the run's, its frame's and four
// groups' distributions, and the bin is found once for all of them, up
// front (a table lookup, inlined), since in a long run nearly every value
// meets a sketch.
type sample struct {
	v   int64
	bin int // sketchBin(|v|), for v ≠ 0
}

// sampleOf returns v with its bin.
func sampleOf(v int64) sample {
	m := uint64(v)
	if v < 0 {
		m = -m // -MinInt64 wraps to 2^63 as a uint64: still right
	}
	return sample{v: v, bin: sketchBin(m)} // for 0 some bin, never read: zeros are counted apart
}

// countHeld counts one in bin i when the bins hold it and reports whether
// they did: the per-value loops' common case, small enough to be inlined
// there (add, with its growing, is not).
func (b *sketchBins) countHeld(i int) bool {
	if j := uint(i - b.offset); j < uint(len(b.counts)) {
		b.counts[j]++
		return true
	}
	return false
}

// add counts c in bin i and returns how many cells the bins grew by.
func (b *sketchBins) add(i int, c int64) (grown int) {
	if j := i - b.offset; j >= 0 && j < len(b.counts) {
		b.counts[j] += c
		return 0
	}
	before := cap(b.counts)
	if len(b.counts) == 0 {
		b.counts = make([]int64, 1, 16)
		b.offset = i
	}
	switch {
	case i < b.offset:
		// Grow downwards, with room for a few more bins below.
		grow := b.offset - i + 8
		counts := make([]int64, grow+len(b.counts), grow+cap(b.counts))
		copy(counts[grow:], b.counts)
		b.counts, b.offset = counts, b.offset-grow
	case i >= b.offset+len(b.counts):
		need := i - b.offset + 1
		if need > cap(b.counts) {
			counts := make([]int64, need, need+need/4+8)
			copy(counts, b.counts)
			b.counts = counts
		}
		b.counts = b.counts[:need]
	}
	b.counts[i-b.offset] += c
	return cap(b.counts) - before
}

// sameLayout reports whether s and o hold their bins in the same places
// and the same room, so that they grow alike (their counts may differ).
func (s *sketch) sameLayout(o *sketch) bool {
	return s.pos.offset == o.pos.offset && s.neg.offset == o.neg.offset &&
		len(s.pos.counts) == len(o.pos.counts) && len(s.neg.counts) == len(o.neg.counts) &&
		cap(s.pos.counts) == cap(o.pos.counts) && cap(s.neg.counts) == cap(o.neg.counts)
}

func (s *sketch) merge(o *sketch) {
	s.pos.merge(&o.pos)
	s.neg.merge(&o.neg)
	s.zero += o.zero
}

func (b *sketchBins) merge(o *sketchBins) {
	for j, c := range o.counts {
		if c != 0 {
			b.add(o.offset+j, c)
		}
	}
}

// each calls f with every non-empty bin's value and count, ascending.
func (s *sketch) each(f func(v, c int64)) {
	for j := len(s.neg.counts) - 1; j >= 0; j-- {
		if c := s.neg.counts[j]; c > 0 {
			f(-int64(math.Round(sketchValue(s.neg.offset+j))), c)
		}
	}
	if s.zero > 0 {
		f(0, s.zero)
	}
	for j, c := range s.pos.counts {
		if c > 0 {
			f(int64(math.Round(sketchValue(s.pos.offset+j))), c)
		}
	}
}

// at returns the estimate of the value of rank r (0-based, ascending).
func (s *sketch) at(r int64) int64 {
	var cum, last int64
	found := false
	s.each(func(v, c int64) {
		if found {
			return
		}
		cum += c
		last = v
		found = cum > r
	})
	return last
}

// atLeast estimates how many values are ≥ x: it counts whole bins, so
// values within about 2 % below x may count too.
func (s *sketch) atLeast(x int64) int64 {
	if x <= 0 {
		n := s.pos.sum(math.MinInt)
		if x == 0 {
			return n + s.zero
		}
		return n + s.zero + s.neg.sum(math.MinInt) - s.neg.sum(sketchBin(uint64(-x))+1)
	}
	return s.pos.sum(sketchBin(uint64(x)))
}

// sum counts the values in bins from.
func (b *sketchBins) sum(from int) int64 {
	var n int64
	for j, c := range b.counts {
		if b.offset+j >= from {
			n += c
		}
	}
	return n
}

// bytes is about the memory the sketch holds.
func (s *sketch) bytes() int { return 8 * s.cells() }

// cells is how many counts the sketch holds room for.
func (s *sketch) cells() int { return cap(s.pos.counts) + cap(s.neg.counts) }
