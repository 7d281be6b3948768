package recorder

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

func TestAssemble(t *testing.T) {
	a := NewAssembler(Config{Recorder: "r1", Upstream: "up:8000", MaxBody: 8, ContextHeaders: []string{"X-Batch-Size", "x-queue-depth", "x-node"}})
	t0 := time.Unix(1700000000, 0)
	r := a.Begin(t0, ConnInfo{ID: 7, Seq: 2, Client: "10.0.0.1:5555"})
	r.SetRequest(Request{Method: "POST", Host: "gw", Path: "/v1/chat/completions", RawQuery: "q=1", Header: http.Header{
		"Content-Type": {"application/json"}, "Authorization": {"Bearer sk-secret"}, "Cookie": {"a=b"},
		"X-Session-Id": {"s-1"}, "Accept": {"a", "b"}, "X-Node": {"from-request"}, "Connection": {"keep-alive"},
	}})
	r.RequestBody([]byte("0123456"))
	r.RequestBody([]byte("789"))
	r.SetResponse(t0.Add(3*time.Millisecond), 200, http.Header{
		"Content-Type": {"text/event-stream"}, "X-Batch-Size": {"oops"}, "X-Queue-Depth": {"5"}, "X-Node": {"gpu-2"}, "Set-Cookie": {"s=1"},
	})
	r.ResponseBody(t0.Add(10*time.Millisecond), []byte("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"A\"}}]}\n"))
	r.ResponseBody(t0.Add(25*time.Millisecond), []byte("\ndata: {\"choices\":[{\"delta\":{\"content\":\"B\"}}]}\n\n"))
	r.ResponseBody(t0.Add(30*time.Millisecond), []byte("data: [DONE]\n\n"))
	x := r.Finish(t0.Add(40*time.Millisecond), true)
	if again := r.Finish(t0, true); again != nil {
		t.Fatal("second Finish returned an exchange")
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"seq", x.Seq, int64(1)},
		{"conn", fmt.Sprint(x.ConnID, "/", x.ConnSeq), "7/2"},
		{"ts", x.TsUnixNs, t0.UnixNano()},
		{"recorder", x.Recorder, "r1"},
		{"upstream", x.Upstream, "up:8000"},
		{"session", x.Session, "s-1"},
		{"req body kept", string(x.ReqBody), "01234567"},
		{"req body truncated", x.ReqBodyTrunc, true},
		{"req body bytes", x.ReqBodyBytes, int64(10)},
		{"authorization: presence and length only", x.ReqHeaders["authorization"], "<redacted len=16>"},
		{"cookie: presence and length only", x.ReqHeaders["cookie"], "<redacted len=3>"},
		{"connection dropped", x.ReqHeaders["connection"], ""},
		{"set-cookie: presence and length only", x.RespHeaders["set-cookie"], "<redacted len=3>"},
		{"multi-value header", x.ReqHeaders["accept"], "a, b"},
		{"batch size not a number", x.BatchSize, int32(-1)},
		{"queue depth", x.QueueDepth, int32(5)},
		{"context: response wins", x.Context["x-node"], "gpu-2"},
		{"ttfb", time.Duration(x.TTFBNs), 3 * time.Millisecond},
		{"duration: last byte", time.Duration(x.DurationNs), 30 * time.Millisecond},
		{"events", x.Events, int32(4)},
		{"ttft", time.Duration(x.TTFTNs), 25 * time.Millisecond},
		{"gaps", fmt.Sprint(x.EventGapsUs), "[0]"},
		{"output tokens: counted", x.OutputTokens, int32(2)},
		{"complete", x.Complete, true},
		{"resp body capped", len(x.RespBody), 8},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Both token events arrived in the same read at 25 ms: one gap of 0 µs.

	r2 := a.Begin(t0, ConnInfo{})
	r2.Fail(ErrClientAborted)
	x2 := r2.Finish(t0.Add(time.Second), true)
	if x2.Seq != 2 || x2.Complete || x2.Error != "client aborted" || x2.Status != 0 || x2.DurationNs != int64(time.Second) || x2.BatchSize != -1 {
		t.Errorf("aborted exchange: %+v", x2)
	}
}

