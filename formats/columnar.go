package formats

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"reflect"
	"strings"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// The columnar path: with ReaderOptions.Columns, a row group's projected
// columns are decoded straight from their pages into the records' fields —
// column chunk by column chunk, page by page, from the typed values
// parquet-go's page decoders leave (Page.Data), with the repetition and
// definition levels read directly for lists and optional values. No row is
// reconstructed, nothing is reflected per row, and nothing is allocated
// per row: strings of a dictionary column come from its dictionary,
// converted once per column chunk; list elements and optional values of a
// batch share one slab per column (fresh for every batch, or with
// ReaderOptions.ReuseSlices kept for the next batch decoded into the same
// records). It gives the same records as parquet-go's
// row reader (TestColumnarMatchesRows), which the Reader keeps for the
// fields it cannot decode this way (maps, byte slices: the bodies and
// headers) and for reading every column.

// fieldKind is how a record field is decoded from its leaf column.
type fieldKind uint8

const (
	kindInt64     fieldKind = iota // int64 from INT64
	kindInt32                      // int32 from INT32
	kindBool                       // bool from BOOLEAN
	kindString                     // string from BYTE_ARRAY
	kindTime                       // time.Time (UTC) from a TIMESTAMP INT64
	kindOptInt32                   // *int32 from an optional INT32 (nil when NULL)
	kindListInt32                  // []int32 from a LIST of INT32
	kindListInt64                  // []int64 from a LIST of INT64
)

// columnField is one projected field of the record type: its leaf column's
// top-level name and where and how the value goes in the struct.
type columnField struct {
	name   string
	offset uintptr
	kind   fieldKind
}

var timeType = reflect.TypeFor[time.Time]()

// columnarFields returns the fields of T named by columns (top-level column
// names, the time column included by the caller), or ok false when one of
// them has a Go type the columnar path does not decode.
func columnarFields[T Record](columns []string) (fields []columnField, ok bool) {
	want := map[string]bool{}
	for _, c := range columns {
		want[c] = true
	}
	rt := reflect.TypeFor[T]()
	for i := range rt.NumField() {
		sf := rt.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("parquet"), ",")
		if !want[name] {
			continue
		}
		f := columnField{name: name, offset: sf.Offset}
		switch t := sf.Type; {
		case t == timeType:
			f.kind = kindTime
		case t.Kind() == reflect.Int64:
			f.kind = kindInt64
		case t.Kind() == reflect.Int32:
			f.kind = kindInt32
		case t.Kind() == reflect.Bool:
			f.kind = kindBool
		case t.Kind() == reflect.String:
			f.kind = kindString
		case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Int32:
			f.kind = kindOptInt32
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Int32 && strings.Contains(opts, "list"):
			f.kind = kindListInt32
		case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Int64 && strings.Contains(opts, "list"):
			f.kind = kindListInt64
		default:
			return nil, false
		}
		fields = append(fields, f)
	}
	return fields, true
}

// columnarGroup decodes one row group's projected columns into batches of
// records.
type columnarGroup[T Record] struct {
	cols  []*columnCursor
	left  int64 // rows not decoded yet
	reuse bool  // ReaderOptions.ReuseSlices: each batch's slabs are kept for the next decoded into the same slot
}

// newColumnarGroup prepares rg's columns for fields. It reports ok false
// when the file stores one of them in a way the columnar path does not
// decode (the row path then reads the group).
func newColumnarGroup[T Record](pf *parquet.File, rg parquet.RowGroup, fields []columnField, reuse bool) (*columnarGroup[T], bool) {
	g := &columnarGroup[T]{left: rg.NumRows(), reuse: reuse}
	chunks := rg.ColumnChunks()
	for i := range fields {
		f := &fields[i]
		c := &columnCursor{field: f}
		leaf, found := leafOf(pf.Schema(), f.name)
		if !found {
			c.missing = true // an added column an older file lacks: zero, as the row path reads it
			g.cols = append(g.cols, c)
			continue
		}
		if !c.accepts(leaf) || leaf.ColumnIndex >= len(chunks) {
			return nil, false
		}
		c.maxDef, c.maxRep = byte(leaf.MaxDefinitionLevel), byte(leaf.MaxRepetitionLevel)
		if f.kind == kindTime {
			c.timeUnit = timestampUnit(leaf.Node)
		}
		c.pages = chunks[leaf.ColumnIndex].Pages()
		g.cols = append(g.cols, c)
	}
	return g, true
}

