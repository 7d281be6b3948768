package analysis

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis/analysistest"
	"github.com/reelkit/reel/formats"
)

var t0 = time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC)

// res builds an OK streaming result sent at t0+at with no lag.
func res(at, e2e, ttft time.Duration, out int32, itlUs ...int32) *formats.Result {
	return &formats.Result{
		OrigTs: t0.Add(at), ScheduledNs: int64(at), SentUnixNs: t0.Add(at).UnixNano(),
		Status: 200, E2ENs: int64(e2e), E2ESchedNs: int64(e2e), TTFBNs: int64(ttft), TTFTNs: int64(ttft),
		OutputTokens: out, ITLUs: itlUs, Events: int32(len(itlUs) + 1), BatchSize: -1, QueueDepth: -1,
		Method: "POST", Path: "/v1/chat/completions", Model: "m",
	}
}

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestSummarizeKnownValues(t *testing.T) {
	vals := make([]int64, 100)
	for i := range vals {
		vals[99-i] = int64(ms(float64(i + 1)))
	}
	q := summarize(vals)
	want := Quantiles{N: 100, P50: ms(50), P90: ms(90), P95: ms(95), P99: ms(99), P999: ms(100), Max: ms(100), Mean: ms(50.5),
		Std: time.Duration(math.Round(math.Sqrt((100*100-1)/12.0) * 1e6))}
	if q != want {
		t.Fatalf("summarize 1..100ms:\n got %+v\nwant %+v", q, want)
	}
	if (summarize(nil) != Quantiles{}) {
		t.Fatal("empty set must give zero quantiles")
	}
	one := summarize([]int64{7})
	if one.P50 != 7 || one.P999 != 7 || one.Max != 7 || one.Std != 0 || one.N != 1 {
		t.Fatalf("one value: %+v", one)
	}
}

func TestCountDistMatchesSummarize(t *testing.T) {
	var d countDist
	var vals []int64
	for i := int64(0); i < 1000; i++ {
		v := (i * 7919) % 337
		d.add(v, 1)
		vals = append(vals, v*1000)
	}
	if got, want := d.quantiles(), summarize(vals); got != want {
		t.Fatalf("countDist %+v\nsummarize %+v", got, want)
	}
}

