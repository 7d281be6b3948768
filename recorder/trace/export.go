package trace

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/reelkit/reel/formats"
)

// DefaultVLLMBlockTokens is the hash id block of the vLLM export: vLLM's
// own default for --timed-trace-chunk-hash-size.
const DefaultVLLMBlockTokens = 16

// ExportRow is one request as the trace formats describe it.
type ExportRow struct {
	Offset  time.Duration // arrival after the window's start
	Input   int64         // prompt tokens
	Output  int64         // output tokens
	HashIDs []int64       // one id per BlockTokens of prompt
	Session string        // session key, if recorded
}

// ExportOptions configure an Exporter. The zero value works (Mooncake).
type ExportOptions struct {
	// Format is Mooncake (default), AIPerf or VLLM.
	Format Format
	// BlockTokens is the prompt tokens one exported hash id covers.
	// Default DefaultBlockTokens (512) for Mooncake and AIPerf,
	// DefaultVLLMBlockTokens (16) for VLLM.
	BlockTokens int
	// PrefixBlockTokens is the tokens one entry of the dataset's
	// prefix_hashes covers, when it is a fixed number: imported datasets
	// say so under MetaPrefixBlockTokens. Zero (default) spreads each
	// request's chain evenly over its prompt tokens, which is what a
	// recording's chain (one hash per 64 bytes of prompt text) allows.
	PrefixBlockTokens int
	// Start is the window's start, from which timestamps count. Default:
	// the first exchange's time.
	Start time.Time
}

// Exporter writes exchanges as trace rows. Hash ids are re-blocked from
// each exchange's prefix_hashes: the id of block j is the equivalence class
// of (j, the prefix hash ending where block j ends), numbered from 0 in
// order of first appearance — two requests get the same first k ids exactly
// when their prefix chains agree over their first k blocks. The table of
// ids seen grows with the distinct blocks of the export (about 40 bytes
// each). An Exporter is not safe for concurrent use.
type Exporter struct {
	w       *bufio.Writer
	opts    ExportOptions
	enc     func(*ExportRow) error
	ids     map[blockKey]int64
	start   int64 // ns: ExportOptions.Start, else the first row's time
	started bool  // start is set
	Rows    int64 // rows written
	Skipped int64 // exchanges without a prompt length, not written
}

type blockKey struct {
	hash  int64
	index int
}

// NewExporter returns an Exporter writing to w. Close flushes it.
func NewExporter(w io.Writer, opts ExportOptions) (*Exporter, error) {
	if opts.Format == "" {
		opts.Format = Mooncake
	}
	if opts.BlockTokens == 0 {
		opts.BlockTokens = DefaultBlockTokens
		if opts.Format == VLLM {
			opts.BlockTokens = DefaultVLLMBlockTokens
		}
	}
	if opts.BlockTokens < 1 || opts.PrefixBlockTokens < 0 {
		return nil, fmt.Errorf("block sizes must be positive (got %d and %d)", opts.BlockTokens, opts.PrefixBlockTokens)
	}
	e := &Exporter{w: bufio.NewWriterSize(w, 256<<10), opts: opts, ids: map[blockKey]int64{}}
	if !opts.Start.IsZero() {
		e.start, e.started = opts.Start.UnixNano(), true
	}
	switch opts.Format {
	case Mooncake:
		e.enc = (&mooncakeEncoder{w: e.w}).encode
	case AIPerf:
		e.enc = (&aiperfEncoder{w: e.w}).encode
	case VLLM:
		e.enc = (&vllmEncoder{w: e.w}).encode
	default:
		return nil, fmt.Errorf("cannot export to %q (want %s, %s or %s)", opts.Format, Mooncake, AIPerf, VLLM)
	}
	return e, nil
}

// Write exports one exchange. Exchanges must come in time order;
// exchanges with no prompt length are skipped and counted.
func (e *Exporter) Write(x *formats.Exchange) error {
	if x.PromptTokens <= 0 {
		e.Skipped++
		return nil
	}
	if !e.started {
		e.start, e.started = x.TsUnixNs, true
	}
	row := ExportRow{
		Offset:  time.Duration(max(x.TsUnixNs-e.start, 0)),
		Input:   int64(x.PromptTokens),
		Output:  int64(x.OutputTokens),
		HashIDs: e.hashIDs(x.PrefixHashes, int(x.PromptTokens)),
		Session: x.Session,
	}
	if err := e.enc(&row); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	e.Rows++
	return nil
}

// hashIDs re-blocks a prefix chain over a prompt of n tokens.
func (e *Exporter) hashIDs(chain []int64, n int) []int64 {
	bt, pt := e.opts.BlockTokens, e.opts.PrefixBlockTokens
	blocks := (n + bt - 1) / bt
	out := make([]int64, blocks)
	for j := range out {
		end := min((j+1)*bt, n)
		var last int // the chain entry covering block j's last token
		if pt > 0 {
			last = (end+pt-1)/pt - 1
		} else {
			last = (end*len(chain)+n-1)/n - 1
		}
		key := blockKey{index: j}
		if len(chain) == 0 {
			key.hash, key.index = int64(len(e.ids)), -1 // no chain: a block nobody shares
		} else {
			key.hash = chain[max(min(last, len(chain)-1), 0)]
		}
		id, ok := e.ids[key]
		if !ok {
			id = int64(len(e.ids))
			e.ids[key] = id
		}
		out[j] = id
	}
	return out
}

// Close flushes what is buffered.
func (e *Exporter) Close() error {
	if err := e.w.Flush(); err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	return nil
}
