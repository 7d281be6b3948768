package formats

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/reelkit/reel/formats/store"
)

// Reader streams the records of a dataset in time order (Exchange.TsUnixNs,
// Result.OrigTs) across all its files.
//
// How order is guaranteed: the Writer sorts every row group by time before
// writing it, so each row group is a sorted run; a file's row groups (and
// different files) may overlap in time. The reader collects every row group's
// time bounds from the file footers, sorts the row groups by their minimum,
// and k-way merges them, opening a row group only when the merge reaches its
// minimum. Memory is one batch (ReaderOptions.BatchRows) per row group that
// overlaps the current time — flat in the size of the dataset. Row groups
// outside [From, To) are never read. A row group found out of order (not
// written by reel's Writer) fails the read with an error naming the file.
// With ReaderOptions.Columns only those columns' pages are read and decoded.
// Where the types of the columns read allow (every column of a result; an
// exchange's without its maps and bodies), they are decoded straight from
// the pages into the records' fields (columnar.go).
type Reader[T Record] struct {
	opts     ReaderOptions
	from, to int64
	schema   *parquet.Schema // projection of ReaderOptions.Columns; nil reads every column
	fields   []columnField   // the projection's fields, for the columnar path; nil: rows only
	held     *run[T]         // the run whose current row Scan returned, advanced on the next call
	pending  []*run[T]       // row groups not opened yet, by minimum time
	heap     runHeap[T]
	files    map[string]*openFile
	left     map[string]int // per file, its runs not released yet (started or pending)
	last     int64
	err      error
	maxOpen  int // most row groups open at once (tests check memory stays flat)
	started  int // row groups opened
	opened   int // files opened (footers parsed)
	maxFiles int // most files open at once

	spare [][]T // batch buffers of released runs, for the next runs
}

// run is one row group being merged.
type run[T Record] struct {
	path  string
	group int
	min   int64
	order int // position among all runs, breaks ties deterministically

	file  *openFile
	gr    *parquet.GenericReader[T] // the row path
	col   *columnarGroup[T]         // the columnar path
	ahead *readAhead[T]             // with ReadAhead: decodes the batches
	buf   []T
	slot  int // which of the run's batch buffers buf is (with ReadAhead)
	pos   int
	n     int
	eof   bool
	key   int64 // time of buf[pos]
}

// openFile is a file shared by its runs: opened (its footer parsed) when
// the merge reaches its first row group, closed after its last, so a file
// of many row groups is opened once, not once per row group.
type openFile struct {
	f    store.File
	pf   *parquet.File
	refs int
}

// OpenReader opens paths (files, directory trees, globs) for reading in time
// order. Every file's footer is checked first: a truncated, foreign or
// newer-schema file fails OpenReader with an error naming it, or with SkipBad
// is reported to Warn and skipped.
func OpenReader[T Record](ctx context.Context, paths []string, opts ReaderOptions) (*Reader[T], error) {
	if opts.BatchRows <= 0 {
		opts.BatchRows = 256
		if opts.ReadAhead {
			opts.BatchRows = ReadAheadBatchRows
		}
	}
	r := &Reader[T]{opts: opts, from: math.MinInt64, to: math.MaxInt64, last: math.MinInt64,
		files: map[string]*openFile{}, left: map[string]int{}}
	if !opts.From.IsZero() {
		r.from = opts.From.UnixNano()
	}
	if !opts.To.IsZero() {
		r.to = opts.To.UnixNano()
	}
	if opts.Columns != nil {
		s, err := projectSchema[T](opts.Columns)
		if err != nil {
			return nil, fmt.Errorf("open reader: %w", err)
		}
		r.schema = s
	}
	if !opts.RowPath {
		s := r.schema
		if s == nil {
			s = parquet.SchemaOf(new(T))
		}
		names := make([]string, 0, len(s.Fields()))
		for _, f := range s.Fields() {
			names = append(names, f.Name())
		}
		if fields, ok := columnarFields[T](names); ok { // every column of results; exchanges without maps and bodies
			r.fields = fields
		}
	}
	list, err := ListFiles(paths)
	if err != nil {
		return nil, fmt.Errorf("open reader: %w", err)
	}
	want := schemaName[T]()
	for _, path := range list {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fi, err := statForRead[T](path, want)
		if err != nil {
			if opts.SkipBad && errors.Is(err, ErrBadFile) {
				if opts.Warn != nil {
					opts.Warn(fmt.Errorf("skipped %w", err))
				}
				continue
			}
			return nil, fmt.Errorf("open reader: %w", err)
		}
		for i, g := range fi.RowGroups {
			if g.Rows == 0 || g.Max < r.from || g.Min >= r.to {
				continue
			}
			r.pending = append(r.pending, &run[T]{path: path, group: i, min: g.Min})
			r.left[path]++
		}
	}
	sort.SliceStable(r.pending, func(i, j int) bool { return r.pending[i].min < r.pending[j].min })
	for i, p := range r.pending {
		p.order = i
	}
	return r, nil
}

