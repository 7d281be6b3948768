package proxy

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
)

// memSink keeps written exchanges; block makes Write wait, fail makes it err.
type memSink struct {
	mu    sync.Mutex
	xs    []*formats.Exchange
	block chan struct{}
	fail  error
}

func (s *memSink) Write(x *formats.Exchange) error {
	if s.block != nil {
		<-s.block
	}
	if s.fail != nil {
		return s.fail
	}
	s.mu.Lock()
	s.xs = append(s.xs, x)
	s.mu.Unlock()
	return nil
}

func (s *memSink) Close(context.Context) error { return nil }

// rig is a proxy in front of an upstream handler, with its recorder.
type rig struct {
	proxyURL string
	pipe     *recorder.Recorder
	sink     *memSink
	srv      *http.Server
}

// newRig starts the proxy; ropts.Config defaults to recorder "t" with a
// 1 KiB body cap.
func newRig(t *testing.T, upstream http.Handler, sink *memSink, ropts recorder.Options, mod func(*Options)) *rig {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	return newRigURL(t, up.URL, sink, ropts, mod)
}

func newRigURL(t *testing.T, upstream string, sink *memSink, ropts recorder.Options, mod func(*Options)) *rig {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	if sink == nil {
		sink = &memSink{}
	}
	if ropts.Config.Recorder == "" {
		ropts.Config = recorder.Config{Recorder: "t", Upstream: u.Host, MaxBody: 1 << 10}
	}
	pipe := recorder.New(sink, nil, ropts)
	opts := Options{Upstream: u, Recorder: pipe}
	if mod != nil {
		mod(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer("", p)
	go srv.Serve(ln)
	r := &rig{proxyURL: "http://" + ln.Addr().String(), pipe: pipe, sink: sink, srv: srv}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		if sink.block != nil {
			select {
			case <-sink.block:
			default:
				close(sink.block)
			}
		}
		pipe.Close(ctx)
	})
	return r
}

// recorded closes the proxy and pipeline and returns what was written.
func (r *rig) recorded(t *testing.T) []*formats.Exchange {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := r.pipe.Close(ctx); err != nil {
		t.Fatalf("close pipeline: %v", err)
	}
	r.sink.mu.Lock()
	defer r.sink.mu.Unlock()
	return r.sink.xs
}

func chunk(content string) string {
	return fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":%q}}]}`, content)
}

