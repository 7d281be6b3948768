package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/examples/simcluster/cluster"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/formatstest"
	"github.com/reelkit/reel/scrape/scrapetest"
)

// incidentStart is the recording's first instant: a whole second, so
// frames start on it.
var incidentStart = time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC)

// writeIncidentDataset records chat traffic at 10 req/s of ~400-token
// prompts for span, with a burst from 8 s to 12 s: twice the rate, half of
// it with prompts 4× longer (the weekly incident). Prompts are distinct from
// their first block, so the simulator's prefix cache saves nothing.
func writeIncidentDataset(t *testing.T, dir string, span time.Duration) int {
	t.Helper()
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: dir, Recorder: "gw-1", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	n := 0
	for off := time.Duration(0); off < span; off += 50 * time.Millisecond {
		burst := off >= 8*time.Second && off < 12*time.Second
		if !burst && (off/(50*time.Millisecond))%2 == 1 {
			continue // 10 req/s outside the burst, 20 inside
		}
		tokens := 400
		if burst && rng.IntN(2) == 0 {
			tokens = 1600
		}
		var text strings.Builder
		fmt.Fprintf(&text, "request %d: ", n)
		for text.Len() < 4*tokens {
			text.WriteByte(byte('a' + rng.IntN(26)))
			if rng.IntN(6) == 0 {
				text.WriteByte(' ')
			}
		}
		body := fmt.Appendf(nil, `{"model":"m","messages":[{"role":"user","content":%q}],"max_tokens":24,"ignore_eos":true,"stream":true}`, text.String())
		n++
		ts := incidentStart.Add(off)
		x := formats.Exchange{Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "gw-1", Seq: int64(n), ConnID: int64(n%8 + 1),
			Method: "POST", Host: "gateway.prod.example", Path: "/v1/chat/completions", ReqContentType: "application/json",
			ReqBody: body, ReqBodyBytes: int64(len(body)), Model: "m", Stream: true, MaxTokens: 24,
			PromptTokens: int32(tokens), OutputTokens: 24, Status: 200, Complete: true}
		if err := w.Write(&x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return n
}

// startSim serves the simulated cluster, four times faster than real time,
// with a KV cache small enough that the burst's long prompts queue. The
// dataset's prompts are letter soup sized at 4 bytes per token
// (writeIncidentDataset), so the simulator counts them that way: under
// o200k_base random letters cost several tokens a word: the prompts would
// come out far longer and load the cache, and the machine, beyond what the
// test is about.
func startSim(t *testing.T) *cluster.Server {
	t.Helper()
	srv, err := cluster.Start(context.Background(), "127.0.0.1:0", cluster.Options{
		TimeScale: 4, KVCapacityTokens: 16384, MaxModelLen: 8192, StreamUsage: cluster.UsageAlways,
		Tokenizer: cluster.TokenizerEstimate,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	return srv
}

// The Done-when of server-side signals: replay against the simulator with
// scraping on; the metrics file has the series at the configured cadence,
// every sample lands in the frame its time falls in, and the report names
// the waiting queue (or KV usage) as what moves with p99.
func TestReplayScrapeSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 5 s of traffic")
	}
	data, out := t.TempDir(), t.TempDir()
	n := writeIncidentDataset(t, data, 20*time.Second)
	sim := startSim(t)
	const every = 125 * time.Millisecond
	var stdout, stderr bytes.Buffer
	err := runReplay(context.Background(), []string{data, "--target", sim.URL, "--out", out, "--speed", "4",
		"--frame", "2s", "--quiet", "--scrape", sim.URL + "/metrics", "--scrape-every", every.String(), "--scrape-timeout", "1s"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr.String())
	}
	results := formatstest.Read[formats.Result](t, out)
	if len(results) != n {
		t.Fatalf("%d results for %d exchanges", len(results), n)
	}
	if !strings.Contains(stdout.String(), "server-side signals") || !strings.Contains(stdout.String(), "server side: ") {
		t.Fatalf("the replay's summary lacks the server-side signals:\n%s", stdout.String())
	}

	// Cadence: one scrape every 125 ms of wall clock, on its multiples.
	metrics := formatstest.Read[formats.Metric](t, formats.MetricsDir(out))
	var waits []formats.Metric
	for _, m := range metrics {
		if m.Name == "vllm:num_requests_waiting" {
			waits = append(waits, *m)
		}
	}
	if len(waits) < 20 {
		t.Fatalf("%d samples of the waiting queue in a 5 s run at %s\n%s", len(waits), every, stderr.String())
	}
	for i, m := range waits {
		if m.Source != sim.URL+"/metrics" || m.Labels["model_name"] == "" {
			t.Fatalf("sample %+v", m)
		}
		if i > 0 && m.TsUnixNs-waits[i-1].TsUnixNs < int64(every)/2 {
			t.Fatalf("samples %s apart at %s: want one per %s", time.Duration(m.TsUnixNs-waits[i-1].TsUnixNs), m.Time(), every)
		}
	}
	span := time.Duration(waits[len(waits)-1].TsUnixNs - waits[0].TsUnixNs)
	if want := int(span/every) + 1; len(waits) < want*6/10 {
		t.Fatalf("%d scrapes over %s: want about %d\n%s", len(waits), span, want, stderr.String())
	}

	// Alignment: map each sample through the replay's schedule
	// independently (sent − lag was due for orig_ts; speed 4) and count per
	// 2 s frame of the original clock.
	slices.SortFunc(results, func(a, b *formats.Result) int { return int((a.SentUnixNs - a.LagNs) - (b.SentUnixNs - b.LagNs)) })
	r0 := results[0]
	want := map[time.Time]int{}
	for _, m := range waits {
		orig := r0.OrigTs.UnixNano() + 4*(m.TsUnixNs-(r0.SentUnixNs-r0.LagNs))
		want[time.Unix(0, orig).UTC().Truncate(2*time.Second)]++
	}
	stdout.Reset()
	if err := runReport(context.Background(), []string{out, "--frame", "2s", "--json"}, &stdout, &stderr); err != nil {
		t.Fatalf("report: %v\n%s", err, stderr.String())
	}
	var rep struct {
		Frames  []analysis.Frame  `json:"frames"`
		Signals *analysis.Signals `json:"signals"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Signals == nil || rep.Signals.Clock != "replay" {
		t.Fatalf("report has no replay signals: %s", stdout.String())
	}
	var waiting *analysis.SignalSeries
	for i := range rep.Signals.Series {
		if rep.Signals.Series[i].Name == "vllm:num_requests_waiting" {
			waiting = &rep.Signals.Series[i]
		}
	}
	if waiting == nil || len(waiting.Frames) != len(rep.Frames) {
		t.Fatalf("waiting series %+v for %d frames\n%s", waiting, len(rep.Frames), stdout.String())
	}
	for i, f := range waiting.Frames {
		if !f.Start.Equal(rep.Frames[i].Start) || f.N != want[f.Start] {
			t.Errorf("frame %s: %d samples, want %d (frame %s)", f.Start, f.N, want[f.Start], rep.Frames[i].Start)
		}
		if f.N > 0 && rep.Frames[i].Requests > 0 && (f.N < 2 || f.N > 6) {
			t.Errorf("frame %s holds %d scrapes: want about 4 (2 s at speed 4, one per %s)\n%s", f.Start, f.N, every, stderr.String())
		}
	}
	if m := rep.Signals.Mover; m != "vllm:num_requests_waiting" && m != "vllm:gpu_cache_usage_perc" {
		t.Fatalf("mover %q: want the waiting queue or KV usage\n%s", m, rep.Signals.Explanation)
	}
	if !strings.Contains(rep.Signals.Explanation, "moves with the tail") {
		t.Fatalf("explanation %q", rep.Signals.Explanation)
	}

	// The text report and the replay's own summary say it in words.
	stdout.Reset()
	if err := runReport(context.Background(), []string{out, "--frame", "2s"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), rep.Signals.Explanation) {
		t.Fatalf("text report lacks %q:\n%s", rep.Signals.Explanation, stdout.String())
	}
	html := filepath.Join(t.TempDir(), "r.html")
	if err := runReport(context.Background(), []string{out, "--frame", "2s", "--html", html}, io.Discard, &stderr); err != nil {
		t.Fatal(err)
	}
	t.Logf("server side: %s", rep.Signals.Explanation)
	if testing.Verbose() {
		t.Log(stdout.String())
	}
}

// Shards replay one clock against one shadow: only shard 0 scrapes, so a
// merged report holds each sample once.
func TestReplayScrapeOnlyShardZero(t *testing.T) {
	data := t.TempDir()
	writeIncidentDataset(t, data, 4*time.Second)
	sim := startSim(t)
	for _, tt := range []struct {
		shard  string
		scrape bool
	}{{"0/2", true}, {"1/2", false}} {
		t.Run(tt.shard, func(t *testing.T) {
			out := t.TempDir()
			var stdout, stderr bytes.Buffer
			err := runReplay(context.Background(), []string{data, "--target", sim.URL, "--out", out, "--speed", "4",
				"--quiet", "--shard", tt.shard, "--scrape", sim.URL + "/metrics", "--scrape-every", "100ms"}, &stdout, &stderr)
			if err != nil {
				t.Fatalf("replay: %v\n%s", err, stderr.String())
			}
			_, statErr := os.Stat(formats.MetricsDir(out))
			if scraped := statErr == nil; scraped != tt.scrape {
				t.Fatalf("shard %s: metrics written %v, want %v\n%s", tt.shard, scraped, tt.scrape, stderr.String())
			}
			if note := strings.Contains(stderr.String(), "leaves --scrape to shard 0"); note == tt.scrape {
				t.Fatalf("shard %s: stderr note %v, want %v:\n%s", tt.shard, note, !tt.scrape, stderr.String())
			}
		})
	}
}

// Endpoints that hang, fail or serve garbage do not touch the replay: every
// exchange is sent on time and answered, and the failures are counted and
// reported by reason.
func TestReplayScrapeBadEndpoints(t *testing.T) {
	data, out := t.TempDir(), t.TempDir()
	writeIncidentDataset(t, data, 8*time.Second)
	sim := startSim(t)
	bad := scrapetest.StartBadEndpoints(t)

	var stdout, stderr bytes.Buffer
	err := runReplay(context.Background(), []string{data, "--target", sim.URL, "--out", out, "--speed", "4",
		"--frame", "2s", "--quiet", "--scrape-every", "100ms", "--scrape-timeout", "1s",
		"--scrape", bad.Hang + "/metrics", "--scrape", bad.Fail, "--scrape", bad.Garbage, "--scrape", sim.URL + "/metrics"}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr.String())
	}
	results := formatstest.Read[formats.Result](t, out)
	var lags []int64
	for _, r := range results {
		if r.Status != 200 || r.Error != "" {
			t.Fatalf("result %+v: want every request answered", r)
		}
		lags = append(lags, r.LagNs)
	}
	slices.Sort(lags)
	// A send loop that waited on the hanging endpoint would lag by its 1 s
	// timeout; 400 ms leaves room for a busy CI machine's scheduling noise
	// (100 ms did not: p99 103-124 ms at load 8-10).
	if p99 := time.Duration(lags[len(lags)*99/100]); p99 > 400*time.Millisecond {
		t.Fatalf("lag p99 %s with failing scrape endpoints", p99)
	}
	for _, want := range []string{bad.Hang + "/metrics: 0/", "timeout", bad.Fail + ": 0/", "http_status", bad.Garbage + ": 0/", "parse"} {
		if !strings.Contains(stderr.String(), want) {
			t.Fatalf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	metrics := formatstest.Read[formats.Metric](t, formats.MetricsDir(out))
	for _, m := range metrics {
		if m.Source != sim.URL+"/metrics" {
			t.Fatalf("sample from %s", m.Source)
		}
	}
	if len(metrics) == 0 {
		t.Fatal("the good endpoint's samples are missing")
	}
}

// reel record --scrape samples the server beside the proxied traffic, on
// the recording's clock, and reel stats aligns the samples with its frames.
func TestRecordScrape(t *testing.T) {
	sim := startSim(t)
	dir := t.TempDir()
	listen := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runRecord(ctx, []string{"--listen", listen, "--upstream", sim.URL, "--out", dir, "--raw", "--metrics-listen", "",
			"--recorder-id", "scrapetest", "--scrape", sim.URL + "/metrics", "--scrape-every", "100ms"}, io.Discard, &stderr)
	}()
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := client.Get("http://" + listen + "/v1/models")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recorder did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range 30 {
		body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"question %d about the weekly incident"}],"max_tokens":8}`, i)
		resp, err := client.Post("http://"+listen+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		time.Sleep(40 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("record: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("record did not stop")
	}
	if !strings.Contains(stderr.String(), "scrape "+sim.URL+"/metrics: ") {
		t.Fatalf("no scrape report on stderr:\n%s", stderr.String())
	}
	var stdout bytes.Buffer
	if err := runStats(context.Background(), []string{dir, "--frame", "500ms", "--json"}, &stdout, &stderr); err != nil {
		t.Fatalf("stats: %v\n%s", err, stderr.String())
	}
	var st struct {
		Summary struct {
			Requests int64             `json:"requests"`
			Signals  *analysis.Signals `json:"signals"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	sig := st.Summary.Signals
	if st.Summary.Requests < 30 || sig == nil || sig.Clock != "recording" || len(sig.Series) == 0 {
		t.Fatalf("stats: %d requests, signals %+v", st.Summary.Requests, sig)
	}
	points := 0
	for _, f := range sig.Series[0].Frames {
		points += f.N
	}
	if points < 5 {
		t.Fatalf("%d scrapes inside the recording's frames: %+v", points, sig.Series[0])
	}
}
