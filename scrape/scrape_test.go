package scrape

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/scrape/scrapetest"
)

// memSink collects samples; block, when set, makes Write wait on it.
type memSink struct {
	mu    sync.Mutex
	rows  []formats.Metric
	block chan struct{}
}

func (m *memSink) Write(r *formats.Metric) error {
	if m.block != nil {
		<-m.block
	}
	m.mu.Lock()
	m.rows = append(m.rows, *r)
	m.mu.Unlock()
	return nil
}

func (m *memSink) snapshot() []formats.Metric {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]formats.Metric(nil), m.rows...)
}

const exposition = `# HELP vllm:num_requests_waiting Waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 3
# HELP vllm:prompt_tokens_total Prompt tokens.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="m"} 1200
# HELP vllm:e2e_request_latency_seconds E2E.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{model_name="m",le="0.5"} 1
vllm:e2e_request_latency_seconds_bucket{model_name="m",le="+Inf"} 2
vllm:e2e_request_latency_seconds_sum{model_name="m"} 1.5
vllm:e2e_request_latency_seconds_count{model_name="m"} 2
`

func metricsServer(t *testing.T, scrapes *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if scrapes != nil {
			scrapes.Add(1)
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		fmt.Fprint(w, exposition)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// waitScrapes polls until cond holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestScrapeRawSamplesAtCadence(t *testing.T) {
	t.Parallel()
	srv := metricsServer(t, nil)
	sink := &memSink{}
	every := 100 * time.Millisecond
	s, err := Start(context.Background(), sink, Options{Targets: []string{srv.URL + "/metrics"}, Every: every})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return s.Stats().Targets[0].OK >= 4 })
	st := closeStats(t, s)
	rows := sink.snapshot()
	if st.Targets[0].OK < 4 || st.Failed() != 0 || st.Written != int64(len(rows)) {
		t.Fatalf("stats %+v, %d rows", st, len(rows))
	}
	perScrape := map[int64]map[string]float64{}
	for _, r := range rows {
		if r.Source != srv.URL+"/metrics" {
			t.Fatalf("source %q", r.Source)
		}
		if perScrape[r.TsUnixNs] == nil {
			perScrape[r.TsUnixNs] = map[string]float64{}
		}
		key := r.Name
		if le, ok := r.Labels["le"]; ok {
			key += "{le=" + le + "}"
		}
		perScrape[r.TsUnixNs][key] = r.Value
		if r.Labels["model_name"] != "m" {
			t.Fatalf("labels %v: want model_name=m", r.Labels)
		}
	}
	if int64(len(perScrape)) != st.Targets[0].OK {
		t.Fatalf("%d distinct scrape times for %d scrapes", len(perScrape), st.Targets[0].OK)
	}
	want := map[string]float64{
		"vllm:num_requests_waiting": 3, "vllm:prompt_tokens_total": 1200,
		"vllm:e2e_request_latency_seconds_bucket{le=0.5}": 1, "vllm:e2e_request_latency_seconds_bucket{le=+Inf}": 2,
		"vllm:e2e_request_latency_seconds_sum": 1.5, "vllm:e2e_request_latency_seconds_count": 2,
	}
	for ts, got := range perScrape {
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("scrape at %d: %s = %v, want %v (got %v)", ts, k, got[k], v, got)
			}
		}
		// Due at whole multiples of Every: a scrape starts after its due
		// time, well within the interval even on a loaded machine.
		if off := time.Duration(ts % int64(every)); off > every*9/10 {
			t.Fatalf("scrape at %s is %s past its due time", time.Unix(0, ts).UTC(), off)
		}
	}
}

func TestSeriesFilter(t *testing.T) {
	t.Parallel()
	srv := metricsServer(t, nil)
	sink := &memSink{}
	s, err := Start(context.Background(), sink, Options{Targets: []string{srv.URL}, Every: 50 * time.Millisecond,
		Series: []string{"vllm:num_requests_waiting", "vllm:e2e_request_latency_seconds_count"}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return s.Stats().Targets[0].OK >= 1 })
	closeStats(t, s)
	names := map[string]bool{}
	for _, r := range sink.snapshot() {
		names[r.Name] = true
	}
	if !names["vllm:num_requests_waiting"] || !names["vllm:e2e_request_latency_seconds_count"] ||
		!names["vllm:e2e_request_latency_seconds_bucket"] || names["vllm:prompt_tokens_total"] {
		t.Fatalf("kept %v: want the gauge and the histogram family only", names)
	}
}

