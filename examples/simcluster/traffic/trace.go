// Package traffic generates production-shaped OpenAI chat traffic for the
// simulated cluster: arrivals and token counts replayed from the Azure LLM
// inference trace (or a bursty built-in process), chat bodies with shared
// system prompts so prefix caching has something to share, and once per
// "week" a window in which prompts are about four times longer — the
// weekly incident of reel's README.
//
// NewPlanner yields the request plan (offset + body) without sending;
// Run sends it open-loop on an absolute schedule and returns a summary.
package traffic

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/reelkit/reel/recorder/trace"
)

// TraceRow is one request of the Azure LLM inference trace
// (AzurePublicDataset, AzureLLMInferenceTrace_conv.csv, CC-BY).
type TraceRow struct {
	Time            time.Time // arrival, UTC
	ContextTokens   int       // prompt tokens
	GeneratedTokens int       // output tokens
}

// ErrTrace wraps every trace parsing error.
var ErrTrace = errors.New("bad trace")

// maxTraceRows bounds ReadAzureTrace's memory (the published hour has
// 19,365 rows; the week-long 2024 traces have a few million).
const maxTraceRows = 10_000_000

// ReadAzureTrace parses the trace's CSV (header
// TIMESTAMP,ContextTokens,GeneratedTokens) with reel's trace reader
// (recorder/trace). Rows must be in time order; a bad row is an error
// naming its line.
func ReadAzureTrace(r io.Reader) ([]TraceRow, error) {
	tr, err := trace.NewAzureReader(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTrace, err)
	}
	var rows []TraceRow
	for {
		row, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrTrace, err)
		}
		if len(rows) == maxTraceRows {
			return nil, fmt.Errorf("%w: more than %d rows", ErrTrace, maxTraceRows)
		}
		if n := len(rows); n > 0 && row.At.Before(rows[n-1].Time) {
			return nil, fmt.Errorf("%w: line %d: time goes backwards", ErrTrace, row.Line)
		}
		rows = append(rows, TraceRow{Time: row.At, ContextTokens: row.Input, GeneratedTokens: row.Output})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: no rows", ErrTrace)
	}
	return rows, nil
}