func statForRead[T Record](path, want string) (*FileInfo, error) {
	f, pf, err := openParquet(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := describe(path, pf)
	if err != nil {
		return nil, err
	}
	if err := checkSchema(fi, want); err != nil {
		return nil, err
	}
	if err := checkColumns[T](path, pf); err != nil {
		return nil, err
	}
	return fi, nil
}

// Next returns the next record in time order, or io.EOF after the last. The
// record is the caller's.
func (r *Reader[T]) Next() (*T, error) {
	p, err := r.Scan()
	if err != nil {
		return nil, err
	}
	rec := *p
	return &rec, nil
}

// Scan is Next without the copy: the record is the reader's, valid until the
// next call to Scan or Next, and must not be kept (its slices and strings
// may be; they are not reused). For a caller that summarises each record
// and drops it, it allocates nothing per record.
func (r *Reader[T]) Scan() (*T, error) {
	if r.err != nil {
		return nil, r.err
	}
	if ru := r.held; ru != nil {
		r.held = nil
		if err := r.advance(ru); err != nil && !r.skipDamaged(ru.path, err) {
			r.err = err
			return nil, err
		}
	}
	for {
		for len(r.pending) > 0 && (len(r.heap) == 0 || r.pending[0].min <= r.heap[0].key) {
			ru := r.pending[0]
			r.pending[0] = nil
			r.pending = r.pending[1:]
			if err := r.start(ru); err != nil {
				if r.skipDamaged(ru.path, err) {
					continue
				}
				r.err = err
				return nil, err
			}
		}
		if len(r.heap) == 0 {
			return nil, io.EOF
		}
		ru := r.heap[0]
		key := ru.key
		if key < r.from || key >= r.to {
			if err := r.advance(ru); err != nil && !r.skipDamaged(ru.path, err) {
				r.err = err
				return nil, err
			}
			continue
		}
		if key < r.last {
			r.err = fmt.Errorf("%s: row group %d: %w: records out of time order", ru.path, ru.group, ErrBadFile)
			return nil, r.err
		}
		r.last = key
		r.held = ru
		return &ru.buf[ru.pos], nil
	}
}

// skipDamaged, with SkipBad, drops the rest of a file whose pages turned
// out damaged (the footer was fine): its remaining runs leave the merge and
// Warn says how many of its rows were read before the damage. It reports
// whether it skipped; without SkipBad, or for a cancelled read, the error
// stands.
func (r *Reader[T]) skipDamaged(path string, err error) bool {
	if !r.opts.SkipBad || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	kept := r.pending[:0]
	for _, ru := range r.pending {
		if ru.path != path {
			kept = append(kept, ru)
		} else {
			r.left[path]--
		}
	}
	clear(r.pending[len(kept):])
	r.pending = kept
	for i := 0; i < len(r.heap); {
		if r.heap[i].path == path {
			r.release(heap.Remove(&r.heap, i).(*run[T]))
			i = 0
			continue
		}
		i++
	}
	r.closeUnused(path)
	if r.opts.Warn != nil {
		r.opts.Warn(fmt.Errorf("skipped the rest of %s: damaged pages (%w); rows read from it before the damage were kept", path, err))
	}
	return true
}

// start opens a row group and pushes it on the merge heap if it has rows.
func (r *Reader[T]) start(ru *run[T]) (err error) {
	of := r.files[ru.path]
	if of == nil {
		f, pf, err := openParquet(ru.path)
		if err != nil {
			return err
		}
		of = &openFile{f: f, pf: pf}
		r.files[ru.path] = of
		r.opened++
		r.maxFiles = max(r.maxFiles, len(r.files))
	}
	of.refs++
	ru.file = of
	groups := of.pf.RowGroups()
	if ru.group >= len(groups) {
		r.release(ru)
		return fmt.Errorf("%s: %w: row group %d vanished", ru.path, ErrBadFile, ru.group)
	}
	if err := ru.open(of.pf, groups[ru.group], r.schema, r.fields, r.opts.ReuseSlices); err != nil {
		r.release(ru)
		return err
	}
	if r.opts.ReadAhead {
		ru.startReadAhead([batchSlots][]T{r.batchBuffer(), r.batchBuffer()})
	} else {
		ru.buf = r.batchBuffer()
	}
	if err := r.fill(ru); err != nil {
		r.release(ru)
		return err
	}
	if ru.n == 0 {
		r.release(ru)
		return nil
	}
	ru.key = timeKey(&ru.buf[0])
	heap.Push(&r.heap, ru)
	r.started++
	r.maxOpen = max(r.maxOpen, len(r.heap))
	return nil
}

// open starts reading a row group, only schema's columns when it is not nil;
// through the columnar path when fields is not nil and the file stores them
// in a way it decodes.
func (ru *run[T]) open(pf *parquet.File, rg parquet.RowGroup, schema *parquet.Schema, fields []columnField, reuse bool) (err error) {
	defer func() {
		if p := recover(); p != nil { // parquet-go on a damaged file
			err = fmt.Errorf("%s: row group %d: %w: %v", ru.path, ru.group, ErrBadFile, p)
		}
	}()
	if fields != nil {
		if g, ok := newColumnarGroup[T](pf, rg, fields, reuse); ok {
			ru.col = g
			return nil
		}
	}
	if schema != nil {
		ru.gr = parquet.NewGenericRowGroupReader[T](rg, schema)
	} else {
		ru.gr = parquet.NewGenericRowGroupReader[T](rg)
	}
	return nil
}

// projectSchema is T's schema cut down to the named top-level columns and
// the time column, in schema order. The reader decodes only its leaf
// columns: parquet-go converts each row group to it, and the chunks of the
// other columns are never opened.
func projectSchema[T Record](columns []string) (*parquet.Schema, error) {
	full := parquet.SchemaOf(new(T))
	want := map[string]bool{timeColumn[T](): true}
	for _, c := range columns {
		want[c] = true
	}
	var fields []parquet.Field
	for _, f := range full.Fields() {
		if want[f.Name()] {
			fields = append(fields, f)
			delete(want, f.Name())
		}
	}
	if len(want) > 0 {
		unknown := make([]string, 0, len(want))
		for c := range want {
			unknown = append(unknown, c)
		}
		sort.Strings(unknown)
		return nil, fmt.Errorf("project columns: %s has no column %s", schemaName[T](), strings.Join(unknown, ", "))
	}
	return parquet.NewSchema(full.Name(), projection{Node: full, fields: fields}), nil
}

// projection is a group node with a subset of a struct schema's fields. It
// keeps the struct fields themselves (not a parquet.Group, whose fields find
// their Go field by name on every row), so rows are reconstructed by field
// index as with the full schema.
type projection struct {
	parquet.Node
	fields []parquet.Field
}

func (p projection) Fields() []parquet.Field { return p.fields }

// batchBuffer is a batch's worth of records, a released run's if there is one.
func (r *Reader[T]) batchBuffer() []T {
	if n := len(r.spare); n > 0 {
		buf := r.spare[n-1]
		r.spare[n-1] = nil
		r.spare = r.spare[:n-1]
		return buf
	}
	return make([]T, r.opts.BatchRows)
}

// fill reads the next batch of a run: decodes it, or with ReadAhead takes
// the one decoded meanwhile and gives the buffer it is done with back.
func (r *Reader[T]) fill(ru *run[T]) error {
	ru.pos, ru.n = 0, 0
	if ru.eof {
		return nil
	}
	var n int
	var err error
	if ra := ru.ahead; ra != nil {
		if ru.buf != nil {
			ra.free <- ru.slot
		}
		b := <-ra.full
		ru.slot, ru.buf, n, err = b.slot, ra.bufs[b.slot], b.n, b.err
		if err != nil {
			ru.eof = true // the goroutine has returned: nothing more comes
		}
	} else {
		n, err = ru.decode(ru.buf, 0)
	}
	ru.n = n
	if err == io.EOF {
		ru.eof = true
		err = nil
	}
	if err != nil {
		return fmt.Errorf("%s: row group %d: %w: %v", ru.path, ru.group, ErrBadFile, err)
	}
	if n == 0 && !ru.eof {
		return fmt.Errorf("%s: row group %d: %w: read returned no rows", ru.path, ru.group, ErrBadFile)
	}
	return nil
}

// decode reads a run's next rows into buf, batch buffer slot of the run,
// and reports how many (io.EOF after the last; a panic of parquet-go on
// damaged pages as an error).
func (ru *run[T]) decode(buf []T, slot int) (n int, err error) {
	defer func() {
		if p := recover(); p != nil {
			n, err = 0, errors.New(fmt.Sprint(p))
		}
	}()
	if ru.col != nil {
		return ru.col.read(buf, slot) // overwrites every projected field; lists get a fresh slab unless ReuseSlices
	}
	clear(buf) // fresh memory for every record handed out
	return ru.gr.Read(buf)
}

// batchSlots is how many batch buffers a run decodes into: the one Scan
// hands records out of and, with ReadAhead, the one decoded meanwhile.
const batchSlots = 2

// readAhead decodes a run's batches on a goroutine of its own, one batch
// ahead of the reader: the reader hands out records from one slot's buffer
// while the goroutine decodes into the other's, and they swap through free
// and full. The goroutine alone touches the run's decoder (col, gr) until
// it has returned.
type readAhead[T Record] struct {
	bufs [batchSlots][]T
	free chan int          // slots the reader is done with, to decode into
	full chan decodedBatch // slots decoded, in row order
	stop chan struct{}     // closed by release: the goroutine returns
	done chan struct{}     // closed once it has returned
}

// decodedBatch is what the read-ahead goroutine decoded into a slot.
type decodedBatch struct {
	slot, n int
	err     error // io.EOF after the last rows; the goroutine returns with any error
}

// startReadAhead starts decoding the run's batches into bufs on a
// goroutine of its own.
func (ru *run[T]) startReadAhead(bufs [batchSlots][]T) {
	ra := &readAhead[T]{bufs: bufs, free: make(chan int, batchSlots), full: make(chan decodedBatch, batchSlots),
		stop: make(chan struct{}), done: make(chan struct{})}
	for s := range batchSlots {
		ra.free <- s
	}
	ru.ahead = ra
	go ra.loop(ru.decode)
}

func (ra *readAhead[T]) loop(decode func(buf []T, slot int) (int, error)) {
	defer close(ra.done)
	for {
		var slot int
		select {
		case slot = <-ra.free:
		case <-ra.stop:
			return
		}
		n, err := decode(ra.bufs[slot], slot)
		ra.full <- decodedBatch{slot: slot, n: n, err: err} // room for every slot: never blocks
		if err != nil {
			return
		}
	}
}

// stopReadAhead stops the run's goroutine, waits for it and keeps its
// buffers for the next runs.
func (r *Reader[T]) stopReadAhead(ru *run[T]) {
	ra := ru.ahead
	close(ra.stop)
	<-ra.done
	ru.ahead = nil
	r.spare = append(r.spare, ra.bufs[:]...)
}

// advance moves a run to its next row, dropping it when exhausted.
func (r *Reader[T]) advance(ru *run[T]) error {
	ru.pos++
	if ru.pos >= ru.n {
		if err := r.fill(ru); err != nil {
			return err
		}
		if ru.n == 0 {
			heap.Pop(&r.heap)
			r.release(ru)
			return nil
		}
	}
	prev := ru.key
	ru.key = timeKey(&ru.buf[ru.pos])
	if ru.key < prev {
		return fmt.Errorf("%s: row group %d: %w: rows not sorted by %s", ru.path, ru.group, ErrBadFile, timeColumn[T]())
	}
	if len(r.heap) > 1 { // one run alone (files read one after another) stays on top
		heap.Fix(&r.heap, 0)
	}
	return nil
}

// release closes a run and, with its last run, its file.
func (r *Reader[T]) release(ru *run[T]) {
	if ru.ahead != nil {
		r.stopReadAhead(ru)
	} else if ru.buf != nil {
		r.spare = append(r.spare, ru.buf)
	}
	if ru.gr != nil {
		ru.gr.Close()
		ru.gr = nil
	}
	if ru.col != nil {
		ru.col.close()
		ru.col = nil
	}
	ru.buf = nil
	if of := ru.file; of != nil {
		ru.file = nil
		of.refs--
	}
	r.left[ru.path]--
	r.closeUnused(ru.path)
}

// closeUnused closes path's file once no run of it is open and none is
// left to start.
func (r *Reader[T]) closeUnused(path string) {
	if of := r.files[path]; of != nil && of.refs == 0 && r.left[path] <= 0 {
		of.f.Close()
		delete(r.files, path)
	}
}

// Close releases every open file.
func (r *Reader[T]) Close() error {
	r.held = nil
	for len(r.heap) > 0 {
		r.release(heap.Pop(&r.heap).(*run[T]))
	}
	r.pending = nil
	for path, of := range r.files { // files whose remaining runs never started
		of.f.Close()
		delete(r.files, path)
	}
	if r.err == nil {
		r.err = errors.New("formats: reader closed")
	}
	return nil
}

// runHeap orders runs by current time, then by run order.
type runHeap[T Record] []*run[T]

func (h runHeap[T]) Len() int { return len(h) }
func (h runHeap[T]) Less(i, j int) bool {
	if h[i].key != h[j].key {
		return h[i].key < h[j].key
	}
	return h[i].order < h[j].order
}
func (h runHeap[T]) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap[T]) Push(x any)   { *h = append(*h, x.(*run[T])) }
func (h *runHeap[T]) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}
