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
	var xs []*formats.Exchange
	for seed := uint64(0); len(xs) < 3*pipeBatchRows+pipeBatchRows/2; seed++ {
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
	recording, results := t.TempDir(), t.TempDir()
	analysistest.WriteDataset(t, recording, xs)
	analysistest.WriteDataset(t, results, analysistest.Replayed(xs, 2*time.Millisecond, func(*formats.Exchange) float64 { return 1.5 }))
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
