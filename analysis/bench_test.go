package analysis

import (
	"runtime"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis/analysistest"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/internal/cputime"
)

// BenchmarkAnalyze1M adds a million replay results (streaming, 20 tokens,
// 19 ITL gaps each) and computes the summary; it reports rows/s on one core
// and the heap the analyzer holds per row.
//
//	go test ./analysis -run XXX -bench Analyze1M -benchtime 3x -cpu 1
func BenchmarkAnalyze1M(b *testing.B) {
	const rows = 1_000_000
	pool := analysistest.Run(1, 4096, 1)
	b.ReportAllocs()
	var heapPerRow float64
	cpu0 := cputime.Process()
	for b.Loop() {
		a := New(Options{SLO: SLO{Bounds: map[Metric]time.Duration{MetricTTFT: 50 * time.Millisecond, MetricE2E: time.Second}}})
		var r formats.Result
		for i := range rows {
			r = *pool[i%len(pool)]
			shift := time.Duration(i/len(pool)) * 4096 * 20 * time.Millisecond
			r.OrigTs = r.OrigTs.Add(shift)
			r.SentUnixNs += int64(shift)
			r.ScheduledNs += int64(shift)
			a.AddResult(&r)
		}
		s := a.Summary()
		if s.Requests != rows {
			b.Fatalf("requests %d", s.Requests)
		}
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heapPerRow = float64(ms.HeapInuse) / rows
		runtime.KeepAlive(a)
	}
	cpu := cputime.Process() - cpu0
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(rows)*float64(b.N)/cpu.Seconds(), "rows/cpu-s")
	b.ReportMetric(heapPerRow, "heap-B/row")
}

// BenchmarkAnalyzeRecording1M adds a million recorded exchanges (the
// weekly-incident traffic's requests, streams with TTFT and event gaps,
// starting every 200 µs: 5,000/s, 200 s) and computes the stats, sessions
// inferred: what `reel stats` does per row, without reading.
//
//	go test ./analysis -run XXX -bench AnalyzeRecording1M -benchtime 1x -count 3 -cpu 1
func BenchmarkAnalyzeRecording1M(b *testing.B) {
	const rows = 1_000_000
	pool := analysistest.WeeklyIncident(1)
	t0 := pool[0].TsUnixNs
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		a := New(Options{Sessions: SessionsInferred})
		var x formats.Exchange
		for i := range rows {
			x = *pool[i%len(pool)]
			x.TsUnixNs = t0 + int64(i)*int64(200*time.Microsecond)
			a.AddExchange(&x)
		}
		if st := a.Stats(); st.Summary.Requests != rows || st.Sessions == nil {
			b.Fatalf("requests %d", st.Summary.Requests)
		}
	}
	cpu := cputime.Process() - cpu0
	b.ReportMetric(float64(rows)*float64(b.N)/cpu.Seconds(), "rows/cpu-s")
}

// BenchmarkSummarize measures exact quantiles alone: sorting one metric
// column of a million values.
func BenchmarkSummarize(b *testing.B) {
	vals := make([]int64, 1_000_000)
	src := make([]int64, len(vals))
	for i := range src {
		src[i] = int64((i * 7919) % 1_000_003)
	}
	b.ReportAllocs()
	for b.Loop() {
		copy(vals, src)
		summarize(vals)
	}
	b.ReportMetric(float64(len(vals))*float64(b.N)/b.Elapsed().Seconds(), "values/s")
}

// BenchmarkCompare100k compares two runs of 100k requests each with the
// default 500 resamples (every latency metric and quantile).
func BenchmarkCompare100k(b *testing.B) {
	a, c := New(Options{}), New(Options{})
	for _, r := range analysistest.Run(1, 100_000, 1) {
		a.AddResult(r)
	}
	for _, r := range analysistest.Run(2, 100_000, 1.1) {
		c.AddResult(r)
	}
	b.ReportAllocs()
	for b.Loop() {
		Compare(a, c, CompareOptions{})
	}
}
