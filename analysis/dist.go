package analysis

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// dist is the distribution of one metric over one set of requests (the run,
// a frame, a group): the values themselves while its analyzer's exact
// budget holds them, a sketch (SketchRelErr) once the budget has had to
// summarise it. Count, mean, standard deviation and maximum stay exact
// either way.
type dist struct {
	// The exact values (nil once sketched) are the chunks of full, then
	// vals: a distribution past exactChunk values grows by whole chunks,
	// not by append's copies of ever larger slices, so values that are
	// sketched later (a long run's frames) cost their bytes once. flat
	// joins them into vals before anything reads them.
	vals    []int64
	full    [][]int64 // earlier chunks, exactChunk values each (or one flat slice)
	sorted  bool      // vals is sorted (and full is empty)
	tracked bool      // registered with the budget
	sk      *sketch   // nil while exact

	n int64
	// The moments are sums of the values less shift (the first value, or
	// the mean of a merge): Σx and Σx² of x = v − shift need no division
	// per value, as Welford's update does, and the shift keeps the sum of
	// squares from cancelling (all-equal values give exactly 0).
	shift, sum, sumSq float64
	min, max          int64
}

// exactBudget bounds the values an Analyzer's distributions hold exactly.
// Past its limit the largest exact distributions become sketches until half
// the limit is free, so small distributions (a quiet frame, a rare route)
// stay exact in a long run and memory stays flat however long the run is.
// A sketch's bins count against the limit too (a bin is an int64, like a
// value): in a long run the frames' sketches take the place of exact
// values instead of adding to them.
type exactBudget struct {
	limit int64   // values and bins held at most; 0 sketches everything at once
	held  int64   // values and sketch bins held now
	next  int64   // held above which to shed again (limit, or more while sketches alone exceed half of it)
	dists []*dist // distributions holding exact values
}

// exactChunk is how many exact values a distribution adds at a time once
// it holds that many (8 KiB).
const exactChunk = 1024

// minShed is the fewest values a distribution must hold to be sketched by
// shed: a sketch of fewer is no smaller.
const minShed = 64

// DefaultExactValues is Options.ExactValues' default: 2^20 values (8 MiB
// of numbers; about 35,000 replayed requests) are kept exactly.
const DefaultExactValues = 1 << 20

func (d *dist) add(b *exactBudget, v int64) {
	x := sampleOf(v)
	d.addSample(b, &x)
}

// addSample adds s.v, in its sketch at s.bin once sketched (see sample),
// and returns how many cells its sketch grew by (0 while exact).
func (d *dist) addSample(b *exactBudget, s *sample) (grown int) {
	v := s.v
	d.n++
	if d.n == 1 {
		d.min, d.max, d.shift = v, v, float64(v)
	} else {
		d.min, d.max = min(d.min, v), max(d.max, v)
	}
	x := float64(v) - d.shift
	d.sum += x
	d.sumSq += x * x
	if sk := d.sk; sk != nil {
		if v > 0 && sk.pos.countHeld(s.bin) { // most values
			return 0
		}
		grown = sk.addSample(s, 1)
		b.grow(grown)
		return grown
	}
	if b.limit <= 0 {
		d.sk = &sketch{}
		return d.sk.addSample(s, 1)
	}
	if !d.tracked {
		d.tracked = true
		b.dists = append(b.dists, d)
	}
	if len(d.vals) == cap(d.vals) && cap(d.vals) >= exactChunk {
		d.full = append(d.full, d.vals)
		d.vals = make([]int64, 0, exactChunk)
	}
	d.vals = append(d.vals, v)
	d.sorted = false
	if b.held++; b.held > max(b.limit, b.next) {
		b.shed()
	}
	return 0
}

// grow counts cells a sketch grew by, shedding when over the limit
// (inlined: mostly none).
func (b *exactBudget) grow(cells int) {
	if cells != 0 && b.limit > 0 {
		b.hold(int64(cells))
	}
}

// hold counts n more values or cells held, shedding when over the limit.
// Out of line, so that grow is small enough to be inlined.
//
//go:noinline
func (b *exactBudget) hold(n int64) {
	if b.held += n; b.held > max(b.limit, b.next) {
		b.shed()
	}
}

