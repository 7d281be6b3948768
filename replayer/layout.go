package replayer

// The result layout: where a run's result files go, what each file says
// about the run in its metadata, and the rule that keeps runs apart. The
// CLI and the examples write results through these, so every result file
// answers "which run, measured how" the same way.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/reelkit/reel/formats"
)

// Result file metadata keys (formats.WriterOptions.Meta; stored under
// formats.MetaUserPrefix). ResultMeta fills them; docs/schema.md lists them.
const (
	MetaRunID        = "run_id"        // the run: shards of one run share it
	MetaSpeed        = "speed"         // time compression of this result set
	MetaTarget       = "target"        // the shadow's URL, without user info
	MetaShard        = "shard"         // i/n
	MetaDataset      = "dataset"       // the recording's paths, comma-separated
	MetaFrame        = "frame"         // frame length
	MetaFrom         = "from"          // window start (RFC 3339), when set
	MetaTo           = "to"            // window end (RFC 3339), when set
	MetaFrames       = "frames"        // frame range, when set
	MetaStartAt      = "start_at"      // shared wall-clock start, when set
	MetaSLO          = "slo"           // SLO bounds, when set
	MetaSelection    = "selection"     // filters, sample and shard, as text
	MetaConn         = "conn"          // pooled or recorded
	MetaLoop         = "loop"          // loops over the window
	MetaSample       = "sample"        // sampled share
	MetaMaxInflight  = "max_inflight"  // in-flight cap (0: none)
	MetaWarmup       = "warmup"        // warm-up requests
	MetaExcludeFirst = "exclude_first" // span left out of the summaries
	MetaPinOutput    = "pin_output"    // --pin-output: "false", "server" or "true" (PinMode.String)
	MetaIncludeUsage = "include_usage" // streams asked for usage
)

// ResultRowGroupRows and ResultPageBytes shape a result file: row groups
// of 65,536 rows (about 5 MB of Parquet) and page buffers of 256 KiB.
// parquet-go gives every column of a file's first row group a buffer of the
// full page size, and a narrow column's page holds a whole row group, so at
// formats' default 1 MiB pages the writer held 36 MB of column buffers for
// each new file and about 20 MB for each later row group; at 256 KiB it
// holds 9 MB either way, and the files are 0.4 % larger. Smaller row groups
// would hold less again but cost DuckDB more to scan (16,384 rows: 1.4×
// its CPU at two threads). The sizes change how rows are cut into pages,
// never their values (docs/performance.md, #22 session 8).
const (
	ResultRowGroupRows = 65536
	ResultPageBytes    = 256 << 10
)

// ResultWriterOptions are the options of the writer of a run's results at
// speed into dir: the shard's writer name, the run's metadata (ResultMeta)
// and the result file shape above. reel replay writes through them.
func ResultWriterOptions(dir string, o Options, speed float64, dataset []string) formats.WriterOptions {
	return formats.WriterOptions{
		Dir: dir, Recorder: WriterName(o.Selection.Shard), Source: "replay:" + o.RunID,
		Meta:         ResultMeta(o, speed, dataset),
		RowGroupRows: ResultRowGroupRows,
		PageBytes:    ResultPageBytes,
	}
}

// ResultMeta is the metadata every result file of a run at speed carries:
// the run id and the parameters that decide what was measured, so that
// reel report can tell runs apart and reel compare can flag two runs that
// measured different windows or selections.
func ResultMeta(o Options, speed float64, dataset []string) map[string]string {
	sel := &o.Selection
	m := map[string]string{
		MetaRunID:        o.RunID,
		MetaSpeed:        strconv.FormatFloat(speed, 'g', -1, 64),
		MetaShard:        sel.Shard.String(),
		MetaDataset:      strings.Join(dataset, ","),
		MetaFrame:        sel.frame().String(),
		MetaConn:         string(o.Conn),
		MetaLoop:         strconv.Itoa(max(o.Loop, 1)),
		MetaSample:       strconv.FormatFloat(sampleOrAll(sel.Sample), 'g', -1, 64),
		MetaMaxInflight:  strconv.Itoa(o.MaxInflight),
		MetaWarmup:       strconv.Itoa(o.Warmup),
		MetaExcludeFirst: o.ExcludeFirst.String(),
		MetaPinOutput:    o.PinOutput.String(),
		MetaIncludeUsage: strconv.FormatBool(o.IncludeUsage),
		MetaSelection:    sel.String(),
	}
	if m[MetaConn] == "" {
		m[MetaConn] = string(ConnPooled)
	}
	if o.Target != nil {
		t := *o.Target
		t.User = nil
		m[MetaTarget] = t.String()
	}
	for k, t := range map[string]time.Time{MetaFrom: sel.From, MetaTo: sel.To, MetaStartAt: o.StartAt} {
		if !t.IsZero() {
			m[k] = t.UTC().Format(time.RFC3339Nano)
		}
	}
	if !sel.Frames.IsZero() {
		m[MetaFrames] = sel.Frames.String()
	}
	if !o.Analysis.SLO.IsZero() {
		m[MetaSLO] = o.Analysis.SLO.String()
	}
	return m
}

