package formats

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reelkit/reel/formats/store"
)

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("formats: writer closed")

var recorderRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Writer writes records of one schema into a Hive-partitioned dataset:
// Dir/dt=YYYY-MM-DD/hour=HH/<recorder>-<start>-<n>.parquet, partitioned by
// the record's time (Exchange.TsUnixNs, Result.OrigTs).
//
// Each file is written as _<name>.parquet.tmp and renamed when it is
// complete, so readers never see a partial file (Spark and Hadoop skip '_'
// names; globs like DIR/**/*.parquet never match '.tmp'). Unless NoSpool is
// set, every record is first appended to a write-ahead spool under
// Dir/_spool/, synced every SyncEvery, and leaves the spool only once it sits
// in a renamed file; NewWriter recovers what a killed predecessor left there.
// A background goroutine syncs the spool and rotates files by age until
// Close, which must be called (see the package's Close convention).
//
// Write takes ownership of the record's slices and maps until the writer is
// closed: the caller must not modify them after Write (the struct itself is
// copied). Write and Close may be called from different goroutines, but
// records are ordered within a row group by time, not by call.
type Writer[T Record] struct {
	opts  WriterOptions
	cfg   fileConfig
	sid   string    // session id: <recorder>-<start>, unique per Dir
	epoch time.Time // see Epoch
	sess  *session
	up    *uploader // nil for a local Dir
	stop  chan struct{}
	done  chan struct{}

	unsaved atomic.Int64 // see Unsaved

	mu     sync.Mutex               // guards everything below, and sess
	files  map[int64]*fileWriter[T] // open files by unix hour
	next   uint32                   // last file ordinal used
	use    int64                    // write counter, for least-recently-used eviction
	stats  Stats
	pinned int              // oldest spool segment a failed file needs; math.MaxInt if none
	failed map[uint32]int64 // files that failed (pinned), by ordinal: their rows
	ratio  float64          // compression ratio of the last closed file, for rotation estimates
	closed bool
}

