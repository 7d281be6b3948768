package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
)

// API shapes an imported request can take.
const (
	ShapeChat        = "chat"        // POST /v1/chat/completions, one user message
	ShapeCompletions = "completions" // POST /v1/completions, a prompt string
)

// DefaultModel is the model name written into imported requests when the
// options name none and the trace has none.
const DefaultModel = "trace-model"

// DefaultStart is where a relative trace's clock starts when
// ImportOptions.Start is zero: a fixed date, so that importing the same
// trace twice gives the same dataset.
var DefaultStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// ImportOptions configure Import. The zero value works.
type ImportOptions struct {
	// Shape is ShapeChat (default) or ShapeCompletions.
	Shape string
	// Model names the model in every request; default the trace's own
	// model column, else DefaultModel.
	Model string
	// BlockTokens is the prompt tokens one hash id covers (default
	// DefaultBlockTokens, Mooncake's 512).
	BlockTokens int
	// TimeScale multiplies the gaps between arrivals: 2 spreads the trace
	// over twice its duration, 0.5 compresses it. Default 1.
	TimeScale float64
	// Start is when the first request of the imported trace arrives.
	// Default: the trace's own time for traces with absolute timestamps
	// (Azure), DefaultStart for relative ones.
	Start time.Time
	// Tokenizer is the BPE vocabulary prompts are synthesized for (default
	// recorder.DefaultTokenizer). Lengths are exact under it; other
	// tokenizers see about the same lengths, not the same.
	Tokenizer *recorder.Tokenizer
	// NoStream sends the requests without "stream": true (default: they
	// stream, with usage, so replays measure TTFT).
	NoStream bool
	// Recorder is the recorder id of the rows (default "trace").
	Recorder string
	// MaxRows stops after this many rows (default: all).
	MaxRows int
}

// Report says what an Import did.
type Report struct {
	Rows    int64       // exchanges emitted
	Skipped int64       // rows skipped (see Errors)
	Errors  []*RowError // the first maxReportErrors skipped rows
	First   time.Time   // arrival of the first emitted row
	Last    time.Time   // arrival of the last emitted row
	Tokens  int64       // Σ prompt tokens emitted
}

const maxReportErrors = 20

// Import reads r to its end and emits one exchange per row, in order. emit
// may keep the exchange. A row that cannot be read is skipped and reported;
// an error from emit or from the reader stops the import.
func Import(ctx context.Context, r Reader, opts ImportOptions, emit func(*formats.Exchange) error) (Report, error) {
	var rep Report
	im, err := newImporter(opts)
	if err != nil {
		return rep, err
	}
	for opts.MaxRows <= 0 || rep.Rows < int64(opts.MaxRows) {
		if rep.Rows%1024 == 0 && ctx.Err() != nil {
			return rep, ctx.Err()
		}
		row, err := r.Next()
		if err == io.EOF {
			break
		}
		var rowErr *RowError
		if errors.As(err, &rowErr) {
			rep.Skipped++
			if len(rep.Errors) < maxReportErrors {
				rep.Errors = append(rep.Errors, rowErr)
			}
			continue
		}
		if err != nil {
			return rep, err
		}
		x, err := im.exchange(&row)
		if err != nil {
			rep.Skipped++
			if len(rep.Errors) < maxReportErrors {
				rep.Errors = append(rep.Errors, &RowError{Line: row.Line, Err: err})
			}
			continue
		}
		if err := emit(x); err != nil {
			return rep, err
		}
		if rep.Rows == 0 {
			rep.First = x.Ts
		}
		rep.Rows++
		rep.Last = x.Ts
		rep.Tokens += int64(x.PromptTokens)
	}
	if rep.Rows == 0 && rep.Skipped > 0 {
		return rep, fmt.Errorf("%w: no row could be read (first: %v)", ErrFormat, rep.Errors[0])
	}
	return rep, nil
}

// importer turns rows into exchanges.
type importer struct {
	opts   ImportOptions
	synth  *synthesizer
	path   string
	seq    int64
	fresh  int64 // next hash id for blocks the trace gives none for
	origin time.Time
	start  time.Time
	prev   time.Time // arrival of the previous row, for order checks
}

// freshIDs start far above any hash id a trace uses, so blocks without one
// never match a trace's block.
const freshIDs = 1 << 48

