package formats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Recovery, run by NewWriter before it accepts records. For every spool
// directory no live writer holds locked:
//
//   - each file named in an 'O' frame whose final name does not exist is
//     rebuilt from its 'R' frames under a temporary name and renamed to that
//     final name; a file whose final name exists (or, writing to a storage
//     URL, is in the bucket already) was complete before the crash and its
//     frames are skipped. This makes recovery idempotent: a recovery
//     killed half way is finished by the next one, and nothing is stored
//     twice;
//   - records of a file whose 'O' frame was lost go through the new writer;
//   - the spool directory is then removed.
//
// Finally, temporary files ('_' + name) of sessions that are no longer alive
// are deleted: their records were in the spool just recovered.

var tempFileRE = regexp.MustCompile(`^_(.+)-[0-9]+\.parquet\.tmp$`)

func recoverDataset[T Record](ctx context.Context, w *Writer[T]) (recovered, lost int64, err error) {
	spoolRoot := filepath.Join(w.opts.Dir, spoolDirName)
	ents, err := os.ReadDir(spoolRoot)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return recovered, lost, err
		}
		name := e.Name()
		if !e.IsDir() || name == w.sid {
			continue
		}
		dir := filepath.Join(spoolRoot, name)
		if strings.HasPrefix(name, ".") && recentlyModified(dir, time.Minute) {
			// A session being created right now by a writer starting beside
			// us (shards sharing one results directory): it is not locked
			// yet, and removing it would fail that writer.
			continue
		}
		lock, err := lockDir(dir)
		if err != nil {
			continue // alive (or unreadable): not ours to touch
		}
		if strings.HasPrefix(name, ".") { // a session that died while being created
			os.RemoveAll(dir)
			lock.Close()
			continue
		}
		n, l, err := recoverSpool[T](ctx, w, dir)
		recovered += n
		lost += l
		if errors.Is(err, fs.ErrNotExist) {
			lock.Close() // its owner closed it while we looked: nothing to recover
			continue
		}
		if errors.Is(err, errOtherSchema) {
			lock.Close()
			continue
		}
		if err != nil {
			lock.Close()
			return recovered, lost, fmt.Errorf("spool %s: %w", name, err)
		}
		if err := os.RemoveAll(dir); err != nil {
			lock.Close()
			return recovered, lost, err
		}
		lock.Close()
	}
	syncDir(spoolRoot)
	return recovered, lost, removeStaleTemps(w.opts.Dir, w.sid)
}

var errOtherSchema = errors.New("spool of another schema")

// recentlyModified reports whether path changed less than age ago (or cannot
// be examined, which is treated the same: leave it alone).
func recentlyModified(path string, age time.Duration) bool {
	fi, err := os.Stat(path)
	return err != nil || time.Since(fi.ModTime()) < age
}

// recoverSpool rebuilds the files of one dead session's spool.
func recoverSpool[T Record](ctx context.Context, w *Writer[T], dir string) (recovered, lost int64, err error) {
	segs, err := segments(dir)
	if err != nil {
		return 0, 0, err
	}
	paths := map[uint32]string{}         // ordinal → final path, "" when already complete
	files := map[uint32]*fileWriter[T]{} // files being rebuilt
	var cfg fileConfig
	defer func() {
		for _, fw := range files {
			fw.abort()
		}
	}()
	for _, seg := range segs {
		if err := ctx.Err(); err != nil {
			return recovered, lost, err
		}
		n, l, err := func() (int64, int64, error) {
			f, err := os.Open(filepath.Join(dir, segName(seg)))
			if err != nil {
				return 0, 0, err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return 0, 0, err
			}
			var n, l int64
			fr := newFrameReader(f, st.Size())
			for {
				kind, ordinal, payload, err := fr.next()
				if err == io.EOF {
					return n, l, nil
				}
				if err != nil {
					return n, l + 1, nil // torn tail: the rest of this segment is lost
				}
				switch kind {
				case frameHeader:
					var h spoolHeader
					if err := json.Unmarshal(payload, &h); err != nil {
						return n, l + 1, nil
					}
					if h.Schema != schemaName[T]() || h.Codec != codecVersion {
						return n, l, errOtherSchema
					}
					cfg = w.cfg
					cfg.meta = maps.Clone(h.Meta)
					if cfg.meta == nil {
						cfg.meta = maps.Clone(w.cfg.meta)
					}
					cfg.meta[MetaRecoveredBy] = w.sid
				case frameOpen:
					rel := filepath.FromSlash(string(payload))
					if !filepath.IsLocal(rel) || !strings.HasSuffix(rel, ".parquet") {
						l++
						continue
					}
					final := filepath.Join(w.opts.Dir, rel)
					if w.committed(rel) {
						paths[ordinal] = "" // renamed (or uploaded) before the crash
						continue
					}
					paths[ordinal] = final
				case frameRecord:
					var rec T
					if err := decodeRecord(payload, &rec); err != nil {
						l++
						continue
					}
					final, known := paths[ordinal]
					if !known { // its 'O' frame was lost: store it as a new record
						if err := w.Write(&rec); err != nil {
							return n, l, err
						}
						n++
						continue
					}
					if final == "" {
						continue
					}
					fw := files[ordinal]
					if fw == nil {
						if cfg.meta == nil { // no header seen: describe it as this writer's
							cfg = w.cfg
						}
						w.next++
						temp := filepath.Join(filepath.Dir(final), fmt.Sprintf("_%s-%d.parquet.tmp", w.sid, w.next))
						fw, err = newFileWriter[T](final, temp, ordinal, 0, w.opts.Now(), cfg, 1)
						if err != nil {
							return n, l, err
						}
						files[ordinal] = fw
					}
					if err := fw.add(&rec); err != nil {
						return n, l, err
					}
					n++
				default:
					l++
				}
			}
		}()
		recovered += n
		lost += l
		if err != nil {
			return recovered, lost, err
		}
	}
	for ordinal, fw := range files {
		delete(files, ordinal)
		size, err := fw.close()
		if err != nil {
			return recovered, lost, err
		}
		w.stats.FilesClosed++
		w.stats.RowGroups += fw.groups
		w.stats.BytesWritten += size
	}
	return recovered, lost, nil
}

// committed reports whether the file at rel (relative to the dataset) was
// complete before a crash: renamed into place, or, for a storage URL,
// uploaded already.
func (w *Writer[T]) committed(rel string) bool {
	if _, err := os.Stat(filepath.Join(w.opts.Dir, rel)); err == nil {
		return true
	}
	return w.up != nil && w.up.exists(rel)
}

// removeStaleTemps deletes temporary Parquet files of sessions that are no
// longer alive (their spool directory is gone).
func removeStaleTemps(root, self string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil // vanished or unreadable: not ours
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && isHidden(name) {
				return filepath.SkipDir
			}
			return nil
		}
		m := tempFileRE.FindStringSubmatch(name)
		if m == nil || m[1] == self {
			return nil
		}
		if _, err := os.Stat(filepath.Join(root, spoolDirName, m[1])); err == nil {
			return nil // alive, or kept for another writer to recover
		}
		os.Remove(path)
		return nil
	})
}