func TestMetricsPerRequest(t *testing.T) {
	tests := []struct {
		name string
		rows []*formats.Result
		slo  string
		want func(t *testing.T, s *Summary)
	}{
		{
			name: "stream with usage",
			rows: []*formats.Result{func() *formats.Result {
				r := res(0, time.Second, ms(100), 10, 200_000, 100_000, 100_000, 100_000, 100_000, 100_000, 100_000, 100_000, 100_000)
				r.TTSTNs = int64(ms(200))
				r.LagNs = int64(ms(2))
				r.SentUnixNs += r.LagNs
				r.E2ESchedNs = r.E2ENs + r.LagNs
				return r
			}()},
			want: func(t *testing.T, s *Summary) {
				check(t, "ttft", s.TTFT.P50, ms(100))
				check(t, "ttst", s.TTST.P50, ms(200))
				check(t, "e2e", s.E2E.P50, time.Second)
				check(t, "e2e_sched", s.E2ESched.P50, time.Second+ms(2))
				check(t, "tpot", s.TPOT.P50, ms(100)) // (1000−100)/(10−1)
				check(t, "lag", s.Lag.P50, ms(2))
				check(t, "itl max", s.ITL.Max, ms(200))
				check(t, "itl p50", s.ITL.P50, ms(100))
				if s.ITL.N != 9 {
					t.Errorf("itl n = %d, want 9 gaps", s.ITL.N)
				}
				if s.OutputTokens != 10 {
					t.Errorf("output tokens = %d", s.OutputTokens)
				}
			},
		},
		{
			name: "one output token has no tpot",
			rows: []*formats.Result{res(0, ms(150), ms(150), 1)},
			want: func(t *testing.T, s *Summary) {
				if s.TPOT.N != 0 {
					t.Errorf("tpot n = %d, want 0", s.TPOT.N)
				}
				check(t, "ttft", s.TTFT.P50, ms(150))
				if s.ITL.N != 0 {
					t.Errorf("itl n = %d, want 0", s.ITL.N)
				}
			},
		},
		{
			name: "no usage: no tokens, no tpot, latency still counted",
			rows: []*formats.Result{res(0, ms(300), ms(50), 0, 100_000, 150_000)},
			want: func(t *testing.T, s *Summary) {
				if s.TPOT.N != 0 || s.OutputTokens != 0 || s.OutputTokenRate != 0 {
					t.Errorf("tpot n %d, tokens %d, rate %v", s.TPOT.N, s.OutputTokens, s.OutputTokenRate)
				}
				check(t, "e2e", s.E2E.P50, ms(300))
				if s.ITL.N != 2 || s.ITLToken.N != 2 {
					t.Errorf("itl n %d, per-token n %d, want 2 and 2", s.ITL.N, s.ITLToken.N)
				}
			},
		},
		{
			name: "usage gives per-token itl",
			rows: []*formats.Result{res(0, ms(500), ms(100), 9, 100_000, 100_000)}, // 3 events × 3 tokens
			want: func(t *testing.T, s *Summary) {
				if s.ITL.N != 2 {
					t.Errorf("per-event itl n = %d", s.ITL.N)
				}
				if s.ITLToken.N != 6 {
					t.Errorf("per-token itl n = %d, want 6 (2 gaps × 3 tokens)", s.ITLToken.N)
				}
				check(t, "per-token itl", s.ITLToken.P50, time.Duration(33_333)*time.Microsecond)
			},
		},
		{
			name: "all errors",
			slo:  "e2e=1s",
			rows: []*formats.Result{
				{OrigTs: t0, SentUnixNs: t0.UnixNano(), Error: "dial tcp: connection refused", LagNs: 1000},
				{OrigTs: t0.Add(time.Second), ScheduledNs: int64(time.Second), SentUnixNs: t0.Add(time.Second).UnixNano(), Error: "context deadline exceeded (Client.Timeout exceeded)"},
				{OrigTs: t0.Add(2 * time.Second), ScheduledNs: int64(2 * time.Second), SentUnixNs: t0.Add(2 * time.Second).UnixNano(), Status: 503, E2ENs: int64(ms(5))},
			},
			want: func(t *testing.T, s *Summary) {
				if s.OK != 0 || s.Errors != 3 || s.ErrorRate != 1 {
					t.Errorf("ok %d errors %d rate %v", s.OK, s.Errors, s.ErrorRate)
				}
				if s.E2E.N != 0 || s.Goodput != 0 || s.MeetingSLO != 0 {
					t.Errorf("e2e n %d goodput %v meeting %d", s.E2E.N, s.Goodput, s.MeetingSLO)
				}
				if math.Abs(s.TimeoutRate-1.0/3) > 1e-9 {
					t.Errorf("timeout rate %v", s.TimeoutRate)
				}
				classes := map[string]int64{}
				for _, c := range s.Classes {
					classes[c.Class] = c.Count
				}
				if classes[ClassConnection] != 1 || classes[ClassTimeout] != 1 || classes["5xx"] != 1 {
					t.Errorf("classes %v", classes)
				}
				if s.MeetsSLO || s.WindowCompliance != 0 || s.JudgedFrames != 1 {
					t.Errorf("meets %v compliance %v judged %d", s.MeetsSLO, s.WindowCompliance, s.JudgedFrames)
				}
				if s.Lag.N != 3 {
					t.Errorf("lag is measured for failed requests too: n = %d", s.Lag.N)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slo, err := ParseSLO(tt.slo)
			if err != nil {
				t.Fatal(err)
			}
			a := New(Options{SLO: slo})
			for _, r := range tt.rows {
				a.AddResult(r)
			}
			tt.want(t, a.Summary())
		})
	}
}

func check(t *testing.T, name string, got, want time.Duration) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

func TestGoodputComplianceAndEmptyWindow(t *testing.T) {
	slo, err := ParseSLO("ttft=300ms,e2e=2s")
	if err != nil {
		t.Fatal(err)
	}
	a := New(Options{SLO: slo})
	// Frame 14:00:00: 4 requests, all meet. Frame 14:00:05: empty.
	// Frame 14:00:10: 4 requests, one with TTFT 900ms (p95 misses).
	for i := range 4 {
		a.AddResult(res(time.Duration(i)*time.Second, time.Second, ms(100), 5))
	}
	for i := range 4 {
		ttft := ms(100)
		if i == 3 {
			ttft = ms(900)
		}
		a.AddResult(res(10*time.Second+time.Duration(i)*time.Second, time.Second, ttft, 5))
	}
	s := a.Summary()
	if len(s.Frames) != 3 {
		t.Fatalf("frames = %d, want 3 (one empty)", len(s.Frames))
	}
	if f := s.Frames[1]; f.Requests != 0 || f.Judged || !f.Start.Equal(t0.Add(5*time.Second)) {
		t.Errorf("empty frame %+v", f)
	}
	if !s.Frames[0].MeetsSLO || s.Frames[2].MeetsSLO {
		t.Errorf("frame verdicts %v %v", s.Frames[0].MeetsSLO, s.Frames[2].MeetsSLO)
	}
	if !strings.Contains(strings.Join(s.Frames[2].Misses, ";"), "ttft.p95 900ms > 300ms") {
		t.Errorf("misses %v", s.Frames[2].Misses)
	}
	if s.JudgedFrames != 2 || s.CompliantFrames != 1 || s.WindowCompliance != 0.5 || s.MeetsSLO {
		t.Errorf("judged %d compliant %d compliance %v meets %v", s.JudgedFrames, s.CompliantFrames, s.WindowCompliance, s.MeetsSLO)
	}
	// Duration: first send 14:00:00 to last end 14:00:14.
	check(t, "duration", s.Duration, 14*time.Second)
	if s.MeetingSLO != 7 || math.Abs(s.Goodput-7.0/14) > 1e-9 || math.Abs(s.GoodputShare-7.0/8) > 1e-9 {
		t.Errorf("meeting %d goodput %v share %v", s.MeetingSLO, s.Goodput, s.GoodputShare)
	}
	if math.Abs(s.Throughput-8.0/14) > 1e-9 || math.Abs(s.OutputTokenRate-40.0/14) > 1e-9 {
		t.Errorf("throughput %v tokens/s %v", s.Throughput, s.OutputTokenRate)
	}
}

func TestConcurrencyAndPeakTokens(t *testing.T) {
	a := New(Options{})
	// Three requests: [0,4s), [1s,3s), [5s,6s). Peak in flight 2.
	a.AddResult(res(0, 4*time.Second, 0, 8))
	a.AddResult(res(time.Second, 2*time.Second, 0, 4))
	a.AddResult(res(5*time.Second, time.Second, 0, 2))
	s := a.Summary()
	if s.PeakInFlight != 2 {
		t.Errorf("peak in flight %d, want 2", s.PeakInFlight)
	}
	if want := 7.0 / 6; math.Abs(s.Concurrency-want) > 1e-9 {
		t.Errorf("concurrency %v, want %v", s.Concurrency, want)
	}
	// Non-streaming: tokens land at the end; ends at 4s, 3s, 6s → peak 8.
	if s.PeakOutputTokenRate != 8 {
		t.Errorf("peak tokens/s %v, want 8", s.PeakOutputTokenRate)
	}

	b := New(Options{})
	// Streaming: 4 events 400ms apart from ttft 100ms → tokens at 0.1, 0.5, 0.9, 1.3 s.
	b.AddResult(res(0, ms(1300), ms(100), 8, 400_000, 400_000, 400_000))
	if got := b.Summary().PeakOutputTokenRate; got != 6 {
		t.Errorf("streaming peak tokens/s %v, want 6 (3 events × 2 tokens in second 0)", got)
	}
}

func TestExcludeFirst(t *testing.T) {
	a := New(Options{ExcludeFirst: 2 * time.Second})
	for i := range 5 {
		a.AddResult(res(time.Duration(i)*time.Second, ms(float64(100*(i+1))), 0, 0))
	}
	s := a.Summary()
	if s.Requests != 3 || s.Excluded != 2 {
		t.Fatalf("requests %d excluded %d", s.Requests, s.Excluded)
	}
	check(t, "e2e p50", s.E2E.P50, ms(400))

	rec := New(Options{ExcludeFirst: 2 * time.Second})
	for i := range 5 {
		rec.AddExchange(exch(time.Duration(i)*time.Second, ms(100), 100))
	}
	if s := rec.Summary(); s.Requests != 3 || s.Excluded != 2 {
		t.Fatalf("recording: requests %d excluded %d", s.Requests, s.Excluded)
	}
}

// exch builds a complete non-streaming recorded exchange.
func exch(at, dur time.Duration, prompt int32) *formats.Exchange {
	return &formats.Exchange{
		Ts: t0.Add(at), TsUnixNs: t0.Add(at).UnixNano(), Method: "POST", Path: "/v1/chat/completions", Model: "m",
		Status: 200, TTFBNs: int64(dur), DurationNs: int64(dur), PromptTokens: prompt, OutputTokens: 20,
		BatchSize: -1, QueueDepth: -1, Complete: true, ReqBodyBytes: int64(4 * prompt),
	}
}

func TestExchangeMapping(t *testing.T) {
	x := exch(0, time.Second, 100)
	x.Stream, x.TTFTNs, x.EventGapsUs, x.OutputTokens, x.BatchSize, x.QueueDepth = true, int64(ms(100)), []int32{300_000, 100_000}, 3, 8, 2
	a := New(Options{})
	a.AddExchange(x)
	inc := exch(time.Second, time.Second, 100)
	inc.Complete = false
	a.AddExchange(inc)
	s := a.Summary()
	if s.Source != "recording" || s.OK != 1 || s.Errors != 1 {
		t.Fatalf("source %q ok %d errors %d", s.Source, s.OK, s.Errors)
	}
	check(t, "ttft", s.TTFT.P50, ms(100))
	check(t, "ttst", s.TTST.P50, ms(300))
	// A stream ends at its last token event: 100ms + 300ms + 100ms, not at
	// duration_ns (1s, which includes the trailing [DONE]).
	check(t, "e2e", s.E2E.P50, ms(500))
	check(t, "tpot", s.TPOT.P50, ms(200)) // (500−100)/(3−1)
	check(t, "e2e_sched", s.E2ESched.P50, ms(500))
	check(t, "ttfb", s.TTFB.P50, time.Second)
	if s.Lag.N != 0 {
		t.Errorf("a recording has no lag, n = %d", s.Lag.N)
	}
	if s.MeanBatchSize != 8 || s.MeanQueueDepth != 2 {
		t.Errorf("batch %v queue %v", s.MeanBatchSize, s.MeanQueueDepth)
	}
}

func TestShardsMergeExactly(t *testing.T) {
	whole, shards := New(Options{}), New(Options{})
	var s0, s1 []*formats.Result
	for i := range 200 {
		r := res(time.Duration(i)*100*time.Millisecond, ms(float64(10+(i*37)%500)), ms(5), 3)
		r.Shard = int32(i % 2)
		whole.AddResult(r)
		if i%2 == 0 {
			s0 = append(s0, r)
		} else {
			s1 = append(s1, r)
		}
	}
	// Shards arrive merged in time order, as formats.Reader yields them.
	for i := range s0 {
		shards.AddResult(s0[i])
		shards.AddResult(s1[i])
	}
	a, b := whole.Summary(), shards.Summary()
	if a.E2E != b.E2E || a.Requests != b.Requests || len(a.Frames) != len(b.Frames) {
		t.Fatalf("shard union differs: %+v vs %+v", a.E2E, b.E2E)
	}
}

func TestBreakdowns(t *testing.T) {
	a := New(Options{LengthBuckets: []int32{100, 1000}})
	for i := range 10 {
		r := res(time.Duration(i)*time.Second, ms(100), 0, 1)
		r.PromptTokens = int32(50 + 100*i) // 50..950
		if i >= 8 {
			r.Model, r.Path, r.Status = "big", "/v1/completions", 500
		}
		a.AddResult(r)
	}
	s := a.Summary()
	keys := func(gs []Group) map[string]int64 {
		m := map[string]int64{}
		for _, g := range gs {
			m[g.Key] = g.Requests
		}
		return m
	}
	if m := keys(s.Models); m["m"] != 8 || m["big"] != 2 {
		t.Errorf("models %v", m)
	}
	if m := keys(s.Routes); m["POST /v1/chat/completions"] != 8 || m["POST /v1/completions"] != 2 {
		t.Errorf("routes %v", m)
	}
	if m := keys(s.PromptBuckets); m["0–99"] != 1 || m["100–999"] != 9 {
		t.Errorf("buckets %v", m)
	}
	if m := keys(s.StatusClasses); m["2xx"] != 8 || m["5xx"] != 2 {
		t.Errorf("classes %v", m)
	}
}

func TestParseSLO(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{"ttft=300ms,tpot=50ms,e2e=5s", "ttft=300ms,tpot=50ms,e2e=5s", ""},
		{" e2e = 1s , TTFT=1ms ", "ttft=1ms,e2e=1s", ""},
		{"", "", ""},
		{"ttft<=300ms", "ttft=300ms", ""},
		{"p99=1s", "", "unknown metric"},
		{"ttft=fast", "", "invalid duration"},
		{"ttft", "", "want name=duration"},
		{"ttft=0s", "", "positive"},
		{"ttft=1s,ttft=2s", "", "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			slo, err := ParseSLO(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if slo.String() != tt.want {
				t.Fatalf("got %q, want %q", slo.String(), tt.want)
			}
		})
	}
}

