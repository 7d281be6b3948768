package formats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/reelkit/reel/formats/store"
)

// Compaction merges an hour partition's small files (every recorder's
// rotations) into a few large, time-sorted ones with bigger pages and a
// higher zstd level.
//
// How readers never count a row twice, with no rename across objects:
// a compaction writes a *set* of files named
//
//	compact.g<generation>-<k>of<n>.parquet
//
// in the partition, each carrying the base names of the files it replaces
// in its metadata (reel.replaces). ListFiles shows a set only once all n
// parts are present, and then hides every file a complete set replaces;
// until then it shows the set's sources and hides the set. So the order of
// a compaction — write every part, then delete the sources — is safe at
// every point a kill can land: before the last part, readers see the old
// files; after it, the new ones; a rerun deletes what a killed run left
// (parts of an incomplete set, sources of a complete one) and then finds
// the hour done. A new set replaces the old set's files and everything
// the old set replaced, so a source that reappears (a recorder recovering
// its spool re-uploads it) stays hidden. Recorder ids cannot start with
// "compact.", so no recorder's file looks like a part.
//
// Plain globs (DuckDB's read_parquet('…/**/*.parquet')) see the files
// themselves: they count a row twice only between a compaction's last
// part landing and its sources being deleted, a window of a few deletes.

// MetaReplaces and MetaCompaction are the compaction's file metadata.
const (
	MetaReplaces   = "reel.replaces"   // comma-separated base names of the files a compaction set replaces
	MetaCompaction = "reel.compaction" // generation of the compaction set, e.g. "g3"
)

// compactPrefix starts every compaction set file's name, and no recorder id.
const compactPrefix = "compact."

var compactNameRE = regexp.MustCompile(`^compact\.g([0-9]+)-([0-9]+)of([0-9]+)\.parquet$`)

// compactName is part k of n of generation gen.
func compactName(gen, k, n int) string {
	return fmt.Sprintf("%sg%d-%dof%d.parquet", compactPrefix, gen, k, n)
}

// compactPart parses a compaction part's base name.
type compactPart struct {
	gen, k, n int
}

func parseCompactName(base string) (compactPart, bool) {
	m := compactNameRE.FindStringSubmatch(base)
	if m == nil {
		return compactPart{}, false
	}
	gen, _ := strconv.Atoi(m[1])
	k, _ := strconv.Atoi(m[2])
	n, _ := strconv.Atoi(m[3])
	if k < 1 || n < 1 || k > n {
		return compactPart{}, false
	}
	return compactPart{gen, k, n}, true
}

// partitionView is what one directory's files look like to readers.
type partitionView struct {
	visible  []string        // base names readers see
	complete map[int]int     // generation → n of every complete set
	partial  []string        // parts of incomplete sets
	hidden   map[string]bool // base names replaced by a complete set
}

// viewPartition works out which files of one directory readers see;
// replaces reads a complete set's replaced names (from its first part).
func viewPartition(names []string, replaces func(base string) ([]string, error)) (partitionView, error) {
	v := partitionView{complete: map[int]int{}, hidden: map[string]bool{}}
	parts := map[int]map[int]bool{} // generation → parts present
	ns := map[int]int{}
	for _, name := range names {
		p, ok := parseCompactName(name)
		if !ok {
			continue
		}
		if parts[p.gen] == nil {
			parts[p.gen] = map[int]bool{}
			ns[p.gen] = p.n
		}
		if ns[p.gen] != p.n {
			ns[p.gen] = -1 // parts disagree on n: never complete
		}
		parts[p.gen][p.k] = true
	}
	if len(parts) == 0 {
		v.visible = names
		return v, nil
	}
	for gen, have := range parts {
		if ns[gen] > 0 && len(have) == ns[gen] {
			v.complete[gen] = ns[gen]
			rs, err := replaces(compactName(gen, 1, ns[gen]))
			if err != nil {
				return v, err
			}
			for _, r := range rs {
				v.hidden[r] = true
			}
		}
	}
	for _, name := range names {
		p, isPart := parseCompactName(name)
		switch {
		case isPart && v.complete[p.gen] == 0:
			v.partial = append(v.partial, name)
		case v.hidden[name]:
		default:
			v.visible = append(v.visible, name)
		}
	}
	return v, nil
}