// leafOf finds the leaf column under the top-level column name: the column
// itself, or a list's element.
func leafOf(s *parquet.Schema, name string) (parquet.LeafColumn, bool) {
	for _, path := range s.Columns() {
		if path[0] == name {
			return s.Lookup(path...)
		}
	}
	return parquet.LeafColumn{}, false
}

// timestampUnit is how many nanoseconds one unit of a TIMESTAMP column is
// (parquet-go's row path: nanoseconds without a timestamp logical type).
func timestampUnit(n parquet.Node) int64 {
	if lt := n.Type().LogicalType(); lt != nil {
		if ts, ok := lt.Value.(*format.TimestampType); ok && ts.Unit.Value != nil {
			return int64(ts.Unit.Value.Duration())
		}
	}
	return 1
}

// close releases the pages still held and the column chunks' readers.
func (g *columnarGroup[T]) close() {
	for _, c := range g.cols {
		c.release()
		if c.pages != nil {
			c.pages.Close()
		}
	}
}

// read decodes the next rows into buf, overwriting the projected fields of
// buf[:n], and reports n (0 and io.EOF after the last row). slot (0 or 1)
// names buf among the run's batch buffers: with reuse, the slabs of the
// batch last decoded into the same slot are decoded over.
func (g *columnarGroup[T]) read(buf []T, slot int) (int, error) {
	n := int(min(int64(len(buf)), g.left))
	if n == 0 {
		return 0, io.EOF
	}
	base := unsafe.Pointer(unsafe.SliceData(buf))
	size := unsafe.Sizeof(buf[0])
	if !g.reuse {
		slot = -1
	}
	for _, c := range g.cols {
		if err := c.decode(base, size, n, slot); err != nil {
			return 0, fmt.Errorf("column %s: %w", c.field.name, err)
		}
	}
	g.left -= int64(n)
	return n, nil
}

// columnCursor is one column's position in its chunk's pages.
type columnCursor struct {
	field    *columnField
	missing  bool
	maxDef   byte
	maxRep   byte
	timeUnit int64

	pages parquet.Pages
	page  parquet.Page
	// The current page's contents: values (one of the typed slices, or
	// dictionary indexes into dict), levels, and the next value and level.
	i64     []int64
	i32     []int32
	bits    []byte
	data    []byte
	offs    []uint32
	indexes []int32
	defs    []byte
	reps    []byte
	nvals   int
	vpos    int
	lpos    int

	dictOf  parquet.Dictionary // the dictionary the dict values were built from
	dict    []string
	dictI64 []int64
	dictI32 []int32
	last    string // the last plain string, reused while values repeat

	ends     []int32 // scratch: end of each row's list in the batch's slab
	slabHint int     // capacity for the next batch's list slab: the last batch's elements and an eighth
	// With ReuseSlices, the slabs last handed out in each batch slot, decoded
	// over when the slot is decoded again.
	kept32 [batchSlots][]int32
	kept64 [batchSlots][]int64
}

// accepts reports whether the file's leaf column can be decoded into the
// field: the physical type, and levels that fit (required scalars, an
// optional one for a pointer, one repetition level for a list).
func (c *columnCursor) accepts(leaf parquet.LeafColumn) bool {
	kind := leaf.Node.Type().Kind()
	def, rep := leaf.MaxDefinitionLevel, leaf.MaxRepetitionLevel
	switch c.field.kind {
	case kindInt64, kindTime:
		return kind == parquet.Int64 && def == 0 && rep == 0
	case kindInt32:
		return kind == parquet.Int32 && def == 0 && rep == 0
	case kindBool:
		return kind == parquet.Boolean && def == 0 && rep == 0
	case kindString:
		return kind == parquet.ByteArray && def == 0 && rep == 0
	case kindOptInt32:
		return kind == parquet.Int32 && def == 1 && rep == 0
	case kindListInt32:
		return kind == parquet.Int32 && def >= 1 && rep == 1
	case kindListInt64:
		return kind == parquet.Int64 && def >= 1 && rep == 1
	}
	return false
}

