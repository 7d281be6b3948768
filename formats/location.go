package formats

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/reelkit/reel/formats/store"
	"github.com/reelkit/reel/formats/store/filestore"
)

// A dataset location is a local path or a storage URL (package store).
// This file owns telling them apart and turning either into the files
// behind it: listing (with the compaction view of compact.go) and opening
// one file for ranged reads.

// location is a resolved dataset root: a local directory, or a bucket and
// key prefix.
type location struct {
	local  string       // local directory; "" for a bucket
	bucket store.Bucket // nil for a local directory
	loc    store.Location
}

// resolve turns a dataset argument into its location. file:// URLs are
// local paths.
func resolve(ctx context.Context, s string) (location, error) {
	if !store.IsURL(s) {
		return location{local: s}, nil
	}
	l, err := store.Parse(s)
	if err != nil {
		return location{}, err
	}
	if l.Scheme == "file" {
		return location{local: filepath.FromSlash(l.Prefix)}, nil
	}
	b, l, err := store.Open(ctx, s)
	if err != nil {
		return location{}, err
	}
	return location{bucket: b, loc: l}, nil
}

// bucketOf is the location as a bucket: a local directory is a
// filestore.Dir.
func (l location) bucketOf() (store.Bucket, store.Location) {
	if l.bucket != nil {
		return l.bucket, l.loc
	}
	return filestore.New(l.local), store.Location{Scheme: "file"}
}

// listRemote lists the dataset files under a URL: the object it names, or
// every *.parquet object below its prefix whose path (below the prefix)
// has no '_' or '.' component. A URL with glob characters lists the
// literal part before the first of them and keeps the keys that match
// ('*' and '?' within one path segment, '**' across segments).
func listRemote(ctx context.Context, raw string) ([]string, error) {
	pattern := ""
	base := raw
	if i := strings.IndexAny(raw, "*?["); i >= 0 {
		j := strings.LastIndex(raw[:i], "/")
		if j < len("s3://") || !strings.Contains(raw[:j], "://") {
			return nil, fmt.Errorf("list %s: a glob needs a bucket before it", raw)
		}
		base, pattern = raw[:j], raw[j+1:]
	}
	l, err := resolve(ctx, base)
	if err != nil {
		return nil, err
	}
	if l.bucket == nil { // file://
		p := l.local
		if pattern != "" {
			p = filepath.Join(p, filepath.FromSlash(pattern))
		}
		return ListFiles([]string{p})
	}
	var match *regexp.Regexp
	if pattern != "" {
		if match, err = globRegexp(pattern); err != nil {
			return nil, fmt.Errorf("list %s: %w", raw, err)
		}
	}
	if pattern == "" && strings.HasSuffix(l.loc.Prefix, ".parquet") {
		if _, err := l.bucket.Stat(ctx, l.loc.Prefix); err == nil {
			return []string{l.bucket.URL(l.loc.Prefix)}, nil // one file, named explicitly
		} else if !errors.Is(err, store.ErrNotExist) {
			return nil, err
		}
	}
	prefix := l.loc.Prefix
	if prefix != "" {
		prefix += "/"
	}
	objs, err := l.bucket.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, prefix)
		if !strings.HasSuffix(rel, ".parquet") || hiddenPath(rel) {
			continue
		}
		if match != nil && !match.MatchString(rel) {
			continue
		}
		out = append(out, l.bucket.URL(o.Key))
	}
	if len(out) == 0 && match != nil {
		return nil, fmt.Errorf("list %s: no file matches", raw)
	}
	if len(out) == 0 && len(objs) == 0 {
		return nil, fmt.Errorf("%s: %w", raw, fs.ErrNotExist)
	}
	return out, nil
}

// hiddenPath reports whether any component of a '/'-separated path is a
// name readers skip.
func hiddenPath(rel string) bool {
	for _, c := range strings.Split(rel, "/") {
		if isHidden(c) {
			return true
		}
	}
	return false
}

// globRegexp compiles a '/'-separated glob: '**' matches any number of
// segments, '*' and '?' stay within one, [...] is a class.
func globRegexp(glob string) (*regexp.Regexp, error) {
	var sb strings.Builder
	sb.WriteString("^")
	for i := 0; i < len(glob); i++ {
		c := glob[i]
		switch {
		case strings.HasPrefix(glob[i:], "**/"):
			sb.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(glob[i:], "**"):
			sb.WriteString(".*")
			i++
		case c == '*':
			sb.WriteString("[^/]*")
		case c == '?':
			sb.WriteString("[^/]")
		case c == '[':
			j := strings.IndexByte(glob[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("glob %q: unclosed [", glob)
			}
			class := glob[i+1 : i+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			sb.WriteString("[" + class + "]")
			i += j
		default:
			sb.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	sb.WriteString("$")
	return regexp.Compile(sb.String())
}

// remoteReadBuffer is parquet-go's read size on object storage: each
// column chunk is fetched in ranged GETs of up to this size, not 4 KiB.
// (parquet-go's OptimisticRead would fetch this much of every file's end
// for its footer; s3store fetches a 32 KiB tail block instead.)
const remoteReadBuffer = 256 << 10

// openSource opens one dataset file, local or remote, for ranged reads.
func openSource(p string) (store.File, []parquet.FileOption, error) {
	if !store.IsURL(p) {
		f, err := filestore.OpenFile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", p, unwrapNotExist(err))
		}
		return f, nil, nil
	}
	ctx := context.Background()
	l, err := resolve(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	if l.bucket == nil {
		return openSource(l.local)
	}
	f, err := l.bucket.Open(ctx, l.loc.Prefix)
	if err != nil {
		return nil, nil, unwrapNotExist(err)
	}
	return f, []parquet.FileOption{parquet.ReadBufferSize(remoteReadBuffer)}, nil
}

// unwrapNotExist keeps fs.ErrNotExist matchable for callers that test for
// it (os.Open's error did before files could be remote).
func unwrapNotExist(err error) error {
	if errors.Is(err, store.ErrNotExist) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (%w)", err, fs.ErrNotExist)
	}
	return err
}

// JoinPath joins a dataset location (local path or storage URL) and a
// relative '/'-separated path.
func JoinPath(dataset, rel string) string {
	if store.IsURL(dataset) {
		return strings.TrimRight(dataset, "/") + "/" + strings.TrimLeft(rel, "/")
	}
	return filepath.Join(dataset, filepath.FromSlash(rel))
}