func FuzzParseSLO(f *testing.F) {
	for _, s := range []string{"ttft=300ms,tpot=50ms,e2e=5s", "", "x", "e2e=-1s", "lag<=1ms,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		slo, err := ParseSLO(s)
		if err != nil {
			return
		}
		again, err := ParseSLO(slo.String())
		if err != nil || again.String() != slo.String() {
			t.Fatalf("round trip %q → %q: %v", s, slo.String(), err)
		}
	})
}

func TestTextWriters(t *testing.T) {
	slo, _ := ParseSLO("e2e=500ms")
	a := New(Options{SLO: slo})
	a.AddResult(res(0, ms(100), ms(20), 4, 10_000))
	a.AddResult(res(time.Second, ms(900), ms(20), 4, 10_000))
	s := a.Summary()
	var line bytes.Buffer
	if err := WriteFrameLine(&line, &s.Frames[0]); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2026-03-04 14:00:00", "req 2 ok 2 err 0", "p99 900ms", "SLO MISS (e2e.p95 900ms > 500ms)"} {
		if !strings.Contains(line.String(), want) {
			t.Errorf("frame line %q lacks %q", line.String(), want)
		}
	}
	if strings.Count(line.String(), "\n") != 1 {
		t.Errorf("frame line must be one line: %q", line.String())
	}
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"replay: 2 requests", "e2e", "goodput", "MISSES", "by model:", "frames (5s each)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	var empty bytes.Buffer
	if err := New(Options{}).Summary().WriteText(&empty); err != nil || !strings.Contains(empty.String(), "no requests") {
		t.Errorf("empty report %q %v", empty.String(), err)
	}
}

