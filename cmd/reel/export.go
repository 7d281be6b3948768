package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/trace"
)

const exportUsage = `usage: reel export DATASET... --format mooncake|aiperf|vllm [flags]

Writes a recording (or a window of it) as the JSONL that other benchmarks
replay: one line per LLM request with its arrival (from the window's
start), prompt and output lengths (from usage, else the estimate) and hash
ids re-blocked from the recording's prefix chain, so that two requests get
the same first k hash ids exactly when their prompts share the first k
blocks. Bodies are not exported.

Formats:
  mooncake  timestamp (ms), input_length, output_length, hash_ids of 512 tokens
  aiperf    the same plus session_id: aiperf profile --input-file F
            --custom-dataset-type mooncake_trace --fixed-schedule
  vllm      vLLM's timed_trace defaults: timestamp (s), hash_ids of 16 tokens:
            vllm bench serve --dataset-name timed_trace --dataset-path F

Examples:
  reel export ./capture --format mooncake --out capture.jsonl
  reel export ./capture --format aiperf --from 2026-03-04T13:55:00Z --to 2026-03-04T14:10:00Z --out incident.jsonl
  reel export ./capture --format vllm --path /v1/chat/completions > chat-trace.jsonl

Flags:
`

// exportFlags holds reel export's command line.
type exportFlags struct {
	format, out string
	from, to    timeValue
	paths       []string
	blockTokens int
}

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f exportFlags
	fs := pflag.NewFlagSet("export", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageFunc(fs, exportUsage)
	fs.StringVar(&f.format, "format", "", "mooncake, aiperf or vllm (required)")
	fs.StringVarP(&f.out, "out", "o", "-", "file to write (-: standard output)")
	fs.Var(&f.from, "from", "only requests at or after this time (RFC 3339); timestamps count from here")
	fs.Var(&f.to, "to", "only requests before this time (RFC 3339, or +DURATION after --from)")
	fs.Var(newListValue(nil, &f.paths, false), "path", "only requests whose path matches: a prefix (/v1/chat/), or a glob with * ? [ (repeatable or comma-separated)")
	fs.IntVar(&f.blockTokens, "block-size", 0, "prompt tokens one exported hash id covers (default 512; 16 for vllm)")
	if helped, err := parseFlags(fs, args, "reel export DATASET --format mooncake", stdout); helped || err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return &usageError{msg: "no dataset given", hint: "reel export ./capture --format mooncake --out trace.jsonl"}
	}
	format := trace.Format(f.format)
	switch format {
	case trace.Mooncake, trace.AIPerf, trace.VLLM:
	case "":
		return &usageError{msg: "--format is required", hint: "reel export " + fs.Arg(0) + " --format mooncake"}
	default:
		return &usageError{msg: fmt.Sprintf("--format %q: want mooncake, aiperf or vllm", f.format), hint: "reel export " + fs.Arg(0) + " --format mooncake"}
	}
	if f.blockTokens < 0 {
		return &usageError{msg: "--block-size must be positive", hint: "reel export DATASET --format mooncake --block-size 512"}
	}
	from, err := f.from.resolve("--from", time.Now(), "now")
	if err != nil {
		return &usageError{msg: err.Error(), hint: "reel export DATASET --format mooncake --from 2026-03-04T14:00:00Z"}
	}
	to, err := f.to.resolve("--to", from, "--from")
	if err != nil {
		return &usageError{msg: err.Error(), hint: "reel export DATASET --format mooncake --to 2026-03-04T14:10:00Z"}
	}
	prefixBlock, err := datasetPrefixBlock(fs.Args())
	if err != nil {
		return err
	}

	rd, err := formats.OpenReader[formats.Exchange](ctx, fs.Args(), formats.ReaderOptions{From: from, To: to,
		Columns: []string{"path", "session", "prompt_tokens", "output_tokens", "prefix_hashes"}})
	if err != nil {
		return err
	}
	defer rd.Close()

	var w io.Writer = stdout
	var file *os.File
	if f.out != "-" {
		if file, err = os.Create(f.out); err != nil {
			return err
		}
		defer file.Close()
		w = file
	}
	e, err := trace.NewExporter(w, trace.ExportOptions{Format: format, BlockTokens: f.blockTokens, PrefixBlockTokens: prefixBlock, Start: from})
	if err != nil {
		return err
	}
	filter := recorder.Filter{Paths: f.paths}
	for {
		x, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if !filter.Match("", "", x.Path) {
			continue
		}
		if err := e.Write(x); err != nil {
			return err
		}
	}
	if err := e.Close(); err != nil {
		return err
	}
	if file != nil {
		if err := file.Close(); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "reel export: %d requests written as %s", e.Rows, format)
	if e.Skipped > 0 {
		fmt.Fprintf(stderr, " (%d without a prompt length skipped)", e.Skipped)
	}
	fmt.Fprintln(stderr)
	return nil
}

// datasetPrefixBlock reads the prefix_hashes block size, in tokens, that
// the datasets' files state (imports do); 0 when they state none
// (recordings: a hash per 64 bytes of text). Files that disagree are an
// error, as their hash ids could not be compared.
func datasetPrefixBlock(paths []string) (int, error) {
	files, err := formats.ListFiles(paths)
	if err != nil {
		return 0, err
	}
	block := -1
	for _, p := range files {
		fi, err := formats.StatFile(p)
		if err != nil {
			return 0, err
		}
		n := 0
		if v := fi.Meta[formats.MetaUserPrefix+trace.MetaPrefixBlockTokens]; v != "" {
			if n, err = strconv.Atoi(v); err != nil || n < 1 {
				return 0, fmt.Errorf("%s: bad %s %q", p, trace.MetaPrefixBlockTokens, v)
			}
		}
		if block >= 0 && n != block {
			return 0, fmt.Errorf("%s: prefix_hashes of %d-token blocks, other files %d (0: a recording's): export them apart", p, n, block)
		}
		block = n
	}
	return max(block, 0), nil
}
