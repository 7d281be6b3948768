package formats

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// fileWriter writes one Parquet file under a temporary name and renames it
// into place on close. Every row group is in time order (the reader merges
// row groups as sorted runs) and memory stays bounded by the row-group
// limits.
//
// Rows are shredded into the column writers (shred.go) while the row group
// fills, not all at once when it closes: buf holds the newest arrivals, and
// once it holds shredBatch+holdBack rows (or a quarter of the byte bound)
// its shredBatch oldest go to the column writers, which compress each page
// as it fills. Closing a row group then only shreds what buf holds, encodes
// each column's last page and writes the pages out: the work (and the
// allocation) of a row group is spread over its rows instead of landing in
// one burst, which a recording sidecar's forwarding goroutines felt as GC
// assists and CPU starvation. A row older than one already shredded into
// the row group (an exchange that took longer than holdBack later ones)
// waits in late and opens the next row group. Rows that arrive in time
// order are shredded in the same batches as before, so the file's bytes do
// not change.
type fileWriter[T Record] struct {
	final    string // path once complete
	temp     string // path while being written
	ordinal  uint32 // writer-local file number, as named in the spool
	hour     int64  // partition: unix hour of its records
	opened   time.Time
	firstSeg int // first spool segment holding records of this file
	lastUse  int64

	f        diskFile
	pw       *parquet.GenericWriter[T] // file layout and pages; rows go in through shred, never pw.Write
	shred    *shredder
	buf      rowBuffer[T] // rows of the current row group not yet shredded
	late     rowBuffer[T] // rows older than mark: they open the next row group
	spare    rowBuffer[T] // scratch for compacting buf
	keys     []int64      // scratch: buf's time keys
	order    []int32      // scratch: buf's indices in time order
	shredded int          // rows of the current row group in the column writers
	mark     int64        // time key of the newest row shredded into the current row group
	// pwSize is pw.Size() as of the last shred or flush, the only calls
	// that change it; full reads it for every record, and pw.Size walks
	// every column.
	pwSize int64

	groupBytes int64 // estimated uncompressed bytes of the current row group (shredded and in buf)
	bufBytes   int64 // of them, in buf
	lateBytes  int64 // estimated bytes in late
	rows       int64
	groups     int64
	flushed    int64   // estimated uncompressed bytes of the row groups written
	ratio      float64 // compressed/uncompressed, to estimate the buffered rows' share of the file

	rowGroupRows  int
	rowGroupBytes int64
	rotateSize    int64
}

// fileConfig is what every file of one writer shares.
type fileConfig struct {
	codec         compress.Codec // page compression, shared by every file (its encoders are pooled)
	rowGroupRows  int
	rowGroupBytes int64
	rotateSize    int64
	pageBytes     int               // page buffer size; 0: DefaultPageBytes
	meta          map[string]string // complete key-value metadata
	disk          disk              // where files are created; nil: the operating system's
}

func newFileWriter[T Record](final, temp string, ordinal uint32, hour int64, now time.Time, cfg fileConfig, ratio float64) (*fileWriter[T], error) {
	if err := os.MkdirAll(filepath.Dir(temp), 0o755); err != nil {
		return nil, fmt.Errorf("create partition: %w", err)
	}
	d := cfg.disk
	if d == nil {
		d = osDisk{}
	}
	f, err := d.create(temp)
	if err != nil {
		return nil, fmt.Errorf("create file: %w", err)
	}
	pw := parquet.NewGenericWriter[T](f, parquetOptions[T](cfg, now)...)
	return &fileWriter[T]{
		final: final, temp: temp, ordinal: ordinal, hour: hour, opened: now,
		f:             f,
		pw:            pw,
		pwSize:        pw.Size(),
		shred:         newShredder(pw.ColumnWriters()),
		rowGroupRows:  cfg.rowGroupRows,
		rowGroupBytes: cfg.rowGroupBytes,
		rotateSize:    cfg.rotateSize,
		ratio:         ratio,
	}, nil
}

// parquetOptions are the writer options of every file holding T.
func parquetOptions[T Record](cfg fileConfig, now time.Time) []parquet.WriterOption {
	pageBytes := cfg.pageBytes
	if pageBytes <= 0 {
		pageBytes = DefaultPageBytes
	}
	opts := []parquet.WriterOption{
		parquet.Compression(cfg.codec),
		parquet.DataPageVersion(1),
		parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.DeltaLengthByteArray),
		parquet.MaxRowsPerRowGroup(int64(cfg.rowGroupRows)),
		parquet.PageBufferSize(pageBytes),
		parquet.CreatedBy("reel", Version, ""),
		parquet.KeyValueMetadata(metaCreatedKey, now.UTC().Format(time.RFC3339Nano)),
	}
	// Min/max of bodies and headers mean nothing and cost comparisons of
	// every value.
	for _, path := range boundlessColumns[T]() {
		opts = append(opts, parquet.SkipPageBounds(path...), parquet.SkipPageStatistics(path...))
	}
	for k, v := range cfg.meta {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	return opts
}

// holdBack is how many of the newest rows buf keeps back from shredding, so
// that a row arriving a little out of time order still finds its place in
// the current row group.
const holdBack = 192

// add buffers one record, shredding the oldest buffered rows or flushing a
// row group when a bound is reached.
func (fw *fileWriter[T]) add(rec *T) error {
	size := sizeEstimate(rec)
	fw.rows++
	if fw.shredded > 0 && timeKey(rec) < fw.mark {
		fw.late.add(rec)
		fw.lateBytes += size
	} else {
		fw.buf.add(rec)
		fw.bufBytes += size
		fw.groupBytes += size
	}
	if fw.shredded+fw.buf.n+fw.late.n >= fw.rowGroupRows || fw.groupBytes+fw.lateBytes >= fw.rowGroupBytes {
		return fw.flushRowGroup()
	}
	if fw.buf.n >= shredBatch+holdBack || fw.buf.n >= shredBatch && fw.bufBytes >= fw.rowGroupBytes/4 {
		return fw.shredOldest(shredBatch)
	}
	return nil
}

