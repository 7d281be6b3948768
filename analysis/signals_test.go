package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

var sigT0 = time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC)

func writeRows[T formats.Record](t *testing.T, dir string, rows []T) {
	t.Helper()
	w, err := formats.NewWriter[T](context.Background(), formats.WriterOptions{Dir: dir, NoSpool: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if err := w.Write(&rows[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// writeTailRecording records 10 one-second frames of 10 requests each; frames 4–6
// are slow (the tail).
func writeTailRecording(t *testing.T, dir string) {
	t.Helper()
	var xs []formats.Exchange
	for f := range 10 {
		d := 50 * time.Millisecond
		if f >= 4 && f <= 6 {
			d = time.Duration(f) * 200 * time.Millisecond
		}
		for i := range 10 {
			ts := sigT0.Add(time.Duration(f)*time.Second + time.Duration(i)*100*time.Millisecond)
			xs = append(xs, formats.Exchange{Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "gw", Seq: int64(len(xs) + 1),
				Method: "POST", Path: "/v1/completions", Status: 200, Complete: true, DurationNs: int64(d), TTFTNs: int64(d / 2),
				BatchSize: -1, QueueDepth: -1})
		}
	}
	writeRows(t, dir, xs)
}

func metric(at time.Time, name string, v float64, labels map[string]string) formats.Metric {
	return formats.Metric{Ts: at.Truncate(time.Microsecond), TsUnixNs: at.UnixNano(), Source: "http://sim/metrics", Name: name, Labels: labels, Value: v}
}

func loadFor(t *testing.T, dir string, series []string) (*Summary, *Signals) {
	t.Helper()
	a := New(Options{Frame: time.Second})
	if _, err := a.AddDataset(context.Background(), []string{dir}, formats.ReaderOptions{}); err != nil {
		t.Fatal(err)
	}
	s := a.Summary()
	sig, err := LoadSignals(context.Background(), []string{dir}, s, SignalOptions{Series: series})
	if err != nil {
		t.Fatal(err)
	}
	return s, sig
}

func TestSignalsRecording(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTailRecording(t, dir)
	var ms []formats.Metric
	for k := range 40 { // every 250 ms from the first frame's start
		at := sigT0.Add(time.Duration(k) * 250 * time.Millisecond)
		f := k / 4
		waiting := 1.0
		if f >= 4 && f <= 6 {
			waiting = float64(10 * f)
		}
		// Two models' queues: summed. Two GPUs' utilisation: averaged.
		ms = append(ms,
			metric(at, "vllm:num_requests_waiting", waiting-1, map[string]string{"model_name": "a"}),
			metric(at, "vllm:num_requests_waiting", 1, map[string]string{"model_name": "b"}),
			metric(at, "DCGM_FI_DEV_GPU_UTIL", 40, map[string]string{"gpu": "0"}),
			metric(at, "DCGM_FI_DEV_GPU_UTIL", 60+float64(k%2), map[string]string{"gpu": "1"}),
			metric(at, "vllm:prompt_tokens_total", float64(100*k), nil), // 400 tokens/s
			metric(at, "vllm:num_requests_running", math.NaN(), nil),
			metric(at, "unrelated", 5, nil),
		)
	}
	// A sample exactly at a frame's start belongs to it; 1 ns before, to the
	// one before.
	ms = append(ms, metric(sigT0.Add(8*time.Second-time.Nanosecond), "vllm:num_requests_waiting", 100, nil))
	writeRows(t, formats.MetricsDir(dir), ms)

	s, sig := loadFor(t, dir, []string{"vllm:num_requests_waiting", "DCGM_FI_DEV_GPU_UTIL", "vllm:prompt_tokens_total", "vllm:num_requests_running", "absent"})
	if sig == nil || sig.Clock != "recording" || len(s.Frames) != 10 {
		t.Fatalf("signals %+v, %d frames", sig, len(s.Frames))
	}
	by := map[string]SignalSeries{}
	for _, ss := range sig.Series {
		by[ss.Name] = ss
	}
	if _, ok := by["vllm:num_requests_running"]; ok {
		t.Fatal("a series of NaN samples only is listed")
	}
	if _, ok := by["absent"]; ok {
		t.Fatal("a series never scraped is listed")
	}
	w := by["vllm:num_requests_waiting"]
	for i, f := range w.Frames {
		wantN, wantMean, wantMax := 4, 1.0, 1.0
		if i >= 4 && i <= 6 {
			wantMean, wantMax = float64(10*i), float64(10*i)
		}
		if i == 7 {
			wantN, wantMean, wantMax = 5, (4+100)/5.0, 100
		}
		if f.N != wantN || f.Mean != wantMean || f.Max != wantMax || !f.Start.Equal(s.Frames[i].Start) {
			t.Errorf("frame %d: %+v, want n=%d mean=%v max=%v", i, f, wantN, wantMean, wantMax)
		}
	}
	if u := by["DCGM_FI_DEV_GPU_UTIL"]; math.Abs(u.Mean-50.25) > 1e-9 {
		t.Errorf("GPU util mean %v: want the GPUs averaged (50.25)", u.Mean)
	}
	if r := by["vllm:prompt_tokens_total"]; !r.Rate || math.Abs(r.Mean-400) > 1e-6 || r.Frames[0].N != 3 {
		t.Errorf("prompt tokens %+v: want a 400/s rate, 3 intervals in the first frame", r)
	}
	if sig.Mover != "vllm:num_requests_waiting" || !strings.Contains(sig.Explanation, "waiting-queue depth") {
		t.Fatalf("mover %q: %s", sig.Mover, sig.Explanation)
	}
	if by["vllm:prompt_tokens_total"].P99.Valid {
		t.Error("a constant rate cannot correlate")
	}

	var text bytes.Buffer
	s.Signals = sig
	if err := s.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "server-side signals") || !strings.Contains(text.String(), sig.Explanation) {
		t.Fatalf("summary text lacks the signals:\n%s", text.String())
	}
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"signals":{`)) || !bytes.Contains(js, []byte(`"mover":"vllm:num_requests_waiting"`)) {
		t.Fatalf("JSON lacks the signals: %.300s", js)
	}
}

func TestSignalsNoneAndFlat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTailRecording(t, dir)
	if _, sig := loadFor(t, dir, nil); sig != nil {
		t.Fatalf("no metrics: got %+v, want nil", sig)
	}
	var ms []formats.Metric
	for k := range 20 {
		ms = append(ms, metric(sigT0.Add(time.Duration(k)*500*time.Millisecond), "vllm:gpu_cache_usage_perc", float64(k%2)/2, nil))
	}
	writeRows(t, formats.MetricsDir(dir), ms)
	_, sig := loadFor(t, dir, nil)
	if sig == nil || sig.Mover != "" || !strings.Contains(sig.Explanation, "no scraped signal moves with the tail") {
		t.Fatalf("flat KV usage: %+v", sig)
	}
}

// Replay results map wall-clock scrapes to the original time being replayed
// then: here at speed 2, starting 1 h after the recording.
func TestSignalsReplayClock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := sigT0.Add(time.Hour)
	var rs []formats.Result
	for k := range 40 { // 4 per frame of 1 s original time
		orig := sigT0.Add(time.Duration(k) * 250 * time.Millisecond)
		sched := run.Add(time.Duration(k) * 125 * time.Millisecond)
		e2e := 20 * time.Millisecond
		if k >= 20 && k < 28 {
			e2e = time.Second
		}
		rs = append(rs, formats.Result{RunID: "r", OrigTs: orig, Frame: orig.Truncate(time.Second),
			ScheduledNs: int64(sched.Sub(run)), SentUnixNs: sched.UnixNano() + 1000, LagNs: 1000, Status: 200,
			E2ENs: int64(e2e), E2ESchedNs: int64(e2e), TTFTNs: int64(e2e / 2), BatchSize: -1, QueueDepth: -1, Method: "POST", Path: "/"})
	}
	writeRows(t, dir, rs)
	var ms []formats.Metric
	for k := range 50 { // every 100 ms of wall time = 200 ms of original time
		at := run.Add(time.Duration(k) * 100 * time.Millisecond)
		v := 0.0
		if k >= 25 && k < 35 { // original 5 s–7 s: the slow frames
			v = 30
		}
		ms = append(ms, metric(at, "vllm:num_requests_waiting", v, nil))
	}
	writeRows(t, formats.MetricsDir(dir), ms)
	s, sig := loadFor(t, dir, nil)
	if sig == nil || sig.Clock != "replay" || len(sig.Series) != 1 {
		t.Fatalf("signals %+v", sig)
	}
	for i, f := range sig.Series[0].Frames {
		want := 0.0
		if i == 5 || i == 6 {
			want = 30
		}
		if f.N != 5 || f.Mean != want || !f.Start.Equal(sigT0.Add(time.Duration(i)*time.Second)) {
			t.Errorf("frame %d (%s): %+v, want 5 points of %v", i, s.Frames[i].Start, f, want)
		}
	}
	if sig.Mover != "vllm:num_requests_waiting" {
		t.Fatalf("mover %q: %s", sig.Mover, sig.Explanation)
	}
}

func TestRates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []point
		want []point
	}{
		{"steady", []point{{0, 0}, {1e9, 10}, {2e9, 30}}, []point{{1e9, 10}, {2e9, 20}}},
		{"reset", []point{{0, 100}, {1e9, 110}, {2e9, 5}}, []point{{1e9, 10}, {2e9, 5}}},
		{"one point", []point{{0, 1}}, []point{}},
		{"same time", []point{{0, 1}, {0, 2}, {5e8, 3}}, []point{{5e8, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rates(tt.in)
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestCompareSignalsText(t *testing.T) {
	t.Parallel()
	c := &Comparison{A: &Summary{Signals: &Signals{Explanation: "server side: waiting-queue depth moves with the tail"}}, B: &Summary{}}
	var b bytes.Buffer
	if err := c.WriteText(&b, "base", "fix"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\nA server side: waiting-queue depth moves with the tail\n") || strings.Contains(b.String(), "B server side") {
		t.Fatalf("compare text:\n%s", b.String())
	}
}

// Metrics are found beside a dataset, and beside a sweep for one of its
// speed partitions; a dataset without scraped metrics has none.
func TestMetricsPaths(t *testing.T) {
	root := t.TempDir()
	run := root + "/run"
	for _, d := range []string{run + "/speed=2", run + ".metrics/speed=2", root + "/rec", root + "/rec.metrics", root + "/bare"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ path, want string }{
		{root + "/rec/", root + "/rec.metrics"},
		{run + "/speed=2", run + ".metrics/speed=2"},
		{run, run + ".metrics"},
		{root + "/bare", ""},
	} {
		got := MetricsPaths([]string{tc.path})
		if tc.want == "" && len(got) != 0 || tc.want != "" && (len(got) != 1 || got[0] != tc.want) {
			t.Errorf("MetricsPaths(%s) = %v, want %q", tc.path, got, tc.want)
		}
	}
}
