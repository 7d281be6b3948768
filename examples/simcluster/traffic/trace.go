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
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
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

// traceLayout is the trace's timestamp format; fractions of up to 7 digits.
const traceLayout = "2006-01-02 15:04:05.999999999"

// ReadAzureTrace parses the trace's CSV (header
// TIMESTAMP,ContextTokens,GeneratedTokens). Rows must be in time order;
// a bad row is an error naming its line.
func ReadAzureTrace(r io.Reader) ([]TraceRow, error) {
	cr := csv.NewReader(bufio.NewReader(r))
	cr.FieldsPerRecord = 3
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%w: read header: %v", ErrTrace, err)
	}
	if strings.TrimPrefix(head[0], "\ufeff") != "TIMESTAMP" || head[1] != "ContextTokens" || head[2] != "GeneratedTokens" {
		return nil, fmt.Errorf("%w: header %q, want TIMESTAMP,ContextTokens,GeneratedTokens", ErrTrace, head)
	}
	var rows []TraceRow
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrTrace, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rows) == maxTraceRows {
			return nil, fmt.Errorf("%w: more than %d rows", ErrTrace, maxTraceRows)
		}
		ts, err := time.Parse(traceLayout, rec[0])
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: timestamp: %v", ErrTrace, line, err)
		}
		ctxTok, err1 := strconv.Atoi(rec[1])
		gen, err2 := strconv.Atoi(rec[2])
		if err1 != nil || err2 != nil || ctxTok < 0 || gen < 0 || ctxTok > 1<<24 || gen > 1<<24 {
			return nil, fmt.Errorf("%w: line %d: token counts %q, %q", ErrTrace, line, rec[1], rec[2])
		}
		if n := len(rows); n > 0 && ts.Before(rows[n-1].Time) {
			return nil, fmt.Errorf("%w: line %d: time goes backwards", ErrTrace, line)
		}
		rows = append(rows, TraceRow{Time: ts, ContextTokens: ctxTok, GeneratedTokens: gen})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%w: no rows", ErrTrace)
	}
	return rows, nil
}