// full reports whether the file has reached its rotation size, counting
// rows not yet in the column writers at the compression ratio seen so far
// (1 before the writer has written anything, so early files err on the small
// side).
func (fw *fileWriter[T]) full() bool {
	return fw.pwSize+int64(float64(fw.bufBytes+fw.lateBytes)*fw.ratio) >= fw.rotateSize
}

// shredOldest shreds buf's n oldest rows into the current row group and
// keeps the others, in time order.
func (fw *fileWriter[T]) shredOldest(n int) error {
	order := fw.timeOrder()
	if err := writeFirst(fw.shred, &fw.buf, order, n); err != nil {
		return fmt.Errorf("write rows: %w", err)
	}
	at := func(i int) int {
		if order == nil {
			return i
		}
		return int(order[i])
	}
	fw.mark = fw.keys[at(n-1)]
	fw.shredded += n
	fw.pwSize = fw.pw.Size()
	for i := range n {
		fw.bufBytes -= sizeEstimate(fw.buf.at(at(i)))
	}
	for i := n; i < fw.buf.n; i++ {
		fw.spare.add(fw.buf.at(at(i)))
	}
	fw.buf.reset()
	fw.buf, fw.spare = fw.spare, fw.buf
	return nil
}

// flushRowGroup shreds the rest of the current row group, in time order, and
// writes it out. The late rows open the next one.
func (fw *fileWriter[T]) flushRowGroup() error {
	if fw.buf.n > 0 {
		if err := writeRows(fw.shred, &fw.buf, fw.timeOrder()); err != nil {
			return fmt.Errorf("write rows: %w", err)
		}
		fw.shredded += fw.buf.n
		fw.buf.reset()
	}
	if fw.shredded > 0 {
		if err := fw.pw.Flush(); err != nil {
			return fmt.Errorf("flush row group: %w", err)
		}
		fw.flushed += fw.groupBytes
		fw.ratio = min(1, float64(fw.pw.Size())/float64(fw.flushed))
		fw.groups++
	}
	fw.pwSize = fw.pw.Size()
	fw.buf, fw.late = fw.late, fw.buf
	fw.shredded, fw.mark = 0, 0
	fw.bufBytes, fw.groupBytes, fw.lateBytes = fw.lateBytes, fw.lateBytes, 0
	return nil
}

// timeOrder returns the buffered rows' indices sorted by time (stable), or
// nil when they already are in order, as they mostly arrive. Sorting indices
// leaves the large row structs where they are.
func (fw *fileWriter[T]) timeOrder() []int32 {
	keys := fw.keys[:0]
	sorted := true
	for i := range fw.buf.n {
		k := timeKey(fw.buf.at(i))
		sorted = sorted && (i == 0 || keys[i-1] <= k)
		keys = append(keys, k)
	}
	fw.keys = keys
	if sorted {
		return nil
	}
	order := fw.order[:0]
	for i := range keys {
		order = append(order, int32(i))
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(keys[a], keys[b]) })
	fw.order = order
	return order
}

// rowBuffer holds a row group's records in chunks of rowChunk, so that growing
// it never copies the (large) row structs.
type rowBuffer[T Record] struct {
	chunks [][]T
	n      int
}

const rowChunk = 256

func (r *rowBuffer[T]) add(rec *T) {
	if r.n == len(r.chunks)*rowChunk {
		r.chunks = append(r.chunks, make([]T, rowChunk))
	}
	r.chunks[r.n/rowChunk][r.n%rowChunk] = *rec
	r.n++
}

func (r *rowBuffer[T]) at(i int) *T { return &r.chunks[i/rowChunk][i%rowChunk] }

// reset empties r, dropping its references to bodies but keeping its chunks.
func (r *rowBuffer[T]) reset() {
	for i := 0; i*rowChunk < r.n; i++ {
		clear(r.chunks[i])
	}
	r.n = 0
}

// close finishes the file, syncs it and renames it into place. It returns the
// final size in bytes.
func (fw *fileWriter[T]) close() (int64, error) {
	err := fw.flushRowGroup()
	if err == nil && fw.buf.n > 0 { // the late rows of the last row group
		err = fw.flushRowGroup()
	}
	if err == nil {
		err = fw.pw.Close()
	}
	if err == nil {
		err = fw.f.Sync()
	}
	var size int64
	if err == nil {
		var st os.FileInfo
		if st, err = fw.f.Stat(); err == nil {
			size = st.Size()
		}
	}
	if cerr := fw.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(fw.temp)
		return 0, fmt.Errorf("close %s: %w", fw.final, err)
	}
	if err := os.Rename(fw.temp, fw.final); err != nil {
		return 0, fmt.Errorf("rename %s: %w", fw.final, err)
	}
	syncDir(filepath.Dir(fw.final))
	return size, nil
}

// abort drops the file; its records are still in the spool.
func (fw *fileWriter[T]) abort() {
	fw.f.Close()
	os.Remove(fw.temp)
}

// syncDir makes a rename durable; failures only weaken durability.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// partitionDir is the Hive partition of an hour: dt=YYYY-MM-DD/hour=HH.
func partitionDir(hour int64) string {
	t := time.Unix(hour*3600, 0).UTC()
	return fmt.Sprintf("dt=%s/hour=%02d", t.Format("2006-01-02"), t.Hour())
}

// isHidden reports names readers skip: temporary files and the spool.
func isHidden(name string) bool {
	return strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".")
}