func newImporter(opts ImportOptions) (*importer, error) {
	if opts.Shape == "" {
		opts.Shape = ShapeChat
	}
	if opts.Shape != ShapeChat && opts.Shape != ShapeCompletions {
		return nil, fmt.Errorf("unknown API shape %q (want %s or %s)", opts.Shape, ShapeChat, ShapeCompletions)
	}
	if opts.BlockTokens == 0 {
		opts.BlockTokens = DefaultBlockTokens
	}
	if opts.BlockTokens < 1 || opts.BlockTokens > 1<<20 {
		return nil, fmt.Errorf("block size %d tokens out of range", opts.BlockTokens)
	}
	if opts.TimeScale == 0 {
		opts.TimeScale = 1
	}
	if opts.TimeScale < 0 || math.IsNaN(opts.TimeScale) || math.IsInf(opts.TimeScale, 0) {
		return nil, fmt.Errorf("time scale %v: want a positive number", opts.TimeScale)
	}
	if opts.Tokenizer == nil {
		t, err := recorder.NewTokenizer("")
		if err != nil {
			return nil, err
		}
		opts.Tokenizer = t
	}
	if opts.Recorder == "" {
		opts.Recorder = "trace"
	}
	im := &importer{opts: opts, synth: newSynthesizer(opts.Tokenizer, opts.BlockTokens), fresh: freshIDs}
	im.path = "/v1/chat/completions"
	if opts.Shape == ShapeCompletions {
		im.path = "/v1/completions"
	}
	return im, nil
}

// exchange builds the exchange for one row.
func (im *importer) exchange(row *Row) (*formats.Exchange, error) {
	if err := row.check(); err != nil {
		return nil, err
	}
	if im.seq == 0 {
		im.origin = row.At
		im.start = im.opts.Start
		if im.start.IsZero() {
			im.start = row.At
			if row.Relative {
				im.start = DefaultStart
			}
		}
	} else if row.At.Before(im.prev) {
		return nil, fmt.Errorf("%w: arrival %s is before the previous row's", ErrFormat, row.At.Format(time.RFC3339Nano))
	}
	im.prev = row.At
	at := im.start.Add(time.Duration(float64(row.At.Sub(im.origin)) * im.opts.TimeScale)).UTC()

	ids := im.blockIDs(row)
	content := row.Input
	if im.opts.Shape == ShapeChat {
		content = max(row.Input-recorder.ChatOverheadTokens(1), 0)
	}
	model := im.opts.Model
	if model == "" {
		model = row.Model
	}
	if model == "" {
		model = DefaultModel
	}
	body := im.body(model, ids, content, row.Output)

	im.seq++
	x := &formats.Exchange{
		Ts: at, TsUnixNs: at.UnixNano(),
		Recorder: im.opts.Recorder, Seq: im.seq, ConnID: im.seq,
		Session: row.Session,
		Method:  "POST", Path: im.path,
		ReqHeaders:     map[string]string{"content-type": "application/json"},
		ReqContentType: "application/json",
		ReqBody:        body, ReqBodyBytes: int64(len(body)),
		Model: model, Stream: !im.opts.NoStream,
		MaxTokens:    clamp32(row.Output),
		PromptTokens: clamp32(row.Input), PromptTokensSource: formats.TokensFromTrace,
		PrefixHashes: im.synth.prefixHashes(ids, row.Input),
		OutputTokens: clamp32(row.Output),
		BatchSize:    -1, QueueDepth: -1,
		Complete: true,
	}
	return x, nil
}

// blockIDs returns one id per BlockTokens of the row's prompt: the trace's
// hash ids, cut or extended with fresh ids (which no other row shares) to
// cover the prompt.
func (im *importer) blockIDs(row *Row) []int64 {
	need := (row.Input + im.opts.BlockTokens - 1) / im.opts.BlockTokens
	ids := row.HashIDs
	if len(ids) > need {
		ids = ids[:need]
	}
	for len(ids) < need {
		ids = append(ids, im.fresh)
		im.fresh++
	}
	return ids
}

// body renders the request body: a chat with one user message, or a
// completion prompt.
func (im *importer) body(model string, ids []int64, content, output int) []byte {
	b := make([]byte, 0, 6*content+160)
	b = append(b, `{"model":`...)
	b, _ = appendJSONString(b, model)
	if im.opts.Shape == ShapeChat {
		b = append(b, `,"messages":[{"role":"user","content":"`...)
		b = im.synth.appendPrompt(b, ids, content)
		b = append(b, `"}]`...)
	} else {
		b = append(b, `,"prompt":"`...)
		b = im.synth.appendPrompt(b, ids, content)
		b = append(b, '"')
	}
	if output > 0 {
		b = fmt.Appendf(b, `,"max_tokens":%d`, output)
	}
	if !im.opts.NoStream {
		b = append(b, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	return append(b, '}')
}

func appendJSONString(b []byte, s string) ([]byte, error) {
	q, err := json.Marshal(s)
	return append(b, q...), err
}

func clamp32(n int) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(max(n, 0))
}
