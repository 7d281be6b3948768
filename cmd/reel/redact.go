package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/redact"
)

const redactUsage = `usage: reel redact IN... OUT [flags]
       reel redact --explain --body FILE [--content-type TYPE] [--response] [flags]

Re-redact a dataset: read every exchange under IN (files, directory trees or
globs; raw captures made with 'reel record --raw' inside a secure zone), redact
it with the policy and key, and write a new dataset under OUT. With --explain,
redact one body and print what each field became and why.

The key comes from --redact-key-file, else $REEL_REDACT_KEY (64 hex digits,
base64, or a passphrase of at least 16 bytes); without one a random key is used
and tokens and prefix_hashes will not match any other dataset.

examples:
  REEL_REDACT_KEY=$(cat /etc/reel/key) reel redact ./raw-capture ./capture
  reel redact './raw/dt=2025-03-14/hour=1*' ./out --policy policy.yaml --redact-key-file /etc/reel/key
  reel redact --explain --body request.json
  reel redact --explain --body stream.txt --content-type text/event-stream --response
  reel redact --explain --body request.json --policy policy.yaml --json

flags:
`

func runRedact(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("redact", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var rf redactorFlags
	rf.register(fs)
	explain := fs.Bool("explain", false, "redact one body (--body) and show what each field became and why")
	body := fs.String("body", "", "with --explain: the body file ('-' for stdin)")
	contentType := fs.String("content-type", "application/json", "with --explain: the body's content type")
	response := fs.Bool("response", false, "with --explain: treat the body as a response (SSE streams, no prefix hashes)")
	asJSON := fs.Bool("json", false, "with --explain: print JSON")
	recorder := fs.String("recorder", "redact", "recorder id in the new files' names and metadata (rows keep their own)")
	skipBad := fs.Bool("skip-bad", false, "skip unreadable input files with a warning (default: fail)")
	fs.Usage = usageFunc(fs, redactUsage)
	if helped, err := parseFlags(fs, args, "reel redact --help", stdout); helped || err != nil {
		return err
	}
	// Misuse is reported before the key is read, so it is not buried
	// under the missing-key warning.
	if *explain && (*body == "" || fs.NArg() > 0) {
		return &usageError{msg: "--explain takes one body file and no datasets", hint: "reel redact --explain --body request.json"}
	}
	if !*explain && fs.NArg() < 2 {
		return &usageError{msg: "need an input dataset and an output directory", hint: "reel redact ./raw-capture ./capture"}
	}
	r, err := rf.openRedactor("redact", stderr)
	if err != nil {
		return err
	}
	if *explain {
		return explainBody(r, *body, *contentType, *response, *asJSON, stdout)
	}
	in, out := fs.Args()[:fs.NArg()-1], fs.Arg(fs.NArg()-1)
	return redactDataset(ctx, r, in, out, *recorder, *skipBad, stdout, stderr)
}

func explainBody(r *redact.Redactor, path, contentType string, response, asJSON bool, stdout io.Writer) error {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(os.Stdin, 64<<20))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	b, expl, err := r.Explain(contentType, data, response)
	if err != nil {
		return fmt.Errorf("explain: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Fingerprint  string               `json:"fingerprint"`
			Fields       []redact.Explanation `json:"fields"`
			PrefixHashes []int64              `json:"prefix_hashes"`
			Topic        string               `json:"topic"`
			Body         string               `json:"body"`
		}{r.Fingerprint(), expl, b.PrefixHashes, b.Topic, string(b.Data)})
	}
	fmt.Fprintf(stdout, "policy: %s\n\n", r.Fingerprint())
	if err := redact.WriteExplanation(stdout, b, expl); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nredacted body (%d bytes, was %d):\n%s\n", len(b.Data), len(data), b.Data)
	return nil
}

func redactDataset(ctx context.Context, r *redact.Redactor, in []string, out, recorder string, skipBad bool, stdout, stderr io.Writer) error {
	files, err := formats.ListFiles(in)
	if err != nil {
		return fmt.Errorf("list input: %w", err)
	}
	if len(files) == 0 {
		return &usageError{msg: fmt.Sprintf("no dataset files under %s", strings.Join(in, " ")), hint: "reel inspect " + in[0]}
	}
	for _, f := range files {
		if fi, err := formats.StatFile(f); err == nil {
			if fp := fi.Meta[formats.MetaRedaction]; fp != "" && fp != "raw" {
				fmt.Fprintf(stderr, "reel redact: note: %s is already redacted (%s); redacting it again\n", f, fp)
			}
		}
	}
	rd, err := formats.OpenReader[formats.Exchange](ctx, in, formats.ReaderOptions{
		SkipBad: skipBad,
		Warn:    func(err error) { fmt.Fprintln(stderr, "reel redact: skipped:", err) },
	})
	if err != nil {
		return fmt.Errorf("open input: %w", err)
	}
	defer rd.Close()
	w, err := formats.NewWriter[formats.Exchange](ctx, formats.WriterOptions{
		Dir: out, Recorder: recorder, Source: "redact:" + strings.Join(in, ","), RedactionFingerprint: r.Fingerprint(),
	})
	if err != nil {
		return fmt.Errorf("open output: %w", err)
	}
	var n, failed int64
	for {
		if err := ctx.Err(); err != nil {
			w.Close(context.Background())
			return err
		}
		x, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			w.Close(context.Background())
			return fmt.Errorf("read input: %w", err)
		}
		r.RedactExchange(x)
		if x.RedactErr != "" {
			failed++
		}
		if err := w.Write(x); err != nil {
			w.Close(context.Background())
			return fmt.Errorf("write output: %w", err)
		}
		n++
	}
	if err := w.Close(context.Background()); err != nil {
		return fmt.Errorf("close output: %w", err)
	}
	fmt.Fprintf(stdout, "redacted %d exchanges from %d files into %s (%d with a redaction error, stored empty)\npolicy: %s\n", n, len(files), out, failed, r.Fingerprint())
	return nil
}