func sampleOrAll(s float64) float64 {
	if s <= 0 || s >= 1 {
		return 1
	}
	return s
}

// String describes the selection's filters, e.g. "path /v1/chat/, model
// llama; sample 0.5; shard 2/8"; "all" for the zero selection (windows and
// frames are described by their own keys).
func (s *Selection) String() string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, name+" "+strings.Join(v, " or "))
		}
	}
	add("path", s.Paths)
	add("model", s.Models)
	add("method", s.Methods)
	for _, h := range s.Headers {
		parts = append(parts, "header "+h.Name+": "+h.Value)
	}
	switch lo, hi := s.MinPromptTokens, s.MaxPromptTokens; {
	case lo > 0 || hi > 0:
		parts = append(parts, fmt.Sprintf("prompt tokens %s:%s", tokenBound(lo), tokenBound(hi)))
	}
	if s.Sample > 0 && s.Sample < 1 {
		parts = append(parts, "sample "+strconv.FormatFloat(s.Sample, 'g', -1, 64))
	}
	if s.Shard.Count > 1 {
		parts = append(parts, "shard "+s.Shard.String())
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, "; ")
}

func tokenBound(n int32) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(int(n))
}

// String writes the range as ParseFrameRange reads it, ends joined by "..".
func (r FrameRange) String() string {
	end := func(f FrameRef) string {
		switch {
		case !f.Set:
			return ""
		case !f.Time.IsZero():
			return f.Time.UTC().Format(time.RFC3339Nano)
		}
		return strconv.Itoa(f.Index)
	}
	return end(r.From) + ".." + end(r.To)
}

// ResultDirs returns where the results of one speed go under out, and where
// the metrics scraped beside them go. A single run writes into out itself;
// each speed of a sweep is a Hive partition out/speed=G, so a query engine
// sees a speed column, with its metrics in out.metrics/speed=G (outside
// the results tree: one schema per tree).
func ResultDirs(out string, speed float64, sweep bool) (results, metrics string) {
	results, metrics = out, formats.MetricsDir(out)
	if sweep {
		part := "speed=" + strconv.FormatFloat(speed, 'g', -1, 64)
		results, metrics = formats.JoinPath(out, part), formats.JoinPath(metrics, part)
	}
	return results, metrics
}

// WriterName is the recorder name of a shard's result files (the file-name
// prefix): "replay", or "replay-shard-I-of-N".
func WriterName(s Shard) string {
	if s.Count > 1 {
		return fmt.Sprintf("replay-shard-%d-of-%d", s.Index, s.Count)
	}
	return "replay"
}

// ShardedRunID is the run id shards of one run share when none is given:
// derived from what they all agree on (dataset, target, window, selection
// without the shard index, speed list and the shared start), so every
// shard of a Kubernetes Indexed Job computes the same one. Give a
// different --start-at (or a --run-id) to make a rerun a new run.
func ShardedRunID(o Options, dataset []string, speeds []float64) string {
	sel := o.Selection
	sel.Shard.Index = 0
	o.Selection = sel
	o.RunID = ""
	meta := ResultMeta(o, 0, dataset)
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, meta[k])
	}
	fmt.Fprintf(h, "speeds=%v\n", speeds)
	at := "now"
	if !o.StartAt.IsZero() {
		at = o.StartAt.UTC().Format("20060102T150405")
	}
	return "run-" + at + "-" + hex.EncodeToString(h.Sum(nil))[:8]
}

// Run is one measurement found in a results location: the files of one run
// id at one speed.
type Run struct {
	RunID  string            // the run's id (run_id metadata)
	Speed  string            // the result set's speed as written (speed metadata); empty when not recorded
	Shards []string          // shard strings of the files, sorted, unique
	Dirs   []string          // directories holding its files, sorted, unique
	Files  int               // result files
	Meta   map[string]string // the first file's run metadata (keys without prefix)
}

// Name is "RUN_ID" or "RUN_ID at speed G" for a sweep's partition.
func (r *Run) Name() string {
	id := r.RunID
	if id == "" {
		id = "(no run id)"
	}
	if r.Speed != "" && r.Speed != "1" {
		return id + " at speed " + r.Speed
	}
	return id
}