func TestHistogram(t *testing.T) {
	h := histogramOf([]int64{int64(ms(1)), int64(ms(1.1)), int64(ms(10)), 5}) // 5ns clamps into the first bin
	var total int64
	for _, c := range h.Counts {
		total += c
	}
	if total != 4 || len(h.Edges) != len(h.Counts)+1 || h.Edges[0] != histMin {
		t.Fatalf("histogram %+v", h)
	}
	if i := histBin(int64(ms(1))); histEdges[i] > int64(ms(1)) || histEdges[i+1] <= int64(ms(1)) {
		t.Fatalf("1ms in bin [%d, %d)", histEdges[i], histEdges[i+1])
	}
	if e := histogramOf(nil); len(e.Counts) != 0 {
		t.Fatalf("empty histogram %+v", e)
	}
}

func TestCountDistLargeValues(t *testing.T) {
	var d countDist
	var vals []int64
	for _, v := range []int64{5, 5, 999_999, 1 << 20, 3 << 21, 7} {
		d.add(v, 1)
		vals = append(vals, v*1000)
	}
	d.add(-1, 1) // ignored
	if got, want := d.quantiles(), summarize(vals); got != want {
		t.Fatalf("countDist %+v\nsummarize %+v", got, want)
	}
}

func TestSortInt64(t *testing.T) {
	for _, n := range []int{0, 1, 100, 5000, 70000} {
		v := make([]int64, n)
		x := uint64(88172645463325252)
		for i := range v {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			v[i] = int64(x)
			if i%3 == 0 {
				v[i] %= 1000 // small values, negatives included
			}
		}
		want := slices.Clone(v)
		slices.Sort(want)
		sortInt64(v)
		if !slices.Equal(v, want) {
			t.Fatalf("n=%d: radix sort differs from slices.Sort", n)
		}
	}
}

