package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/trace"
)

const importUsage = `usage: reel import TRACE --out DIR [flags]

Turns a public or private LLM request trace into a reel dataset that
replay, stats, report and compare use unchanged. Each row becomes a
request whose prompt is synthesized to the trace's length under a real BPE
tokenizer (o200k_base by default); rows whose hash ids share their first
k blocks share exactly their first k×block-size prompt tokens, and their
prefix_hashes say so. Bodies are synthetic: nothing to redact.

Formats (--format, default: from the file's extension and header):
  mooncake   JSONL: timestamp (ms), input_length, output_length, hash_ids (512-token blocks)
  azure      CSV: TIMESTAMP, ContextTokens, GeneratedTokens (Azure LLM inference 2023 and 2024)
  burstgpt   CSV: Timestamp (s), Model, Request tokens, Response tokens, ...
  csv, jsonl any other trace, with --map naming its columns

Examples:
  # the Mooncake FAST'25 trace, as chat requests, then replay it
  reel import ../shared/traces/mooncake-synthetic-fast25.jsonl --out mooncake
  reel replay mooncake --target http://127.0.0.1:8000 --pin-output

  # an hour of Azure's conversation trace as /v1/completions, twice as fast
  reel import ../shared/traces/azure-llm-conv-2023.csv --out azure --api completions --time-scale 0.5

  # your own CSV: column names mapped, times in Unix milliseconds
  reel import requests.csv --out mine --format csv \
      --map time=created_ms --map unit=unix_ms --map input=prompt_tokens --map output=completion_tokens

Flags:
`

// importFlags holds reel import's command line.
type importFlags struct {
	out, format, api, model string
	maps                    []string
	blockTokens, maxRows    int
	timeScale               float64
	tokenizer, recorder     string
	start                   timeValue
	noStream                bool
}

func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f importFlags
	fs := pflag.NewFlagSet("import", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageFunc(fs, importUsage)
	fs.StringVar(&f.out, "out", "", "dataset directory to write (required)")
	fs.StringVar(&f.format, "format", "", "trace format: mooncake, azure, burstgpt, csv or jsonl (default: detected)")
	fs.StringSliceVar(&f.maps, "map", nil, "KEY=COLUMN for csv/jsonl traces: time, unit (s, ms, us, ns, unix, unix_ms, datetime), input, output, hash_ids, model, session (repeatable)")
	fs.StringVar(&f.api, "api", trace.ShapeChat, "request shape: chat (/v1/chat/completions) or completions (/v1/completions)")
	fs.StringVar(&f.model, "model", "", "model name in every request (default: the trace's model column, else "+trace.DefaultModel+")")
	fs.IntVar(&f.blockTokens, "block-size", trace.DefaultBlockTokens, "prompt tokens one hash id covers")
	fs.Float64Var(&f.timeScale, "time-scale", 1, "multiply the gaps between arrivals (0.5: twice as fast)")
	fs.Var(&f.start, "start", "arrival time of the first request, RFC 3339 (default: the trace's own for absolute traces, else "+trace.DefaultStart.Format("2006-01-02T15:04:05Z")+")")
	fs.StringVar(&f.tokenizer, "tokenizer", recorder.DefaultTokenizer, "BPE vocabulary prompts are exact under: o200k_base or cl100k_base")
	fs.BoolVar(&f.noStream, "no-stream", false, "requests without \"stream\": true")
	fs.StringVar(&f.recorder, "recorder-id", "trace", "recorder id in file names and every row")
	fs.IntVar(&f.maxRows, "max-rows", 0, "import at most this many rows (0: all)")
	if helped, err := parseFlags(fs, args, "reel import TRACE --out DIR", stdout); helped || err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{msg: "give one trace file", hint: "reel import trace.jsonl --out DIR"}
	}
	if f.out == "" {
		return &usageError{msg: "--out is required", hint: "reel import " + fs.Arg(0) + " --out DIR"}
	}
	opts := trace.ImportOptions{Shape: f.api, Model: f.model, BlockTokens: f.blockTokens, TimeScale: f.timeScale,
		NoStream: f.noStream, Recorder: f.recorder, MaxRows: f.maxRows}
	if f.timeScale <= 0 {
		return &usageError{msg: fmt.Sprintf("--time-scale %v: want a positive number", f.timeScale), hint: "reel import TRACE --out DIR --time-scale 0.5"}
	}
	if f.api != trace.ShapeChat && f.api != trace.ShapeCompletions {
		return &usageError{msg: fmt.Sprintf("--api %q: want chat or completions", f.api), hint: "reel import TRACE --out DIR --api completions"}
	}
	var err error
	if opts.Start, err = f.start.resolve("--start", time.Now(), "now"); err != nil {
		return &usageError{msg: err.Error(), hint: "reel import TRACE --out DIR --start 2026-03-04T14:00:00Z"}
	}
	if opts.Tokenizer, err = recorder.NewTokenizer(f.tokenizer); err != nil {
		return &usageError{msg: "--tokenizer: " + err.Error(), hint: "reel import TRACE --out DIR --tokenizer cl100k_base"}
	}

	file, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer file.Close()
	in, err := decompress(file)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	format, r, err := openTrace(in, fs.Arg(0), f.format, f.maps)
	if err != nil {
		return err
	}

	// Synthetic bodies need no redaction (nil redactor); the recorder still
	// carries them to the dataset as it does every source's, waiting for
	// room rather than dropping, as file imports do.
	rec, _, err := recorder.OpenDataset(ctx, formats.WriterOptions{
		Dir: f.out, Recorder: f.recorder, NoSpool: true,
		Source:               "trace:" + format + ":" + filepath.Base(fs.Arg(0)),
		RedactionFingerprint: "synthetic",
		Meta: map[string]string{
			trace.MetaPrefixBlockTokens: strconv.Itoa(trace.PrefixBlockTokens),
			"trace_block_tokens":        strconv.Itoa(f.blockTokens),
			"tokenizer":                 opts.Tokenizer.Name(),
		},
	}, nil, recorder.Options{Wait: true})
	if err != nil {
		return err
	}
	rep, ierr := trace.Import(ctx, r, opts, func(x *formats.Exchange) error { rec.Record(x); return nil })
	if err := rec.Close(context.Background()); err != nil {
		return fmt.Errorf("close dataset: %w", err)
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(stderr, "reel import: %s: skipped %v\n", fs.Arg(0), e)
	}
	if ierr != nil {
		return ierr
	}
	if rep.Skipped > int64(len(rep.Errors)) {
		fmt.Fprintf(stderr, "reel import: ... %d rows skipped in all\n", rep.Skipped)
	}
	fmt.Fprintf(stdout, "imported %d requests (%s trace, %d prompt tokens under %s) spanning %s .. %s into %s\n",
		rep.Rows, format, rep.Tokens, opts.Tokenizer.Name(), rep.First.Format("2006-01-02T15:04:05.000Z"), rep.Last.Format("2006-01-02T15:04:05.000Z"), f.out)
	return nil
}