// compactionView filters a sorted list of dataset files (paths or URLs)
// down to what readers see: see the comment at the top of this file.
func compactionView(files []string) ([]string, error) {
	type group struct {
		dir   string
		names []string
	}
	var groups []*group
	byDir := map[string]*group{}
	for _, f := range files {
		dir, base := splitPath(f)
		g := byDir[dir]
		if g == nil {
			g = &group{dir: dir}
			byDir[dir] = g
			groups = append(groups, g)
		}
		g.names = append(g.names, base)
	}
	var out []string
	for _, g := range groups {
		v, err := viewPartition(g.names, func(base string) ([]string, error) {
			return readReplaces(joinPath(g.dir, base))
		})
		if err != nil {
			return nil, err
		}
		for _, name := range v.visible {
			out = append(out, joinPath(g.dir, name))
		}
	}
	sort.Strings(out)
	return out, nil
}

// splitPath splits a file path or URL into its directory and base name.
func splitPath(p string) (dir, base string) {
	if store.IsURL(p) {
		i := strings.LastIndex(p, "/")
		return p[:i], p[i+1:]
	}
	return filepath.Dir(p), filepath.Base(p)
}

func joinPath(dir, base string) string {
	if store.IsURL(dir) {
		return dir + "/" + base
	}
	return filepath.Join(dir, base)
}

// readReplaces reads the names a compaction part says it replaces.
func readReplaces(p string) ([]string, error) {
	f, pf, err := openParquet(p)
	if err != nil {
		return nil, fmt.Errorf("read compaction set: %w", err)
	}
	defer f.Close()
	v, _ := pf.Lookup(MetaReplaces)
	if v == "" {
		return nil, nil
	}
	return strings.Split(v, ","), nil
}

// Defaults of CompactOptions, used where a field is zero.
const (
	DefaultCompactLevel     = zstd.SpeedBestCompression
	DefaultCompactPageBytes = 16 << 20
	DefaultCompactGroupRows = 1 << 20
	DefaultCompactGroupSize = 128 << 20
	DefaultCompactFileSize  = 1 << 30
	DefaultCompactMinAge    = time.Hour
)

// CompactOptions configure Compact. The zero value compacts every hour that
// ended at least an hour ago.
type CompactOptions struct {
	// From and To select the hours overlapping [From, To); a zero bound is
	// open.
	From, To time.Time
	// MinAge leaves alone hours that ended less than this long ago (their
	// recorders may still be writing); negative compacts every hour.
	// Default 1 h.
	MinAge time.Duration
	// Level is the zstd level of the new files. Default
	// zstd.SpeedBestCompression.
	Level zstd.Level
	// PageBytes is the page buffer size: a body column compresses with a
	// whole page as context. Default 16 MiB.
	PageBytes int
	// RowGroupRows and RowGroupBytes bound a row group (and the memory one
	// holds). Default 1Mi rows, 128 MiB.
	RowGroupRows  int
	RowGroupBytes int64
	// FileSize starts a new part of the set once a part passes this size.
	// Default 1 GiB.
	FileSize int64
	// TempDir holds the new files of a dataset in object storage before
	// they are uploaded. Default os.TempDir().
	TempDir string
	// Progress, when set, receives each hour's result as it is done.
	Progress func(CompactHour)
	// Now is the clock for MinAge. Default time.Now.
	Now func() time.Time

	// crash, when set (by tests only), is called at each step that a kill
	// could interrupt; a non-nil return stops Compact there, as a kill
	// would, leaving what was written.
	crash func(step string) error
}

// CompactHour is what Compact did to one hour partition.
type CompactHour struct {
	Partition string // dt=YYYY-MM-DD/hour=HH
	Action    string // "compacted", "finished" (a killed run's leftovers removed), "done" (nothing to do)
	FilesIn   int    // files merged
	FilesOut  int    // parts written
	Rows      int64  // rows merged
	BytesIn   int64  // bytes of the files merged
	BytesOut  int64  // bytes of the parts written
	Removed   int    // files deleted (merged sources, leftovers of a killed run)
}

