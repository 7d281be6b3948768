package analysis

import (
	"context"
	"encoding/json"
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
	analyse := func(columns []string, opt Options) string {
		t.Helper()
		a := New(opt)
		if _, err := a.AddDataset(context.Background(), []string{dir}, formats.ReaderOptions{Columns: columns}); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(struct {
			S  *Summary
			St *Stats
		}{a.Summary(), a.Stats()})
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	for name, opt := range map[string]Options{
		"default":  {Frame: 5 * time.Second, SLO: slo},
		"filtered": {Frame: 5 * time.Second, SLO: slo, Filter: Filter{MaxPromptTokens: 1999, Models: []string{"llama-3-8b", "mistral-7b"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if got, want := analyse(nil, opt), analyse(every, opt); got != want {
				t.Fatalf("reading exchangeColumns changed the analysis:\n got  %.600s\n want %.600s", got, want)
			}
		})
	}
}
