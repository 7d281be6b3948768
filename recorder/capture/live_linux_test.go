//go:build linux

package capture_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/capture"
)

// sseHandler streams n token events and [DONE], flushing each.
func testHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			f := w.(http.Flusher)
			for i := range 3 {
				fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
				f.Flush()
				time.Sleep(2 * time.Millisecond)
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Batch-Size", "4")
		fmt.Fprintf(w, `{"id":"x","usage":{"prompt_tokens":5,"completion_tokens":2},"echo":%d}`, len(body))
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.URL.RawQuery) })
	return mux
}

// chanSink is a recorder.Sink that sends every exchange on a channel.
type chanSink chan *formats.Exchange

func (s chanSink) Write(x *formats.Exchange) error { s <- x; return nil }
func (s chanSink) Close(context.Context) error     { return nil }

// startLive runs Live on lo for port and returns the exchanges channel and
// a stop function that cancels the capture and waits for it. The engine
// hands exchanges to Options.Emit, or with viaRecorder to a Recorder (in
// batches, as reel record does), whose raw rows reach the channel; stop
// then also closes the Recorder, so every exchange has arrived when it
// returns.
func startLive(t *testing.T, port uint16, viaRecorder bool) (<-chan *formats.Exchange, *capture.Engine, func()) {
	t.Helper()
	if _, err := net.InterfaceByName("lo"); err != nil {
		t.Skip("no loopback interface named lo")
	}
	got := make(chan *formats.Exchange, 1024)
	opts := capture.Options{Ports: []uint16{port}, Emit: func(x *formats.Exchange) { got <- x }}
	var rec *recorder.Recorder
	if viaRecorder {
		rec = recorder.New(chanSink(got), nil, recorder.Options{})
		opts.Recorder, opts.Emit = rec, nil
	}
	e, err := capture.NewEngine(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- capture.Live(ctx, e, capture.LiveOptions{Interface: "lo", StatsEvery: 50 * time.Millisecond,
			Started: func() { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		if errors.Is(err, capture.ErrNoCapNetRaw) {
			t.Skipf("skipping live capture: %v", err)
		}
		t.Fatalf("Live: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("capture did not start within 10s")
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("Live: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Live did not return within 10s of cancel")
			}
			if rec != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := rec.Close(ctx); err != nil {
					t.Errorf("close recorder: %v", err)
				}
			}
		})
	}
	t.Cleanup(stop)
	return got, e, stop
}

func serverPort(tb testing.TB, rawURL string) uint16 {
	u, err := url.Parse(rawURL)
	if err != nil {
		tb.Fatal(err)
	}
	p, _ := strconv.Atoi(u.Port())
	return uint16(p)
}

// TestLiveLoopback captures an in-test server and client on lo: every
// exchange is recorded exactly once (the loopback duplicates are filtered in
// the kernel), complete, with SSE timing, and while the capture runs: also
// through a Recorder, which takes the exchanges a ring block completes as
// one batch.
func TestLiveLoopback(t *testing.T) {
	for _, tc := range []struct {
		name        string
		viaRecorder bool
	}{{"emit", false}, {"recorder", true}} {
		t.Run(tc.name, func(t *testing.T) { testLiveLoopback(t, tc.viaRecorder) })
	}
}

func testLiveLoopback(t *testing.T, viaRecorder bool) {
	srv := httptest.NewServer(testHandler())
	defer srv.Close()
	got, e, stop := startLive(t, serverPort(t, srv.URL), viaRecorder)

	const n = 30
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		var resp *http.Response
		var err error
		switch i % 3 {
		case 0:
			resp, err = client.Post(srv.URL+"/v1/chat/completions?i="+strconv.Itoa(i), "application/json",
				strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`))
		case 1:
			resp, err = client.Post(srv.URL+"/v1/chat/completions?i="+strconv.Itoa(i), "application/json",
				strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`))
		default:
			resp, err = client.Get(srv.URL + "/healthz?i=" + strconv.Itoa(i))
		}
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	client.CloseIdleConnections()

	seen := map[string]*formats.Exchange{}
	deadline := time.After(20 * time.Second)
	for len(seen) < n {
		select {
		case x := <-got:
			if prev, dup := seen[x.Query]; dup {
				t.Fatalf("exchange %s %s?%s recorded twice (seq %d and %d)", x.Method, x.Path, x.Query, prev.Seq, x.Seq)
			}
			seen[x.Query] = x
		case <-deadline:
			t.Fatalf("captured %d of %d exchanges in 20s; stats %+v", len(seen), n, e.Stats().Snapshot())
		}
	}
	stop() // Live has returned (and the Recorder has closed): nothing more is emitted
	for len(got) > 0 {
		x := <-got
		t.Errorf("extra exchange after all were seen: %s %s?%s complete=%v err=%q", x.Method, x.Path, x.Query, x.Complete, x.Error)
	}
	for i := range n {
		x := seen["i="+strconv.Itoa(i)]
		if !x.Complete || x.Error != "" || x.Status != 200 {
			t.Errorf("exchange %d: complete=%v error=%q status=%d", i, x.Complete, x.Error, x.Status)
		}
		if x.TTFBNs <= 0 || x.DurationNs < x.TTFBNs {
			t.Errorf("exchange %d: ttfb %d, duration %d", i, x.TTFBNs, x.DurationNs)
		}
		switch i % 3 {
		case 0:
			if x.BatchSize != 4 || len(x.ReqBody) == 0 || !strings.Contains(string(x.RespBody), `"usage"`) {
				t.Errorf("exchange %d: batch_size %d, req %q, resp %q", i, x.BatchSize, x.ReqBody, x.RespBody)
			}
		case 1:
			if x.Events != 4 || x.TTFTNs <= 0 || len(x.EventGapsUs) != 2 {
				t.Errorf("exchange %d: events %d, ttft %d, gaps %v", i, x.Events, x.TTFTNs, x.EventGapsUs)
			}
		}
	}
	snap := e.Stats().Snapshot()
	if snap.KernelRecv == 0 || snap.Packets == 0 {
		t.Errorf("kernel counters not read: %+v", snap)
	}
	t.Logf("stats: packets %d, kernel received %d, kernel drops %d, connections %d",
		snap.Packets, snap.KernelRecv, snap.KernelDrops, snap.Connections)
}