// Compact merges the small files of each hour partition of the dataset at
// dataset (a local directory or a storage URL) into a compaction set; see
// the top of compact.go for why it is crash-safe and idempotent. It returns
// the hours it looked at, in time order.
func Compact(ctx context.Context, dataset string, opts CompactOptions) ([]CompactHour, error) {
	opts = opts.withDefaults()
	l, err := resolve(ctx, dataset)
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	b, loc := l.bucketOf()
	prefix := loc.Key("")
	if prefix != "" {
		prefix += "/"
	}
	objs, err := b.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	hours := map[string][]store.Object{}
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Key, prefix)
		dir, base := path.Split(rel)
		dir = strings.TrimSuffix(dir, "/")
		if _, ok := partitionHour(dir); !ok {
			continue
		}
		if isHidden(base) && l.bucket == nil && strings.HasPrefix(base, "_"+compactPrefix) {
			// A killed local compaction's scratch file.
			if err := b.Delete(ctx, o.Key); err != nil {
				return nil, fmt.Errorf("compact: %w", err)
			}
			continue
		}
		if !strings.HasSuffix(base, ".parquet") || hiddenPath(rel) {
			continue
		}
		hours[dir] = append(hours[dir], o)
	}
	dirs := slices.Sorted(maps.Keys(hours))
	var done []CompactHour
	for _, dir := range dirs {
		if err := ctx.Err(); err != nil {
			return done, err
		}
		start, _ := partitionHour(dir)
		end := start.Add(time.Hour)
		if !opts.From.IsZero() && !end.After(opts.From) || !opts.To.IsZero() && !start.Before(opts.To) {
			continue
		}
		if opts.MinAge >= 0 && opts.Now().Sub(end) < opts.MinAge {
			continue
		}
		h, err := compactPartition(ctx, l, b, prefix+dir, hours[dir], opts)
		h.Partition = dir
		if err != nil {
			return done, fmt.Errorf("compact %s: %w", dir, err)
		}
		done = append(done, h)
		if opts.Progress != nil {
			opts.Progress(h)
		}
	}
	return done, nil
}