var errShortChunk = errors.New("column chunk ended before its row group's rows")

// next loads the column's next page.
func (c *columnCursor) next() error {
	c.release()
	p, err := c.pages.ReadPage()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return errShortChunk
		}
		return err
	}
	c.page = p
	c.defs, c.reps = p.DefinitionLevels(), p.RepetitionLevels()
	if c.maxRep > 0 && len(c.defs) != len(c.reps) {
		return errLevelsUneven
	}
	c.vpos, c.lpos = 0, 0
	data := p.Data()
	c.i64, c.i32, c.bits, c.data, c.offs, c.indexes = nil, nil, nil, nil, nil, nil
	if d := p.Dictionary(); d != nil {
		c.indexes = data.Int32()
		c.nvals = len(c.indexes)
		if d != c.dictOf {
			c.loadDict(d)
		}
		return nil
	}
	switch c.field.kind {
	case kindInt64, kindTime, kindListInt64:
		c.i64 = data.Int64()
		c.nvals = len(c.i64)
	case kindInt32, kindOptInt32, kindListInt32:
		c.i32 = data.Int32()
		c.nvals = len(c.i32)
	case kindBool:
		c.bits = data.Boolean()
		c.nvals = int(p.NumValues())
	case kindString:
		c.data, c.offs = data.ByteArray()
		c.nvals = max(len(c.offs)-1, 0)
	}
	return nil
}

// loadDict converts a column chunk's dictionary to the values the field
// takes, once per chunk.
func (c *columnCursor) loadDict(d parquet.Dictionary) {
	c.dictOf = d
	vals := d.Page().Data()
	c.dict, c.dictI64, c.dictI32 = c.dict[:0], nil, nil
	switch c.field.kind {
	case kindString:
		data, offs := vals.ByteArray()
		for i := 0; i+1 < len(offs); i++ {
			c.dict = append(c.dict, string(data[offs[i]:offs[i+1]]))
		}
	case kindInt64, kindTime, kindListInt64:
		c.dictI64 = vals.Int64()
	case kindInt32, kindOptInt32, kindListInt32:
		c.dictI32 = vals.Int32()
	}
}

func (c *columnCursor) int64At(i int) int64 {
	if c.indexes != nil {
		return c.dictI64[c.indexes[i]]
	}
	return c.i64[i]
}

func (c *columnCursor) int32At(i int) int32 {
	if c.indexes != nil {
		return c.dictI32[c.indexes[i]]
	}
	return c.i32[i]
}

// plainString is the page's plain string i; a run of equal values shares
// one string.
func (c *columnCursor) plainString(i int) string {
	b := c.data[c.offs[i]:c.offs[i+1]]
	if string(b) != c.last { // compared without converting
		c.last = string(b)
	}
	return c.last
}

// decode writes the column's next n rows into the records at base (size
// bytes apart). slot is the batch slot whose slabs are decoded over, or -1
// for fresh ones.
func (c *columnCursor) decode(base unsafe.Pointer, size uintptr, n, slot int) error {
	if c.missing {
		return nil // never written: the field stays zero
	}
	switch c.field.kind {
	case kindOptInt32:
		return c.decodeOptional(base, size, n, keptSlab(&c.kept32, slot))
	case kindListInt32:
		return decodeList(c, base, size, n, (*columnCursor).int32Values, emptyListInt32s, keptSlab(&c.kept32, slot))
	case kindListInt64:
		return decodeList(c, base, size, n, (*columnCursor).int64Values, emptyListInt64s, keptSlab(&c.kept64, slot))
	}
	for r := 0; r < n; {
		if c.vpos >= c.nvals {
			if err := c.next(); err != nil {
				return err
			}
			continue
		}
		k := min(n-r, c.nvals-c.vpos)
		v := c.vpos
		dst := unsafe.Add(base, uintptr(r)*size+c.field.offset)
		switch c.field.kind {
		case kindInt64:
			if c.indexes != nil {
				scatterDict(dst, size, c.indexes[v:v+k], c.dictI64)
			} else {
				scatter(dst, size, c.i64[v:v+k])
			}
		case kindInt32:
			if c.indexes != nil {
				scatterDict(dst, size, c.indexes[v:v+k], c.dictI32)
			} else {
				scatter(dst, size, c.i32[v:v+k])
			}
		case kindTime:
			for j := range k {
				*(*time.Time)(fieldAt(dst, size, j)) = time.Unix(0, c.int64At(v+j)*c.timeUnit).UTC()
			}
		case kindBool:
			for j := range k {
				i := v + j
				*(*bool)(fieldAt(dst, size, j)) = c.bits[i>>3]>>(i&7)&1 != 0
			}
		case kindString:
			if c.indexes != nil {
				scatterDict(dst, size, c.indexes[v:v+k], c.dict)
			} else {
				for j := range k {
					*(*string)(fieldAt(dst, size, j)) = c.plainString(v + j)
				}
			}
		}
		r += k
		c.vpos += k
	}
	return nil
}

