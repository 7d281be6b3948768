// Package filestore is the local-directory store.Bucket: object keys are
// '/'-separated paths under a root directory, Put is a rename (a copy, then
// a rename, across file systems), so an object appears complete or not at
// all, as it does in object storage.
package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/reelkit/reel/formats/store"
)

// Dir is a directory tree seen as a bucket.
type Dir struct {
	root string
}

// New returns the bucket rooted at the directory root (which need not exist
// yet: Put creates what it needs).
func New(root string) *Dir { return &Dir{root: filepath.Clean(root)} }

func (d *Dir) path(key string) (string, error) {
	rel := filepath.FromSlash(key)
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("key %q: not a path inside %s", key, d.root)
	}
	return filepath.Join(d.root, rel), nil
}

// URL is the local path of key.
func (d *Dir) URL(key string) string {
	p, err := d.path(key)
	if err != nil {
		return filepath.Join(d.root, key)
	}
	return p
}

// List walks the tree under root and returns the files whose key starts
// with prefix. Files that vanish during the walk are left out.
func (d *Dir) List(ctx context.Context, prefix string) ([]store.Object, error) {
	var out []store.Object
	err := filepath.WalkDir(d.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == d.root && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipAll
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(d.root, p)
		key := filepath.ToSlash(rel)
		if e.IsDir() {
			// Skip directories that cannot hold a key with the prefix.
			if p != d.root && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil // vanished
		}
		out = append(out, store.Object{Key: key, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.root, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Stat describes one file.
func (d *Dir) Stat(_ context.Context, key string) (store.Object, error) {
	p, err := d.path(key)
	if err != nil {
		return store.Object{}, err
	}
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return store.Object{}, fmt.Errorf("%s: %w", p, store.ErrNotExist)
	}
	if err != nil {
		return store.Object{}, err
	}
	return store.Object{Key: key, Size: st.Size(), Modified: st.ModTime()}, nil
}

// Open opens a file.
func (d *Dir) Open(_ context.Context, key string) (store.File, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	return OpenFile(p)
}

// OpenFile opens a local file as a store.File.
func OpenFile(path string) (store.File, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, store.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &file{File: f, size: st.Size()}, nil
}

type file struct {
	*os.File
	size int64
}

func (f *file) Size() int64 { return f.size }

// Put renames localPath to key (copying first when they are on different
// file systems) and syncs the directory, so the rename survives a crash.
func (d *Dir) Put(_ context.Context, key, localPath string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("put %s: %w", p, err)
	}
	if err := os.Rename(localPath, p); err != nil {
		if !isCrossDevice(err) {
			return fmt.Errorf("put %s: %w", p, err)
		}
		if err := copyIn(localPath, p); err != nil {
			return fmt.Errorf("put %s: %w", p, err)
		}
	}
	syncDir(filepath.Dir(p))
	return nil
}

// copyIn copies src next to dst under a hidden name, syncs it and renames
// it to dst.
func copyIn(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := filepath.Join(filepath.Dir(dst), "_"+filepath.Base(dst)+".put")
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// Delete removes a file.
func (d *Dir) Delete(_ context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", p, err)
	}
	syncDir(filepath.Dir(p))
	return nil
}

// syncDir makes a rename durable; failures only weaken durability.
func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}