// Endpoints that hang, fail or serve garbage are counted by reason; a good
// endpoint beside them keeps its cadence, and Close returns promptly.
func TestFailingEndpoints(t *testing.T) {
	t.Parallel()
	var good atomic.Int64
	goodSrv := metricsServer(t, &good)
	bad := scrapetest.StartBadEndpoints(t)
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("# comment line that is long enough\n"), 2000))
	}))
	defer big.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/metrics"
	ln.Close()

	every := 100 * time.Millisecond
	sink := &memSink{}
	s, err := Start(context.Background(), sink, Options{
		Targets:  []string{goodSrv.URL, bad.Hang, bad.Fail, bad.Garbage, big.URL, refused},
		Every:    every,
		Timeout:  300 * time.Millisecond, // generous: the good endpoint must not time out on a loaded machine
		MaxBytes: 32 << 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, func() bool {
		for _, ts := range s.Stats().Targets {
			if ts.Scrapes < 3 {
				return false
			}
		}
		return true
	})
	began := time.Now()
	st := closeStats(t, s)
	if d := time.Since(began); d > 3*time.Second {
		t.Fatalf("Close took %s with a hanging endpoint", d)
	}
	byURL := map[string]TargetStats{}
	for _, ts := range st.Targets {
		byURL[ts.URL] = ts
	}
	tests := []struct {
		url, reason string
	}{
		{bad.Hang, ReasonTimeout},
		{bad.Fail, ReasonStatus},
		{bad.Garbage, ReasonParse},
		{big.URL, ReasonTooLarge},
		{refused, ReasonConnect},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			ts := byURL[tt.url]
			if ts.OK != 0 || ts.Failures[tt.reason] < 2 || ts.LastError == "" {
				t.Fatalf("%s: %+v, want ≥ 2 %s failures and no success", tt.url, ts, tt.reason)
			}
		})
	}
	g := byURL[goodSrv.URL]
	if g.OK < 3 || g.Failures[ReasonParse]+g.Failures[ReasonStatus]+g.Failures[ReasonConnect]+g.Failures[ReasonTooLarge] > 0 {
		t.Fatalf("good endpoint %+v: its scrapes must not suffer from the others", g)
	}
	for _, r := range sink.snapshot() {
		if r.Source != goodSrv.URL {
			t.Fatalf("sample from failing endpoint %s", r.Source)
		}
	}
	var text strings.Builder
	if err := st.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"timeout", "http_status", "parse", "too_large", "connect"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, text.String())
		}
	}
}

// A sink that stops accepting never holds up scraping: samples beyond the
// queue are dropped and counted.
func TestSlowSinkDrops(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := metricsServer(t, &hits)
	sink := &memSink{block: make(chan struct{})}
	s, err := Start(context.Background(), sink, Options{Targets: []string{srv.URL}, Every: 20 * time.Millisecond, Queue: 10})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return s.Stats().Dropped > 0 && s.Stats().Targets[0].OK >= 5 })
	close(sink.block)
	st := closeStats(t, s)
	if st.Dropped == 0 || st.Written+st.Dropped != st.Targets[0].Samples {
		t.Fatalf("stats %+v: want drops and written+dropped = sampled", st)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
	}{
		{"no targets", Options{}},
		{"bad scheme", Options{Targets: []string{"ftp://x/metrics"}}},
		{"no host", Options{Targets: []string{"/metrics"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Start(context.Background(), &memSink{}, tt.opts); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(exposition), false)
	f.Add([]byte("# TYPE x counter\nx_total 1\n# EOF\n"), true)
	f.Add([]byte("garbage{{{"), false)
	s := &Scraper{opts: Options{MaxSamples: 1000}.withDefaults()}
	at := time.Unix(1700000000, 0)
	f.Fuzz(func(t *testing.T, data []byte, openMetrics bool) {
		format := expfmt.NewFormat(expfmt.TypeTextPlain)
		if openMetrics {
			format = expfmt.NewFormat(expfmt.TypeOpenMetrics)
		}
		rows, reason, err := s.parse(bytes.NewReader(data), format, "src", at)
		if err != nil {
			if reason == "" || rows != nil {
				t.Fatalf("error %v with reason %q and %d rows", err, reason, len(rows))
			}
			return
		}
		if len(rows) > 1000 {
			t.Fatalf("%d rows past MaxSamples", len(rows))
		}
		for _, r := range rows {
			if r.TsUnixNs != at.UnixNano() || r.Name == "" {
				t.Fatalf("row %+v", r)
			}
		}
	})
}

// closeStats closes s, failing the test if that takes 10 s, and returns its
// final counts.
func closeStats(t *testing.T, s *Scraper) Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return s.Stats()
}
