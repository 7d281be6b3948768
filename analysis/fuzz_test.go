package analysis

import (
	"bytes"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// FuzzAnalyzer feeds rows with arbitrary (hostile) numbers: no panic, and
// the summary and stats stay consistent.
func FuzzAnalyzer(f *testing.F) {
	f.Add(int64(0), int64(1e9), int64(5e8), int64(1e8), int32(10), int32(200), int32(20_000), int64(0), "")
	f.Add(int64(-5e9), int64(-1), int64(-1), int64(1<<62), int32(-3), int32(0), int32(-7), int64(1<<40), "timeout")
	f.Fuzz(func(t *testing.T, at, e2e, ttft, lag int64, out, status, gap int32, sched int64, errStr string) {
		a := New(Options{SLO: SLO{Bounds: map[Metric]time.Duration{MetricE2E: time.Second, MetricTPOT: time.Millisecond}}, ExcludeFirst: time.Second})
		for i := range 3 {
			ts := t0.Add(time.Duration(at) + time.Duration(i)*time.Hour*24*30)
			a.AddResult(&formats.Result{OrigTs: ts, SentUnixNs: ts.UnixNano() + lag, LagNs: lag, ScheduledNs: sched + int64(i)*int64(time.Hour),
				Status: status, Error: errStr, E2ENs: e2e, E2ESchedNs: e2e + lag, TTFTNs: ttft, TTFBNs: ttft,
				OutputTokens: out, ITLUs: []int32{gap, gap / 2}, PromptTokens: out * 3, BatchSize: out})
			a.AddExchange(&formats.Exchange{TsUnixNs: ts.UnixNano(), Status: status, Error: errStr, DurationNs: e2e,
				TTFTNs: ttft, EventGapsUs: []int32{gap}, OutputTokens: out, PromptTokens: out, Complete: true, PrefixHashes: []int64{at, lag}})
		}
		st := a.Stats()
		s := st.Summary
		if s.Requests+s.Excluded != 6 || s.OK+s.Errors != s.Requests {
			t.Fatalf("counts: requests %d excluded %d ok %d errors %d", s.Requests, s.Excluded, s.OK, s.Errors)
		}
		if s.E2E.N > 0 && (s.E2E.P50 > s.E2E.P99 || s.E2E.P99 > s.E2E.Max) {
			t.Fatalf("quantiles out of order: %+v", s.E2E)
		}
		var buf bytes.Buffer
		if err := st.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		Compare(a, a, CompareOptions{Resamples: 20})
	})
}