// NewWriter opens a dataset writer on opts.Dir, first recovering the spools
// and removing the temporary files of killed predecessors there.
func NewWriter[T Record](ctx context.Context, opts WriterOptions) (*Writer[T], error) {
	opts = opts.withDefaults()
	if opts.Dir == "" {
		return nil, errors.New("new writer: no dataset directory")
	}
	if !recorderRE.MatchString(opts.Recorder) {
		return nil, fmt.Errorf("new writer: recorder id %q: use letters, digits, '.', '_' and '-'", opts.Recorder)
	}
	if strings.HasPrefix(opts.Recorder, compactPrefix) {
		return nil, fmt.Errorf("new writer: recorder id %q: names starting with %q are compaction sets'", opts.Recorder, compactPrefix)
	}
	var up *uploader
	if store.IsURL(opts.Dir) {
		l, err := resolve(ctx, opts.Dir)
		if err != nil {
			return nil, fmt.Errorf("new writer: %w", err)
		}
		if l.bucket == nil { // file://
			opts.Dir = l.local
		} else {
			if opts.SpoolDir == "" {
				opts.SpoolDir = DefaultSpoolDir(opts.Dir)
			}
			up = newUploader(l, opts.SpoolDir, opts.Warn)
			opts.Dir = opts.SpoolDir // everything up to the upload happens on local disk
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("new writer: %w", err)
	}
	meta := map[string]string{
		MetaSchema:      schemaName[T](),
		MetaRecorder:    opts.Recorder,
		MetaSource:      opts.Source,
		MetaRedaction:   opts.RedactionFingerprint,
		MetaVersion:     Version,
		metaSortedByKey: timeColumn[T](),
	}
	for k, v := range opts.Meta {
		meta[MetaUserPrefix+k] = v
	}
	codec, err := pageCodec(opts)
	if err != nil {
		return nil, fmt.Errorf("new writer: %w", err)
	}
	w := &Writer[T]{
		opts: opts,
		cfg: fileConfig{
			codec:         codec,
			rowGroupRows:  opts.RowGroupRows,
			rowGroupBytes: opts.RowGroupBytes,
			rotateSize:    opts.RotateSize,
			pageBytes:     opts.PageBytes,
			meta:          meta,
			disk:          opts.disk,
		},
		up:     up,
		files:  map[int64]*fileWriter[T]{},
		failed: map[uint32]int64{},
		pinned: math.MaxInt,
		ratio:  1,
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	sess, sid, err := openSession(opts.Dir, opts.Recorder, opts.Now(), schemaName[T](), meta, !opts.NoSpool, opts.disk)
	if err != nil {
		return nil, fmt.Errorf("new writer: %w", err)
	}
	w.sess, w.sid, w.epoch = sess, sid, newEpoch(sess.start)
	n, lost, err := recoverDataset[T](ctx, w)
	w.stats.Recovered, w.stats.Lost = n, lost
	if err != nil {
		sess.remove()
		return nil, fmt.Errorf("new writer: recover: %w", err)
	}
	if up != nil {
		if err := up.scan(); err != nil {
			sess.remove()
			return nil, fmt.Errorf("new writer: %w", err)
		}
		up.start()
	}
	go w.background()
	return w, nil
}

// Write adds one record. It returns an error exactly when the record is
// not stored: its file cannot be created, or the spool refuses it
// (ErrSpoolFull: the disk has been refusing writes for a while). A record
// Write accepted ends up in a closed file — now, or, when its file fails
// later, rebuilt from the spool by the next writer on the directory —
// unless the process is killed within SyncEvery, or the disk refuses the
// spool until Close; such records are counted in Stats.Unsaved and
// Unsaved. Failures the writer works around (a file that could not be
// closed, a failed spool sync, a removed spool directory) go to
// WriterOptions.Warn. The writer stays usable after an error.
func (w *Writer[T]) Write(rec *T) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	hour := floorDiv(timeKey(rec), int64(time.Hour))
	fw, err := w.fileFor(hour)
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if w.sess.spooling() {
		if err := w.sess.appendRecord(fw.ordinal, func(b []byte) []byte { return appendRecord(b, rec) }); err != nil {
			return fmt.Errorf("write: spool: %w", err)
		}
	}
	w.stats.Records++
	if err := fw.add(rec); err != nil {
		// The record is in the spool with the file's others: the next
		// writer rebuilds them (without a spool they are lost, counted).
		w.failFile(fw)
		w.warn(fmt.Errorf("write %s: %w", fw.final, err))
		return nil
	}
	w.use++
	fw.lastUse = w.use
	if fw.full() {
		if err := w.closeFile(fw); err != nil {
			w.warn(err)
		}
	}
	return nil
}

// Unsaved counts the records Write accepted that were lost since (see
// Write); safe to call at any time.
func (w *Writer[T]) Unsaved() int64 { return w.unsaved.Load() }

// warn hands a failure the writer worked around to WriterOptions.Warn.
func (w *Writer[T]) warn(err error) {
	if w.opts.Warn != nil {
		w.opts.Warn(err)
	}
}

// Epoch is when the writer started, to the millisecond: a writer opened
// later on the same directory has a later epoch (even when the clock
// stepped back: see sessionStart), and two writers in one process never
// share one. A recorder numbers its exchanges and connections from it
// (recorder.Config.Epoch), which keeps them unique across restarts.
func (w *Writer[T]) Epoch() time.Time { return w.epoch }

// lastEpoch is the latest Writer epoch handed out in this process, in unix
// milliseconds.
var lastEpoch atomic.Int64

// newEpoch returns now to the millisecond, later than every earlier epoch of
// this process.
func newEpoch(now time.Time) time.Time {
	ms := now.UnixMilli()
	for {
		last := lastEpoch.Load()
		next := max(ms, last+1)
		if lastEpoch.CompareAndSwap(last, next) {
			return time.UnixMilli(next).UTC()
		}
	}
}

// Stats reports counters since NewWriter.
func (w *Writer[T]) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.OpenFiles = len(w.files)
	s.SpoolBytes = w.sess.bytes()
	if w.up != nil {
		u := w.up.snapshot()
		s.Uploaded, s.UploadedBytes, s.UploadErrors = u.uploaded, u.bytes, u.errors
		s.UploadPending, s.UploadPendingBytes = u.pending, u.pendingBytes
	}
	return s
}

