// Package trace imports the LLM request traces the field publishes
// (Mooncake JSONL, the Azure LLM inference CSVs, BurstGPT CSV, or any
// CSV/JSONL with a column mapping) as exchange/1 records, and exports
// recordings back to the JSONL that Mooncake's, AIPerf's and vLLM's
// benchmarks replay. Each format lives in its own file, reader and writer
// together.
//
// A trace row carries an arrival time, prompt and output lengths in
// tokens, and sometimes hash ids of fixed-size prompt blocks (Mooncake's
// hash_ids: two rows whose hash_ids share their first k entries share their
// first k·512 prompt tokens). Import synthesizes each row's prompt from
// words that are one token each under the chosen BPE vocabulary, drawing
// block j's words from hash_ids[j] alone, so that
//
//   - the prompt has exactly the trace's length under that tokenizer
//     (ChatOverheadTokens of chat formatting included), and
//   - rows sharing their first k hash ids share exactly their first
//     k·BlockTokens prompt tokens, and differ from the next token on.
//
// It also writes prefix_hashes: a chain over the prompt's
// PrefixBlockTokens-token blocks, so the shared hash ids become shared
// leading prefix_hashes, and export re-blocks them into hash ids again.
package trace

import (
	"errors"
	"fmt"
	"time"
)

// DefaultBlockTokens is the prompt tokens one hash id covers in Mooncake
// traces (and AIPerf's default).
const DefaultBlockTokens = 512

// PrefixBlockTokens is the block, in tokens, of the prefix_hashes an import
// writes (the KV block of vLLM and most engines). Files say so under the
// metadata key MetaPrefixBlockTokens.
const PrefixBlockTokens = 16

// MetaPrefixBlockTokens is the formats.WriterOptions.Meta key under which
// an imported dataset records PrefixBlockTokens.
const MetaPrefixBlockTokens = "prefix_block_tokens"

// maxTokens bounds a row's lengths: beyond, a row is refused as absurd
// (the longest context windows are about 10M tokens).
const maxTokens = 1 << 24

// maxHashIDs bounds one row's hash ids.
const maxHashIDs = maxTokens / 16

// ErrFormat wraps every parse error of a trace; errors for one row come as
// a *RowError.
var ErrFormat = errors.New("bad trace")

// RowError reports a trace row that could not be read.
type RowError struct {
	Line int   // 1-based line of the row in the file
	Err  error // what was wrong with the row
}

func (e *RowError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *RowError) Unwrap() error { return e.Err }

// Row is one request of a trace.
type Row struct {
	// At is the arrival time. Relative traces (Mooncake, BurstGPT) give it
	// as an offset from the Unix epoch; Relative says so.
	At       time.Time
	Relative bool
	Input    int     // prompt tokens
	Output   int     // output tokens
	HashIDs  []int64 // ids of the prompt's blocks, in order; nil when the trace has none
	Model    string  // the trace's model name, if it has one
	Session  string  // conversation id, if the trace has one
	Line     int     // line in the file, for messages
}

func (r *Row) check() error {
	switch {
	case r.Input < 0 || r.Input > maxTokens:
		return fmt.Errorf("%w: input length %d out of range", ErrFormat, r.Input)
	case r.Output < 0 || r.Output > maxTokens:
		return fmt.Errorf("%w: output length %d out of range", ErrFormat, r.Output)
	case len(r.HashIDs) > maxHashIDs:
		return fmt.Errorf("%w: %d hash ids", ErrFormat, len(r.HashIDs))
	}
	return nil
}

// Reader yields a trace's rows in file order. Next returns io.EOF at the
// end, a *RowError for a row it skips (the caller may go on), and any other
// error when it cannot go on.
type Reader interface {
	Next() (Row, error)
}

// Format names a trace format.
type Format string

// Formats reel reads and writes.
const (
	Mooncake Format = "mooncake" // JSONL: timestamp (ms), input_length, output_length, hash_ids
	Azure    Format = "azure"    // CSV: TIMESTAMP, ContextTokens, GeneratedTokens (2023 and 2024)
	BurstGPT Format = "burstgpt" // CSV: Timestamp (s), Model, Request tokens, Response tokens, …
	Generic  Format = "generic"  // CSV or JSONL with a Mapping
	AIPerf   Format = "aiperf"   // export: AIPerf's mooncake_trace JSONL for --fixed-schedule
	VLLM     Format = "vllm"     // export: vLLM bench serve's timed_trace JSONL
)
