//go:build linux

package capture_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/proxy"
)

// memSink collects what a Pipeline writes.
type memSink struct {
	mu   sync.Mutex // guards rows
	rows []*formats.Exchange
}

func (s *memSink) Write(x *formats.Exchange) error {
	s.mu.Lock()
	s.rows = append(s.rows, x)
	s.mu.Unlock()
	return nil
}
func (s *memSink) Close(context.Context) error { return nil }

// comparable is the part of an exchange that must not depend on whether it
// was recorded by the proxy or by passive capture of the proxy's upstream
// leg. (Timings differ by where they are measured; client addresses and
// connection ids are the vantage point's own.)
func comparable(x *formats.Exchange) string {
	return fmt.Sprintf("%s %s?%s req=%q (%d) model=%s stream=%v max=%d prompt=%d/%s status=%d ct=%s resp=%q (%d) events=%d gaps=%d out=%d batch=%d queue=%d complete=%v err=%q",
		x.Method, x.Path, x.Query, x.ReqBody, x.ReqBodyBytes, x.Model, x.Stream, x.MaxTokens, x.PromptTokens, x.PromptTokensSource,
		x.Status, x.RespContentType, x.RespBody, x.RespBodyBytes, x.Events, len(x.EventGapsUs), x.OutputTokens,
		x.BatchSize, x.QueueDepth, x.Complete, x.Error)
}

// TestProxyAndCaptureEquivalent sends the same requests through the proxy
// sidecar while capturing the proxy-to-upstream leg on lo: both recorders
// must produce the same rows (through the same Recorder and Enrich).
func TestProxyAndCaptureEquivalent(t *testing.T) {
	upstream := httptest.NewServer(testHandler())
	defer upstream.Close()
	captured, _, stop := startLive(t, serverPort(t, upstream.URL), false)

	sink := &memSink{}
	pipe := recorder.New(sink, nil, recorder.Options{Config: recorder.Config{Recorder: "proxy"}})
	u, _ := url.Parse(upstream.URL)
	p, err := proxy.New(proxy.Options{Upstream: u, Recorder: pipe})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()

	const n = 12
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		var resp *http.Response
		var err error
		q := fmt.Sprintf("?i=%d", i)
		switch i % 3 {
		case 0:
			resp, err = client.Post(front.URL+"/v1/chat/completions"+q, "application/json",
				strings.NewReader(`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hello there"}]}`))
		case 1:
			resp, err = client.Post(front.URL+"/v1/chat/completions"+q, "application/json",
				strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"stream please"}]}`))
		default:
			resp, err = client.Get(front.URL + "/healthz" + q)
		}
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	client.CloseIdleConnections()

	var passive []*formats.Exchange
	deadline := time.After(20 * time.Second)
	for len(passive) < n {
		select {
		case x := <-captured:
			passive = append(passive, x)
		case <-deadline:
			t.Fatalf("captured %d of %d exchanges", len(passive), n)
		}
	}
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pipe.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(sink.rows) != n {
		t.Fatalf("proxy recorded %d of %d", len(sink.rows), n)
	}
	var a, b []string
	for i := range n {
		recorder.Enrich(passive[i]) // the pipeline enriched the proxy's rows
		a = append(a, comparable(sink.rows[i]))
		b = append(b, comparable(passive[i]))
	}
	sort.Strings(a)
	sort.Strings(b)
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("row %d differs:\n proxy   %s\n passive %s", i, a[i], b[i])
		}
	}
	// Timings are measured at different points, but agree in kind.
	for _, x := range passive {
		if x.Events > 0 && (x.TTFTNs <= 0 || x.TTFTNs > x.DurationNs) {
			t.Errorf("passive SSE timing: ttft %d, duration %d", x.TTFTNs, x.DurationNs)
		}
	}
}