// TestSSETiming streams events with programmed delays in lockstep with the
// client: the upstream sends event i+1 only after the client has read event
// i through the proxy, so any buffering in the proxy deadlocks the test.
func TestSSETiming(t *testing.T) {
	delays := []time.Duration{20 * time.Millisecond, 5 * time.Millisecond, 30 * time.Millisecond, 10 * time.Millisecond, 15 * time.Millisecond}
	acks := make(chan struct{}, 1)
	var (
		mu        sync.Mutex
		upStart   time.Time
		sentToken []time.Time // upstream send times of token-bearing events
	)
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		upStart = time.Now()
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Batch-Size", "12")
		w.Header().Set("X-Queue-Depth", "4")
		w.Header().Set("X-Gpu", "h100-3")
		send := func(data string, token bool) bool {
			if token {
				mu.Lock()
				sentToken = append(sentToken, time.Now())
				mu.Unlock()
			}
			fmt.Fprintf(w, "data: %s\n\n", data)
			w.(http.Flusher).Flush()
			select {
			case <-acks:
				return true
			case <-time.After(5 * time.Second):
				return false // the client never saw it: the proxy held it back
			}
		}
		if !send(`{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`, false) {
			return
		}
		for i, d := range delays {
			time.Sleep(d)
			if !send(chunk(fmt.Sprint("tok", i)), true) {
				return
			}
		}
		send(`{"choices":[],"usage":{"prompt_tokens":21,"completion_tokens":9}}`, false)
		send("[DONE]", false)
	})
	r := newRig(t, upstream, nil, recorder.Options{
		Config: recorder.Config{Recorder: "t", ContextHeaders: []string{"x-batch-size", "x-queue-depth", "x-gpu"}},
	}, nil)
	body := `{"model":"llama-3-8b","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hello there"}]}`
	resp, err := http.Post(r.proxyURL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	events := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			break
		}
		if strings.HasPrefix(line, "data: ") {
			events++
			acks <- struct{}{}
		}
	}
	if events != len(delays)+3 {
		t.Fatalf("client saw %d events in lockstep, want %d (an event was held back)", events, len(delays)+3)
	}
	xs := r.recorded(t)
	if len(xs) != 1 {
		t.Fatalf("recorded %d exchanges, want 1", len(xs))
	}
	x := xs[0]
	mu.Lock()
	defer mu.Unlock()
	// The proxy stamps an event when its goroutine reads it: on a busy CI
	// machine that runs a few ms after the upstream's write (2 ms failed 1
	// run in 8 at load 10). Gaps are never shorter than programmed (below).
	const tol = 5 * time.Millisecond
	wantTTFT := sentToken[0].Sub(upStart)
	gotTTFT := time.Duration(x.TTFTNs)
	// The recorder's clock starts when the proxy got the request, a little
	// before the upstream did: TTFT may exceed the upstream's by that much.
	if gotTTFT < wantTTFT || gotTTFT > wantTTFT+tol {
		t.Errorf("ttft %v, upstream sent the first token %v after it got the request", gotTTFT, wantTTFT)
	}
	if len(x.EventGapsUs) != len(delays)-1 {
		t.Fatalf("gaps %v, want %d", x.EventGapsUs, len(delays)-1)
	}
	for i, g := range x.EventGapsUs {
		want := sentToken[i+1].Sub(sentToken[i])
		if d := time.Duration(g)*time.Microsecond - want; d > tol || d < -tol {
			t.Errorf("gap %d recorded %dµs, upstream %v", i, g, want)
		}
		if time.Duration(g)*time.Microsecond < delays[i+1] {
			t.Errorf("gap %d recorded %dµs, shorter than the programmed %v", i, g, delays[i+1])
		}
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"events", x.Events, int32(len(delays) + 3)},
		{"output_tokens", x.OutputTokens, int32(9)},
		{"prompt_tokens", x.PromptTokens, int32(21)},
		{"prompt_tokens_source", x.PromptTokensSource, formats.TokensFromUsage},
		{"batch_size", x.BatchSize, int32(12)},
		{"queue_depth", x.QueueDepth, int32(4)},
		{"context", x.Context["x-gpu"], "h100-3"},
		{"model", x.Model, "llama-3-8b"},
		{"stream", x.Stream, true},
		{"max_tokens", x.MaxTokens, int32(64)},
		{"status", x.Status, int32(200)},
		{"complete", x.Complete, true},
		{"error", x.Error, ""},
		{"path", x.Path, "/v1/chat/completions"},
		{"req_body", string(x.ReqBody), body},
		{"resp_content_type", x.RespContentType, "text/event-stream"},
	}
	for _, c := range checks {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if x.DurationNs < x.TTFTNs || x.TTFBNs <= 0 || x.TTFBNs > x.TTFTNs {
		t.Errorf("ttfb %d ttft %d duration %d out of order", x.TTFBNs, x.TTFTNs, x.DurationNs)
	}
}