// openTrace picks the reader for a trace: the named format, or one
// detected from the file name and its first line.
func openTrace(in *bufio.Reader, name, format string, maps []string) (string, trace.Reader, error) {
	if format == "" {
		var err error
		if format, err = detectTraceFormat(in, name, len(maps) > 0); err != nil {
			return "", nil, err
		}
	}
	if len(maps) > 0 && format != "csv" && format != "jsonl" {
		return "", nil, &usageError{msg: "--map is for --format csv or jsonl", hint: "reel import TRACE --out DIR --format csv --map time=ts --map input=prompt_tokens"}
	}
	var (
		r   trace.Reader
		err error
	)
	switch format {
	case string(trace.Mooncake):
		r = trace.NewMooncakeReader(in)
	case string(trace.Azure):
		r, err = trace.NewAzureReader(in)
	case string(trace.BurstGPT):
		r, err = trace.NewBurstGPTReader(in)
	case "csv", "jsonl":
		m, merr := trace.ParseMapping(maps)
		if merr != nil {
			return "", nil, &usageError{msg: "--map: " + merr.Error(), hint: "reel import TRACE --out DIR --format " + format + " --map time=ts --map input=prompt_tokens --map output=completion_tokens"}
		}
		if format == "csv" {
			r, err = trace.NewCSVReader(in, m)
		} else {
			r = trace.NewJSONLReader(in, m)
		}
	default:
		return "", nil, &usageError{msg: fmt.Sprintf("--format %q: want mooncake, azure, burstgpt, csv or jsonl", format), hint: "reel import TRACE --out DIR --format mooncake"}
	}
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", name, err)
	}
	return format, r, nil
}

// detectTraceFormat guesses a trace's format from its name and first line.
func detectTraceFormat(in *bufio.Reader, name string, mapped bool) (string, error) {
	head, _ := in.Peek(4096)
	first, _, _ := bytes.Cut(head, []byte("\n"))
	first = bytes.TrimPrefix(bytes.TrimSpace(first), []byte("\ufeff"))
	isJSON := len(first) > 0 && first[0] == '{'
	switch {
	case isJSON && mapped:
		return "jsonl", nil
	case isJSON:
		return string(trace.Mooncake), nil
	case mapped:
		return "csv", nil
	case bytes.HasPrefix(first, []byte("TIMESTAMP,")) && bytes.Contains(first, []byte("ContextTokens")):
		return string(trace.Azure), nil
	case bytes.Contains(first, []byte("Request tokens")) && bytes.Contains(first, []byte("Timestamp")):
		return string(trace.BurstGPT), nil
	}
	return "", &usageError{msg: fmt.Sprintf("%s: cannot tell the trace format from %q", name, truncateForMessage(string(first))),
		hint: "reel import " + name + " --out DIR --format csv --map time=COLUMN --map input=COLUMN"}
}

// decompress returns a reader of f's content, gunzipped when it is gzip.
func decompress(f *os.File) (*bufio.Reader, error) {
	br := bufio.NewReaderSize(f, 1<<20)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		return bufio.NewReaderSize(zr, 1<<20), nil
	}
	return br, nil
}

func truncateForMessage(s string) string {
	if len(s) > 80 {
		return strings.ToValidUTF8(s[:80], "") + "…"
	}
	return s
}