func (o CompactOptions) withDefaults() CompactOptions {
	if o.MinAge == 0 {
		o.MinAge = DefaultCompactMinAge
	}
	if o.Level == 0 {
		o.Level = DefaultCompactLevel
	}
	if o.PageBytes <= 0 {
		o.PageBytes = DefaultCompactPageBytes
	}
	if o.RowGroupRows <= 0 {
		o.RowGroupRows = DefaultCompactGroupRows
	}
	if o.RowGroupBytes <= 0 {
		o.RowGroupBytes = DefaultCompactGroupSize
	}
	if o.FileSize <= 0 {
		o.FileSize = DefaultCompactFileSize
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// partitionHour parses dt=YYYY-MM-DD/hour=HH.
func partitionHour(dir string) (time.Time, bool) {
	dt, hour, ok := strings.Cut(dir, "/")
	if !ok || !strings.HasPrefix(dt, "dt=") || !strings.HasPrefix(hour, "hour=") {
		return time.Time{}, false
	}
	t, err := time.Parse("2006-01-02 15", strings.TrimPrefix(dt, "dt=")+" "+strings.TrimPrefix(hour, "hour="))
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

func (o CompactOptions) step(s string) error {
	if o.crash != nil {
		return o.crash(s)
	}
	return nil
}

// compactPartition finishes what a killed run left in one partition, then
// merges its visible files into a new set unless it already is one set.
func compactPartition(ctx context.Context, l location, b store.Bucket, dirKey string, objs []store.Object, opts CompactOptions) (CompactHour, error) {
	var h CompactHour
	sizes := map[string]int64{}
	var names []string
	for _, o := range objs {
		base := path.Base(o.Key)
		names = append(names, base)
		sizes[base] = o.Size
	}
	sort.Strings(names)
	key := func(base string) string { return dirKey + "/" + base }
	pathOf := func(base string) string {
		if l.bucket != nil {
			return b.URL(key(base))
		}
		return filepath.Join(l.local, filepath.FromSlash(key(base)))
	}
	v, err := viewPartition(names, func(base string) ([]string, error) { return readReplaces(pathOf(base)) })
	if err != nil {
		return h, err
	}
	// Leftovers of a killed run: parts of a set that never completed, and
	// sources of one that did.
	var leftovers []string
	leftovers = append(leftovers, v.partial...)
	for _, name := range names {
		if v.hidden[name] {
			leftovers = append(leftovers, name)
		}
	}
	for _, name := range leftovers {
		if err := b.Delete(ctx, key(name)); err != nil {
			return h, err
		}
		h.Removed++
		if err := opts.step("delete-leftover"); err != nil {
			return h, err
		}
	}
	generation := 0
	var replaced []string // what the new set replaces: what readers see now, and what they hid
	setsVisible, plain := 0, 0
	for _, name := range names {
		if p, ok := parseCompactName(name); ok {
			generation = max(generation, p.gen)
		}
	}
	for _, name := range v.visible {
		replaced = append(replaced, name)
		if p, ok := parseCompactName(name); ok {
			if p.k == 1 {
				setsVisible++
				rs, err := readReplaces(pathOf(name))
				if err != nil {
					return h, err
				}
				replaced = append(replaced, rs...)
			}
		} else {
			plain++
		}
	}
	if len(v.visible) == 0 || setsVisible == 1 && plain == 0 {
		h.Action = "done"
		if h.Removed > 0 {
			h.Action = "finished"
		}
		return h, nil
	}
	slices.Sort(replaced)
	replaced = slices.Compact(replaced)

	var inputs []string
	for _, name := range v.visible {
		inputs = append(inputs, pathOf(name))
		h.BytesIn += sizes[name]
	}
	h.FilesIn = len(inputs)
	// The parts are written inside the partition for a local dataset, so
	// that Put is a rename, and in a scratch directory for a bucket.
	scratch := filepath.Join(l.local, filepath.FromSlash(dirKey))
	if l.bucket != nil {
		d, err := os.MkdirTemp(opts.TempDir, "reel-compact-")
		if err != nil {
			return h, err
		}
		defer os.RemoveAll(d)
		scratch = d
	}
	parts, rows, wantRows, err := mergeFiles(ctx, inputs, scratch, generation+1, replaced, opts)
	defer func() {
		for _, p := range parts {
			os.Remove(p.local)
		}
	}()
	if err != nil {
		return h, err
	}
	if rows != wantRows {
		return h, fmt.Errorf("merged %d rows, the files hold %d: sources kept", rows, wantRows)
	}
	h.Rows = rows
	for k, p := range parts {
		h.BytesOut += p.size
		if err := b.Put(ctx, key(compactName(generation+1, k+1, len(parts))), p.local); err != nil {
			return h, err
		}
		h.FilesOut++
		if err := opts.step("put-part"); err != nil {
			return h, err
		}
	}
	for _, name := range v.visible {
		if err := b.Delete(ctx, key(name)); err != nil {
			return h, err
		}
		h.Removed++
		if err := opts.step("delete-source"); err != nil {
			return h, err
		}
	}
	h.Action = "compacted"
	return h, nil
}

// mergedPart is one written part, on local disk.
type mergedPart struct {
	local string
	size  int64
}

// mergeFiles reads inputs in time order and writes them as parts of
// generation gen into the local directory scratch. It returns the parts,
// the rows written and the rows the inputs' footers hold.
func mergeFiles(ctx context.Context, inputs []string, scratch string, gen int, replaced []string, opts CompactOptions) ([]mergedPart, int64, int64, error) {
	var schema string
	var metas []map[string]string
	var wantRows int64
	for _, in := range inputs {
		fi, err := StatFile(in)
		if err != nil {
			return nil, 0, 0, err
		}
		if schema == "" {
			schema = fi.Schema
		}
		if schemaFamily(fi.Schema) != schemaFamily(schema) {
			return nil, 0, 0, fmt.Errorf("%s holds %s, %s holds %s: one partition, one schema", inputs[0], schema, in, fi.Schema)
		}
		metas = append(metas, fi.Meta)
		wantRows += fi.Rows
	}
	m := &merger{ctx: ctx, inputs: inputs, scratch: scratch, gen: gen, opts: opts, meta: mergedMeta(metas, gen, replaced)}
	var err error
	switch schemaFamily(schema) {
	case "exchange":
		err = mergeAs[Exchange](m)
	case "result":
		err = mergeAs[Result](m)
	case "metrics":
		err = mergeAs[Metric](m)
	default:
		err = fmt.Errorf("%s: %w: unknown schema %q", inputs[0], ErrBadFile, schema)
	}
	if err != nil {
		for _, p := range m.parts {
			os.Remove(p.local)
		}
		return nil, 0, 0, err
	}
	return m.parts, m.rows, wantRows, nil
}

// merger carries one merge's inputs and results.
type merger struct {
	ctx     context.Context
	inputs  []string
	scratch string
	gen     int
	opts    CompactOptions
	meta    map[string]string
	parts   []mergedPart
	rows    int64
}

func mergeAs[T Record](m *merger) error {
	r, err := OpenReader[T](m.ctx, m.inputs, ReaderOptions{BatchRows: 1024})
	if err != nil {
		return err
	}
	defer r.Close()
	codec, err := newKeptEncoderCodec(m.opts.Level)
	if err != nil {
		return err
	}
	m.meta[MetaSchema] = schemaName[T]()
	m.meta[metaSortedByKey] = timeColumn[T]()
	cfg := fileConfig{codec: codec, rowGroupRows: m.opts.RowGroupRows, rowGroupBytes: m.opts.RowGroupBytes,
		rotateSize: m.opts.FileSize, pageBytes: m.opts.PageBytes, meta: m.meta}
	var fw *fileWriter[T]
	ratio := 1.0
	closePart := func() error {
		size, err := fw.close()
		if err != nil {
			return err
		}
		if fw.flushed > 0 {
			ratio = min(1, float64(size)/float64(fw.flushed))
		}
		m.parts = append(m.parts, mergedPart{local: fw.final, size: size})
		fw = nil
		return nil
	}
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if fw != nil {
				fw.abort()
			}
			return err
		}
		if fw == nil {
			k := len(m.parts) + 1
			name := fmt.Sprintf("_%sg%d-%d", compactPrefix, m.gen, k)
			fw, err = newFileWriter[T](filepath.Join(m.scratch, name+".parquet.part"),
				filepath.Join(m.scratch, name+".parquet.tmp"), uint32(k), 0, m.opts.Now(), cfg, ratio)
			if err != nil {
				return err
			}
		}
		if err := fw.add(rec); err != nil {
			fw.abort()
			return err
		}
		m.rows++
		if fw.full() {
			if err := closePart(); err != nil {
				return err
			}
		}
	}
	if fw != nil {
		return closePart()
	}
	return nil
}

// mergedMeta is the metadata of a compaction set's files: what every input
// agrees on, the comma-joined distinct values of the recorder, source and
// redaction keys (a set that mixes raw and redacted files says so), and
// the compaction's own keys.
func mergedMeta(metas []map[string]string, gen int, replaced []string) map[string]string {
	out := map[string]string{}
	joined := map[string]bool{MetaRecorder: true, MetaSource: true, MetaRedaction: true}
	for k, v := range metas[0] {
		if joined[k] || k == metaCreatedKey || k == MetaRecoveredBy || k == MetaReplaces || k == MetaCompaction {
			continue
		}
		same := true
		for _, m := range metas[1:] {
			same = same && m[k] == v
		}
		if same {
			out[k] = v
		}
	}
	for k := range joined {
		var vals []string
		for _, m := range metas {
			for _, v := range strings.Split(m[k], ",") {
				if v != "" {
					vals = append(vals, v)
				}
			}
		}
		slices.Sort(vals)
		out[k] = strings.Join(slices.Compact(vals), ",")
	}
	out[MetaVersion] = Version
	out[MetaCompaction] = "g" + strconv.Itoa(gen)
	out[MetaReplaces] = strings.Join(replaced, ",")
	return out
}
