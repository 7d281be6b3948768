package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/spf13/pflag"

	"github.com/reelkit/reel/formats"
)

const compactUsage = `usage: reel compact DATASET [flags]

Merge each hour partition's small files (every recorder's rotations) into a
few large, time-sorted files with bigger pages and a higher zstd level: the
small-files problem of Spark and DuckDB. DATASET is a local directory or a
storage URL (s3://bucket/prefix; docs/storage.md).

Crash-safe and idempotent: the new files are written before the old ones go,
readers (every reel command) never see a row twice, and a killed compaction
is finished by running it again. Hours that ended less than --min-age ago
are left alone, so recorders still writing into them are not raced.

examples:
  reel compact ./capture
  reel compact s3://traffic/gw --from 2026-03-04T00:00:00Z --to 2026-03-05T00:00:00Z
  reel compact ./results --min-age 0 --json

flags:
`

func runCompact(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("compact", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var from, to timeValue
	fs.Var(&from, "from", "compact hours overlapping this time and later (RFC 3339)")
	fs.Var(&to, "to", "compact hours before this time (RFC 3339, or a duration after --from such as +24h)")
	minAge := fs.Duration("min-age", formats.DefaultCompactMinAge, "leave alone hours that ended less than this long ago (0: every hour)")
	level := fs.Int("level", int(formats.DefaultCompactLevel), "zstd level of the new files (1 fastest … 4 best)")
	tempDir := fs.String("temp-dir", "", "local directory for the new files of a storage URL before their upload (default: the system's)")
	asJSON := fs.Bool("json", false, "print what was done per hour as JSON lines")
	fs.Usage = usageFunc(fs, compactUsage)
	hint := "reel compact ./capture"
	if helped, err := parseFlags(fs, args, hint, stdout); helped || err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{msg: "compact: want exactly one DATASET", hint: hint}
	}
	opts := formats.CompactOptions{MinAge: *minAge, TempDir: *tempDir}
	if *minAge == 0 {
		opts.MinAge = -1 // every hour
	}
	if *level < 1 || *level > 4 {
		return &usageError{msg: fmt.Sprintf("compact: --level %d: want 1 to 4", *level), hint: hint + " --level 4"}
	}
	opts.Level = zstd.Level(*level)
	var err error
	if opts.From, err = from.resolve("--from", time.Time{}, ""); err != nil {
		return &usageError{msg: err.Error(), hint: hint + " --from 2026-03-04T00:00:00Z"}
	}
	if opts.To, err = to.resolve("--to", opts.From, "--from"); err != nil {
		return &usageError{msg: err.Error(), hint: hint + " --from 2026-03-04T00:00:00Z --to +24h"}
	}
	enc := json.NewEncoder(stdout)
	opts.Progress = func(h formats.CompactHour) {
		if *asJSON {
			enc.Encode(h)
			return
		}
		switch h.Action {
		case "compacted":
			fmt.Fprintf(stdout, "%s: %d files (%s) → %d (%s), %d rows\n", h.Partition, h.FilesIn, humanBytes(h.BytesIn), h.FilesOut, humanBytes(h.BytesOut), h.Rows)
		case "finished":
			fmt.Fprintf(stdout, "%s: finished a killed compaction (%d leftover files removed)\n", h.Partition, h.Removed)
		}
	}
	start := time.Now()
	hours, err := formats.Compact(ctx, fs.Arg(0), opts)
	if err != nil {
		return err
	}
	if !*asJSON {
		compacted := 0
		for _, h := range hours {
			if h.Action == "compacted" {
				compacted++
			}
		}
		fmt.Fprintf(stderr, "reel compact: %d hour(s) looked at, %d compacted, in %v\n", len(hours), compacted, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