// ListRuns reads the footers of the result files under paths and groups
// them by run and speed, in the order of the files. Files that are not
// result files (recordings, unreadable files) are not listed: the reader
// reports those.
func ListRuns(paths []string) ([]Run, error) {
	files, err := formats.ListFiles(paths)
	if err != nil {
		return nil, err
	}
	var runs []Run
	index := map[[2]string]int{}
	for _, p := range files {
		fi, err := formats.StatFile(p)
		if err != nil || fi.Schema != formats.ResultSchema {
			continue
		}
		id, speed := fi.Meta[formats.MetaUserPrefix+MetaRunID], fi.Meta[formats.MetaUserPrefix+MetaSpeed]
		key := [2]string{id, speed}
		i, ok := index[key]
		if !ok {
			meta := map[string]string{}
			for k, v := range fi.Meta {
				if s, ok := strings.CutPrefix(k, formats.MetaUserPrefix); ok {
					meta[s] = v
				}
			}
			runs = append(runs, Run{RunID: id, Speed: speed, Meta: meta})
			i = len(runs) - 1
			index[key] = i
		}
		r := &runs[i]
		r.Files++
		r.Shards = addSorted(r.Shards, fi.Meta[formats.MetaUserPrefix+MetaShard])
		r.Dirs = addSorted(r.Dirs, filepath.Dir(p))
	}
	return runs, nil
}

func addSorted(list []string, s string) []string {
	if i, found := slices.BinarySearch(list, s); !found {
		list = slices.Insert(list, i, s)
	}
	return list
}

// ErrOtherRun is returned by CheckResultsDir when a results location holds
// another run's results (or a recording).
var ErrOtherRun = errors.New("the results location holds another run")

// CheckResultsDir is the rule that keeps runs apart: a run writes into out
// only when out holds no result file yet, or only files of the same run id
// from other shards (shards of one run land together and reel report
// merges them). A recording, another run's results or this shard's own
// earlier results are refused with ErrOtherRun.
//
// With appendTo the new results join the one run already in out: the id
// returned is that run's (an explicit runID must match it), so reel report
// merges them as one run. Otherwise the id returned is runID.
func CheckResultsDir(out, runID string, explicit bool, shard Shard, appendTo bool) (string, error) {
	files, err := formats.ListFiles([]string{out})
	if err != nil {
		return runID, nil // nothing there yet (or unreadable: the writer says so)
	}
	var ids []string
	seen := map[string]bool{}
	sameShard := false
	for _, p := range files {
		fi, err := formats.StatFile(p)
		if err != nil {
			continue
		}
		if fi.Schema != formats.ResultSchema {
			return "", fmt.Errorf("%w: %s is a %s file; write results to a directory of their own", ErrOtherRun, p, fi.Schema)
		}
		id := fi.Meta[formats.MetaUserPrefix+MetaRunID]
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
		if id == runID && fi.Meta[formats.MetaUserPrefix+MetaShard] == shard.String() {
			sameShard = true
		}
	}
	if appendTo {
		switch {
		case len(ids) == 0:
			return runID, nil
		case len(ids) > 1:
			return "", fmt.Errorf("%w: --append: %s holds %d runs (%s); append to a location that holds one", ErrOtherRun, out, len(ids), strings.Join(ids, ", "))
		case explicit && ids[0] != runID:
			return "", fmt.Errorf("%w: --append: %s holds run %s, not --run-id %s", ErrOtherRun, out, ids[0], runID)
		}
		return ids[0], nil
	}
	var others []string
	for _, id := range ids {
		if id != runID {
			others = append(others, id)
		}
	}
	switch {
	case len(others) > 0:
		return "", fmt.Errorf("%w: %s already holds results of run %s; give a new --out (one directory per run), or --append to add to that run", ErrOtherRun, out, strings.Join(others, ", "))
	case sameShard:
		return "", fmt.Errorf("%w: %s already holds shard %s of run %s; give a new --out or --run-id, or --append to add to it", ErrOtherRun, out, shard, runID)
	}
	return runID, nil
}

// DefaultRunID is the run id when none is given: ShardedRunID for a shard
// (every shard must agree on it), else a time-based id.
func DefaultRunID(o Options, dataset []string, speeds []float64) string {
	if o.Selection.Shard.Count > 1 {
		return ShardedRunID(o, dataset, speeds)
	}
	return timeRunID(time.Now())
}

// timeRunID is the time-based run id: "run-20261125T140000.000".
func timeRunID(t time.Time) string { return "run-" + t.UTC().Format("20060102T150405.000") }
