package analysis

import (
	"math"
	"slices"
	"time"
)

// Quantiles summarises one metric. P-values use the nearest rank: the
// p-quantile of n values is the ⌈p·n⌉-th smallest, exactly when RelErr is
// zero, else within RelErr of it (a sketched distribution: see
// Options.ExactValues). N, Max, Mean and Std are always exact; Std is the
// population standard deviation. All fields are zero when N is zero.
type Quantiles struct {
	N    int64         `json:"n"`       // values in the distribution
	P50  time.Duration `json:"p50_ns"`  // median
	P90  time.Duration `json:"p90_ns"`  // 90th percentile
	P95  time.Duration `json:"p95_ns"`  // 95th percentile
	P99  time.Duration `json:"p99_ns"`  // 99th percentile
	P999 time.Duration `json:"p999_ns"` // 99.9th percentile
	Max  time.Duration `json:"max_ns"`  // largest value
	Mean time.Duration `json:"mean_ns"` // arithmetic mean
	Std  time.Duration `json:"std_ns"`  // population standard deviation
	// RelErr is the quantiles' relative error bound: 0 when exact,
	// SketchRelErr when sketched.
	RelErr float64 `json:"rel_err,omitempty"`
}

// At returns the named quantile: 0.5, 0.9, 0.95, 0.99 and 0.999 give the
// stored fields, 1 gives Max; other values give false.
func (q Quantiles) At(p float64) (time.Duration, bool) {
	switch p {
	case 0.5:
		return q.P50, true
	case 0.9:
		return q.P90, true
	case 0.95:
		return q.P95, true
	case 0.99:
		return q.P99, true
	case 0.999:
		return q.P999, true
	case 1:
		return q.Max, true
	}
	return 0, false
}

// rank returns the index of the p-quantile in n sorted values (nearest rank).
func rank(p float64, n int) int {
	if n == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(n))) - 1
	return min(max(i, 0), n-1)
}

// summarize summarises values exactly; it sorts vals in place.
func summarize(vals []int64) Quantiles {
	d := dist{vals: vals, n: int64(len(vals))}
	if len(vals) > 0 {
		d.min, d.max = slices.Min(vals), slices.Max(vals)
	}
	return d.quantiles()
}

// countDist is an exact distribution over integer microsecond values kept as
// counts per distinct value: ITL lists are long, but their distinct values
// are few, so memory is bounded by the value range rather than the events.
// Values below denseMax are counted in a slice grown to the largest seen,
// the rare larger ones in a map.
type countDist struct {
	dense  []int64         // dense[v]: occurrences of v µs, v < denseMax
	sparse map[int64]int64 // value (µs) ≥ denseMax → occurrences
	n      int64
}

// denseMax bounds the dense counts: 1 s of µs values, 8 MB at most.
const denseMax = 1 << 20

func (d *countDist) add(v int64, c int64) {
	if c <= 0 || v < 0 {
		return
	}
	d.n += c
	if v < denseMax {
		if v >= int64(len(d.dense)) {
			grown := make([]int64, min(max(2*len(d.dense), int(v)+1, 1024), denseMax))
			copy(grown, d.dense)
			d.dense = grown
		}
		d.dense[v] += c
		return
	}
	if d.sparse == nil {
		d.sparse = make(map[int64]int64)
	}
	d.sparse[v] += c
}

// addEach counts each of gaps (µs) once; negative ones are not counted.
func (d *countDist) addEach(gaps []int32) {
	dense := d.dense        // in a register: d.dense[i]++ could change d's fields as far as the compiler knows
	d.n += int64(len(gaps)) // less those add counts itself or drops
	for _, g := range gaps {
		if i := uint(g); i < uint(len(dense)) { // 0 ≤ g < len(dense), and no second bounds check
			dense[i]++
			continue
		}
		d.n--
		d.add(int64(g), 1)
		dense = d.dense
	}
}

// sumCounts returns the counts of a and b together: a itself when b is
// empty (the caller must not change it), else a new countDist.
func sumCounts(a, b *countDist) *countDist {
	if b.n == 0 {
		return a
	}
	out := &countDist{dense: make([]int64, max(len(a.dense), len(b.dense)))}
	for _, d := range []*countDist{a, b} {
		for v, c := range d.dense {
			out.dense[v] += c
			out.n += c
		}
		for v, c := range d.sparse {
			out.add(v, c)
		}
	}
	return out
}

// each calls f for every distinct value in ascending order.
func (d *countDist) each(f func(v, c int64)) {
	for v, c := range d.dense {
		if c > 0 {
			f(int64(v), c)
		}
	}
	keys := make([]int64, 0, len(d.sparse))
	for k := range d.sparse {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f(k, d.sparse[k])
	}
}

// quantiles summarises the distribution; values are microseconds and the
// result is in time.Duration (ns).
func (d *countDist) quantiles() Quantiles {
	if d.n == 0 {
		return Quantiles{}
	}
	var sum float64
	d.each(func(v, c int64) { sum += float64(v) * float64(c) })
	n := float64(d.n)
	mean := sum / n
	var ss float64
	ps := []float64{0.5, 0.9, 0.95, 0.99, 0.999}
	out := make([]int64, len(ps))
	var cum, last int64
	pi := 0
	d.each(func(v, c int64) {
		x := float64(v) - mean
		ss += x * x * float64(c)
		cum += c
		for pi < len(ps) && cum > int64(rank(ps[pi], int(d.n))) {
			out[pi] = v
			pi++
		}
		last = v
	})
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return Quantiles{
		N: d.n, P50: us(out[0]), P90: us(out[1]), P95: us(out[2]), P99: us(out[3]), P999: us(out[4]),
		Max:  us(last),
		Mean: time.Duration(math.Round(mean * 1000)),
		Std:  time.Duration(math.Round(math.Sqrt(ss/n) * 1000)),
	}
}