// moments returns the mean and the sum of squared deviations from it.
func (d *dist) moments() (mean, m2 float64) {
	if d.n == 0 {
		return 0, 0
	}
	n := float64(d.n)
	return d.shift + d.sum/n, max(d.sumSq-d.sum*d.sum/n, 0)
}

// shed sketches the largest exact distributions until at most half the
// limit is held.
func (b *exactBudget) shed() {
	slices.SortFunc(b.dists, func(x, y *dist) int { return cmp.Compare(y.n, x.n) })
	keep := b.dists[:0]
	for _, d := range b.dists {
		if b.held > b.limit/2 && d.n >= minShed {
			b.held -= d.n
			d.toSketch()
			b.held += int64(d.sk.cells())
			d.tracked = false
			continue
		}
		keep = append(keep, d)
	}
	clear(b.dists[len(keep):])
	b.dists = keep
	// Sketches (and distributions too small to shed) may hold more than
	// half the limit on their own: try again only after another half.
	b.next = max(b.limit, b.held+b.limit/2)
}

// copyFrom makes d (empty, in b) a copy of src (in b), its values or bins
// counted against b; the caller sheds when b is over its limit.
func (d *dist) copyFrom(b *exactBudget, src *dist) {
	*d = *src
	d.tracked = false
	if src.sk != nil {
		sk := sketch{pos: src.sk.pos, neg: src.sk.neg, zero: src.sk.zero}
		sk.pos.counts, sk.neg.counts = slices.Clone(src.sk.pos.counts), slices.Clone(src.sk.neg.counts)
		d.sk = &sk
		b.held += int64(sk.cells())
		return
	}
	src.flat()
	d.vals, d.full = slices.Clone(src.vals), nil
	if len(d.vals) > 0 {
		d.tracked = true
		b.dists = append(b.dists, d)
		b.held += int64(len(d.vals))
	}
}

// cloneSketched makes d a copy of src, a sketch, its bins' capacity
// included, without counting them against a budget: the caller's
// budget already counts them (see groupAcc.whole).
func (d *dist) cloneSketched(src *dist) {
	*d = *src
	d.tracked = false
	sk := *src.sk
	sk.pos.counts = append(make([]int64, 0, cap(sk.pos.counts)), sk.pos.counts...)
	sk.neg.counts = append(make([]int64, 0, cap(sk.neg.counts)), sk.neg.counts...)
	d.sk = &sk
}

func (d *dist) toSketch() {
	sk := &sketch{}
	for _, c := range d.full {
		sk.addEach(c)
	}
	sk.addEach(d.vals)
	d.sk, d.vals, d.full, d.sorted = sk, nil, nil, false
}

// flat joins the exact values' chunks into vals.
func (d *dist) flat() {
	if len(d.full) == 0 {
		return
	}
	n := len(d.vals)
	for _, c := range d.full {
		n += len(c)
	}
	vals := make([]int64, 0, n)
	for _, c := range d.full {
		vals = append(vals, c...)
	}
	d.vals, d.full = append(vals, d.vals...), nil
}

// exact reports whether the distribution's quantiles are exact.
func (d *dist) exact() bool { return d.sk == nil }

func (d *dist) sort() {
	if !d.sorted {
		d.flat()
		sortInt64(d.vals)
		d.sorted = true
	}
}

// at returns the value of rank r (0-based, ascending): exact, or the
// sketch's estimate (within the exact minimum and maximum, which can only
// bring it closer).
func (d *dist) at(r int64) int64 {
	if d.sk != nil {
		return min(max(d.sk.at(r), d.min), d.max)
	}
	d.sort()
	return d.vals[r]
}

// quantile is the nearest-rank p-quantile (0 when empty).
func (d *dist) quantile(p float64) int64 {
	if d.n == 0 {
		return 0
	}
	return d.at(int64(rank(p, int(d.n))))
}

// atLeast counts the values ≥ x (a sketch counts whole bins: see
// sketch.atLeast).
func (d *dist) atLeast(x int64) int64 {
	if d.sk != nil {
		return d.sk.atLeast(x)
	}
	d.flat()
	var n int64
	for _, v := range d.vals {
		if v >= x {
			n++
		}
	}
	return n
}

