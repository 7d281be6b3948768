package analysis

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis/analysistest"
	"github.com/reelkit/reel/formats"
)

// within reports whether an estimate is within the sketch's bound of the
// exact value: SketchRelErr relative, plus half a unit of rounding.
func within(est, exact int64) bool {
	return math.Abs(float64(est-exact)) <= SketchRelErr*math.Abs(float64(exact))+0.5
}

// adversarial are distributions a sketch is easy to get wrong on.
func adversarial() map[string][]int64 {
	rng := rand.New(rand.NewPCG(7, 11))
	const n = 200_000
	out := map[string][]int64{}
	var bimodal, heavy, equal, wide, lag []int64
	for i := range n {
		// Two modes four decades apart, split at p99 exactly, so p99 and
		// p99.9 sit at the edge between them.
		if i%100 == 0 {
			bimodal = append(bimodal, int64(5e9+rng.Float64()*1e9))
		} else {
			bimodal = append(bimodal, int64(5e5+rng.Float64()*1e5))
		}
		// Pareto tail (α = 1.1): the top quantiles are orders of magnitude
		// above the median.
		heavy = append(heavy, int64(1e6/math.Pow(1-rng.Float64(), 1/1.1)))
		equal = append(equal, 123_456_789)
		// Every magnitude from 1 ns to about 9e18 ns.
		wide = append(wide, int64(math.Exp(rng.Float64()*43)))
		// Lag: mostly small, some zero and negative.
		lag = append(lag, int64(rng.NormFloat64()*2e5))
	}
	out["bimodal"], out["heavy tail"], out["all equal"], out["every magnitude"], out["negative and zero"] = bimodal, heavy, equal, wide, lag
	out["small integers"] = []int64{1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144}
	return out
}

func TestSketchErrorBound(t *testing.T) {
	ps := []float64{0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1}
	for name, vals := range adversarial() {
		t.Run(name, func(t *testing.T) {
			var sk sketch
			for _, v := range vals {
				sk.add(v, 1)
			}
			sorted := slices.Clone(vals)
			slices.Sort(sorted)
			for _, p := range ps {
				r := int64(rank(p, len(sorted)))
				if got, want := sk.at(r), sorted[r]; !within(got, want) {
					t.Errorf("p%g: sketch %d, exact %d: off by %.3g%%", 100*p, got, want, 100*math.Abs(float64(got-want))/float64(want))
				}
			}
			if sk.bytes() > 2*8*2300 {
				t.Errorf("sketch holds %d bytes for %d values: not bounded by the value range", sk.bytes(), len(vals))
			}
		})
	}
}

// TestShardMergeEqualsWhole: sketches of shards merged are the sketch of
// all their values, bin for bin, and so are merged distributions'
// summaries (mean and std to rounding).
func TestShardMergeEqualsWhole(t *testing.T) {
	for name, vals := range adversarial() {
		t.Run(name, func(t *testing.T) {
			var whole sketch
			shards := make([]sketch, 7)
			for i, v := range vals {
				whole.add(v, 1)
				shards[(i*31)%len(shards)].add(v, 1)
			}
			var m sketch
			for i := range shards {
				m.merge(&shards[i])
			}
			type bin struct{ v, c int64 }
			var a, b []bin
			whole.each(func(v, c int64) { a = append(a, bin{v, c}) })
			m.each(func(v, c int64) { b = append(b, bin{v, c}) })
			if !slices.Equal(a, b) {
				t.Fatalf("merged shards' bins differ from the whole's")
			}

			none := exactBudget{} // sketch from the first value
			wholeD := &dist{}
			parts := make([]*dist, 5)
			for i := range parts {
				parts[i] = &dist{}
			}
			for i, v := range vals {
				wholeD.add(&none, v)
				parts[i%len(parts)].add(&none, v)
			}
			got, want := merged(parts...).quantiles(), wholeD.quantiles()
			if got.N != want.N || got.P50 != want.P50 || got.P99 != want.P99 || got.P999 != want.P999 || got.Max != want.Max {
				t.Errorf("merged shards %+v, whole %+v", got, want)
			}
			if d := math.Abs(float64(got.Mean - want.Mean)); d > 1+1e-9*math.Abs(float64(want.Mean)) {
				t.Errorf("mean: merged %d, whole %d", got.Mean, want.Mean)
			}
			if d := math.Abs(float64(got.Std - want.Std)); d > 1+1e-6*float64(want.Std) {
				t.Errorf("std: merged %d, whole %d", got.Std, want.Std)
			}
		})
	}
}

