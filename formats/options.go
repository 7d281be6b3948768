package formats

import (
	"fmt"
	"time"

	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// Record is the set of row types a dataset can hold.
type Record interface {
	Exchange | Result | Metric
}

// Keys of the file key-value metadata every reel file carries.
const (
	MetaSchema      = "reel.schema"       // ExchangeSchema or ResultSchema
	MetaRecorder    = "reel.recorder"     // WriterOptions.Recorder
	MetaSource      = "reel.source"       // WriterOptions.Source
	MetaRedaction   = "reel.redaction"    // WriterOptions.RedactionFingerprint
	MetaVersion     = "reel.version"      // Version of the reel that wrote the file
	MetaUserPrefix  = "reel.meta."        // prefix of every WriterOptions.Meta key
	MetaRecoveredBy = "reel.recovered_by" // session that rebuilt the file from a dead writer's spool
	metaSortedByKey = "reel.sorted_by"    // time column each row group is sorted by
	metaCreatedKey  = "reel.created_utc"  // when the file was opened, RFC 3339
)

// Defaults of WriterOptions, used where a field is zero.
const (
	DefaultRecorder      = "reel"
	DefaultRotateSize    = 128 << 20
	DefaultRotateAge     = 10 * time.Minute
	DefaultRowGroupRows  = 65536
	DefaultRowGroupBytes = 32 << 20
	DefaultSyncEvery     = time.Second
	DefaultMaxOpenHours  = 2
	DefaultUploadWait    = time.Minute
	// DefaultLevel: zstd's better level costs a writer some 20 µs of CPU
	// per chat exchange more than the fastest (2 % of a recording
	// sidecar's) for 4 % less disk on chat exchanges, 22 % on 16 KiB
	// bodies. DefaultPageBytes stays 1 MiB: parquet-go sizes every
	// column's page buffer by it, so 4 MiB pages (4 % less disk on chat)
	// held 170 MiB more heap with 16 KiB bodies (docs/performance.md,
	// "Storage").
	DefaultLevel     = zstd.SpeedBetterCompression
	DefaultPageBytes = 1 << 20
)

// WriterOptions configure a dataset Writer. The zero value of every field but
// Dir works; defaults are in the field comments.
type WriterOptions struct {
	// Dir is the dataset root, a local directory or a storage URL
	// (s3://bucket/prefix; package store); files go to
	// Dir/dt=YYYY-MM-DD/hour=HH/. With a URL, files are written in
	// SpoolDir and uploaded once closed (upload.go). Required.
	Dir string
	// SpoolDir is the local directory a writer to a storage URL works in
	// (spool, files being written, closed files waiting for their
	// upload); ignored for a local Dir, where the spool is Dir/_spool.
	// Default DefaultSpoolDir(Dir).
	SpoolDir string
	// UploadWait bounds how long Close keeps uploading closed files to a
	// storage URL; what is left stays in SpoolDir for the next writer
	// there. Default 1 minute.
	UploadWait time.Duration
	// Warn receives the failures the writer works around without refusing
	// records: failed upload attempts (each is retried), a file that could
	// not be closed (its records stay in the spool), a failed spool sync
	// (the frames wait in memory), a spool directory removed and recreated.
	// Default: ignore; Stats counts them.
	Warn func(error)
	// Recorder identifies the writer in file names and metadata
	// (letters, digits, '.', '_' and '-'; not starting with '_' or '.').
	// Default "reel".
	Recorder string
	// Source says where the records came from ("proxy", "pcap:file.pcap",
	// "replay:RUN"); stored in the file metadata. Default empty.
	Source string
	// RedactionFingerprint is the redaction policy fingerprint
	// (redact.Redactor.Fingerprint), or "raw". Default empty.
	RedactionFingerprint string
	// Meta is extra file metadata, stored under "reel.meta.<key>".
	Meta map[string]string

	// RotateSize closes a file once its estimated size passes this many
	// bytes. Default 128 MiB.
	RotateSize int64
	// RotateAge closes a file this long after it was opened, even if the
	// writer is idle. Default 10 minutes.
	RotateAge time.Duration
	// RowGroupRows bounds the rows of one row group. Default 65536.
	RowGroupRows int
	// RowGroupBytes bounds the (uncompressed, estimated) bytes of one row
	// group; it is also about the memory one open file holds. Default 32 MiB.
	RowGroupBytes int64
	// MaxOpenHours bounds the hour partitions open at once: a record for a
	// new hour closes the least recently written file beyond it. Default 2.
	MaxOpenHours int
	// Level is the zstd level. Default zstd.SpeedBetterCompression.
	Level zstd.Level
	// PageBytes is the page buffer size: larger pages give the compressor
	// more context (bodies repeat across records) for more memory per open
	// column (every column's buffer has this size). Default 1 MiB.
	PageBytes int

	// SyncEvery is how often the spool is flushed and fsynced; a SIGKILL
	// loses at most about this much. Default 1 s.
	SyncEvery time.Duration
	// NoSpool writes without the write-ahead spool: a crash loses every
	// record not yet in a closed file.
	NoSpool bool

	// Now is the clock for file ages and names. Default time.Now.
	Now func() time.Time

	// disk creates the files and spool segments (default the operating
	// system's); tests give it a disk that fills up.
	disk disk

	// pageTap, when set (by benchmarks only), receives a copy of every
	// uncompressed page before it is compressed.
	pageTap func(page []byte)
}

// Stats counts what a Writer did. Bytes are compressed bytes on disk.
type Stats struct {
	Records      int64 // records accepted by Write
	FilesClosed  int64 // files renamed into place
	RowGroups    int64 // row groups flushed
	BytesWritten int64 // bytes of closed files
	OpenFiles    int   // files being written now
	SpoolBytes   int64 // bytes in the live spool
	Syncs        int64 // spool fsyncs
	Recovered    int64 // records recovered from a predecessor's spool
	Lost         int64 // spool frames found damaged during recovery (torn tails)
	// Unsaved counts records Write accepted and then lost: their file
	// failed and their spool frames never reached the disk (it refused
	// them until Close), or the spool directory holding them was removed.
	Unsaved int64
	// SpoolRecreated counts the times the spool directory was found removed
	// and made again.
	SpoolRecreated int64

	// Upload figures, for a writer to a storage URL.
	Uploaded           int64 // closed files uploaded and released from local disk
	UploadedBytes      int64 // their bytes
	UploadErrors       int64 // failed upload attempts (each retried with backoff)
	UploadPending      int64 // closed files waiting in SpoolDir for their upload
	UploadPendingBytes int64 // their bytes
}

// ReaderOptions configure a Reader. The zero value reads everything and fails
// on the first bad file.
type ReaderOptions struct {
	// From and To select records with From <= time < To; a zero bound is open.
	From, To time.Time
	// SkipBad skips files whose footer or schema is bad (truncated, foreign,
	// newer schema) instead of failing OpenReader; each is reported to Warn.
	// Damage found later, inside pages, is still an error from Next: rows
	// already returned cannot be taken back.
	SkipBad bool
	// Warn receives skipped files' errors. Default: ignore.
	Warn func(error)
	// BatchRows is how many rows are read at a time from one row group.
	// Default 256 (ReadAheadBatchRows with ReadAhead).
	BatchRows int
	// Columns lists the top-level columns of the record's schema to decode
	// (names as in docs/schema.md, e.g. "method", "req_headers"); the
	// fields of every other column are left zero and their pages are never
	// read. The time column (ts_unix_ns, or orig_ts for results) is always
	// decoded. An unknown name fails OpenReader. Default (nil): all columns.
	Columns []string
	// RowPath reads Columns through parquet-go's row reconstruction even
	// where the columnar path (straight from the pages into the fields)
	// applies; both give the same records. For tests and comparisons.
	RowPath bool
	// ReuseSlices lets the reader decode later batches over the slices and
	// pointers (lists, optional numbers) of the records Scan returned, so
	// that they are valid only as long as the record itself: until the next
	// call to Scan (strings stay the caller's). For a caller that keeps
	// nothing of a record it saves an allocation per batch and list column.
	// Next copies the record but not what its slices point to: do not
	// combine the two. Default: every batch gets fresh slices. (The
	// columnar path; the row path always allocates.)
	ReuseSlices bool
	// ReadAhead decodes every open row group's next batch on a goroutine of
	// its own while the caller works on the current one, so that on more
	// than one core decoding and the caller's work overlap. Memory: two
	// batches per open row group instead of one. Default: batches are
	// decoded by Scan, when needed.
	ReadAhead bool
}

// ReadAheadBatchRows is the default ReaderOptions.BatchRows with
// ReadAhead: batches large enough that handing them between goroutines
// (a wake-up each) costs little beside decoding them.
const ReadAheadBatchRows = 1024

func (o WriterOptions) withDefaults() WriterOptions {
	if o.Recorder == "" {
		o.Recorder = DefaultRecorder
	}
	if o.RotateSize <= 0 {
		o.RotateSize = DefaultRotateSize
	}
	if o.RotateAge <= 0 {
		o.RotateAge = DefaultRotateAge
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = DefaultRowGroupRows
	}
	if o.RowGroupBytes <= 0 {
		o.RowGroupBytes = DefaultRowGroupBytes
	}
	if o.MaxOpenHours <= 0 {
		o.MaxOpenHours = DefaultMaxOpenHours
	}
	if o.Level == 0 {
		o.Level = DefaultLevel
	}
	if o.PageBytes <= 0 {
		o.PageBytes = DefaultPageBytes
	}
	if o.SyncEvery <= 0 {
		o.SyncEvery = DefaultSyncEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.disk == nil {
		o.disk = osDisk{}
	}
	if o.UploadWait <= 0 {
		o.UploadWait = DefaultUploadWait
	}
	return o
}

// pageCodec is the page compression of a writer's files: one codec for all
// of them, with the benchmark's tap when set.
func pageCodec(o WriterOptions) (compress.Codec, error) {
	c, err := newKeptEncoderCodec(o.Level)
	if err != nil || o.pageTap == nil {
		return c, err
	}
	return tapCodec{c, o.pageTap}, nil
}

// keptEncoderCodec is parquet-go's zstd codec with one encoder that lives as
// long as the writer. parquet-go keeps its encoders in a sync.Pool, which
// every GC cycle empties, so a writer that compresses a page now and then
// (every row group fills its pages over seconds) built a new encoder, with
// its 1 MiB history and match tables, for most pages: 15 % of all the bytes
// a recording proxy allocated. The encoder has parquet-go's options, so the
// pages are the same bytes (TestEagerShredMatchesReflection); EncodeAll is
// safe for concurrent use (a second caller waits for the encoder).
//
// It is built with the encoder's low-memory option, which changes only the
// buffers' starting sizes, not a compressed byte (TestKeptEncoderSameBytes):
// at zstd's default 8 MiB window the history buffer is the window plus one
// block instead of twice the window, 8 MiB less heap held for as long as a
// recorder runs. In a sidecar under its memory limit that heap is headroom
// the collector paces by (docs/performance.md, "Proxy sidecar").
type keptEncoderCodec struct {
	*zstd.Codec // decoding, name and codec id
	enc         *kzstd.Encoder
}

func newKeptEncoderCodec(level zstd.Level) (compress.Codec, error) {
	enc, err := kzstd.NewWriter(nil,
		kzstd.WithEncoderConcurrency(zstd.DefaultConcurrency),
		kzstd.WithEncoderLevel(level),
		kzstd.WithZeroFrames(true),
		kzstd.WithEncoderCRC(false),
		kzstd.WithLowerEncoderMem(true),
	)
	if err != nil { // only for invalid options: a level out of range
		return nil, fmt.Errorf("zstd level %d: %w", level, err)
	}
	return keptEncoderCodec{&zstd.Codec{Level: level}, enc}, nil
}

func (c keptEncoderCodec) Encode(dst, src []byte) ([]byte, error) {
	return c.enc.EncodeAll(src, dst[:0]), nil
}

// tapCodec hands every page to tap before compressing it.
type tapCodec struct {
	compress.Codec
	tap func([]byte)
}

func (t tapCodec) Encode(dst, src []byte) ([]byte, error) {
	t.tap(append([]byte(nil), src...))
	return t.Codec.Encode(dst, src)
}
