package analysis

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/reelkit/reel/analysis/analysistest"
	"github.com/reelkit/reel/formats"
)

// AddDataset reads a recording through exchangeColumns: the summary, the
// stats and a filtered summary must equal those of reading every column,
// on a recording whose every field the analysis could look at varies.
func TestExchangeColumnsCoverAnalysis(t *testing.T) {
	xs := analysistest.WeeklyIncident(7)
	for i, x := range xs {
		switch i % 7 {
		case 1:
			x.Status, x.Error, x.Complete = 500, "upstream: boom", false
		case 2:
			x.Method, x.Path, x.Model = "GET", "/v1/models", "qwen-7b"
		case 3:
			x.Error, x.Complete = "client aborted", false
		case 4:
			x.Model, x.ReqBodyBytes = "mistral-7b", 90_000
		case 5: // not a stream: E2E is the last byte
			x.TTFTNs, x.EventGapsUs, x.Events = 0, nil, 0
		}
		x.ReqBody, x.RespBody = []byte(`{"messages":[]}`), []byte("data: {}\n\n")
		x.ReqHeaders = map[string]string{"content-type": "application/json"}
		if i%3 != 0 { // sessions: chains of turns, some recorded ids
			x.TurnKey, x.ParentTurnKey = int64(i+1), int64(i-i%3)
			x.Session = fmt.Sprint("s", i/3)
		}
	}
	dir := t.TempDir()
	analysistest.WriteDataset(t, dir, xs)
	var every []string
	for _, f := range parquet.SchemaOf(new(formats.Exchange)).Fields() {
		every = append(every, f.Name())
	}
	slo, err := ParseSLO("ttft=200ms,e2e=2s")
	if err != nil {
		t.Fatal(err)
	}
	analyse := func(columns []string, opt Options, rowPath bool) string {
		t.Helper()
		a := New(opt)
		if _, err := a.AddDataset(context.Background(), []string{dir}, formats.ReaderOptions{Columns: columns, RowPath: rowPath}); err != nil {
			t.Fatal(err)
		}
		return outputJSON(t, a)
	}
	for _, mode := range []SessionMode{SessionsInferred, SessionsRecorded} {
		sessions := func(rowPath bool) string {
			st, err := SessionStatsOf(context.Background(), []string{dir}, formats.ReaderOptions{RowPath: rowPath}, mode, LinkerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out, _ := json.Marshal(st)
			return string(out)
		}
		if got, want := sessions(false), sessions(true); got != want || !strings.Contains(got, `"sessions":`) || strings.Contains(got, `"sessions":0`) {
			t.Fatalf("sessions (%v) through the columnar path:\n got  %s\n want %s", mode, got, want)
		}
	}
	for name, opt := range map[string]Options{
		"default":  {Frame: 5 * time.Second, SLO: slo},
		"filtered": {Frame: 5 * time.Second, SLO: slo, Filter: Filter{MaxPromptTokens: 1999, Models: []string{"llama-3-8b", "mistral-7b"}}},
	} {
		t.Run(name, func(t *testing.T) {
			want := analyse(every, opt, false) // maps and bodies: parquet-go's row path
			if got := analyse(nil, opt, false); got != want {
				t.Fatalf("reading exchangeColumns (the columnar path) changed the analysis:\n got  %.600s\n want %.600s", got, want)
			}
			if got := analyse(nil, opt, true); got != want {
				t.Fatalf("reading exchangeColumns through the row path changed the analysis:\n got  %.600s\n want %.600s", got, want)
			}
		})
	}
}

// outputJSON is a's Summary and Stats as JSON: what tests compare byte for
// byte between two ways of reading the same rows.
func outputJSON(t testing.TB, a *Analyzer) string {
	t.Helper()
	out, err := json.Marshal(struct {
		S  *Summary
		St *Stats
	}{a.Summary(), a.Stats()})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
