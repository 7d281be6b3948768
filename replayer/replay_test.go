package replayer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
)

func run(t *testing.T, xs []*formats.Exchange, opts Options, speed float64) (*Report, *memSink) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := NewPlan(ctx, sliceOpener(xs), opts)
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	sink := &memSink{}
	rep, err := p.Run(ctx, sink, speed)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep, sink
}

// TestFidelity replays the first minutes of a real hour-shaped trace,
// written as a dataset with the formats writer and streamed back by
// formats.Reader, at speed 60 against a loopback server that timestamps arrivals. The strict
// lag target (p99 ≤ 1 ms) is the benchmark's (bench/replay): on a loaded
// shared 2-core machine, where sleeps overshoot by 10–60 ms at p99, this
// test asserts generous bounds (lag p99 ≤ 250 ms — a load average of 13
// stalled it for a second once; each gap within the two
// reported lags + 20 ms of loopback jitter for 98 % of gaps) and logs the
// measured values. The duration bound (0.1 %) is the issue's own.
func TestFidelity(t *testing.T) {
	span := 10 * time.Minute
	if testing.Short() {
		span = 2 * time.Minute
	}
	xs := azureTrace(t, span)
	srv := newArrivals(t, nil)
	p, err := NewPlan(context.Background(), datasetOpener(t, xs), Options{Target: srv.url(t), Warmup: 8}) // warm connections: the first send does not dial
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	rep, err := p.Run(context.Background(), sink, 60)
	if err != nil {
		t.Fatal(err)
	}
	if int(rep.Sent) != len(xs) || len(sink.rows) != len(xs) {
		t.Fatalf("sent %d, rows %d, want %d", rep.Sent, len(sink.rows), len(xs))
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.at) < len(xs) {
		t.Fatalf("server saw %d distinct requests, want %d", len(srv.at), len(xs))
	}
	rows := sink.byID()
	ts0 := xs[0].TsUnixNs
	var worst time.Duration
	var bad int
	for i := 1; i < len(xs); i++ {
		a, b := xs[i-1], xs[i]
		want := time.Duration(float64(b.TsUnixNs-a.TsUnixNs) / 60)
		got := time.Duration(srv.at[b.Seq] - srv.at[a.Seq])
		allow := time.Duration(abs(rows[a.Seq].LagNs)+abs(rows[b.Seq].LagNs)) + 20*time.Millisecond // + loopback transit jitter on a loaded machine
		if d := got - want; d.Abs() > allow {
			bad++
			worst = max(worst, d.Abs())
		}
	}
	if testing.Short() { // -short runs under -race in CI: functional checks only
		t.Logf("lag p99 %s; %d gaps off by more than lag + 20ms", rep.Summary.Lag.P99, bad)
		return
	}
	if bad > len(xs)/50 {
		t.Errorf("%d of %d inter-arrival gaps off by more than the reported lag + 20ms (worst %s)", bad, len(xs), worst)
	}
	// Total duration: arrival minus ideal offset, compared between the first
	// and the last 50 requests (medians, so one late request on a loaded
	// machine does not decide it) — the drift that relative sleeps build up.
	wantDur := time.Duration(float64(xs[len(xs)-1].TsUnixNs-ts0) / 60)
	offset := func(x *formats.Exchange) int64 { return srv.at[x.Seq] - int64(float64(x.TsUnixNs-ts0)/60) }
	median := func(part []*formats.Exchange) int64 {
		v := make([]int64, len(part))
		for i, x := range part {
			v[i] = offset(x)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	drift := time.Duration(median(xs[len(xs)-50:]) - median(xs[:50]))
	gotDur := wantDur + drift
	if off := float64(drift.Abs()) / float64(wantDur); off > 0.001 {
		t.Errorf("replayed duration %s, recorded/60 %s: off by %.3f%% (> 0.1%%)", gotDur, wantDur, 100*off)
	}
	t.Logf("first/last arrival span %s", time.Duration(srv.at[xs[len(xs)-1].Seq]-srv.at[xs[0].Seq]))
	lag := rep.Summary.Lag
	t.Logf("%d requests at %.0f req/s: lag p50 %s p99 %s max %s; duration %s vs %s", len(xs),
		float64(len(xs))/wantDur.Seconds(), lag.P50, lag.P99, lag.Max, gotDur, wantDur)
	if lag.P99 > 250*time.Millisecond {
		t.Errorf("lag p99 %s > 250ms", lag.P99)
	}
	for _, r := range sink.rows {
		if r.Status != 200 || r.BatchSize != 3 || r.OutputTokens != 16 || r.Error != "" {
			t.Fatalf("row %+v: want status 200, batch 3, 16 output tokens", r)
		}
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// TestOpenLoop: a target that stalls for 2 s mid-run does not shift later
// sends; latency from schedule shows the stall.
func TestOpenLoop(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	xs := evenTrace(start, 400, 10*time.Millisecond, 8) // 100 req/s for 4 s
	var stallOnce sync.Once
	stallEnd := make(chan struct{})
	srv := newArrivals(t, func(w http.ResponseWriter, r *http.Request, id int64) {
		if id >= 100 && id < 300 { // from 1 s in, every request hangs until the stall ends
			stallOnce.Do(func() { time.AfterFunc(2*time.Second, func() { close(stallEnd) }) })
			<-stallEnd
		}
		io.WriteString(w, "ok")
	})
	rep, sink := run(t, xs, Options{Target: srv.url(t)}, 1)
	if rep.Sent != 400 {
		t.Fatalf("sent %d, want 400", rep.Sent)
	}
	rows := sink.byID()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	base := srv.at[1]
	var late int
	for i := int64(1); i <= 400; i++ {
		want := time.Duration(i-1) * 10 * time.Millisecond
		got := time.Duration(srv.at[i] - base)
		if (got - want).Abs() > 50*time.Millisecond {
			late++
		}
	}
	if late > 8 && !testing.Short() {
		t.Errorf("%d of 400 requests arrived more than 50ms off their schedule despite the stall", late)
	}
	if e := time.Duration(rows[101].E2ESchedNs); e < 1500*time.Millisecond {
		t.Errorf("request 101 e2e from schedule %s: the stall does not show", e)
	}
	if e := time.Duration(rows[390].E2ESchedNs); e > 500*time.Millisecond {
		t.Errorf("request 390 (after the stall) e2e from schedule %s", e)
	}
	if rep.Summary.E2ESched.Max < 1500*time.Millisecond {
		t.Errorf("summary e2e-from-schedule max %s hides the stall", rep.Summary.E2ESched.Max)
	}
}

// TestMaxInflight: held-back requests are counted and their wait is lag.
func TestMaxInflight(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	xs := evenTrace(start, 60, 5*time.Millisecond, 4) // 200 req/s for 0.3 s
	srv := newArrivals(t, func(w http.ResponseWriter, r *http.Request, id int64) {
		time.Sleep(50 * time.Millisecond)
		io.WriteString(w, "ok")
	})
	rep, sink := run(t, xs, Options{Target: srv.url(t), MaxInflight: 2}, 1)
	if rep.HeldBack == 0 {
		t.Fatal("no request counted as held back with --max-inflight 2 at 200 req/s × 50 ms")
	}
	rows := sink.byID()
	last := rows[60]
	// 60 requests, 2 at a time, 50 ms each: the last goes out ≈ 1.5 s in, due at 0.3 s.
	if lag := time.Duration(last.LagNs); lag < 800*time.Millisecond {
		t.Errorf("last request lag %s: the wait for a slot does not show", lag)
	}
	if last.E2ESchedNs < last.E2ENs+last.LagNs-int64(time.Millisecond) {
		t.Errorf("e2e from schedule %d < e2e %d + lag %d", last.E2ESchedNs, last.E2ENs, last.LagNs)
	}
	if rep.Summary.Lag.P99 < 500*time.Millisecond {
		t.Errorf("lag p99 %s hides held-back requests", rep.Summary.Lag.P99)
	}
}

// TestSSETiming: TTFT, TTST and gaps match the server's programmed delays;
// a role-only first event does not count as a token.
func TestSSETiming(t *testing.T) {
	delays := []time.Duration{30 * time.Millisecond, 20 * time.Millisecond, 10 * time.Millisecond, 15 * time.Millisecond}
	var mu sync.Mutex
	var flushed []int64 // server-side token event times, mono ns from handler entry
	srv := newArrivals(t, func(w http.ResponseWriter, r *http.Request, id int64) {
		t0 := mono()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Batch-Size", "7")
		f := w.(http.Flusher)
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n")
		f.Flush()
		var ts []int64
		for i, d := range delays {
			time.Sleep(d)
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"tok%d\"}}]}\n\n", i)
			f.Flush()
			ts = append(ts, mono()-t0)
		}
		io.WriteString(w, ": keep-alive\n\ndata: {\"choices\":[],\"usage\":{\"completion_tokens\":9}}\n\ndata: [DONE]\n\n")
		mu.Lock()
		flushed = ts
		mu.Unlock()
	})
	x := exchangeAt(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC), 1, 1)
	x.Stream = true
	x.ReqBody = []byte(`{"model":"m","stream":true,"prompt":"hi"}`)
	_, sink := run(t, []*formats.Exchange{x}, Options{Target: srv.url(t), IncludeUsage: true}, 1)
	r := sink.rows[0]
	mu.Lock()
	defer mu.Unlock()
	if r.Error != "" || r.Status != 200 || len(flushed) != 4 {
		t.Fatalf("row %+v (server flushed %d)", r, len(flushed))
	}
	tol := 2 * time.Millisecond
	if testing.Short() {
		tol = 20 * time.Millisecond // -race in CI
	}
	near := func(name string, got, want int64) {
		t.Helper()
		if d := time.Duration(got - want); d.Abs() > tol {
			t.Errorf("%s = %s, server sent at %s (off %s > %s)", name, time.Duration(got), time.Duration(want), d, tol)
		}
	}
	near("TTFT", r.TTFTNs, flushed[0])
	near("TTST", r.TTSTNs, flushed[1]-flushed[0])
	if len(r.ITLUs) != 3 {
		t.Fatalf("ITL %v: want 3 gaps between 4 token events", r.ITLUs)
	}
	for i, g := range r.ITLUs {
		near(fmt.Sprintf("gap %d", i), int64(g)*1000, flushed[i+1]-flushed[i])
	}
	if r.Events != 7 { // role, 4 tokens, usage, [DONE]
		t.Errorf("events %d, want 7", r.Events)
	}
	if r.OutputTokens != 9 {
		t.Errorf("output tokens %d, want 9 from usage", r.OutputTokens)
	}
	if r.BatchSize != 7 || r.QueueDepth != -1 {
		t.Errorf("batch %d queue %d, want 7 and -1 (absent)", r.BatchSize, r.QueueDepth)
	}
	if r.E2ENs < flushed[3]-int64(tol) {
		t.Errorf("e2e %s ends before the last token event %s", time.Duration(r.E2ENs), time.Duration(flushed[3]))
	}
}

// TestRequestRebuild: recorded credentials never reach the shadow; --header,
// --pin-output and --include-usage do.
func TestRequestRebuild(t *testing.T) {
	var got http.Header
	var body string
	srv := newArrivals(t, func(w http.ResponseWriter, r *http.Request, id int64) {
		got = r.Header.Clone()
		io.WriteString(w, "ok")
	})
	// capture the body before arrivals drains it
	inner := srv.srv.Config.Handler
	srv.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		r.Body = io.NopCloser(strings.NewReader(body))
		inner.ServeHTTP(w, r)
	})
	x := exchangeAt(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC), 1, 1)
	x.ReqHeaders["Cookie"] = "sid=prod"
	x.ReqHeaders["X-Api-Key"] = "prod-key"
	x.ReqHeaders["User-Agent"] = "client/1"
	x.Stream = true
	x.ReqBody = []byte(`{"model":"m","stream":true,"prompt":"hi","max_tokens":500}`)
	x.OutputTokens = 42
	fwd := append(slices.Clone(DefaultForwardHeaders), "X-Api-Key", "Cookie")
	run(t, []*formats.Exchange{x}, Options{Target: srv.url(t), ForwardHeaders: fwd, PinOutput: PinAll, IgnoreEOS: true, IncludeUsage: true,
		Headers: http.Header{"Authorization": {"Bearer shadow-token"}}}, 1)
	if a := got.Get("Authorization"); a != "Bearer shadow-token" {
		t.Errorf("Authorization %q: want the --header value, never the recorded one", a)
	}
	for _, h := range []string{"Cookie", "X-Api-Key"} {
		if v := got.Get(h); v != "" {
			t.Errorf("recorded credential header %s=%q was forwarded", h, v)
		}
	}
	if got.Get("User-Agent") != "client/1" {
		t.Errorf("User-Agent %q not forwarded", got.Get("User-Agent"))
	}
	for _, want := range []string{`"max_tokens":42`, `"ignore_eos":true`, `"stream_options":{"include_usage":true}`, `"prompt":"hi"`} {
		if !strings.Contains(body, want) {
			t.Errorf("body %s lacks %s", body, want)
		}
	}
}