// histogramOf bins values (any order) as the analyzer does.
func histogramOf(vals []int64) Histogram {
	counts := make([]int64, len(histEdges)-1)
	for _, v := range vals {
		counts[histBin(v)]++
	}
	return trimHist(counts)
}

// A recording's E2E from schedule is its E2E, so the analyzer keeps one
// distribution for both until a request's differ; from then on they are
// apart, E2E from schedule starting as a copy. The run's and every frame's
// E2E-from-schedule quantiles must be those of the values, whether the
// split comes first, halfway or never, exact or sketched.
func TestE2ESchedApartFromE2E(t *testing.T) {
	base := analysistest.Run(1, 3000, 1)
	for _, splitAt := range []int{0, 1500, len(base)} {
		for _, exact := range []int{0, -1} {
			t.Run(fmt.Sprintf("split at %d, ExactValues %d", splitAt, exact), func(t *testing.T) {
				a := New(Options{ExactValues: exact})
				ref := New(Options{ExactValues: exact}) // E2E set to each row's E2E from schedule
				for i, r := range base {
					x := *r
					if i < splitAt {
						x.E2ESchedNs = x.E2ENs
					} else {
						x.E2ESchedNs = x.E2ENs + int64(i%7)*int64(time.Millisecond)
					}
					a.AddResult(&x)
					y := x
					y.E2ENs = x.E2ESchedNs
					ref.AddResult(&y)
				}
				got, want := a.Summary(), ref.Summary()
				if got.E2ESched != want.E2E {
					t.Fatalf("run: e2e_sched %+v, want %+v", got.E2ESched, want.E2E)
				}
				if splitAt == len(base) && got.E2ESched != got.E2E {
					t.Fatalf("never apart: e2e_sched %+v differs from e2e %+v", got.E2ESched, got.E2E)
				}
				for i := range got.Frames {
					if g, w := got.Frames[i].E2ESched, want.Frames[i].E2E; g != w {
						t.Fatalf("frame %s: e2e_sched %+v, want %+v", got.Frames[i].Start, g, w)
					}
				}
			})
		}
	}
}

