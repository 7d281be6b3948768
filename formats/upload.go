package formats

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/reelkit/reel/formats/store"
)

// Writing to object storage. The writer works exactly as it does on a local
// directory — spool, temporary names, rename when complete — in
// WriterOptions.SpoolDir, a local directory; the uploader then moves each
// closed file to the bucket under the same relative key and deletes the
// local copy only once the upload succeeded. So the crash-safety chain is:
// a record is in the spool until it is in a closed local file, and a closed
// local file stays until it is in the bucket. A PUT (or multipart upload)
// that a kill interrupts never becomes visible; the next writer on the same
// SpoolDir finds the closed files still there and uploads them first.
//
// Uploads run on their own goroutine, retrying with exponential backoff
// (uploadRetryMin doubling to uploadRetryMax, with jitter): a slow or
// unreachable bucket only grows the local backlog (Stats.UploadPending),
// it never blocks Write.

const (
	uploadRetryMin = time.Second
	uploadRetryMax = time.Minute
)

// DefaultSpoolDir is the local directory a writer to a storage URL works
// in when WriterOptions.SpoolDir is empty: a directory named after the URL
// under the system's temporary directory. A sidecar should set SpoolDir to
// a volume that outlives the process (a Kubernetes emptyDir), so a
// restarted recorder finds what its predecessor left.
func DefaultSpoolDir(url string) string {
	return filepath.Join(os.TempDir(), "reel-spool", unsafeNameRE.ReplaceAllString(url, "_"))
}

var unsafeNameRE = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// uploader moves closed files from the local directory to the bucket.
type uploader struct {
	bucket store.Bucket
	loc    store.Location
	local  string
	warn   func(error)

	cancel context.CancelFunc
	ctx    context.Context
	wake   chan struct{} // a file was queued, or draining started
	done   chan struct{} // closed when run returns

	mu       sync.Mutex       // guards everything below
	queue    []string         // relative paths of closed local files, oldest first
	queued   map[string]int64 // queued files' sizes
	draining bool
	stats    uploadStats
}

type uploadStats struct {
	uploaded, bytes, errors int64
	pending, pendingBytes   int64
}

func newUploader(l location, local string, warn func(error)) *uploader {
	ctx, cancel := context.WithCancel(context.Background())
	return &uploader{bucket: l.bucket, loc: l.loc, local: local, warn: warn,
		ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), done: make(chan struct{}),
		queued: map[string]int64{}}
}

// key is the object key of a relative path.
func (u *uploader) key(rel string) string { return u.loc.Key(filepath.ToSlash(rel)) }

// exists reports whether rel is already in the bucket; on an error (the
// bucket unreachable) it says no, and the caller rebuilds a file that an
// upload will then replace with the same rows under the same key.
func (u *uploader) exists(rel string) bool {
	ctx, cancel := context.WithTimeout(u.ctx, 10*time.Second)
	defer cancel()
	_, err := u.bucket.Stat(ctx, u.key(rel))
	return err == nil
}

// scan queues every closed file in the local directory: what a killed
// predecessor did not upload, and the files recovery just rebuilt.
func (u *uploader) scan() error {
	return filepath.WalkDir(u.local, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == u.local {
				return err
			}
			return nil
		}
		if d.IsDir() {
			if p != u.local && isHidden(d.Name()) {
				return filepath.SkipDir // the spool, temporary files
			}
			return nil
		}
		if isHidden(d.Name()) || !strings.HasSuffix(d.Name(), ".parquet") {
			return nil
		}
		rel, err := filepath.Rel(u.local, p)
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			u.enqueue(rel, info.Size())
		}
		return nil
	})
}

// enqueue queues a closed file for upload; it never blocks.
func (u *uploader) enqueue(rel string, size int64) {
	u.mu.Lock()
	if _, ok := u.queued[rel]; !ok {
		u.queued[rel] = size
		u.queue = append(u.queue, rel)
		u.stats.pending++
		u.stats.pendingBytes += size
	}
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

func (u *uploader) start() { go u.run() }

// run uploads queued files one at a time until finish.
func (u *uploader) run() {
	defer close(u.done)
	backoff := uploadRetryMin
	for {
		u.mu.Lock()
		if len(u.queue) == 0 {
			draining := u.draining
			u.mu.Unlock()
			if draining {
				return
			}
			select {
			case <-u.wake:
			case <-u.ctx.Done():
				return
			}
			continue
		}
		rel := u.queue[0]
		u.mu.Unlock()

		size, err := u.upload(rel)
		if err == nil {
			backoff = uploadRetryMin
			u.mu.Lock()
			u.queue = u.queue[1:]
			u.stats.pending--
			u.stats.pendingBytes -= u.queued[rel]
			delete(u.queued, rel)
			if size >= 0 {
				u.stats.uploaded++
				u.stats.bytes += size
			}
			u.mu.Unlock()
			continue
		}
		if u.ctx.Err() != nil {
			return
		}
		u.mu.Lock()
		u.stats.errors++
		u.mu.Unlock()
		if u.warn != nil {
			u.warn(fmt.Errorf("upload %s (retrying in %v): %w", rel, backoff, err))
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-t.C:
		case <-u.ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, uploadRetryMax)
	}
}

// upload puts one local file in the bucket and deletes it. It returns the
// file's size, or -1 when the file was gone already (another writer on the
// same directory uploaded it).
func (u *uploader) upload(rel string) (int64, error) {
	local := filepath.Join(u.local, rel)
	st, err := os.Stat(local)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	if err := u.bucket.Put(u.ctx, u.key(rel), local); err != nil {
		if _, serr := os.Stat(local); errors.Is(serr, fs.ErrNotExist) {
			return -1, nil
		}
		return 0, err
	}
	if err := os.Remove(local); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("release %s after its upload: %w", local, err)
	}
	syncDir(filepath.Dir(local))
	return st.Size(), nil
}

// finish uploads what is queued until ctx ends or for at most wait, then
// stops. It returns an error naming what is still waiting in the local
// directory.
func (u *uploader) finish(ctx context.Context, wait time.Duration) error {
	u.mu.Lock()
	u.draining = true
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
	t := time.NewTimer(wait)
	select {
	case <-u.done:
		t.Stop()
	case <-t.C:
		u.cancel()
		<-u.done
	case <-ctx.Done():
		t.Stop()
		u.cancel()
		<-u.done
	}
	u.cancel()
	u.mu.Lock()
	defer u.mu.Unlock()
	if n := len(u.queue); n > 0 {
		return fmt.Errorf("%d closed file(s) not uploaded to %s within %v; they stay in %s and the next writer there uploads them",
			n, u.bucket.URL(u.loc.Key("")), wait, u.local)
	}
	return nil
}

func (u *uploader) snapshot() uploadStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stats
}