// fieldAt is the field of the j-th record from the one at dst (records
// size bytes apart). Computed from the start each time rather than by
// stepping a pointer, which would point past the records after the last
// one (checkptr, under -race, rejects that).
func fieldAt(dst unsafe.Pointer, size uintptr, j int) unsafe.Pointer {
	return unsafe.Add(dst, uintptr(j)*size)
}

// scatter writes vals into the field of consecutive records from dst.
func scatter[T any](dst unsafe.Pointer, size uintptr, vals []T) {
	for j, x := range vals {
		*(*T)(fieldAt(dst, size, j)) = x
	}
}

// scatterDict writes dict[indexes[j]] into the field of consecutive records from dst.
func scatterDict[T any](dst unsafe.Pointer, size uintptr, indexes []int32, dict []T) {
	for j, x := range indexes {
		*(*T)(fieldAt(dst, size, j)) = dict[x]
	}
}

// keptSlab is the slab kept for slot, or nil for slot -1 (fresh slabs).
func keptSlab[E int32 | int64](kept *[batchSlots][]E, slot int) *[]E {
	if slot < 0 {
		return nil
	}
	return &kept[slot]
}

// decodeOptional decodes an optional INT32 column: one definition level per
// row, a value where it is the maximum. The batch's values share one slab,
// allocated at the batch's first value, or the kept one (when not nil)
// where it holds n values.
func (c *columnCursor) decodeOptional(base unsafe.Pointer, size uintptr, n int, kept *[]int32) error {
	var slab []int32
	if kept != nil && cap(*kept) >= n {
		slab = (*kept)[:0]
	}
	for r := 0; r < n; r++ {
		if c.lpos >= len(c.defs) {
			if err := c.next(); err != nil {
				return err
			}
			r--
			continue
		}
		p := (**int32)(unsafe.Add(base, uintptr(r)*size+c.field.offset))
		*p = nil
		if c.defs[c.lpos] == c.maxDef {
			if c.vpos >= c.nvals {
				return errBadLevels
			}
			if slab == nil {
				room := n - r
				if kept != nil {
					room = n // for the next batch in this slot too
				}
				slab = make([]int32, 0, room) // never grows: *p points into it
				if kept != nil {
					*kept = slab
				}
			}
			slab = append(slab, c.int32At(c.vpos))
			c.vpos++
			*p = &slab[len(slab)-1]
		}
		c.lpos++
	}
	return nil
}

var (
	errBadLevels    = errors.New("definition levels promise more values than the page holds")
	errListRowStart = errors.New("list row does not start at repetition level 0")
	errLevelsUneven = errors.New("page has different numbers of repetition and definition levels")
	errLevelRange   = errors.New("repetition level above the column's maximum")
	emptyListInt32s = []int32{}
	emptyListInt64s = []int64{}
)

