package formats

import (
	"errors"
	"slices"
	"testing"
)

// listRowsByLevel is listRows written one level at a time, the reference
// the word-at-a-time scan must agree with.
func listRowsByLevel(c *columnCursor, started *int, n int, slab int32) (stop, vals int, done bool, err error) {
	if *started == 0 && c.reps[c.lpos] != 0 {
		return 0, 0, false, errListRowStart
	}
	for i := c.lpos; i < len(c.reps); i++ {
		switch c.reps[i] {
		case 0:
			if *started == n {
				return i, vals, true, nil
			}
			if *started > 0 {
				c.ends = append(c.ends, slab+int32(vals))
			}
			*started++
		case 1:
		default:
			return 0, 0, false, errLevelRange
		}
		if c.defs[i] == c.maxDef {
			vals++
		}
	}
	return len(c.reps), vals, false, nil
}

// FuzzListRows checks listRows against listRowsByLevel on arbitrary levels:
// where it starts, how many rows the batch wants and has begun, and the
// levels' values (in range or not).
func FuzzListRows(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1}, []byte{1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, byte(1), uint16(0), uint16(3), uint8(0))
	f.Add([]byte{1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}, []byte{2, 2, 2, 2, 0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}, byte(2), uint16(0), uint16(9), uint8(2))
	f.Add([]byte{0, 2, 0}, []byte{1, 1, 1}, byte(1), uint16(0), uint16(9), uint8(0))
	f.Fuzz(func(t *testing.T, reps, defs []byte, maxDef byte, at, n uint16, begun uint8) {
		if len(reps) == 0 || len(defs) < len(reps) {
			return
		}
		defs = defs[:len(reps)]
		lpos := int(at) % len(reps)
		want := max(int(n)%64, 1)
		began := min(int(begun)%64, want)
		run := func(scan func(*columnCursor, *int, int, int32) (int, int, bool, error)) (c *columnCursor, started, stop, vals int, done bool, err error) {
			c = &columnCursor{reps: reps, defs: defs, lpos: lpos, maxDef: maxDef, ends: []int32{-1}}
			started = began
			stop, vals, done, err = scan(c, &started, want, 7)
			return
		}
		c1, s1, stop1, vals1, done1, err1 := run((*columnCursor).listRows)
		c2, s2, stop2, vals2, done2, err2 := run(listRowsByLevel)
		if !errors.Is(err1, err2) || (err1 == nil) != (err2 == nil) {
			t.Fatalf("errors: %v, by level %v", err1, err2)
		}
		if err1 != nil {
			return
		}
		if s1 != s2 || stop1 != stop2 || vals1 != vals2 || done1 != done2 || !slices.Equal(c1.ends, c2.ends) {
			t.Fatalf("started %d stop %d vals %d done %v ends %v; by level: %d %d %d %v %v", s1, stop1, vals1, done1, c1.ends, s2, stop2, vals2, done2, c2.ends)
		}
	})
}
