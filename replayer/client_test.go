package replayer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// rawServer is a loopback TCP target that answers each request it reads
// with the next canned response of its connection. After the last canned
// response of a connection it closes that connection.
type rawServer struct {
	ln       net.Listener
	accepted atomic.Int64
	requests atomic.Int64
	wg       sync.WaitGroup
}

// newRawServer serves every connection with perConn (one response per
// request, in order).
func newRawServer(t *testing.T, perConn ...string) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer nc.Close()
				nc.SetDeadline(time.Now().Add(20 * time.Second))
				br := bufio.NewReader(nc)
				for _, resp := range perConn {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					s.requests.Add(1)
					if _, err := io.WriteString(nc, resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *rawServer) url() *url.URL { return &url.URL{Scheme: "http", Host: s.ln.Addr().String()} }

// sendOne sends method path through c and returns its row.
func sendOne(c *client, key, method, path string) *formats.Result {
	p := &prepared{wire: renderRequest(method, c.opts.Target.Host, path, nil, nil), head: method == http.MethodHead}
	res := &formats.Result{BatchSize: -1, QueueDepth: -1}
	now := mono()
	c.do(context.Background(), key, p, now, now, res, nil)
	return res
}

// longSSE is an event stream whose second token event is larger than any
// read buffer the client starts with.
var longSSE = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n" +
	"data: {\"choices\":[{\"delta\":{\"content\":\"" + strings.Repeat("b", 100<<10) + "\"}}]}\n\n" +
	"data: [DONE]\n\n"

// TestClientFraming: each way a response can end, read to its last byte and
// the connection reused only when its framing allows.
func TestClientFraming(t *testing.T) {
	tests := []struct {
		name      string
		method    string
		resp      string
		status    int32
		closes    bool // the server closes the connection after one response
		reuse     bool // the second request goes on the same connection
		errPrefix string
	}{
		{"content-length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, false, true, ""},
		{"chunked with trailers", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n", 200, false, true, ""},
		{"close-delimited", "GET", "HTTP/1.1 200 OK\r\n\r\nuntil the end", 200, true, false, ""},
		{"interim 100 and 103", "GET", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok", 201, false, true, ""},
		{"204 no body", "GET", "HTTP/1.1 204 No Content\r\n\r\n", 204, false, true, ""},
		{"304 no body", "GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", 304, false, true, ""},
		{"HEAD ignores Content-Length", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", 200, false, true, ""},
		{"Connection: close", "GET", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 200, false, false, ""},
		{"HTTP/1.0", "GET", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, false, false, ""},
		{"HTTP/1.0 keep-alive", "GET", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", 200, false, true, ""},
		{"bare LF", "GET", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", 200, false, true, ""},
		{"garbled status line", "GET", "HTTP/2 200\r\n\r\n", 0, false, false, "protocol"},
		{"garbled header", "GET", "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", 0, false, false, "protocol"},
		{"bad content-length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n", 0, false, false, "protocol"},
		{"conflicting content-length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 0, false, false, "protocol"},
		{"bad chunk size", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 200, false, false, "protocol"},
		{"truncated body", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 200, true, false, "reset"},
		{"gzip transfer-encoding", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, false, false, "protocol"},
		{"101", "GET", "HTTP/1.1 101 Switching Protocols\r\n\r\n", 0, false, false, "protocol"},
		// Lines longer than the 4 KiB read buffer, within the limits.
		{"40 KiB header line", "GET", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 40<<10) + "\r\nContent-Length: 2\r\n\r\nok", 200, false, true, ""},
		{"40 KiB trailer line", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: " + strings.Repeat("t", 40<<10) + "\r\n\r\n", 200, false, true, ""},
		{"SSE with a 100 KiB event", "GET", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: " + fmt.Sprint(len(longSSE)) + "\r\n\r\n" + longSSE, 200, false, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newRawServer(t, tc.resp, tc.resp)
			if tc.closes {
				srv = newRawServer(t, tc.resp)
			}
			c := newClient(context.Background(), clientOptions{Target: srv.url()})
			defer c.close()
			r := sendOne(c, "", tc.method, "/a")
			if r.Status != tc.status {
				t.Errorf("status %d, want %d", r.Status, tc.status)
			}
			if tc.errPrefix == "" && r.Error != "" || !strings.HasPrefix(r.Error, tc.errPrefix) {
				t.Fatalf("error %q, want prefix %q", r.Error, tc.errPrefix)
			}
			if tc.errPrefix != "" {
				return
			}
			if r.BytesRecv != int64(len(tc.resp)) {
				t.Errorf("bytes received %d, want all %d sent", r.BytesRecv, len(tc.resp))
			}
			if strings.Contains(tc.resp, "event-stream") && r.Events != 3 {
				t.Errorf("%d SSE events read, want 3", r.Events)
			}
			if r.TTFBNs <= 0 || r.E2ENs < r.TTFBNs {
				t.Errorf("ttfb %d e2e %d: want 0 < ttfb ≤ e2e", r.TTFBNs, r.E2ENs)
			}
			r2 := sendOne(c, "", tc.method, "/b")
			if r2.Status != tc.status || r2.Error != "" {
				t.Fatalf("second request: status %d error %q", r2.Status, r2.Error)
			}
			if got := srv.accepted.Load() == 1; got != tc.reuse {
				t.Errorf("%d connections for two requests; reuse want %v", srv.accepted.Load(), tc.reuse)
			}
		})
	}
}

// TestClientHeadLimits: an endless or oversized head is an error row, read
// no further than the limit.
func TestClientHeadLimits(t *testing.T) {
	long := "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 128<<10) + "\r\n\r\n"
	many := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", maxHeaderLines+1) + "\r\n"
	interim := strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", maxInterim+2) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	for name, resp := range map[string]string{"long line": long, "many lines": many, "endless interim": interim} {
		t.Run(name, func(t *testing.T) {
			srv := newRawServer(t, resp)
			c := newClient(context.Background(), clientOptions{Target: srv.url()})
			defer c.close()
			if r := sendOne(c, "", "GET", "/"); !strings.HasPrefix(r.Error, "protocol") {
				t.Errorf("error %q, want a protocol error", r.Error)
			}
		})
	}
}

// TestClientStaleIdle: a server that closes each connection after one
// response (without saying so) makes the reused connection fail before any
// byte; the request is retried once on a fresh connection and succeeds.
func TestClientStaleIdle(t *testing.T) {
	srv := newRawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	c := newClient(context.Background(), clientOptions{Target: srv.url()})
	defer c.close()
	for i := range 3 {
		if r := sendOne(c, "", "GET", "/"); r.Status != 200 || r.Error != "" {
			t.Fatalf("request %d: status %d error %q", i, r.Status, r.Error)
		}
		time.Sleep(20 * time.Millisecond) // let the server's close arrive
	}
	if n := srv.accepted.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (each stale one replaced)", n)
	}
	if n := srv.requests.Load(); n != 3 {
		t.Errorf("server read %d requests, want 3", n)
	}
	// The same when the dispatcher wrote the request on the stale connection.
	p := &prepared{wire: renderRequest("GET", srv.url().Host, "/", nil, nil)}
	var f flight
	if !c.tryWrite("", p, &f) {
		t.Fatal("no idle connection to write on")
	}
	res := &formats.Result{}
	now := mono()
	c.do(context.Background(), "", p, now, now, res, &f)
	if res.Status != 200 || res.Error != "" || res.LagNs < 0 {
		t.Errorf("eager write on a stale connection: status %d error %q lag %d", res.Status, res.Error, res.LagNs)
	}
	if n := srv.requests.Load(); n != 4 {
		t.Errorf("server read %d requests, want 4", n)
	}
}

// TestClientKeepAlive: sequential requests share one connection; a bounded
// pool never opens more than its limit; --conn recorded keeps one
// connection per recorded connection.
func TestClientKeepAlive(t *testing.T) {
	var conns atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		}
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	u, _ := url.Parse(srv.URL)

	t.Run("sequential reuse", func(t *testing.T) {
		conns.Store(0)
		c := newClient(context.Background(), clientOptions{Target: u})
		defer c.close()
		for range 20 {
			if r := sendOne(c, "", "GET", "/"); r.Status != 200 || r.Error != "" {
				t.Fatalf("status %d error %q", r.Status, r.Error)
			}
		}
		if n := conns.Load(); n != 1 {
			t.Errorf("%d connections for 20 sequential requests, want 1", n)
		}
	})
	t.Run("bounded pool", func(t *testing.T) {
		conns.Store(0)
		c := newClient(context.Background(), clientOptions{Target: u, PoolConns: 2})
		defer c.close()
		var wg sync.WaitGroup
		rows := make([]*formats.Result, 6)
		for i := range rows {
			wg.Go(func() { rows[i] = sendOne(c, "", "GET", "/slow") })
		}
		deadline := time.Now().Add(5 * time.Second)
		for conns.Load() < 2 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		if n := conns.Load(); n != 2 {
			t.Errorf("%d connections open with 6 requests waiting, want the limit 2", n)
		}
		once.Do(func() { close(release) })
		wg.Wait()
		for i, r := range rows {
			if r.Status != 200 {
				t.Errorf("request %d: status %d error %q", i, r.Status, r.Error)
			}
		}
		if n := conns.Load(); n != 2 {
			t.Errorf("%d connections in all, want 2", n)
		}
	})
	t.Run("recorded", func(t *testing.T) {
		conns.Store(0)
		c := newClient(context.Background(), clientOptions{Target: u, Mode: ConnRecorded, MaxConns: 2})
		defer c.close()
		for _, key := range []string{"a", "b", "a", "b", "a", "c", "a"} {
			if r := sendOne(c, key, "GET", "/"); r.Status != 200 {
				t.Fatalf("key %s: status %d error %q", key, r.Status, r.Error)
			}
		}
		// a, b: 2 conns; c evicts b (least recent); a is still kept.
		if n := conns.Load(); n != 3 {
			t.Errorf("%d connections for keys a b a b a c a, want 3", n)
		}
		if c.keyed.lru.Len() != 2 {
			t.Errorf("%d idle recorded connections kept, want MaxConns 2", c.keyed.lru.Len())
		}
	})
}

// TestClientTimeoutAndCancel: a slow target gives a timeout row; cancelling
// the run fails what is in flight as canceled.
func TestClientTimeoutAndCancel(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		select {
		case <-stop:
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	defer close(stop)
	u, _ := url.Parse(srv.URL)

	c := newClient(context.Background(), clientOptions{Target: u, Timeout: 100 * time.Millisecond})
	if r := sendOne(c, "", "GET", "/"); !strings.HasPrefix(r.Error, "timeout") || r.Status != 200 {
		t.Errorf("status %d error %q, want 200 and a timeout while reading", r.Status, r.Error)
	}
	c.close()

	ctx, cancel := context.WithCancel(context.Background())
	c = newClient(ctx, clientOptions{Target: u})
	defer c.close()
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if r := sendOne(c, "", "GET", "/"); !strings.HasPrefix(r.Error, "canceled") {
		t.Errorf("error %q, want canceled", r.Error)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %s", d)
	}
	if r := sendOne(c, "", "GET", "/"); !strings.HasPrefix(r.Error, "canceled") {
		t.Errorf("after cancel: error %q, want canceled", r.Error)
	}
}

// TestClientTLS: https targets over TLS with ALPN http/1.1, even when the
// server offers HTTP/2.
func TestClientTLS(t *testing.T) {
	var proto atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(r.Proto)
		w.Header().Set("X-Queue-Depth", "7")
		io.WriteString(w, "secure")
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	cfg := &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	c := newClient(context.Background(), clientOptions{Target: u, TLS: cfg})
	defer c.close()
	for range 2 {
		r := sendOne(c, "", "GET", "/")
		if r.Status != 200 || r.Error != "" || r.QueueDepth != 7 {
			t.Fatalf("status %d error %q queue depth %d", r.Status, r.Error, r.QueueDepth)
		}
	}
	if p, _ := proto.Load().(string); p != "HTTP/1.1" {
		t.Errorf("server saw %q, want HTTP/1.1", p)
	}
	bad := newClient(context.Background(), clientOptions{Target: u}) // no CA: the certificate is refused
	defer bad.close()
	if r := sendOne(bad, "", "GET", "/"); !strings.Contains(r.Error, "tls") && !strings.Contains(r.Error, "certificate") {
		t.Errorf("untrusted certificate: error %q", r.Error)
	}
}

// TestRenderRequest: the pre-rendered request is what net/http's server
// reads back, with bytes in the request line escaped.
func TestRenderRequest(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}, "X-Multi": {"1", "2"}}
	w := renderRequest("POST", "shadow:8000", requestURI("/base", "/v1/x y", "a=1 2"), h, []byte(`{}`))
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(w)))
	if err != nil {
		t.Fatalf("read back %q: %v", w, err)
	}
	body, _ := io.ReadAll(req.Body)
	if req.Method != "POST" || req.Host != "shadow:8000" || req.URL.Path != "/base/v1/x y" || req.URL.RawQuery != "a=1%202" ||
		string(body) != "{}" || req.ContentLength != 2 || len(req.Header["X-Multi"]) != 2 || req.UserAgent() != defaultUserAgent {
		t.Errorf("read back %s %s %s %q %q len %d headers %v", req.Method, req.Host, req.URL, req.URL.RawQuery, body, req.ContentLength, req.Header)
	}
}

// FuzzReadResponse: any bytes from a target give a response or an error,
// never a panic, and never more bytes than were sent.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: x\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: {}\n\n",
		"HTTP/1.1 200 OK\r\nX-Batch-Size: 4\r\nX-Queue-Depth: x\r\n\r\n",
		"HTTP/1.1 2000\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, head bool) {
		br := bufio.NewReaderSize(bytes.NewReader(in), 4096)
		var h respHead
		if err := readHead(br, &h); err != nil {
			return
		}
		if h.status < 200 || h.status > 999 || h.bytes > int64(len(in)) {
			t.Fatalf("status %d head bytes %d of %d", h.status, h.bytes, len(in))
		}
		var body bodyReader
		body.reset(br, &h, head)
		n, _ := io.Copy(io.Discard, &body)
		if h.bytes+n > int64(len(in)) {
			t.Fatalf("head %d + body %d bytes from %d sent", h.bytes, n, len(in))
		}
		if body.clean && h.contentLen >= 0 && !head && n != h.contentLen {
			t.Fatalf("clean end after %d body bytes, Content-Length %d", n, h.contentLen)
		}
	})
}

// BenchmarkClient: one GET and its short response on a keep-alive loopback
// connection, by the replayer's client and, as the peer measured in the same
// run, by net/http's Transport with the httptrace hooks the replayer used
// before (docs/performance.md).
func BenchmarkClient(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "3")
		io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	b.Run("reel", func(b *testing.B) {
		c := newClient(context.Background(), clientOptions{Target: u})
		defer c.close()
		p := &prepared{wire: renderRequest("GET", u.Host, "/?i=1", nil, nil)}
		b.ReportAllocs()
		for b.Loop() {
			res := formats.Result{}
			now := mono()
			c.do(context.Background(), "", p, now, now, &res, nil)
			if res.Status != 200 {
				b.Fatalf("status %d error %q", res.Status, res.Error)
			}
		}
	})
	b.Run("net-http", func(b *testing.B) {
		tr := &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true}
		defer tr.CloseIdleConnections()
		b.ReportAllocs()
		for b.Loop() {
			var wrote, first int64
			trace := &httptrace.ClientTrace{
				WroteRequest:         func(httptrace.WroteRequestInfo) { wrote = mono() },
				GotFirstResponseByte: func() { first = mono() },
			}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", srv.URL+"/?i=1", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			_, _ = wrote, first
		}
	})
}