// TestPassThrough checks that the upstream and the client see the same
// headers and bodies as without the proxy, that large bodies are recorded
// truncated but forwarded whole, and that connection ids and indexes are
// recorded.
func TestPassThrough(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var hs []string
		for k, v := range r.Header {
			hs = append(hs, k+"="+strings.Join(v, ","))
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Batch-Size", "3")
		fmt.Fprintf(w, `{"host":%q,"len":%d,"headers":%q,"usage":{"prompt_tokens":5,"completion_tokens":2}}`, r.Host, len(b), strings.Join(sortStrings(hs), ";"))
	})
	up := httptest.NewServer(upstream)
	defer up.Close()
	r := newRigURL(t, up.URL, nil, recorder.Options{}, nil)

	big := `{"model":"m","prompt":"` + strings.Repeat("x", 4000) + `"}`
	send := func(base string, c *http.Client) string {
		req, _ := http.NewRequest("POST", base+"/v1/completions?a=1", strings.NewReader(big))
		req.Host = "gateway.internal"
		req.Header.Set("X-Forwarded-For", "10.1.2.3")
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	client := &http.Client{Transport: &http.Transport{}}
	direct := send(up.URL, client)
	viaProxy := send(r.proxyURL, client)
	viaProxy2 := send(r.proxyURL, client)
	if direct != viaProxy || viaProxy != viaProxy2 {
		t.Fatalf("upstream saw different requests:\ndirect: %s\nproxy:  %s", direct, viaProxy)
	}
	xs := r.recorded(t)
	if len(xs) != 2 {
		t.Fatalf("recorded %d, want 2", len(xs))
	}
	// The pipeline's workers hand exchanges to the sink in any order (the
	// writer orders a row group by time), so compare in request order.
	slices.SortFunc(xs, func(a, b *formats.Exchange) int { return cmp.Compare(a.Seq, b.Seq) })
	for i, x := range xs {
		if !x.ReqBodyTrunc || len(x.ReqBody) != 1<<10 || x.ReqBodyBytes != int64(len(big)) {
			t.Errorf("req body: truncated %v, kept %d, size %d; want true, 1024, %d", x.ReqBodyTrunc, len(x.ReqBody), x.ReqBodyBytes, len(big))
		}
		if x.ConnSeq != int32(i) || x.ConnID != xs[0].ConnID || x.Seq != int64(i+1) {
			t.Errorf("exchange %d: conn %d/%d seq %d", i, x.ConnID, x.ConnSeq, x.Seq)
		}
		if x.Host != "gateway.internal" || x.Query != "a=1" || x.BatchSize != 3 || x.QueueDepth != -1 {
			t.Errorf("host %q query %q batch %d queue %d", x.Host, x.Query, x.BatchSize, x.QueueDepth)
		}
		if x.PromptTokens != 5 || x.PromptTokensSource != formats.TokensFromUsage || x.OutputTokens != 2 || x.Model != "" {
			t.Errorf("prompt %d (%s) output %d model %q: want usage 5/2 and no model from a truncated body", x.PromptTokens, x.PromptTokensSource, x.OutputTokens, x.Model)
		}
		if x.ReqHeaders["x-forwarded-for"] != "10.1.2.3" || !x.Complete || x.Status != 200 {
			t.Errorf("headers %v complete %v status %d", x.ReqHeaders, x.Complete, x.Status)
		}
	}
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// TestH2C checks that an HTTP/2 client with prior knowledge is served and
// streamed to.
func TestH2C(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			fmt.Fprintf(w, "data: %s\n\n", chunk(fmt.Sprint(i)))
			w.(http.Flusher).Flush()
		}
	})
	r := newRig(t, upstream, nil, recorder.Options{}, nil)
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	c := &http.Client{Transport: &http.Transport{Protocols: &protos}}
	for range 2 {
		resp, err := c.Get(r.proxyURL + "/v1/chat/completions")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || strings.Count(string(b), "data: ") != 3 {
			t.Fatalf("proto %s, body %q", resp.Proto, b)
		}
	}
	xs := r.recorded(t)
	if len(xs) != 2 || xs[0].Events != 3 || xs[1].OutputTokens != 3 || xs[0].ConnID != xs[1].ConnID {
		t.Fatalf("recorded %d exchanges: %+v", len(xs), xs)
	}
}

