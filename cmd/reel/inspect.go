package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/redact"
)

const inspectUsage = `usage: reel inspect DATASET... [flags]

Summarise datasets from their Parquet footers alone (no row is read): files,
rows, time range, schema versions, recorders, bytes on disk and per record,
and the compression ratio. DATASET is a file, a directory tree or a glob;
names starting with '_' or '.' (files being written, the spool) are skipped.

examples:
  reel inspect ./capture
  reel inspect './capture/dt=2025-03-14/hour=1*'
  reel inspect ./capture --files
  reel inspect ./results --json | jq .rows

flags:
`

// inspectSummary is what `reel inspect` prints (--json writes it as is).
type inspectSummary struct {
	Files             int            `json:"files"`
	Rows              int64          `json:"rows"`
	RowGroups         int            `json:"row_groups"`
	From              *time.Time     `json:"from,omitempty"`
	To                *time.Time     `json:"to,omitempty"`
	Schemas           map[string]int `json:"schemas"`   // schema → files
	Recorders         map[string]int `json:"recorders"` // recorder → files
	Sources           map[string]int `json:"sources"`
	Redaction         map[string]int `json:"redaction"`
	Versions          map[string]int `json:"reel_versions"`
	BytesOnDisk       int64          `json:"bytes_on_disk"`
	BytesPerRecord    float64        `json:"bytes_per_record"`
	UncompressedBytes int64          `json:"uncompressed_bytes"`
	CompressedBytes   int64          `json:"compressed_bytes"`
	CompressionRatio  float64        `json:"compression_ratio"`
	Bad               []string       `json:"bad_files,omitempty"`
	PerFile           []inspectFile  `json:"per_file,omitempty"`
}

type inspectFile struct {
	Path     string     `json:"path"`
	Schema   string     `json:"schema"`
	Recorder string     `json:"recorder"`
	Rows     int64      `json:"rows"`
	Groups   int        `json:"row_groups"`
	Bytes    int64      `json:"bytes"`
	From     *time.Time `json:"from,omitempty"`
	To       *time.Time `json:"to,omitempty"`
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("inspect", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	perFile := fs.Bool("files", false, "also list every file")
	skipBad := fs.Bool("skip-bad", false, "report unreadable files and go on (default: fail on the first)")
	fs.Usage = usageFunc(fs, inspectUsage)
	if helped, err := parseFlags(fs, args, "reel inspect ./capture", stdout); helped || err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return &usageError{msg: "no dataset given", hint: "reel inspect ./capture"}
	}
	paths, err := formats.ListFiles(fs.Args())
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("no Parquet files in %s", strings.Join(fs.Args(), " "))
	}
	s := inspectSummary{Schemas: map[string]int{}, Recorders: map[string]int{}, Sources: map[string]int{},
		Redaction: map[string]int{}, Versions: map[string]int{}}
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := formats.StatFile(p)
		if err != nil {
			if !*skipBad {
				return fmt.Errorf("%w (use --skip-bad to go on)", err)
			}
			s.Bad = append(s.Bad, err.Error())
			continue
		}
		s.Files++
		s.Rows += fi.Rows
		s.RowGroups += len(fi.RowGroups)
		s.Schemas[fi.Schema]++
		s.Recorders[fi.Recorder()]++
		s.Sources[redact.CleanURL(fi.Meta[formats.MetaSource])]++ // files written before the recorder cleaned it
		s.Redaction[fi.Meta[formats.MetaRedaction]]++
		s.Versions[fi.Meta[formats.MetaVersion]]++
		s.BytesOnDisk += fi.Size
		s.CompressedBytes += fi.CompressedBytes
		s.UncompressedBytes += fi.UncompressedBytes
		if fi.Rows > 0 {
			lo, hi = min(lo, fi.Min), max(hi, fi.Max)
		}
		if *perFile {
			s.PerFile = append(s.PerFile, inspectFile{Path: p, Schema: fi.Schema, Recorder: fi.Recorder(),
				Rows: fi.Rows, Groups: len(fi.RowGroups), Bytes: fi.Size,
				From: inspectTimePtr(fi.MinTime()), To: inspectTimePtr(fi.MaxTime())})
		}
	}
	if lo != math.MaxInt64 && lo != math.MinInt64 && hi != math.MaxInt64 {
		s.From, s.To = inspectTimePtr(time.Unix(0, lo).UTC()), inspectTimePtr(time.Unix(0, hi).UTC())
	}
	if s.Rows > 0 {
		s.BytesPerRecord = float64(s.BytesOnDisk) / float64(s.Rows)
	}
	if s.CompressedBytes > 0 {
		s.CompressionRatio = float64(s.UncompressedBytes) / float64(s.CompressedBytes)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	writeInspect(stdout, &s)
	if len(s.Schemas) > 1 {
		// Unrelated files summed into one "dataset" mislead: say so.
		fmt.Fprintf(stderr, "reel inspect: warning: %s holds files of %d schemas (%s): the totals mix different datasets; inspect each directory alone\n",
			strings.Join(fs.Args(), " "), len(s.Schemas), inspectCounts(s.Schemas))
	}
	if len(s.Bad) > 0 {
		for _, b := range s.Bad {
			fmt.Fprintf(stderr, "reel inspect: skipped %s\n", b)
		}
	}
	return nil
}