// TestFramesAndStep: --frames selects frames by index and time; --step
// replays one frame at a time and pauses between them.
func TestFramesAndStep(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// 3 frames of 1 s, 5 requests each at 100 ms gaps, first at 12:00:00.2.
	var xs []*formats.Exchange
	for f := 0; f < 3; f++ {
		for i := 0; i < 5; i++ {
			ts := start.Add(time.Duration(f)*time.Second + 200*time.Millisecond + time.Duration(i)*100*time.Millisecond)
			xs = append(xs, exchangeAt(ts, int64(len(xs)+1), 1))
		}
	}
	srv := newArrivals(t, nil)
	tests := []struct {
		name   string
		frames string
		want   []int64 // seqs replayed
	}{
		{"index", "1:1", []int64{6, 7, 8, 9, 10}},
		{"open end", "1:", []int64{6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{"time", "2026-01-01T12:00:02Z:2026-01-01T12:00:02.5Z", []int64{11, 12, 13, 14, 15}},
		{"clock", "12:00:00:12:00:00", []int64{1, 2, 3, 4, 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fr, err := ParseFrameRange(tc.frames, start)
			if err != nil {
				t.Fatal(err)
			}
			_, sink := run(t, xs, Options{Target: srv.url(t), Selection: Selection{Frame: time.Second, Frames: fr}}, 10)
			var got []int64
			for _, r := range sink.rows {
				got = append(got, r.Seq)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("replayed %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("step", func(t *testing.T) {
		var out strings.Builder
		var paused []time.Time
		var pauseEnd []int64
		rep, sink := run(t, xs, Options{Target: srv.url(t), Selection: Selection{Frame: time.Second}, Progress: &out, Step: true,
			StepWait: func(ctx context.Context, f *analysis.Frame) error {
				paused = append(paused, f.Start)
				if f.Requests != 5 {
					t.Errorf("frame %s summary has %d requests, want 5 (all back before the pause)", f.Start, f.Requests)
				}
				time.Sleep(300 * time.Millisecond)
				pauseEnd = append(pauseEnd, mono())
				return nil
			}}, 1)
		if rep.Sent != 15 || len(paused) != 2 {
			t.Fatalf("sent %d, paused after %d frames; want 15 and 2", rep.Sent, len(paused))
		}
		if !paused[0].Equal(start) || !paused[1].Equal(start.Add(time.Second)) {
			t.Errorf("paused after frames %v", paused)
		}
		// the clock restarts after a pause: frame 1's first request goes out right after it
		srv.mu.Lock()
		first := srv.at[6]
		srv.mu.Unlock()
		if d := time.Duration(first - pauseEnd[0]); d < 0 || d > 100*time.Millisecond {
			t.Errorf("frame 1 started %s after the pause ended, want at once", d)
		}
		for _, want := range []string{"frame 0 (recorded 2026-01-01 12:00:00)  sent 5 ok 5", "frame 2 (recorded 2026-01-01 12:00:02)  sent 5 ok 5", "lag p99"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("progress lacks %q:\n%s", want, out.String())
			}
		}
		_ = sink
	})
	t.Run("stop", func(t *testing.T) {
		rep, sink := run(t, xs, Options{Target: srv.url(t), Selection: Selection{Frame: time.Second}, Step: true,
			StepWait: func(context.Context, *analysis.Frame) error { return ErrStop }}, 1)
		if !rep.Stopped || len(sink.rows) != 5 {
			t.Errorf("stopped %v after %d rows, want true after 5", rep.Stopped, len(sink.rows))
		}
	})
}

// TestSpeedSweep: the sweep reports the highest speed that meets the SLO
// against a target that overloads above 300 req/s: it answers at once
// unless it saw more than 30 arrivals in the last 100 ms, then after 300 ms
// (a rate threshold, so the test does not hang on sleep precision).
func TestSpeedSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("timing-heavy")
	}
	var mu sync.Mutex
	var recent []int64
	srv := newArrivals(t, func(w http.ResponseWriter, r *http.Request, id int64) {
		now := mono()
		mu.Lock()
		recent = append(recent, now)
		for len(recent) > 0 && recent[0] < now-int64(100*time.Millisecond) {
			recent = recent[1:]
		}
		busy := len(recent) > 30
		mu.Unlock()
		if busy {
			time.Sleep(300 * time.Millisecond)
		}
		io.WriteString(w, "ok")
	})
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	xs := evenTrace(start, 100, 10*time.Millisecond, 4) // 100 req/s for 1 s
	slo, err := analysis.ParseSLO("e2e=100ms")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(context.Background(), sliceOpener(xs), Options{Target: srv.url(t), Analysis: analysis.Options{SLO: slo}})
	if err != nil {
		t.Fatal(err)
	}
	// A scheduling stall of a loaded machine bunches arrivals and can push a
	// slow speed over the target's capacity: the sweep gets three tries to
	// show the right answer, and every try must run each speed in order.
	var best float64
	for try := 0; try < 3 && best != 1.5; try++ {
		var sinks []float64
		sr, err := p.Sweep(context.Background(), []float64{1, 1.5, 5}, func(s float64) (Sink, error) {
			sinks = append(sinks, s)
			return &memSink{}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(sr.Runs) != 3 || !slices.Equal(sinks, []float64{1, 1.5, 5}) {
			t.Fatalf("%d runs, sinks %v", len(sr.Runs), sinks)
		}
		for _, r := range sr.Runs {
			t.Logf("try %d, speed %g: e2e p95 %s meets %v", try, r.Speed, r.Summary.E2E.P95, r.Summary.MeetsSLO)
		}
		best = sr.Best
		mu.Lock()
		recent = nil // the next try starts with an idle target
		mu.Unlock()
		time.Sleep(300 * time.Millisecond)
	}
	if best != 1.5 {
		t.Errorf("best speed %g, want 1.5 (5× is 500 req/s against a 300 req/s target)", best)
	}
}

// TestTargetSafety: a recorded host is refused unless allowed.
func TestTargetSafety(t *testing.T) {
	srv := newArrivals(t, nil)
	u := srv.url(t)
	x := exchangeAt(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC), 1, 1)
	x.Host = "127.0.0.1:8000" // recorded with another port: still the same host
	_, err := NewPlan(context.Background(), sliceOpener([]*formats.Exchange{x}), Options{Target: u})
	var rh *RecordedHostError
	if !errors.As(err, &rh) || rh.Host != "127.0.0.1" || !strings.Contains(err.Error(), "--allow-recorded-host") {
		t.Fatalf("err %v: want a RecordedHostError naming 127.0.0.1 and the flag", err)
	}
	if _, err := NewPlan(context.Background(), sliceOpener([]*formats.Exchange{x}), Options{Target: u, AllowRecordedHost: true}); err != nil {
		t.Fatalf("allowed: %v", err)
	}
}

// TestErrors: bad datasets, empty selections and unreachable targets give
// clear errors or error rows.
func TestErrors(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1") // nothing listens on port 1
	x := exchangeAt(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC), 1, 1)
	t.Run("unreachable", func(t *testing.T) {
		_, sink := run(t, []*formats.Exchange{x}, Options{Target: u, Timeout: 5 * time.Second}, 1)
		if r := sink.rows[0]; r.Status != 0 || !strings.HasPrefix(r.Error, "refused") {
			t.Errorf("row status %d error %q: want a refused error row", r.Status, r.Error)
		}
	})
	bad := func(context.Context, time.Time, time.Time) (Source, error) {
		return nil, errors.New("not a parquet file")
	}
	tests := []struct {
		name string
		open Opener
		opts Options
		want string
	}{
		{"bad dataset", bad, Options{Target: u}, "open dataset: not a parquet file"},
		{"empty", sliceOpener(nil), Options{Target: u}, "no exchange in the window"},
		{"filtered out", sliceOpener([]*formats.Exchange{x}), Options{Target: u, Selection: Selection{Models: []string{"other"}}}, "none passes the filters"},
		{"no target", sliceOpener([]*formats.Exchange{x}), Options{}, "no target"},
		{"bad scheme", sliceOpener([]*formats.Exchange{x}), Options{Target: &url.URL{Scheme: "ftp", Host: "x"}}, "scheme must be http"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPlan(context.Background(), tc.open, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// TestWarmupAndLoop: warm-up requests go out before the clock and leave no
// rows; --loop repeats the window back to back on one clock.
func TestWarmupAndLoop(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	xs := evenTrace(start, 10, 20*time.Millisecond, 2) // 180 ms span
	var n atomic.Int64
	srv := newArrivals(t, func(w http.ResponseWriter, r *http.Request, id int64) {
		n.Add(1)
		io.WriteString(w, "ok")
	})
	rep, sink := run(t, xs, Options{Target: srv.url(t), Warmup: 4, Loop: 2}, 1)
	if n.Load() != 24 || rep.Sent != 20 || len(sink.rows) != 20 {
		t.Fatalf("target saw %d requests, sent %d, rows %d; want 24 (4 warm-up), 20, 20", n.Load(), rep.Sent, len(sink.rows))
	}
	var first, second []*formats.Result
	for _, r := range sink.rows {
		if r.ScheduledNs < int64(190*time.Millisecond) {
			first = append(first, r)
		} else {
			second = append(second, r)
		}
	}
	if len(first) != 10 || len(second) != 10 {
		t.Fatalf("%d rows in the first pass, %d in the second; want 10 and 10", len(first), len(second))
	}
	var maxSched int64
	for _, r := range second {
		maxSched = max(maxSched, r.ScheduledNs)
	}
	// period = span + mean gap = 200 ms: the second pass ends at 380 ms.
	if d := time.Duration(maxSched); d != 380*time.Millisecond {
		t.Errorf("last request of loop 2 scheduled at %s, want 380ms", d)
	}
}
