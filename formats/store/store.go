// Package store is where dataset files live: a local directory or an
// object-storage bucket, behind one small interface (Bucket), in the manner
// of litestream's ReplicaClient. The crash-safety logic — the write-ahead
// spool, temporary names, upload-then-release, compaction's
// replace-then-delete — is written once above it, in package formats; a
// backend only moves, lists, reads and deletes whole objects.
//
// A dataset location is a local path or a URL: s3://bucket/prefix,
// gs://bucket/prefix, azblob://container/prefix, file:///abs/path. Backends
// for URL schemes are registered by the program (cmd/reel registers
// s3store for s3:// and gs://, azstore for azblob://) with Register;
// file:// is always known.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
)

// ErrNotExist is returned (wrapped) for an object that does not exist.
var ErrNotExist = errors.New("object does not exist")

// ErrUnsupported is returned (wrapped) for a URL scheme no backend serves.
var ErrUnsupported = errors.New("unsupported storage URL")

var errNegativeOffset = errors.New("read at a negative offset")

// Object describes one stored object.
type Object struct {
	Key      string    // full key inside the bucket, '/'-separated
	Size     int64     // bytes
	Modified time.Time // last modification time, as the backend reports it
}

// File is an open object read by byte ranges: only the ranges asked for
// are fetched (a Parquet footer, the column chunks a reader needs).
type File interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// Bucket is one bucket (or local directory) holding objects by key. Every
// method is safe for concurrent use.
type Bucket interface {
	// List returns every object whose key starts with prefix, sorted by
	// key. Keys of directories are not objects.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Stat describes one object; ErrNotExist if there is none.
	Stat(ctx context.Context, key string) (Object, error)
	// Open opens an object for ranged reads; ErrNotExist if there is none.
	Open(ctx context.Context, key string) (File, error)
	// Put moves the complete local file localPath to key, replacing any
	// object there. The object is visible complete or not at all (an
	// interrupted Put leaves the old state); localPath may be gone
	// afterwards (a local bucket renames it), or not (an upload copies it).
	Put(ctx context.Context, key, localPath string) error
	// Delete removes an object; deleting one that does not exist is not an
	// error.
	Delete(ctx context.Context, key string) error
	// URL is the location of key, for messages and dataset paths.
	URL(key string) string
}

// Location is a parsed dataset URL.
type Location struct {
	Scheme string // "s3", "gs", "azblob", "file"
	Bucket string // bucket or container; "" for file
	Prefix string // key prefix without leading or trailing '/'; for file, the absolute path
}

// IsURL reports whether s is a storage URL (scheme://...) rather than a
// local path.
func IsURL(s string) bool {
	i := strings.Index(s, "://")
	if i <= 0 {
		return false
	}
	for _, c := range s[:i] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Parse parses a storage URL. A query string or fragment is refused rather
// than silently dropped.
func Parse(s string) (Location, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Location{}, fmt.Errorf("parse %s: %w", s, err)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return Location{}, fmt.Errorf("parse %s: %w: no query, fragment or user info allowed (credentials come from the environment)", s, ErrUnsupported)
	}
	loc := Location{Scheme: strings.ToLower(u.Scheme)}
	if loc.Scheme == "file" {
		if u.Host != "" && u.Host != "localhost" {
			return Location{}, fmt.Errorf("parse %s: %w: file URLs name a local path (file:///abs/path)", s, ErrUnsupported)
		}
		if u.Path == "" {
			return Location{}, fmt.Errorf("parse %s: %w: no path", s, ErrUnsupported)
		}
		loc.Prefix = u.Path
		return loc, nil
	}
	if u.Host == "" {
		return Location{}, fmt.Errorf("parse %s: %w: no bucket (want %s://BUCKET/PREFIX)", s, ErrUnsupported, loc.Scheme)
	}
	loc.Bucket = u.Host
	loc.Prefix = strings.Trim(path.Clean("/"+u.Path), "/")
	return loc, nil
}

// Key joins the location's prefix and a '/'-separated relative path.
func (l Location) Key(rel string) string {
	if l.Prefix == "" {
		return strings.TrimPrefix(rel, "/")
	}
	if rel == "" {
		return l.Prefix
	}
	return l.Prefix + "/" + strings.TrimPrefix(rel, "/")
}

// Opener opens the bucket of a location.
type Opener func(ctx context.Context, loc Location) (Bucket, error)

var (
	mu       sync.Mutex // guards openers and buckets
	openers  = map[string]Opener{}
	buckets  = map[string]Bucket{} // open buckets by scheme://bucket
	missings = map[string]string{} // scheme → why it is not served
)

// Register makes Open serve URLs of scheme with open, replacing an earlier
// registration (and forgetting buckets it opened).
func Register(scheme string, open Opener) {
	mu.Lock()
	defer mu.Unlock()
	scheme = strings.ToLower(scheme)
	openers[scheme] = open
	delete(missings, scheme)
	for k := range buckets {
		if strings.HasPrefix(k, scheme+"://") {
			delete(buckets, k)
		}
	}
}

// Refuse makes Open fail for scheme with why, a message telling the user
// what to do instead.
func Refuse(scheme, why string) {
	mu.Lock()
	defer mu.Unlock()
	scheme = strings.ToLower(scheme)
	delete(openers, scheme)
	missings[scheme] = why
}

// Open resolves a URL to its bucket (opened once per bucket and kept) and
// location. file:// URLs are not served here: use Location.Prefix as a
// local path.
func Open(ctx context.Context, rawURL string) (Bucket, Location, error) {
	loc, err := Parse(rawURL)
	if err != nil {
		return nil, Location{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	id := loc.Scheme + "://" + loc.Bucket
	if b, ok := buckets[id]; ok {
		return b, loc, nil
	}
	open, ok := openers[loc.Scheme]
	if !ok {
		why := missings[loc.Scheme]
		if why == "" {
			why = "no storage backend is registered for " + loc.Scheme + "://"
		}
		return nil, Location{}, fmt.Errorf("%s: %w: %s", rawURL, ErrUnsupported, why)
	}
	b, err := open(ctx, loc)
	if err != nil {
		return nil, Location{}, fmt.Errorf("open %s: %w", id, err)
	}
	buckets[id] = b
	return b, loc, nil
}