func writeInspect(w io.Writer, s *inspectSummary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "files\t%d (%d row groups)\n", s.Files, s.RowGroups)
	fmt.Fprintf(tw, "rows\t%d\n", s.Rows)
	if s.From != nil {
		fmt.Fprintf(tw, "time range\t%s .. %s (%v)\n", s.From.Format(time.RFC3339Nano),
			s.To.Format(time.RFC3339Nano), s.To.Sub(*s.From))
	} else {
		fmt.Fprintf(tw, "time range\tunknown\n")
	}
	fmt.Fprintf(tw, "schema\t%s\n", inspectCounts(s.Schemas))
	fmt.Fprintf(tw, "recorders\t%s\n", inspectCounts(s.Recorders))
	fmt.Fprintf(tw, "sources\t%s\n", inspectCounts(s.Sources))
	fmt.Fprintf(tw, "redaction\t%s\n", inspectCounts(s.Redaction))
	fmt.Fprintf(tw, "written by\treel %s\n", inspectCounts(s.Versions))
	fmt.Fprintf(tw, "on disk\t%s (%.0f bytes/record)\n", inspectBytes(s.BytesOnDisk), s.BytesPerRecord)
	fmt.Fprintf(tw, "compression\t%.1fx (%s of column data in %s)\n", s.CompressionRatio,
		inspectBytes(s.UncompressedBytes), inspectBytes(s.CompressedBytes))
	if len(s.Bad) > 0 {
		fmt.Fprintf(tw, "unreadable\t%d skipped (listed on stderr)\n", len(s.Bad))
	}
	tw.Flush()
	if len(s.PerFile) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tSCHEMA\tRECORDER\tROWS\tGROUPS\tBYTES\tFROM\tTO")
	for _, f := range s.PerFile {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", f.Path, f.Schema, f.Recorder, f.Rows, f.Groups,
			inspectBytes(f.Bytes), inspectTime(f.From), inspectTime(f.To))
	}
	tw.Flush()
}

// inspectCounts renders {"a":3,"b":1} as "a (3 files), b (1 file)", "-" for empty values.
func inspectCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		name := k
		if name == "" {
			name = "-"
		}
		if len(m) == 1 {
			parts = append(parts, name)
			continue
		}
		unit := "files"
		if m[k] == 1 {
			unit = "file"
		}
		parts = append(parts, fmt.Sprintf("%s (%d %s)", name, m[k], unit))
	}
	return strings.Join(parts, ", ")
}

func inspectTimePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func inspectTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func inspectBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), -1
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTP"[i])
}