// TestSecondSumsMatchMap: token-second sums, through the ring of recent
// seconds and the per-second event counting, equal a plain map's sums of
// every event added one by one, bit for bit: whole and fractional tokens
// per event, streams longer than the ring, starts out of order, negative
// gaps and times.
func TestSecondSumsMatchMap(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fractional bool
	}{{"whole", false}, {"fractional", true}} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			s := secondSums{m: map[int64]float64{}}
			want := map[int64]float64{}
			start := int64(-5e9)
			for i := range 20_000 {
				start += rng.Int64N(3e6) - 2e5 // mostly in order
				gaps := make([]int32, rng.IntN(40))
				for j := range gaps {
					switch rng.IntN(50) {
					case 0:
						gaps[j] = int32(rng.IntN(30e6)) // a long pause: crosses the ring
					case 1:
						gaps[j] = -int32(rng.IntN(2e6))
					default:
						gaps[j] = int32(rng.IntN(60e3))
					}
				}
				per := float64(1 + rng.IntN(3))
				if tc.fractional && i > 10_000 {
					per = 1 + rng.Float64()
				}
				s.addEvents(start, gaps, per)
				at := start
				want[floorDiv(at, int64(time.Second))] += per
				for _, g := range gaps {
					at += int64(g) * 1000
					want[floorDiv(at, int64(time.Second))] += per
				}
				if i%97 == 0 { // the whole-request path: all tokens at the end
					end := start + rng.Int64N(4e9)
					s.add(floorDiv(end, int64(time.Second)), 5)
					want[floorDiv(end, int64(time.Second))] += 5
				}
			}
			got := s.all()
			if len(got) != len(want) {
				t.Fatalf("%d seconds, want %d", len(got), len(want))
			}
			for sec, v := range want {
				if got[sec] != v {
					t.Fatalf("second %d: %v, want %v", sec, got[sec], v)
				}
			}
		})
	}
}