// BenchmarkLiveLoopback drives small keep-alive requests over lo from 4
// client connections while capturing them, and reports the request rate,
// the fraction of exchanges captured and the kernel's drop count. The
// peer, no-capture, is the same load without reel; kernel-buffer runs with
// the kernel's default socket buffer instead of reel's 64 MiB, to show
// drops being counted. Run with a fixed count:
//
//	go test -run XXX -bench LiveLoopback -benchtime 50000x ./recorder/capture/
func BenchmarkLiveLoopback(b *testing.B) {
	for _, tc := range []struct {
		name    string
		capture bool
		buffer  int
	}{{"no-capture", false, 0}, {"capture", true, 0}, {"capture-kernel-buffer", true, 212992}} {
		b.Run(tc.name, func(b *testing.B) { benchLoopback(b, tc.capture, tc.buffer) })
	}
}

func benchLoopback(b *testing.B, capturing bool, buffer int) {
	srv := httptest.NewServer(testHandler())
	defer srv.Close()
	var captured, mispaired atomic.Int64
	e, err := capture.NewEngine(capture.Options{Ports: []uint16{serverPort(b, srv.URL)},
		Emit: func(x *formats.Exchange) {
			if x.Complete {
				captured.Add(1)
			}
			if x.Complete && string(x.RespBody) != x.Query {
				mispaired.Add(1) // a complete row with another request's response
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	if capturing {
		ready := make(chan struct{})
		go func() {
			done <- capture.Live(ctx, e, capture.LiveOptions{Interface: "lo", StatsEvery: 100 * time.Millisecond,
				SocketBuffer: buffer, Started: func() { close(ready) }})
		}()
		select {
		case <-ready:
		case err := <-done:
			if errors.Is(err, capture.ErrNoCapNetRaw) {
				b.Skipf("skipping live capture: %v", err)
			}
			b.Fatal(err)
		}
	}
	const workers = 4
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			c := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			for i := w; i < b.N; i += workers {
				resp, err := c.Get(srv.URL + "/echo?" + strconv.Itoa(i))
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	sent := time.Since(start)
	b.ReportMetric(float64(b.N)/sent.Seconds(), "req/s")
	if !capturing {
		return
	}
	// Let the capture catch up (bounded).
	for last, idle := captured.Load(), 0; captured.Load() < int64(b.N) && idle < 20; idle++ {
		time.Sleep(50 * time.Millisecond)
		if now := captured.Load(); now != last {
			last, idle = now, 0
		}
	}
	b.StopTimer()
	cancel()
	<-done
	snap := e.Stats().Snapshot()
	b.ReportMetric(float64(captured.Load())/float64(b.N), "captured/sent")
	b.ReportMetric(float64(snap.KernelDrops), "kernel-drops")
	b.ReportMetric(float64(mispaired.Load()), "mispaired")
	b.ReportMetric(float64(snap.Packets)/sent.Seconds(), "pkts/s")
}

// Stopping the capture right after traffic still records it: the packets
// the kernel has not yet handed over (the ring block being filled) are
// read before Live returns.
func TestLiveStopKeepsRecentTraffic(t *testing.T) {
	srv := httptest.NewServer(testHandler())
	defer srv.Close()
	got, _, stop := startLive(t, serverPort(t, srv.URL), true)
	const n = 5
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range n {
		resp, err := client.Get(srv.URL + "/echo?" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	client.CloseIdleConnections()
	stop() // at once: the last exchanges are still in the kernel's ring
	seen := map[string]bool{}
	for len(got) > 0 {
		x := <-got
		seen[x.Query] = true
	}
	for i := range n {
		if !seen[strconv.Itoa(i)] {
			t.Errorf("exchange %d sent before the stop was not recorded (recorded: %v)", i, seen)
		}
	}
}