// TestFailOpen checks that a recording pipeline that blocks or fails never
// fails a proxied request, and that every lost exchange is counted.
func TestFailOpen(t *testing.T) {
	const n = 40
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"ok":true}`))
	})
	tests := []struct {
		name   string
		sink   *memSink
		opts   recorder.Options
		reason string
	}{
		{"writer blocks", &memSink{block: make(chan struct{})}, recorder.Options{Pipeline: recorder.PipelineOptions{Queue: 4}}, recorder.DropQueueFull},
		{"writer errors", &memSink{fail: errors.New("disk full")}, recorder.Options{}, recorder.DropWrite},
		{"byte bound", &memSink{block: make(chan struct{})}, recorder.Options{Pipeline: recorder.PipelineOptions{QueueBytes: 100}}, recorder.DropQueueBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, upstream, tt.sink, tt.opts, nil)
			for i := range n {
				resp, err := http.Post(r.proxyURL+"/score", "application/json", strings.NewReader(`{"user":42}`))
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(b) != `{"ok":true}` {
					t.Fatalf("request %d: %d %q", i, resp.StatusCode, b)
				}
			}
			if tt.sink.block != nil {
				close(tt.sink.block)
			}
			r.recorded(t)
			m := r.pipe.Metrics()
			dropped := counterValue(m.Dropped.WithLabelValues(tt.reason))
			recorded := counterValue(m.Recorded)
			if dropped == 0 || dropped+recorded != n {
				t.Fatalf("dropped(%s) %v + recorded %v, want >0 drops and %d in all", tt.reason, dropped, recorded, n)
			}
		})
	}
}

// TestUpstreamFailures checks the status the client gets and the error
// recorded when the upstream refuses, times out or resets mid-stream.
func TestUpstreamFailures(t *testing.T) {
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	refusedURL := "http://" + closed.Addr().String()
	closed.Close()

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: %s\n\n", chunk("a"))
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
	}))
	defer reset.Close()

	tests := []struct {
		name       string
		upstream   string
		mod        func(*Options)
		wantStatus int // 0: the client's read fails mid-body
		wantErr    string
		wantRecSt  int32
	}{
		{"refused", refusedURL, nil, http.StatusBadGateway, "upstream: dial tcp", 0},
		{"timeout", slow.URL, func(o *Options) { o.ResponseHeaderTimeout = 100 * time.Millisecond }, http.StatusGatewayTimeout, "upstream: ", 0},
		{"reset mid-stream", reset.URL, nil, 0, "upstream: read body", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRigURL(t, tt.upstream, nil, recorder.Options{}, tt.mod)
			resp, err := http.Get(r.proxyURL + "/v1/chat/completions")
			if err != nil {
				t.Fatal(err)
			}
			_, readErr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tt.wantStatus != 0 && resp.StatusCode != tt.wantStatus {
				t.Errorf("client got %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if tt.wantStatus == 0 && readErr == nil {
				t.Errorf("client read the cut stream without an error: it looks complete")
			}
			xs := r.recorded(t)
			if len(xs) != 1 {
				t.Fatalf("recorded %d", len(xs))
			}
			x := xs[0]
			if !strings.HasPrefix(x.Error, tt.wantErr) || x.Complete || x.Status != tt.wantRecSt {
				t.Errorf("recorded error %q complete %v status %d; want %q… false %d", x.Error, x.Complete, x.Status, tt.wantErr, tt.wantRecSt)
			}
			if got := counterValue(r.pipe.Metrics().ProxyErrors.WithLabelValues(ErrUpstream)); got != 1 {
				t.Errorf("upstream errors counted %v, want 1", got)
			}
			// One failure, one reason: the abort the ReverseProxy raises
			// after a broken upstream body is not the client's.
			for _, kind := range []string{ErrClientAbort, ErrBadRequest} {
				if got := counterValue(r.pipe.Metrics().ProxyErrors.WithLabelValues(kind)); got != 0 {
					t.Errorf("%s counted %v for an upstream failure", kind, got)
				}
			}
		})
	}
}

// TestBadClientChunk: a malformed chunked body from the client is the
// client's error — 400, counted as bad_request and recorded as such — not
// an upstream failure answered 502.
func TestBadClientChunk(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		t.Run(fmt.Sprint("recorded=", recorded), func(t *testing.T) {
			upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				io.WriteString(w, "{}")
			})
			var ropts recorder.Options
			if !recorded {
				ropts.Filter.Paths = []string{"/elsewhere"}
			}
			r := newRig(t, upstream, nil, ropts, nil)
			conn, err := net.Dial("tcp", strings.TrimPrefix(r.proxyURL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"+
				"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			conn.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("client got %d for a bad chunk size, want 400", resp.StatusCode)
			}
			xs := r.recorded(t)
			if recorded && (len(xs) != 1 || !strings.HasPrefix(xs[0].Error, "client: read request body")) {
				t.Fatalf("recorded %d exchanges (%+v), want one with a client error", len(xs), xs)
			}
			m := r.pipe.Metrics()
			for kind, want := range map[string]float64{ErrBadRequest: 1, ErrUpstream: 0, ErrClientAbort: 0} {
				if got := counterValue(m.ProxyErrors.WithLabelValues(kind)); got != want {
					t.Errorf("proxy errors{%s} = %v, want %v", kind, got, want)
				}
			}
		})
	}
}

// TestUpstreamFailuresLogged: a failing upstream is logged, at most once a
// second, and the next line says how many failures it did not log.
func TestUpstreamFailuresLogged(t *testing.T) {
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	refused := "http://" + closed.Addr().String()
	closed.Close()
	var logged syncBuffer
	r := newRigURL(t, refused, nil, recorder.Options{}, func(o *Options) { o.ErrorLog = log.New(&logged, "", 0) })
	get := func() {
		resp, err := http.Get(r.proxyURL + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	const n = 20
	for range n {
		get()
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	if len(lines) < 1 || len(lines) > 2 || !strings.Contains(lines[0], "upstream failed: GET request: dial tcp") {
		t.Fatalf("%d failures logged as %q: want one or two lines (one a second)", n, lines)
	}
	time.Sleep(1100 * time.Millisecond)
	get()
	lines = strings.Split(strings.TrimSpace(logged.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "more upstream failures") {
		t.Errorf("the line after a quiet second %q does not count the failures not logged", last)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestClientAbort checks that a client leaving mid-stream cancels the
// upstream request and is recorded as an abort.
func TestClientAbort(t *testing.T) {
	upstreamSawCancel := make(chan struct{})
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; ; i++ {
			fmt.Fprintf(w, "data: %s\n\n", chunk(fmt.Sprint(i)))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				close(upstreamSawCancel)
				return
			case <-time.After(10 * time.Millisecond):
			}
			if i > 1000 {
				return
			}
		}
	})
	r := newRig(t, upstream, nil, recorder.Options{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", r.proxyURL+"/v1/chat/completions", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for range 3 {
		br.ReadString('\n')
	}
	cancel()
	resp.Body.Close()
	select {
	case <-upstreamSawCancel:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled when the client left")
	}
	xs := r.recorded(t)
	if len(xs) != 1 || xs[0].Error != recorder.ErrClientAborted.Error() || xs[0].Complete || xs[0].Events == 0 {
		t.Fatalf("recorded %+v", xs)
	}
}

// TestFilterAndSample checks that filtered and unsampled requests are
// proxied but not recorded.
func TestFilterAndSample(t *testing.T) {
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	r := newRig(t, upstream, nil, recorder.Options{Filter: recorder.Filter{Paths: []string{"/v1/"}, Methods: []string{"post"}}}, nil)
	for _, c := range []struct{ method, path string }{{"POST", "/v1/x"}, {"GET", "/v1/x"}, {"POST", "/health"}} {
		req, _ := http.NewRequest(c.method, r.proxyURL+c.path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		resp.Body.Close()
	}
	xs := r.recorded(t)
	if len(xs) != 1 || xs[0].Method != "POST" || xs[0].Path != "/v1/x" {
		t.Fatalf("recorded %+v", xs)
	}
	if got := counterValue(r.pipe.Metrics().Skipped.WithLabelValues(recorder.SkipFiltered)); got != 2 {
		t.Fatalf("skipped %v, want 2", got)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}