// TestBudgetKeepsSmallExact: past the budget the largest distributions are
// sketched first; a small one stays exact, and the values held stay within
// the limit.
func TestBudgetKeepsSmallExact(t *testing.T) {
	b := exactBudget{limit: 1000}
	var big, small dist
	for i := range 5000 {
		big.add(&b, int64(i+1))
		if i%100 == 0 {
			small.add(&b, int64(i+1))
		}
	}
	if big.exact() || !small.exact() {
		t.Fatalf("big exact %v, small exact %v: want the big one sketched, the small one exact", big.exact(), small.exact())
	}
	if b.held > b.limit {
		t.Errorf("held %d values, limit %d", b.held, b.limit)
	}
	if q := small.quantiles(); q.RelErr != 0 || q.P50 != 2401 || q.N != 50 {
		t.Errorf("small %+v, want exact p50 2401 of 50", q)
	}
	if q := big.quantiles(); q.RelErr != SketchRelErr || !within(int64(q.P99), 4950) || q.Max != 5000 || q.Mean != 2501 {
		t.Errorf("big %+v, want p99 ≈ 4950 (±1%%), exact max 5000 and mean 2500.5", q)
	}
}

// TestSketchedAnalyzerWithinBound: the same run analysed with every
// distribution sketched agrees with the exact analysis within the bound,
// overall, per frame and per group, and says so in RelErr.
func TestSketchedAnalyzerWithinBound(t *testing.T) {
	rows := analysistest.Run(3, 20_000, 1.2)
	slo := SLO{Bounds: map[Metric]time.Duration{MetricTTFT: 80 * time.Millisecond}}
	exact, sketched := New(Options{SLO: slo}), New(Options{SLO: slo, ExactValues: -1})
	for _, r := range rows {
		exact.AddResult(r)
		sketched.AddResult(r)
	}
	e, s := exact.Summary(), sketched.Summary()
	check := func(where string, qe, qs Quantiles) {
		t.Helper()
		if qe.RelErr != 0 || (qs.N > 0 && qs.RelErr != SketchRelErr) {
			t.Errorf("%s: rel_err exact %g, sketched %g", where, qe.RelErr, qs.RelErr)
		}
		if qe.N != qs.N || qe.Max != qs.Max {
			t.Errorf("%s: n/max %d/%s vs %d/%s: want them exact in both", where, qe.N, qe.Max, qs.N, qs.Max)
		}
		for _, p := range []float64{0.5, 0.9, 0.95, 0.99, 0.999} {
			a, _ := qe.At(p)
			b, _ := qs.At(p)
			if !within(int64(b), int64(a)) {
				t.Errorf("%s p%g: sketched %s, exact %s", where, 100*p, b, a)
			}
		}
	}
	check("e2e", e.E2E, s.E2E)
	check("ttft", e.TTFT, s.TTFT)
	check("lag", e.Lag, s.Lag)
	if len(e.Frames) != len(s.Frames) || len(e.Frames) < 10 {
		t.Fatalf("frames %d vs %d", len(e.Frames), len(s.Frames))
	}
	for i := range e.Frames {
		check("frame "+e.Frames[i].Start.Format(time.TimeOnly), e.Frames[i].E2E, s.Frames[i].E2E)
	}
	for i := range e.Models {
		check("model "+e.Models[i].Key, e.Models[i].TTFT, s.Models[i].TTFT)
	}
	if e.MeetingSLO != s.MeetingSLO || e.OK != s.OK {
		t.Errorf("counts differ: meeting %d vs %d, ok %d vs %d", e.MeetingSLO, s.MeetingSLO, e.OK, s.OK)
	}
}