func TestEnrich(t *testing.T) {
	tests := []struct {
		name string
		x    formats.Exchange
		want string // model stream max prompt source output cached
	}{
		{"chat", formats.Exchange{ReqContentType: "application/json",
			ReqBody: []byte(`{"model":"gpt-4o","stream":true,"max_completion_tokens":256,"max_tokens":9,"messages":[{"role":"system","content":"` + strings.Repeat("a", 40) + `"},{"role":"user","content":"hi"}]}`)},
			"gpt-4o true 256 17 estimate 0 NULL"},
		{"responses", formats.Exchange{Path: "/v1/responses", ReqBody: []byte(`{"model":"gpt-5","stream":true,"instructions":"Be brief.","input":"What is KV caching?","max_output_tokens":64}`)},
			"gpt-5 true 64 19 estimate 0 NULL"},
		{"responses usage", formats.Exchange{Path: "/v1/responses", ReqBody: []byte(`{"model":"gpt-5","input":"hi"}`),
			RespContentType: "application/json", RespBody: []byte(`{"object":"response","usage":{"input_tokens":9,"output_tokens":4}}`)},
			"gpt-5 false 0 9 usage 4 NULL"},
		{"anthropic", formats.Exchange{Path: "/v1/messages", ReqBody: []byte(`{"model":"claude-x","max_tokens":300,"system":"Be brief.","messages":[{"role":"user","content":"hi"}]}`),
			RespContentType: "application/json", RespBody: []byte(`{"type":"message","usage":{"input_tokens":11,"output_tokens":5}}`)},
			"claude-x false 300 11 usage 5 NULL"},
		{"embeddings", formats.Exchange{Path: "/v1/embeddings", ReqBody: []byte(`{"model":"e","input":["alpha beta","gamma"]}`)},
			"e false 0 3 estimate 0 NULL"},
		{"image by url", formats.Exchange{Path: "/v1/chat/completions", ReqBody: []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`)},
			"m false 0 7 estimate_min 0 NULL"},
		{"completions with usage", formats.Exchange{ReqBody: []byte(`{"model":"m","prompt":"hello world","max_tokens":5}`),
			RespContentType: "application/json", RespBody: []byte(`{"choices":[{"text":"x"}],"usage":{"prompt_tokens":3,"completion_tokens":5}}`)},
			"m false 5 3 usage 5 NULL"},
		{"openai cached tokens", formats.Exchange{ReqBody: []byte(`{"model":"m","messages":[{"content":"x"}]}`),
			RespContentType: "application/json", RespBody: []byte(`{"usage":{"prompt_tokens":1200,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":1024}}}`)},
			"m false 0 1200 usage 5 1024"},
		{"anthropic cache read", formats.Exchange{ReqBody: []byte(`{"model":"claude","max_tokens":64,"messages":[{"content":"x"}]}`),
			RespContentType: "application/json", RespBody: []byte(`{"type":"message","usage":{"input_tokens":10,"cache_read_input_tokens":2048,"output_tokens":7}}`)},
			"claude false 64 2058 usage 7 2048"},
		{"sse usage kept", formats.Exchange{ReqBody: []byte(`{"model":"m","messages":[{"content":"x"}]}`), PromptTokens: 40, PromptTokensSource: formats.TokensFromUsage, OutputTokens: 7},
			"m false 0 40 usage 7 NULL"},
		{"not json", formats.Exchange{ReqContentType: "text/plain", ReqBody: []byte("hello")}, " false 0 0  0 NULL"},
		{"json, not llm", formats.Exchange{ReqBody: []byte(`{"user":1,"items":[1,2]}`)}, " false 0 0  0 NULL"},
		{"broken json", formats.Exchange{ReqBody: []byte(`{"model":"m","messages":[`)}, " false 0 0  0 NULL"},
		{"truncated completion", formats.Exchange{Path: "/v1/chat/completions", ReqBody: []byte(`{"model":"m"`), ReqBodyTrunc: true, ReqBodyBytes: 4000},
			" false 0 1000 estimate 0 NULL"},
		{"truncated response ignored", formats.Exchange{RespBody: []byte(`{"usage":{"prompt_tokens":3}}`), RespBodyBytes: 1 << 20}, " false 0 0  0 NULL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := tt.x
			if x.RespBodyBytes == 0 {
				x.RespBodyBytes = int64(len(x.RespBody))
			}
			Enrich(&x)
			cached := "NULL"
			if x.CachedTokens != nil {
				cached = fmt.Sprint(*x.CachedTokens)
			}
			got := fmt.Sprint(x.Model, " ", x.Stream, " ", x.MaxTokens, " ", x.PromptTokens, " ", x.PromptTokensSource, " ", x.OutputTokens, " ", cached)
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzEnrich(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"content":"hi"}]}`), []byte(`{"usage":{"prompt_tokens":1}}`))
	f.Add([]byte(`{"prompt":["a","b"],"max_tokens":-5}`), []byte(`[]`))
	f.Fuzz(func(t *testing.T, req, resp []byte) {
		x := formats.Exchange{ReqBody: req, RespBody: resp, RespBodyBytes: int64(len(resp)), ReqContentType: "application/json"}
		Enrich(&x)
		if x.PromptTokens < 0 || x.MaxTokens < 0 || x.OutputTokens < 0 {
			t.Fatalf("negative counts: %+v", x)
		}
	})
}

func TestFilter(t *testing.T) {
	f := Filter{Paths: []string{"/v1/chat/", "/v1/*/embeddings"}, Methods: []string{"POST"}, Hosts: []string{"gw.internal"}}
	tests := []struct {
		method, host, path string
		want               bool
	}{
		{"POST", "gw.internal", "/v1/chat/completions", true},
		{"post", "GW.internal:8080", "/v1/chat/completions", true},
		{"POST", "gw.internal", "/v1/x/embeddings", true},
		{"GET", "gw.internal", "/v1/chat/completions", false},
		{"POST", "other", "/v1/chat/completions", false},
		{"POST", "gw.internal", "/healthz", false},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.host+tt.path, func(t *testing.T) {
			if got := f.Match(tt.method, tt.host, tt.path); got != tt.want {
				t.Fatalf("Match = %v, want %v", got, tt.want)
			}
		})
	}
	var all Filter
	if !all.Match("GET", "x", "/") {
		t.Fatal("the zero Filter must match everything")
	}
}

type countSink struct {
	mu     sync.Mutex
	n      int
	closed bool
}

func (s *countSink) Write(*formats.Exchange) error { s.mu.Lock(); s.n++; s.mu.Unlock(); return nil }
func (s *countSink) Close(context.Context) error   { s.closed = true; return nil }

type markRedactor struct{}

func (markRedactor) RedactExchange(x *formats.Exchange) {
	x.ReqBody = []byte("<redacted>")
	if x.Path == "/fail" {
		x.RedactErr = "boom"
	}
}

func TestPipeline(t *testing.T) {
	sink := &countSink{}
	p := New(sink, markRedactor{}, Options{Sample: 0.5, Pipeline: PipelineOptions{Workers: 2}})
	kept := 0
	for i := range 2000 {
		req := Request{Method: "POST", Host: "h", Path: "/", Header: http.Header{"X-Session-Id": {fmt.Sprint("session-", i%200)}}}
		want := p.Want(req, ConnInfo{ID: int64(i)})
		if want != p.Want(req, ConnInfo{ID: int64(i + 1)}) {
			t.Fatal("sampling is not deterministic per key")
		}
		if want {
			kept++
		}
	}
	if kept < 600 || kept > 1400 {
		t.Errorf("sample 0.5 kept %d of 2000", kept)
	}
	for i := range 100 {
		path := "/ok"
		if i%10 == 0 {
			path = "/fail"
		}
		if !p.Submit(&formats.Exchange{Path: path, ReqBody: []byte("secret")}) {
			t.Fatalf("submit %d dropped with a free queue", i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if sink.n != 100 || !sink.closed {
		t.Fatalf("wrote %d (closed %v), want 100", sink.n, sink.closed)
	}
	if p.Submit(&formats.Exchange{}) {
		t.Fatal("Submit after Close accepted")
	}
	if got := counter(p.Metrics().RedactionErrors); got != 10 {
		t.Errorf("redaction errors %v, want 10", got)
	}
	if got := counter(p.Metrics().Dropped.WithLabelValues(DropClosed)); got != 1 {
		t.Errorf("dropped(closed) %v, want 1", got)
	}
}

// TestDeferredScan checks that event-stream pieces scanned late (after the
// proxy forwarded them: at the next piece, ScanPending or Finish) give the
// same timing as pieces scanned on arrival past the body cap, and that a
// Content-Length presizes the body buffers.
func TestDeferredScan(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	pieces := []string{
		"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"A\"}}]}\n",
		"\ndata: {\"choices\":[{\"delta\":{\"content\":\"B\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"con",
		"tent\":\"C\"}}]}\n\n",
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":4,\"completion_tokens\":3}}\n\ndata: [DONE]",
	}
	run := func(maxBody int64, scanEach bool) string {
		a := NewAssembler(Config{MaxBody: maxBody})
		r := a.Begin(t0, ConnInfo{})
		r.SetRequest(Request{Method: "POST", Header: http.Header{"Content-Length": {"100"}}})
		r.SetResponse(t0.Add(time.Millisecond), 200, http.Header{"Content-Type": {"text/event-stream"}})
		for i, p := range pieces {
			r.ResponseBody(t0.Add(time.Duration(10*(i+1))*time.Millisecond), []byte(p))
			if scanEach {
				r.ScanPending()
				r.ScanPending() // a second call has nothing left to scan
			}
		}
		x := r.Finish(t0.Add(time.Second), true)
		return fmt.Sprint(x.Events, time.Duration(x.TTFTNs), x.EventGapsUs, x.OutputTokens, x.PromptTokens, x.DurationNs)
	}
	want := "6 20ms [0 10000] 3 4 40000000"
	for _, tt := range []struct {
		name     string
		maxBody  int64
		scanEach bool
	}{{"deferred to next piece", 0, false}, {"ScanPending after each", 0, true}, {"past the cap", 16, false}, {"nothing kept", -1, false}} {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(tt.maxBody, tt.scanEach); got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
	a := NewAssembler(Config{MaxBody: 64})
	r := a.Begin(t0, ConnInfo{})
	r.SetRequest(Request{Header: http.Header{"Content-Length": {"40"}}})
	r.SetResponse(t0, 200, http.Header{"Content-Length": {"1000000"}})
	if c1, c2 := cap(r.x.ReqBody), cap(r.x.RespBody); c1 != 40 || c2 != 64 {
		t.Fatalf("presized to %d and %d, want 40 and 64 (the cap)", c1, c2)
	}
}

// TestDeferredScanManyPieces checks a stream of more pieces than a
// Recording defers (maxPending): scanned a batch at a time, it gives the
// same timing as the same pieces scanned on arrival (past the body cap).
func TestDeferredScanManyPieces(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	run := func(maxBody int64) string {
		a := NewAssembler(Config{MaxBody: maxBody})
		r := a.Begin(t0, ConnInfo{})
		r.SetRequest(Request{Method: "POST", Header: http.Header{}})
		r.SetResponse(t0.Add(time.Millisecond), 200, http.Header{"Content-Type": {"text/event-stream"}})
		n := 2*maxPending + 37
		for i := range n {
			// Every third event is split across two pieces.
			ev := fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
			at := t0.Add(time.Duration(2+i) * time.Millisecond)
			if i%3 == 0 {
				r.ResponseBody(at, []byte(ev[:10]))
				r.ResponseBody(at.Add(time.Microsecond*time.Duration(i%7)), []byte(ev[10:]))
			} else {
				r.ResponseBody(at, []byte(ev))
			}
		}
		r.ResponseBody(t0.Add(time.Second), []byte("data: [DONE]\n\n"))
		x := r.Finish(t0.Add(2*time.Second), true)
		return fmt.Sprint(x.Events, time.Duration(x.TTFTNs), x.EventGapsUs, x.OutputTokens, x.DurationNs, x.Complete)
	}
	deferred, onArrival := run(0), run(16)
	if deferred != onArrival {
		t.Fatalf("deferred scan:\n%s\nscanned on arrival:\n%s", deferred, onArrival)
	}
	if !strings.HasPrefix(deferred, fmt.Sprint(2*maxPending+37+1, " ")) {
		t.Fatalf("got %s, want %d events", deferred[:min(len(deferred), 40)], 2*maxPending+37+1)
	}
}
