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
// into place on close. Rows are buffered up to one row group, sorted by time,
// then written and flushed, so every row group is in time order and memory
// stays bounded by the row-group limits.
type fileWriter[T Record] struct {
	final    string // path once complete
	temp     string // path while being written
	ordinal  uint32 // writer-local file number, as named in the spool
	hour     int64  // partition: unix hour of its records
	opened   time.Time
	firstSeg int // first spool segment holding records of this file
	lastUse  int64

	f        *os.File
	pw       *parquet.GenericWriter[T]
	buf      []T
	bufBytes int64
	rows     int64
	groups   int64
	flushed  int64   // estimated uncompressed bytes of the row groups written
	ratio    float64 // compressed/uncompressed, to estimate the buffered rows' share of the file

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
	meta          map[string]string // complete key-value metadata
}

func newFileWriter[T Record](final, temp string, ordinal uint32, hour int64, now time.Time, cfg fileConfig, ratio float64) (*fileWriter[T], error) {
	if err := os.MkdirAll(filepath.Dir(temp), 0o755); err != nil {
		return nil, fmt.Errorf("create partition: %w", err)
	}
	f, err := os.OpenFile(temp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create file: %w", err)
	}
	opts := []parquet.WriterOption{
		parquet.Compression(cfg.codec),
		parquet.DataPageVersion(1),
		parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.Plain),
		parquet.MaxRowsPerRowGroup(int64(cfg.rowGroupRows)),
		parquet.PageBufferSize(1 << 20),
		parquet.CreatedBy("reel", Version, ""),
		parquet.KeyValueMetadata(metaCreatedKey, now.UTC().Format(time.RFC3339Nano)),
	}
	// Min/max of bodies mean nothing and cost a comparison of every body.
	for _, blob := range blobColumns[T]() {
		opts = append(opts, parquet.SkipPageBounds(blob), parquet.SkipPageStatistics(blob))
	}
	for k, v := range cfg.meta {
		opts = append(opts, parquet.KeyValueMetadata(k, v))
	}
	return &fileWriter[T]{
		final: final, temp: temp, ordinal: ordinal, hour: hour, opened: now,
		f:             f,
		pw:            parquet.NewGenericWriter[T](f, opts...),
		rowGroupRows:  cfg.rowGroupRows,
		rowGroupBytes: cfg.rowGroupBytes,
		rotateSize:    cfg.rotateSize,
		ratio:         ratio,
	}, nil
}

// add buffers one record, flushing a row group when a bound is reached.
func (fw *fileWriter[T]) add(rec *T) error {
	fw.buf = append(fw.buf, *rec)
	fw.bufBytes += sizeEstimate(rec)
	fw.rows++
	if len(fw.buf) >= fw.rowGroupRows || fw.bufBytes >= fw.rowGroupBytes {
		return fw.flushRowGroup()
	}
	return nil
}

// full reports whether the file has reached its rotation size, counting
// buffered rows at the compression ratio seen so far (1 before the writer
// has written anything, so early files err on the small side).
func (fw *fileWriter[T]) full() bool {
	return fw.pw.Size()+int64(float64(fw.bufBytes)*fw.ratio) >= fw.rotateSize
}

// flushRowGroup sorts the buffered rows by time and writes them as one row
// group.
func (fw *fileWriter[T]) flushRowGroup() error {
	if len(fw.buf) == 0 {
		return nil
	}
	// Records mostly arrive in time order: check before sorting, which
	// would move every (large) row struct through comparisons and merges.
	byTime := func(a, b T) int { return cmp.Compare(timeKey(&a), timeKey(&b)) }
	if !slices.IsSortedFunc(fw.buf, byTime) {
		slices.SortStableFunc(fw.buf, byTime)
	}
	if _, err := fw.pw.Write(fw.buf); err != nil {
		return fmt.Errorf("write rows: %w", err)
	}
	if err := fw.pw.Flush(); err != nil {
		return fmt.Errorf("flush row group: %w", err)
	}
	clear(fw.buf) // drop references to bodies
	fw.buf = fw.buf[:0]
	fw.flushed += fw.bufBytes
	fw.bufBytes = 0
	fw.ratio = min(1, float64(fw.pw.Size())/float64(fw.flushed))
	fw.groups++
	return nil
}

// close finishes the file, syncs it and renames it into place. It returns the
// final size in bytes.
func (fw *fileWriter[T]) close() (int64, error) {
	err := fw.flushRowGroup()
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