// TestExactModeUnchanged: a run within the budget reports exact quantiles
// (nearest rank of the values), as before sketches existed.
func TestExactModeUnchanged(t *testing.T) {
	rows := analysistest.Run(4, 3000, 1)
	a := New(Options{})
	var e2e []int64
	for _, r := range rows {
		a.AddResult(r)
		if r.Status == 200 && r.E2ENs > 0 {
			e2e = append(e2e, r.E2ENs)
		}
	}
	s := a.Summary()
	if want := summarize(e2e); s.E2E != want || s.E2E.RelErr != 0 {
		t.Fatalf("e2e %+v, want the exact %+v", s.E2E, want)
	}
	for _, f := range s.Frames {
		if f.E2E.RelErr != 0 || f.TTFT.RelErr != 0 {
			t.Fatalf("frame %s sketched in a small run", f.Start)
		}
	}
}

// TestExactChunksUnchanged: a distribution that holds its values in
// chunks (past exactChunk) reports what the same values in one slice
// report, bit for bit: quantiles, mean, std, counts at or above a bound,
// copies and merges, also when read between adds (the chunks are joined,
// then grown again).
func TestExactChunksUnchanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	b := exactBudget{limit: 1 << 20}
	var d dist
	var vals []int64
	for _, n := range []int{10, exactChunk, 3*exactChunk + 17, 10 * exactChunk} {
		for len(vals) < n {
			v := int64(rng.ExpFloat64() * 3e8) // ns, a heavy right tail
			if len(vals)%97 == 0 {
				v = -v
			}
			d.add(&b, v)
			vals = append(vals, v)
		}
		want := summarize(slices.Clone(vals))
		if got := d.quantiles(); got != want || !d.exact() {
			t.Fatalf("%d values: chunked %+v\nslice %+v", n, got, want)
		}
		x := vals[len(vals)/3]
		var ge int64
		for _, v := range vals {
			if v >= x {
				ge++
			}
		}
		if got := d.atLeast(x); got != ge {
			t.Fatalf("%d values: atLeast %d, want %d", n, got, ge)
		}
	}
	var c dist
	c.copyFrom(&b, &d)
	d.add(&b, 42)
	c.add(&b, 42)
	vals = append(vals, 42)
	want := summarize(slices.Clone(vals))
	if got := c.quantiles(); got != want {
		t.Fatalf("copy: %+v\nwant %+v", got, want)
	}
	if got, want := merged(&d, &c).quantiles(), summarize(append(slices.Clone(vals), vals...)); got != want {
		t.Fatalf("merged: %+v\nwant %+v", got, want)
	}
}

// TestStatsMemoryFlat: the analyzer's heap does not grow with the rows
// once the exact budget is spent (it holds no per-request state).
func TestStatsMemoryFlat(t *testing.T) {
	pool := analysistest.Run(5, 4096, 1)
	a := New(Options{ExactValues: 1 << 16})
	var r formats.Result
	var held [2]int
	for i := range 300_000 {
		r = *pool[i%len(pool)]
		shift := time.Duration(i/len(pool)) * 4096 * 20 * time.Millisecond
		r.OrigTs = r.OrigTs.Add(shift)
		r.SentUnixNs += int64(shift)
		r.ScheduledNs += int64(shift)
		a.AddResult(&r)
		switch i + 1 {
		case 100_000:
			held[0] = a.heldBytes()
		case 300_000:
			held[1] = a.heldBytes()
		}
	}
	// Frames grow with the run (3× the frames), values do not.
	perFrame := float64(held[1]-held[0]) / float64(len(a.frames)*2/3)
	if perFrame > 32<<10 {
		t.Errorf("held %d → %d bytes from 100k to 300k rows: %.0f bytes per added frame", held[0], held[1], perFrame)
	}
	if s := a.Stats(); s.Summary.Requests != 300_000 || s.Summary.E2E.RelErr != SketchRelErr {
		t.Errorf("requests %d, rel_err %g", s.Summary.Requests, s.Summary.E2E.RelErr)
	}
}