// meanVar returns the mean and population variance: from the values in
// sorted order while exact (as they always were), else Welford's.
func (d *dist) meanVar() (float64, float64) {
	if d.n == 0 {
		return 0, 0
	}
	if d.sk == nil {
		d.sort()
		return meanVar(d.vals)
	}
	mean, m2 := d.moments()
	return mean, m2 / float64(d.n)
}

// quantiles summarises the distribution in ns.
func (d *dist) quantiles() Quantiles {
	if d.n == 0 {
		return Quantiles{}
	}
	mean, variance := d.meanVar()
	q := Quantiles{
		N:    d.n,
		P50:  time.Duration(d.quantile(0.5)),
		P90:  time.Duration(d.quantile(0.9)),
		P95:  time.Duration(d.quantile(0.95)),
		P99:  time.Duration(d.quantile(0.99)),
		P999: time.Duration(d.quantile(0.999)),
		Max:  time.Duration(d.max),
		Mean: time.Duration(math.Round(mean)),
		Std:  time.Duration(math.Round(math.Sqrt(variance))),
	}
	if d.sk != nil {
		q.RelErr = SketchRelErr
	}
	return q
}

// sizes summarises a distribution of counts (bytes, tokens).
func (d *dist) sizes() Sizes {
	if d.n == 0 {
		return Sizes{}
	}
	mean, _ := d.meanVar()
	s := Sizes{N: d.n, P50: d.quantile(0.5), P90: d.quantile(0.9), P99: d.quantile(0.99), Max: d.max, Mean: mean}
	if d.sk != nil {
		s.RelErr = SketchRelErr
	}
	return s
}

// merged returns the distribution of the values of ds together, outside
// any budget: exact when every one of them is, else a sketch.
func merged(ds ...*dist) *dist {
	out := &dist{}
	exact := true
	for _, d := range ds {
		exact = exact && d.exact()
	}
	for _, d := range ds {
		if d.n == 0 {
			continue
		}
		out.mergeStats(d)
		switch {
		case exact:
			d.flat()
			out.vals = append(out.vals, d.vals...)
		case d.sk != nil:
			if out.sk == nil {
				out.sk = &sketch{}
			}
			out.sk.merge(d.sk)
		default:
			if out.sk == nil {
				out.sk = &sketch{}
			}
			d.flat()
			for _, v := range d.vals {
				out.sk.add(v, 1)
			}
		}
	}
	return out
}

// mergeStats folds d's count, mean, variance and maximum into out (Chan et
// al.'s parallel form of Welford's update).
func (out *dist) mergeStats(d *dist) {
	if out.n == 0 || d.max > out.max {
		out.max = d.max
	}
	if out.n == 0 || d.min < out.min {
		out.min = d.min
	}
	ma, m2a := out.moments()
	mb, m2b := d.moments()
	n := out.n + d.n
	delta := mb - ma
	m2 := m2a + m2b + delta*delta*float64(out.n)*float64(d.n)/float64(n)
	out.shift, out.sum, out.sumSq = ma+delta*float64(d.n)/float64(n), 0, m2
	out.n = n
}

// bytes is about the memory the distribution's values take.
func (d *dist) bytes() int {
	n := 8 * cap(d.vals)
	for _, c := range d.full {
		n += 8 * cap(c)
	}
	if d.sk != nil {
		n += d.sk.bytes()
	}
	return n
}

// heldBytes is about the memory of the analyzer's distributions.
func (a *Analyzer) heldBytes() int {
	n := a.prompt.bytes() + a.body.bytes() + a.starts.gaps.bytes() + 8*cap(a.starts.pending)
	for i := range a.lat {
		n += a.lat[i].bytes()
	}
	for _, f := range a.frames {
		n += f.prompt.bytes()
		for i := range f.lat {
			n += f.lat[i].bytes()
		}
	}
	for _, gs := range []*groupSet{&a.byRoute, &a.byModel, &a.byClass, &a.byBucket} {
		for _, g := range gs.groups {
			for k := range g.lat {
				n += g.lat[k].bytes()
			}
		}
	}
	return n
}
