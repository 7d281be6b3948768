package analysis

// Bootstrap confidence intervals for the quantile differences of Compare.

import (
	"math"
	"math/rand/v2"
	"slices"
)

// sortedSample is one metric of one run, sorted, as values or as counts of
// distinct values (ITL).
type sortedSample struct {
	vals     []int64 // sorted values, when kept individually
	keys     []int64 // sorted distinct values (count form)
	cum      []int64 // cumulative counts per key (count form)
	unit     int64   // multiplier of keys to ns
	n        int64
	mean     float64
	variance float64
}

// colSample is one latency column of a run: its exact values, sorted, or
// (once the run's distribution is sketched) the sketch's bins as counts of
// distinct values, so intervals for long runs never need every value.
func colSample(a *Analyzer, col int) sortedSample {
	d := a.latOf(&a.lat, col)
	s := sortedSample{n: d.n, unit: 1}
	s.mean, s.variance = d.meanVar()
	if d.exact() {
		d.sort()
		s.vals = d.vals
		return s
	}
	var cum int64
	d.sk.each(func(v, c int64) {
		cum += c
		s.keys = append(s.keys, min(max(v, d.min), d.max))
		s.cum = append(s.cum, cum)
	})
	return s
}

func distSample(d *countDist) sortedSample {
	s := sortedSample{unit: 1000, n: d.n}
	var cum int64
	var sum, ss float64
	d.each(func(v, c int64) {
		cum += c
		s.keys = append(s.keys, v)
		s.cum = append(s.cum, cum)
		sum += float64(v*1000) * float64(c)
	})
	if d.n > 0 {
		s.mean = sum / float64(d.n)
		d.each(func(v, c int64) {
			x := float64(v*1000) - s.mean
			ss += x * x * float64(c)
		})
		s.variance = ss / float64(d.n)
	}
	return s
}

func meanVar(v []int64) (float64, float64) {
	if len(v) == 0 {
		return 0, 0
	}
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	m := sum / float64(len(v))
	var ss float64
	for _, x := range v {
		ss += (float64(x) - m) * (float64(x) - m)
	}
	return m, ss / float64(len(v))
}

// at returns the i-th smallest value (0-based).
func (s *sortedSample) at(i int64) int64 {
	if s.vals != nil {
		return s.vals[i]
	}
	j, _ := slices.BinarySearchFunc(s.cum, i+1, func(c, t int64) int {
		if c < t {
			return -1
		}
		if c > t {
			return 1
		}
		return 0
	})
	return s.keys[j] * s.unit
}

func (s *sortedSample) quantile(p float64) int64 {
	if s.n == 0 {
		return 0
	}
	return s.at(int64(rank(p, int(s.n))))
}

// resampleQuantiles draws one bootstrap resample and returns its
// quantiles at ps (ascending) into out.
func (s *sortedSample) resampleQuantiles(ps []float64, maxN int, rng *rand.Rand, counts []int32, out []int64) {
	n := s.n
	if n <= int64(maxN) {
		// Whole resample: draw n indices into the sorted sample, count them
		// and walk to each quantile's rank.
		clear(counts[:n])
		for range n {
			counts[rng.Int64N(n)]++
		}
		var cum int64
		j := 0
		for i := int64(0); i < n && j < len(ps); i++ {
			cum += int64(counts[i])
			for j < len(ps) && cum > int64(rank(ps[j], int(n))) {
				out[j] = s.at(i)
				j++
			}
		}
		for ; j < len(ps); j++ {
			out[j] = s.at(n - 1)
		}
		return
	}
	// Large sample: a resample's p-quantile sits at the sample's
	// (p + Z·√(p(1−p)/n))-quantile, Z standard normal (one Z per resample
	// keeps the quantiles of one resample ordered).
	z := rng.NormFloat64()
	for j, p := range ps {
		pp := p + z*math.Sqrt(p*(1-p)/float64(n))
		out[j] = s.at(int64(rank(min(max(pp, 0), 1), int(n))))
	}
}

// bootstrapDiffs returns, for each p in ps, the percentile interval of
// quantile(B*) − quantile(A*).
func bootstrapDiffs(a, b sortedSample, ps []float64, opt CompareOptions, rng *rand.Rand) (lo, hi []float64) {
	counts := make([]int32, min(max(a.n, b.n), int64(opt.MaxResampleN)))
	diffs := make([][]float64, len(ps))
	for j := range diffs {
		diffs[j] = make([]float64, opt.Resamples)
	}
	qa, qb := make([]int64, len(ps)), make([]int64, len(ps))
	for i := range opt.Resamples {
		a.resampleQuantiles(ps, opt.MaxResampleN, rng, counts, qa)
		b.resampleQuantiles(ps, opt.MaxResampleN, rng, counts, qb)
		for j := range ps {
			diffs[j][i] = float64(qb[j] - qa[j])
		}
	}
	alpha := (1 - opt.Confidence) / 2
	lo, hi = make([]float64, len(ps)), make([]float64, len(ps))
	for j, d := range diffs {
		slices.Sort(d)
		lo[j], hi[j] = d[rank(alpha, len(d))], d[rank(1-alpha, len(d))]
	}
	return lo, hi
}

// normalQuantile is the standard normal quantile (Acklam's approximation,
// relative error < 1.2e-9).
func normalQuantile(p float64) float64 {
	a := []float64{-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00}
	b := []float64{-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01}
	c := []float64{-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00}
	d := []float64{7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00}
	const plow = 0.02425
	switch {
	case p <= 0:
		return math.Inf(-1)
	case p >= 1:
		return math.Inf(1)
	case p < plow:
		q := math.Sqrt(-2 * math.Log(p))
		return (((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	case p > 1-plow:
		return -normalQuantile(1 - p)
	}
	q := p - 0.5
	r := q * q
	return (((((a[0]*r+a[1])*r+a[2])*r+a[3])*r+a[4])*r + a[5]) * q / (((((b[0]*r+b[1])*r+b[2])*r+b[3])*r+b[4])*r + 1)
}