// decodeList decodes a LIST column of E (int32 or int64; values gives the
// current page's plain values or the chunk's dictionary, empty is the
// empty list): a row is the
// entries from a repetition level 0 up to the next one, an element where
// the definition level is the maximum (lower levels: an empty or null
// list, which reads as an empty slice, as in the row path). A row may
// continue on the next page. The levels are scanned page by page and each
// page's elements copied into the batch's slab in one block; the slab is
// sized from the previous batch, so it rarely grows. kept, when not nil, is
// the slab to decode over (and where this batch's is left).
func decodeList[E int32 | int64](c *columnCursor, base unsafe.Pointer, size uintptr, n int, values func(*columnCursor) (plain, dict []E), empty []E, kept *[]E) error {
	c.ends = c.ends[:0]
	var slab []E
	if kept != nil && *kept != nil {
		slab = (*kept)[:0]
	} else {
		slab = make([]E, 0, c.slabHint)
	}
	started := 0 // rows of the batch begun
	for {
		if c.lpos >= len(c.reps) {
			if err := c.next(); err != nil {
				if errors.Is(err, errShortChunk) && started == n {
					break // the chunk's last row ends with the chunk
				}
				return err
			}
			continue
		}
		i, vals, done, err := c.listRows(&started, n, int32(len(slab)))
		if err != nil {
			return err
		}
		if c.vpos+vals > c.nvals {
			return errBadLevels
		}
		if plain, dict := values(c); c.indexes != nil {
			for _, x := range c.indexes[c.vpos : c.vpos+vals] {
				slab = append(slab, dict[x])
			}
		} else {
			slab = append(slab, plain[c.vpos:c.vpos+vals]...)
		}
		c.vpos += vals
		c.lpos = i
		if done {
			break
		}
	}
	c.ends = append(c.ends, int32(len(slab)))
	c.slabHint = len(slab) + len(slab)/8
	if kept != nil {
		*kept = slab
	}
	start := int32(0)
	for r, end := range c.ends {
		p := (*[]E)(unsafe.Add(base, uintptr(r)*size+c.field.offset))
		if end == start { // empty, not nil, as the row path reads it
			*p = empty
		} else {
			*p = slab[start:end:end]
		}
		start = end
	}
	return nil
}

// listRows scans the current page's levels from c.lpos for the rows of the
// batch (n rows, *started of them begun before) and their elements: a
// repetition level 0 starts a row, a definition level at the maximum is an
// element (a lower one, an empty or null list). For each row the page ends
// but the batch's first it appends to c.ends the row's end in the batch's
// slab, whose page elements begin at slab (the elements before them). It
// stops at the batch's end (done: the level at stop starts the next
// batch's row) or at the page's end, and reports the level position it
// stopped at and the elements from c.lpos to there. The levels are read
// eight at a time: the row starts and the elements of a word are bit masks,
// so a row costs a few instructions however long its list.
func (c *columnCursor) listRows(started *int, n int, slab int32) (stop, vals int, done bool, err error) {
	const ones, low7 = 0x0101010101010101, 0x7f7f7f7f7f7f7f7f
	reps, defs := c.reps, c.defs[:len(c.reps)]
	i := c.lpos
	if *started == 0 && reps[i] != 0 {
		return 0, 0, false, errListRowStart
	}
	wantDef := uint64(c.maxDef) * ones
	for ; i+8 <= len(reps); i += 8 {
		w := binary.LittleEndian.Uint64(reps[i:])
		if w&^ones != 0 {
			break // a level out of range: the loop below finds it, level by level
		}
		// 0x80 in each byte whose definition level is the maximum.
		x := binary.LittleEndian.Uint64(defs[i:]) ^ wantDef
		elems := ^((x&low7 + low7) | x | low7)
		for starts := ^w & ones; starts != 0; starts &= starts - 1 {
			b := bits.TrailingZeros64(starts) // 8 × the start's byte in the word
			before := vals + bits.OnesCount64(elems&(1<<b-1))
			if *started == n {
				return i + b/8, before, true, nil // the next batch's first row
			}
			if *started > 0 {
				c.ends = append(c.ends, slab+int32(before))
			}
			*started++
		}
		vals += bits.OnesCount64(elems)
	}
	for ; i < len(reps); i++ {
		switch reps[i] {
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
		if defs[i] == c.maxDef {
			vals++
		}
	}
	return len(reps), vals, false, nil
}

func (c *columnCursor) int32Values() (plain, dict []int32) { return c.i32, c.dictI32 }
func (c *columnCursor) int64Values() (plain, dict []int64) { return c.i64, c.dictI64 }

// release gives the current page back to parquet-go's buffer pool.
func (c *columnCursor) release() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
}
