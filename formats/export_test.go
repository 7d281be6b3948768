package formats

import (
	"io"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
)

// WithPageTap returns opts with a hook that receives a copy of every
// uncompressed page the writer compresses, so benchmarks can time the
// compressor alone on exactly the writer's bytes.
func WithPageTap(opts WriterOptions, tap func(page []byte)) WriterOptions {
	opts.pageTap = tap
	return opts
}

// WriteUncompressed writes recs to io.Discard as one Parquet file with the
// writer's options but no compression, in row groups of rowGroupRows, either
// through the shredder or through parquet-go's reflective
// GenericWriter.Write (the path the shredder replaced), so that benchmarks
// can compare the two on the same rows, without zstd.
func WriteUncompressed(recs []Exchange, rowGroupRows int, reflective bool) error {
	cfg := fileConfig{codec: &uncompressed.Codec{}, rowGroupRows: rowGroupRows, meta: map[string]string{}}
	pw := parquet.NewGenericWriter[Exchange](io.Discard, parquetOptions[Exchange](cfg, time.Now())...)
	s := newShredder(pw.ColumnWriters())
	var buf rowBuffer[Exchange]
	for start := 0; start < len(recs); start += rowGroupRows {
		group := recs[start:min(start+rowGroupRows, len(recs))]
		if reflective {
			if _, err := pw.Write(group); err != nil {
				return err
			}
		} else {
			for i := range group {
				buf.add(&group[i])
			}
			if err := writeRows(s, &buf, nil); err != nil {
				return err
			}
			buf.reset()
		}
		if err := pw.Flush(); err != nil {
			return err
		}
	}
	return pw.Close()
}

// DiskQuota is a file system that holds a limited number of bytes, for
// disk-full tests: see quotaDisk.
type DiskQuota struct{ q *quotaDisk }

// WithDiskQuota returns opts writing through a disk that holds limit bytes
// under opts.Dir.
func WithDiskQuota(opts WriterOptions, limit int64) (WriterOptions, *DiskQuota) {
	q := newQuotaDisk(opts.Dir, limit)
	opts.disk = q
	return opts, &DiskQuota{q}
}

// SetLimit changes the disk's size: raise it to give space back.
func (d *DiskQuota) SetLimit(limit int64) { d.q.limit.Store(limit) }