// TestCompareFromSketches: intervals of sketched runs (no values held) give
// the verdict the exact runs give, with deltas within the bound.
func TestCompareFromSketches(t *testing.T) {
	rules, err := ParseRules("p99>+10%,ttft.p50>+50%,e2e.p50>+5%")
	if err != nil {
		t.Fatal(err)
	}
	ra, rb := analysistest.Run(1, 30_000, 1), analysistest.Run(2, 30_000, 1.3)
	var verdicts []Verdict
	var p99s []Delta
	for _, exact := range []int{0, -1} {
		a, b := New(Options{ExactValues: exact}), New(Options{ExactValues: exact})
		for i := range ra {
			a.AddResult(ra[i])
			b.AddResult(rb[i])
		}
		c := Compare(a, b, CompareOptions{Resamples: 200, Seed: 5})
		verdicts = append(verdicts, c.Judge(rules))
		d, _ := c.Metric("e2e.p99")
		p99s = append(p99s, d)
	}
	if verdicts[0].Failed != verdicts[1].Failed || len(verdicts[0].Tripped) != len(verdicts[1].Tripped) {
		t.Errorf("exact verdict %q, sketched %q", verdicts[0].Line, verdicts[1].Line)
	}
	e, s := p99s[0], p99s[1]
	if !within(int64(s.B), int64(e.B)) || !within(int64(s.A), int64(e.A)) || !s.HasCI || s.Significant != e.Significant {
		t.Errorf("e2e.p99 exact %+v, sketched %+v", e, s)
	}
}

// TestSketchBinLookup: the slice table finds the same bin as searching
// every bound — at each power of two, next to it, next to every bound, and
// at random magnitudes.
func TestSketchBinLookup(t *testing.T) {
	search := func(m uint64) int {
		i, _ := slices.BinarySearch(sketchBounds, float64(m))
		return i
	}
	check := func(m uint64) {
		if m == 0 || m > 1<<63 { // magnitudes of int64 values
			return
		}
		if got, want := sketchBin(m), search(m); got != want {
			t.Fatalf("sketchBin(%d) = %d, want %d", m, got, want)
		}
	}
	for k := range 64 {
		p := uint64(1) << k
		for _, m := range []uint64{p - 1, p, p + 1, p + p/3, p + p/2, 2*p - 1} {
			check(m)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		check(rng.Uint64() >> rng.IntN(64))
	}
	for m := uint64(1); m < 70_000; m++ {
		check(m)
	}
	for i, b := range sketchBounds { // either side of every bound, and of the last integer at or below it
		if b >= 1<<63 {
			continue
		}
		for d := uint64(0); d < 5; d++ {
			check(uint64(b) + d - 2)
		}
		check(sketchLast[i])
		check(sketchLast[i] + 1)
	}
}

// TestSketchSliceOneStep: every magnitude of a slice lies at or below the
// bound after its first bin's, so sketchBin's single step finds its bin
// (magnitudes above 2^53 round to a float at most the octave's end).
func TestSketchSliceOneStep(t *testing.T) {
	for k := range 64 {
		for j := range 1 << sliceBits {
			i := int(sliceFirst[(63-k)<<sliceBits|j])
			top := math.Ldexp(1+float64(j+1)/(1<<sliceBits), k) // the slice's upper edge, inclusive for rounding
			if k == 63 {
				top = math.Min(top, 1<<63)
			}
			if i+1 < len(sketchBounds) && sketchBounds[i+1] < top {
				t.Fatalf("octave %d slice %d: bins %d and %d (bounds %g, %g) both below the slice's top %g", k, j, i, i+1, sketchBounds[i], sketchBounds[i+1], top)
			}
		}
	}
}
