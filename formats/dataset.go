package formats

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/reelkit/reel/formats/store"
)

// ErrBadFile marks a file that is not a readable reel file of the wanted
// schema: truncated, damaged, foreign (no reel.schema) or of a newer schema
// version. The error message names the file.
var ErrBadFile = errors.New("bad dataset file")

// FileInfo describes one dataset file from its footer alone.
type FileInfo struct {
	Path      string            // the file's path, as given to the reader
	Size      int64             // bytes on disk
	Schema    string            // reel.schema, e.g. "exchange/1"
	Meta      map[string]string // all key-value metadata
	Rows      int64             // rows in the file
	RowGroups []RowGroupInfo    // the file's row groups, in file order
	// Min and Max bound the records' times (Exchange.TsUnixNs,
	// Result.OrigTs) in ns since the Unix epoch, from row-group statistics;
	// math.MinInt64/MaxInt64 when a file has no statistics.
	Min, Max int64
	// CompressedBytes and UncompressedBytes sum the column chunks.
	CompressedBytes, UncompressedBytes int64
}

// RowGroupInfo is one row group's size and time bounds.
type RowGroupInfo struct {
	Rows     int64 // rows in the row group
	Min, Max int64 // ns since the Unix epoch, as in FileInfo
}

// Recorder is the file's recorder id.
func (fi *FileInfo) Recorder() string { return fi.Meta[MetaRecorder] }

// MinTime is Min as a time (zero if unknown).
func (fi *FileInfo) MinTime() time.Time { return nsTime(fi.Min) }

// MaxTime is Max as a time (zero if unknown).
func (fi *FileInfo) MaxTime() time.Time { return nsTime(fi.Max) }

func nsTime(ns int64) time.Time {
	if ns == math.MinInt64 || ns == math.MaxInt64 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// ListFiles expands paths (files, directory trees, globs, storage URLs)
// into the sorted, de-duplicated list of Parquet files they name. Inside
// directories and below URL prefixes, names starting with '_' or '.' are
// skipped (temporary files, the spool) and only *.parquet files are taken;
// glob matches with such names are skipped too; a file named explicitly is
// always taken. Files a completed compaction replaced, and the parts of a
// compaction that did not complete, are left out (compact.go), so a
// dataset reads the same before, during and after `reel compact`. Files in
// object storage are named by URL (s3://bucket/key).
func ListFiles(paths []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range paths {
		if store.IsURL(p) {
			files, err := listRemote(context.Background(), p)
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				add(f)
			}
			continue
		}
		matches := []string{p}
		glob := strings.ContainsAny(p, "*?[")
		if glob {
			m, err := filepath.Glob(p)
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", p, err)
			}
			if len(m) == 0 {
				return nil, fmt.Errorf("list %s: no file matches", p)
			}
			matches = m
		}
		for _, m := range matches {
			if glob && isHidden(filepath.Base(m)) {
				continue // a glob does not pick temporary files or the spool
			}
			st, err := os.Stat(m)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%s: %w", m, fs.ErrNotExist)
			}
			if err != nil {
				return nil, err // os.Stat names the path and the step
			}
			if !st.IsDir() {
				add(m)
				continue
			}
			err = filepath.WalkDir(m, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if path != m && isHidden(d.Name()) {
					if d.IsDir() {
						return filepath.SkipDir
					}
					return nil
				}
				if !d.IsDir() && strings.HasSuffix(d.Name(), ".parquet") {
					add(path)
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", m, err)
			}
		}
	}
	sort.Strings(out)
	return compactionView(out)
}

// StatFile reads a file's footer and describes it. It fails with ErrBadFile
// when the file is not a reel file it can read.
func StatFile(path string) (*FileInfo, error) {
	f, pf, err := openParquet(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return describe(path, pf)
}

// openParquet opens a file, local or remote, and parses its footer; the
// caller closes f.
func openParquet(path string) (f store.File, pf *parquet.File, err error) {
	f, extra, err := openSource(path)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if p := recover(); p != nil { // parquet-go on a damaged footer
			f.Close()
			f, pf, err = nil, nil, fmt.Errorf("%s: %w: %v", path, ErrBadFile, p)
		}
	}()
	opts := append([]parquet.FileOption{parquet.SkipBloomFilters(true), parquet.SkipPageIndex(true)}, extra...)
	pf, err = parquet.OpenFile(f, f.Size(), opts...)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w: %v (truncated or not Parquet)", path, ErrBadFile, err)
	}
	return f, pf, nil
}