// Close stops the writer: it writes out every open file, renames them into
// place and removes the spool, waiting until that is done or ctx ends. When
// ctx ends first, the files not yet closed are given up and their records
// stay in the spool, as after a failed Close: the next NewWriter on the
// directory recovers them (without a spool, NoSpool, they are lost). With a
// storage URL, Close then uploads the closed files until ctx ends or for at
// most UploadWait; what is not uploaded stays in SpoolDir, and the next
// NewWriter there uploads it. Close reports ErrClosed when called again;
// what was written is in Stats.
func (w *Writer[T]) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	select {
	case <-w.done:
	case <-ctx.Done():
		// The background goroutine is between two ticks' work; it takes
		// the lock, so closing files below waits for it anyway.
	}

	w.mu.Lock()
	err := w.closeAll(ctx)
	w.mu.Unlock()
	if w.up != nil {
		if uerr := w.up.finish(ctx, w.opts.UploadWait); uerr != nil {
			err = errors.Join(err, fmt.Errorf("close writer: %w", uerr))
		}
	}
	return err
}

// closeAll closes every open file and removes the spool, or keeps it when a
// file failed.
func (w *Writer[T]) closeAll(ctx context.Context) error {
	var errs []error
	for _, fw := range w.files {
		if err := ctx.Err(); err != nil {
			w.failFile(fw)
			continue
		}
		if err := w.closeFile(fw); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ctx.Err(); err != nil {
		w.release()
		return fmt.Errorf("close writer: %w; the records of files not closed stay in the spool for the next writer to recover", err)
	}
	if len(errs) > 0 || w.pinned != math.MaxInt {
		w.release()
		if len(errs) == 0 {
			return errors.New("close writer: some files failed earlier; their records stay in the spool for the next writer to recover")
		}
		return fmt.Errorf("close writer: %w", errors.Join(errs...))
	}
	if err := w.sess.remove(); err != nil {
		return fmt.Errorf("close writer: %w", err)
	}
	return nil
}

// release keeps the spool for the next writer, counting the records of
// failed files whose frames never reached the disk.
func (w *Writer[T]) release() {
	w.sess.release()
	failed := make(map[uint32]bool, len(w.failed))
	for o := range w.failed {
		failed[o] = true
	}
	w.lose(w.sess.lostPending(failed))
}

// background syncs the spool and rotates files by age until Close.
func (w *Writer[T]) background() {
	defer close(w.done)
	tick := time.NewTicker(w.opts.SyncEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		// Hand the buffered frames to the kernel under the lock, fsync
		// without it: Write goes on while the disk catches up.
		w.mu.Lock()
		f, err := w.sess.flush()
		w.mu.Unlock()
		if err == nil && f != nil {
			if err = f.Sync(); errors.Is(err, os.ErrClosed) {
				err = nil // rotated meanwhile; rotation synced it
			}
		}
		w.mu.Lock()
		if err != nil {
			w.sess.failing = err
			w.warn(fmt.Errorf("sync spool: %w (records are kept in memory and written when the disk takes them)", err))
		} else if f != nil {
			w.stats.Syncs++
		}
		w.checkSpool()
		now := w.opts.Now()
		for _, fw := range w.files {
			if now.Sub(fw.opened) >= w.opts.RotateAge {
				if err := w.closeFile(fw); err != nil {
					w.warn(err)
				}
			}
		}
		w.mu.Unlock()
	}
}

// fileFor returns the open file of an hour, opening one (and closing the
// least recently used beyond MaxOpenHours) if needed.
func (w *Writer[T]) fileFor(hour int64) (*fileWriter[T], error) {
	if fw, ok := w.files[hour]; ok {
		return fw, nil
	}
	for len(w.files) >= w.opts.MaxOpenHours {
		var lru *fileWriter[T]
		for _, fw := range w.files {
			if lru == nil || fw.lastUse < lru.lastUse {
				lru = fw
			}
		}
		if err := w.closeFile(lru); err != nil {
			w.warn(err) // its records stay in the spool
		}
	}
	// A session id repeats when a writer on the same recorder id opened in
	// the same second as an earlier, closed one: skip numbers in use.
	var rel, final, temp string
	for {
		w.next++
		name := fmt.Sprintf("%s-%d.parquet", w.sid, w.next)
		rel = filepath.Join(partitionDir(hour), name)
		final = filepath.Join(w.opts.Dir, rel)
		temp = filepath.Join(w.opts.Dir, partitionDir(hour), "_"+name+".tmp")
		if !exists(final) && !exists(temp) {
			break
		}
	}
	if w.sess.spooling() {
		if err := w.sess.appendOpen(w.next, rel); err != nil {
			return nil, fmt.Errorf("spool: %w", err)
		}
	}
	fw, err := newFileWriter[T](final, temp, w.next, hour, w.opts.Now(), w.cfg, w.ratio)
	if err != nil {
		return nil, err
	}
	fw.firstSeg = w.sess.segment()
	w.files[hour] = fw
	return fw, nil
}

// closeFile renames a file into place and drops the spool segments no open
// file needs any more.
func (w *Writer[T]) closeFile(fw *fileWriter[T]) error {
	delete(w.files, fw.hour)
	size, err := fw.close()
	if err != nil {
		w.pin(fw)
		return err
	}
	w.stats.RowGroups += fw.groups
	w.stats.FilesClosed++
	w.stats.BytesWritten += size
	if fw.flushed > 0 {
		w.ratio = min(1, float64(size)/float64(fw.flushed))
	}
	if w.up != nil {
		if rel, err := filepath.Rel(w.opts.Dir, fw.final); err == nil {
			w.up.enqueue(rel, size)
		}
	}
	if !w.sess.spooling() {
		return nil
	}
	// The segments before the oldest one an open (or failed) file needs hold
	// only records now in closed files: rotate, then drop them.
	keep := w.pinned
	for _, o := range w.files {
		keep = min(keep, o.firstSeg)
	}
	if err := w.sess.rotateSegment(keep > w.sess.segment()); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	w.sess.dropBefore(min(keep, w.sess.segment()))
	return nil
}

// failFile drops a file that could not be written; its records stay in the
// spool, so the next NewWriter on the directory recovers them.
func (w *Writer[T]) failFile(fw *fileWriter[T]) {
	delete(w.files, fw.hour)
	fw.abort()
	w.pin(fw)
}

// pin keeps the spool segments of a failed file until the next NewWriter on
// the directory recovers them. Without a spool its records are lost, and
// counted.
func (w *Writer[T]) pin(fw *fileWriter[T]) {
	if !w.sess.spooling() {
		w.lose(fw.rows)
		return
	}
	w.pinned = min(w.pinned, fw.firstSeg)
	w.failed[fw.ordinal] = fw.rows
}

// lose counts n accepted records as lost.
func (w *Writer[T]) lose(n int64) {
	w.stats.Unsaved += n
	w.unsaved.Add(n)
}

// checkSpool notices a spool directory removed while the writer runs (an
// operator's rm -rf, a cleanup job) and recreates it. The removed segments
// held the records of the open files and of files that failed earlier: the
// open files are closed at once, so their records sit in closed files
// instead; records that no file holds any more are counted lost. The event
// is counted (Stats.SpoolRecreated) and reported to Warn.
func (w *Writer[T]) checkSpool() {
	if !w.sess.spooling() {
		return
	}
	if _, err := os.Stat(filepath.Join(w.sess.dir, lockName)); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	w.stats.SpoolRecreated++
	if err := w.sess.recreate(); err != nil {
		w.warn(fmt.Errorf("spool directory %s was removed while recording; recreating it failed: %w (records are kept in memory, then refused and counted)", w.sess.dir, err))
		return
	}
	closed := 0
	for _, fw := range w.files {
		if w.closeFile(fw) == nil {
			closed++
		}
	}
	var lost int64
	for _, rows := range w.failed {
		lost += rows
	}
	clear(w.failed)
	w.pinned = math.MaxInt
	w.lose(lost)
	w.warn(fmt.Errorf("spool directory %s was removed while recording: recreated it; closed %d open file(s) early so their records are safe, %d record(s) lost with the removed spool", w.sess.dir, closed, lost))
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
