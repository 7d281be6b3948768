package analysis

import (
	"context"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis/analysistest"
	"github.com/reelkit/reel/formats"
)

// The metrics added on their own goroutine (metricsPipe) give the Summary
// and Stats of one goroutine adding everything, byte for byte: for a
// recording and for replay results, over many batches and a partial last
// one, with long streams' gaps, with rows left out by ExcludeFirst and the
// Filter, and with the exact budget small enough that distributions are
// sketched on the way.
func TestPipedMatchesSerial(t *testing.T) {
	recording, results := pipeDatasets(t)
	for name, opt := range map[string]Options{
		"default":  {},
		"sketched": {ExactValues: 2000, Frame: 10 * time.Second},
		"left out": {ExcludeFirst: 30 * time.Second, Filter: Filter{MinPromptTokens: 500}},
	} {
		for _, dir := range []string{recording, results} {
			analyse := func(piped bool) string {
				t.Helper()
				a := New(opt)
				n, err := a.addDataset(context.Background(), []string{dir}, formats.ReaderOptions{ReuseSlices: true}, piped)
				if err != nil || n == 0 {
					t.Fatalf("%s: %d rows, %v", name, n, err)
				}
				return outputJSON(t, a)
			}
			if got, want := analyse(true), analyse(false); got != want {
				t.Errorf("%s, %s: piped summary differs from one goroutine's\n got  %.600s\n want %.600s", name, dir, got, want)
			}
		}
	}
}

// AddDataset, which adds the metrics of runs of requests column by column
// (addRequests), gives the Summary and Stats of adding every row on its
// own (AddExchange, AddResult), byte for byte: with every distribution
// exact, with sheds of the exact budget on the way (runs beside them are
// added a request at a time), with everything sketched, and with
// schedules apart from sends (results). It fails if no run went column by
// column.
func TestColumnsMatchRows(t *testing.T) {
	recording, results := pipeDatasets(t)
	for name, opt := range map[string]Options{
		"exact":                     {},
		"shedding":                  {ExactValues: 40_000, Frame: 10 * time.Second},
		"sketched":                  {ExactValues: -1},
		"per-minute frames, an SLO": {Frame: time.Minute, ExactValues: 60_000, SLO: SLO{Bounds: map[Metric]time.Duration{MetricTTST: 40 * time.Millisecond}}},
	} {
		for _, dir := range []string{recording, results} {
			batched := New(opt)
			if _, err := batched.addDataset(context.Background(), []string{dir}, formats.ReaderOptions{ReuseSlices: true}, false); err != nil {
				t.Fatal(err)
			}
			if batched.batch.runs == 0 {
				t.Errorf("%s, %s: no run of requests added column by column", name, dir)
			}
			rows := New(opt)
			ctx, ro := context.Background(), formats.ReaderOptions{ReuseSlices: true}
			var err error
			if kind, _ := DatasetKind([]string{dir}); kind == KindExchange {
				_, err = addAll(ctx, []string{dir}, ro, rows.AddExchange)
			} else {
				_, err = addAll(ctx, []string{dir}, ro, rows.AddResult)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := outputJSON(t, batched), outputJSON(t, rows); got != want {
				t.Errorf("%s, %s: column by column differs from row by row\n got  %.600s\n want %.600s", name, dir, got, want)
			}
		}
	}
}

// pipeDatasets writes a recording of a few thousand exchanges and the
// results of its replay.
func pipeDatasets(t *testing.T) (recording, results string) {
	t.Helper()
	var xs []*formats.Exchange
	for seed := uint64(0); len(xs) < 8*pipeBatchRows+pipeBatchRows/2; seed++ {
		xs = append(xs, analysistest.WeeklyIncident(seed)...)
	}
	for i, x := range xs {
		if i%5 == 0 {
			x.PrefixHashes = []int64{int64(i % 7), int64(i % 11), int64(i)}
		}
		if i%13 == 0 {
			x.Status, x.Error, x.Complete = 503, "", true
		}
		if i%97 == 0 && x.TTFTNs > 0 { // long streams
			x.EventGapsUs = make([]int32, 60_000)
			for j := range x.EventGapsUs {
				x.EventGapsUs[j] = int32(1 + j%50)
			}
			x.OutputTokens = int32(len(x.EventGapsUs) + 1)
		}
	}
	recording, results = t.TempDir(), t.TempDir()
	analysistest.WriteDataset(t, recording, xs)
	analysistest.WriteDataset(t, results, analysistest.Replayed(xs, 2*time.Millisecond, func(*formats.Exchange) float64 { return 1.5 }))
	return recording, results
}