func describe(path string, pf *parquet.File) (*FileInfo, error) {
	md := pf.Metadata()
	fi := &FileInfo{Path: path, Size: pf.Size(), Rows: md.NumRows, Meta: map[string]string{},
		Min: math.MaxInt64, Max: math.MinInt64}
	for _, kv := range md.KeyValueMetadata {
		fi.Meta[kv.Key] = kv.Value
	}
	fi.Schema = fi.Meta[MetaSchema]
	if fi.Schema == "" {
		return nil, fmt.Errorf("%s: %w: no %s metadata (not written by reel)", path, ErrBadFile, MetaSchema)
	}
	tcol := ""
	switch schemaFamily(fi.Schema) {
	case "exchange", "metrics":
		tcol = "ts_unix_ns"
	case "result":
		tcol = "orig_ts"
	default:
		return nil, fmt.Errorf("%s: %w: unknown schema %q", path, ErrBadFile, fi.Schema)
	}
	for _, rg := range md.RowGroups {
		g := RowGroupInfo{Rows: rg.NumRows, Min: math.MinInt64, Max: math.MaxInt64}
		for _, cc := range rg.Columns {
			fi.CompressedBytes += cc.MetaData.TotalCompressedSize
			fi.UncompressedBytes += cc.MetaData.TotalUncompressedSize
			if strings.Join(cc.MetaData.PathInSchema, ".") != tcol {
				continue
			}
			st := cc.MetaData.Statistics
			if len(st.MinValue) == 8 && len(st.MaxValue) == 8 {
				g.Min = int64(binary.LittleEndian.Uint64(st.MinValue))
				g.Max = int64(binary.LittleEndian.Uint64(st.MaxValue))
				if tcol == "orig_ts" { // TIMESTAMP(MICROS)
					g.Min, g.Max = g.Min*1000, g.Max*1000
				}
			}
		}
		fi.RowGroups = append(fi.RowGroups, g)
		fi.Min = min(fi.Min, g.Min)
		fi.Max = max(fi.Max, g.Max)
	}
	if len(fi.RowGroups) == 0 {
		fi.Min, fi.Max = math.MinInt64, math.MaxInt64
	}
	return fi, nil
}

// schemaFamily is "exchange" for "exchange/1".
func schemaFamily(s string) string {
	name, _, _ := strings.Cut(s, "/")
	return name
}

// checkSchema accepts a file of schema want's family with a version this
// reel reads (the same or older).
func checkSchema(fi *FileInfo, want string) error {
	if schemaFamily(fi.Schema) != schemaFamily(want) {
		return fmt.Errorf("%s: %w: holds %s, want %s", fi.Path, ErrBadFile, fi.Schema, want)
	}
	_, hv, _ := strings.Cut(fi.Schema, "/")
	_, wv, _ := strings.Cut(want, "/")
	h, err1 := strconv.Atoi(hv)
	v, err2 := strconv.Atoi(wv)
	if err1 != nil || err2 != nil || h < 1 {
		return fmt.Errorf("%s: %w: bad schema version %q", fi.Path, ErrBadFile, fi.Schema)
	}
	if h > v {
		return fmt.Errorf("%s: %w: schema %s is newer than this reel %s reads (%s); upgrade reel",
			fi.Path, ErrBadFile, fi.Schema, Version, want)
	}
	return nil
}

// AddedColumns are the columns added to a schema after its version was first
// written (docs/schema.md, "Columns added within a version"): a file from
// before may lack them, and its rows read with them zero. Every other column
// must be present. Callers must not modify the map.
var AddedColumns = map[string]bool{
	"turn_key": true, "parent_turn_key": true, // exchange/1: session links
	"session_delay_ns": true, // result/1: replay --sessions
	"cached_tokens":    true, // exchange/1 and result/1: prefix-cache reuse (optional: reads as NULL)
}

// checkColumns makes sure every column of T's schema is in the file with the
// same physical type, so reading cannot misinterpret a column; only
// AddedColumns may be missing.
func checkColumns[T Record](path string, pf *parquet.File) error {
	want := parquet.SchemaOf(new(T))
	for _, p := range want.Columns() {
		wl, _ := want.Lookup(p...)
		hl, ok := pf.Schema().Lookup(p...)
		if !ok && AddedColumns[p[0]] {
			continue
		}
		if !ok {
			return fmt.Errorf("%s: %w: no column %s", path, ErrBadFile, strings.Join(p, "."))
		}
		if wl.Node.Type().Kind() != hl.Node.Type().Kind() {
			return fmt.Errorf("%s: %w: column %s is %v, want %v", path, ErrBadFile,
				strings.Join(p, "."), hl.Node.Type(), wl.Node.Type())
		}
	}
	return nil
}
