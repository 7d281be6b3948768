package analysis

import "slices"

// sortInt64 sorts v ascending: an LSD radix sort (8 passes of 8 bits,
// skipping bytes every value shares) for long slices, pdqsort for short
// ones. The radix sort needs a buffer as long as v.
func sortInt64(v []int64) {
	if len(v) < 1<<12 {
		slices.Sort(v)
		return
	}
	buf := make([]int64, len(v))
	src, dst := v, buf
	const signFlip = uint64(1) << 63
	for shift := uint(0); shift < 64; shift += 8 {
		var count [256]int
		for _, x := range src {
			count[byte((uint64(x)^signFlip)>>shift)]++
		}
		if count[byte((uint64(src[0])^signFlip)>>shift)] == len(src) {
			continue // every value has this byte: the pass would not move anything
		}
		pos := 0
		for i, c := range count {
			count[i] = pos
			pos += c
		}
		for _, x := range src {
			b := byte((uint64(x) ^ signFlip) >> shift)
			dst[count[b]] = x
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &v[0] {
		copy(v, src)
	}
}
