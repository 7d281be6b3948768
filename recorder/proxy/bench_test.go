package proxy

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/redact"
)

// discardSink counts exchanges and keeps none.
type discardSink struct{ n int }

func (s *discardSink) Write(*formats.Exchange) error { s.n++; return nil }
func (s *discardSink) Close(context.Context) error   { return nil }

// chunkedBody returns one piece per Read, as a streaming upstream does.
type chunkedBody struct {
	pieces [][]byte
	i      int
}

func (b *chunkedBody) Read(p []byte) (int, error) {
	if b.i == len(b.pieces) {
		return 0, io.EOF
	}
	n := copy(p, b.pieces[b.i])
	b.i++
	return n, nil
}

func (b *chunkedBody) Close() error { return nil }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// flushWriter is a ResponseWriter that discards what it is sent.
type flushWriter struct{ h http.Header }

func (w *flushWriter) Header() http.Header         { return w.h }
func (w *flushWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *flushWriter) WriteHeader(int)             {}
func (w *flushWriter) Flush()                      {}

// BenchmarkProxySSE measures the proxy's own cost per streamed exchange —
// forwarding, recording and SSE scanning of 16 token chunks, a usage chunk
// and [DONE] — without sockets, redaction or Parquet (the pipeline sink
// discards), so it isolates the code on the forwarding path.
func BenchmarkProxySSE(b *testing.B) {
	var pieces [][]byte
	for range 16 {
		pieces = append(pieces, []byte("data: "+chunk("token ")+"\n\n"))
	}
	pieces = append(pieces, []byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":16}}\n\ndata: [DONE]\n\n"))
	for _, record := range []bool{false, true} {
		name := "forward"
		if record {
			name = "record"
		}
		b.Run(name, func(b *testing.B) {
			sink := &discardSink{}
			pipe := recorder.New(sink, nil, recorder.Options{Pipeline: recorder.PipelineOptions{Queue: 1 << 16, QueueBytes: 1 << 30}})
			opts := Options{Upstream: &url.URL{Scheme: "http", Host: "up"},
				Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
					io.Copy(io.Discard, r.Body)
					return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: r,
						Header: http.Header{"Content-Type": {"text/event-stream"}, "X-Batch-Size": {"8"}},
						Body:   &chunkedBody{pieces: pieces}, ContentLength: -1}, nil
				})}
			if record {
				opts.Recorder = pipe
			}
			p, err := New(opts)
			if err != nil {
				b.Fatal(err)
			}
			body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`
			w := &flushWriter{}
			b.ReportAllocs()
			for b.Loop() {
				r, _ := http.NewRequest("POST", "http://gw/v1/chat/completions", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w.h = http.Header{}
				p.ServeHTTP(w, r)
			}
			b.StopTimer()
			pipe.Close(context.Background())
			if record && sink.n == 0 {
				b.Fatal("nothing recorded")
			}
		})
	}
}

// BenchmarkProxySSERecorded is the sidecar's whole recording work per
// streamed exchange of bench/capture's traffic (a 120-token chat request,
// 32 OpenAI chunks, usage and [DONE]): forwarding, SSE scanning,
// enrichment, redaction with the default policy and turn links, with a
// sink that discards (no Parquet) and no sockets. cpu-ns/op is the
// process's user+system CPU per exchange, the pipeline's goroutines
// included (they run on the other core, so ns/op alone undercounts).
func BenchmarkProxySSERecorded(b *testing.B) {
	sink := &discardSink{}
	benchSSERecorded(b, func(red *redact.Redactor) *recorder.Recorder {
		return recorder.New(sink, red, recorder.Options{Pipeline: recorder.PipelineOptions{Queue: 1 << 16, QueueBytes: 1 << 30}})
	})
	if sink.n != b.N {
		b.Fatalf("%d of %d exchanges recorded", sink.n, b.N)
	}
}

// BenchmarkProxySSEParquet is BenchmarkProxySSERecorded with the sink
// `reel record` has: the dataset writer (Parquet, zstd, the write-ahead
// spool; its defaults) on a temporary directory, and reel record's
// collector settings (recorder.GCPercent under recorder.DefaultMemoryLimit).
// Its cpu-ns/op is the whole recording work of a bench/capture sidecar
// exchange without sockets; what the live process spends beyond it is the
// live process's own (docs/performance.md, "Proxy sidecar"). gc/kop is the
// collections per 1,000 exchanges: under the limit they come each time
// the heap reaches it, so fewer means more headroom (load does not change
// it, unlike the CPU figures).
func BenchmarkProxySSEParquet(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(recorder.GCPercent))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(recorder.DefaultMemoryLimit))
	runtime.GC()
	gc0 := gcCycles()
	defer func() { b.ReportMetric(float64(gcCycles()-gc0)*1000/float64(b.N), "gc/kop") }()
	var w *formats.Writer[formats.Exchange]
	benchSSERecorded(b, func(red *redact.Redactor) *recorder.Recorder {
		rec, dw, err := recorder.OpenDataset(context.Background(), formats.WriterOptions{Dir: b.TempDir(), Recorder: "bench"}, red,
			recorder.Options{Pipeline: recorder.PipelineOptions{Queue: 1 << 16, QueueBytes: 1 << 30}})
		if err != nil {
			b.Fatal(err)
		}
		w = dw
		return rec
	})
	if got := w.Stats().Records; got != int64(b.N) {
		b.Fatalf("%d of %d exchanges written", got, b.N)
	}
}

// benchSSERecorded proxies bench/capture's exchange through a Proxy
// recording to newRecorder's recorder (given the default redaction
// policy) and reports cpu-ns/op; the recorder is closed, its sink
// flushed, before the CPU is read.
func benchSSERecorded(b *testing.B, newRecorder func(*redact.Redactor) *recorder.Recorder) {
	var pieces [][]byte
	for range 32 {
		pieces = append(pieces, []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":" token"}}]}`+"\n\n"))
	}
	pieces = append(pieces, []byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":32}}\n\ndata: [DONE]\n\n"))
	key := []byte("bench-key-0123456789abcdef")
	red, err := redact.New(redact.DefaultPolicy(), key)
	if err != nil {
		b.Fatal(err)
	}
	rec := newRecorder(red)
	p, err := New(Options{Upstream: &url.URL{Scheme: "http", Host: "up"}, Recorder: rec,
		Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			io.Copy(io.Discard, r.Body)
			return &http.Response{StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Request: r,
				Header: http.Header{"Content-Type": {"text/event-stream"}, "X-Batch-Size": {"8"}},
				Body:   &chunkedBody{pieces: pieces}, ContentLength: -1}, nil
		})})
	if err != nil {
		b.Fatal(err)
	}
	body := `{"model":"m","stream":true,"max_tokens":32,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"` +
		strings.Repeat("Tell me about the weather in the mountains in winter. ", 12) + `"}]}`
	w := &flushWriter{}
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		r, _ := http.NewRequest("POST", "http://gw/v1/chat/completions", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("User-Agent", "Go-http-client/1.1")
		w.h = http.Header{}
		p.ServeHTTP(w, r)
	}
	if err := rec.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// gcCycles is the collections the process has completed so far.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// processCPU is the process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
