// Package proxy is reel's reverse-proxy sidecar: an http.Handler that
// forwards every request to one upstream unchanged and records it.
//
// Bodies stream through: the request body is teed while the transport sends
// it, and each piece of the response is copied into the recording with its
// arrival time as it is read; the event-stream scanning of the pieces
// happens after the handler has returned (recorder.Recording.ResponseBody).
// Event streams and responses of unknown
// length are flushed to the client at every read, as httputil.ReverseProxy
// does. The proxy adds no header, passes X-Forwarded-* through as received,
// cancels the upstream request when the client goes away, answers 502 (504
// on a timeout) when the upstream fails, 400 when the client's request body
// is malformed (a bad chunk size), and records and counts each kind of
// failure once (reel_proxy_errors_total{kind}), logging upstream failures at
// most once a second.
// Recording is fail-open: the exchange is submitted to a recorder.Recorder,
// which drops and counts rather than wait.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
)

// Options configure a Proxy. Upstream is required.
type Options struct {
	Upstream *url.URL // where requests go: scheme, host and an optional base path
	// Recorder decides what is recorded, builds the exchanges and takes
	// them (filter, sampling, connection ids, queue). Nil: the proxy
	// records nothing.
	Recorder *recorder.Recorder
	// Transport reaches the upstream (default NewTransport(ResponseHeaderTimeout)).
	Transport http.RoundTripper
	// ResponseHeaderTimeout bounds the wait for the upstream's response
	// headers when Transport is nil (default 0: no limit, as LLM queues can
	// be long). A timeout answers 504.
	ResponseHeaderTimeout time.Duration
	// Metrics receives the proxied-request histogram and error counts
	// (default: the Recorder's, else unregistered metrics).
	Metrics *recorder.Metrics
	// ErrorLog receives upstream failures, at most one line a second
	// (saying how many were not logged), and the proxy's own errors
	// (default: discarded; they are counted and recorded either way).
	ErrorLog *log.Logger
}

// Proxy is the recording reverse proxy. Serve it with NewServer so that
// connection ids and h2c work.
type Proxy struct {
	rp    *httputil.ReverseProxy
	rec   *recorder.Recorder // nil: not recording
	m     *recorder.Metrics
	log   *log.Logger
	conns atomic.Int64 // connection ids when not recording

	lastLog    atomic.Int64 // unix ns of the last upstream failure logged
	suppressed atomic.Int64 // upstream failures not logged since
}

// Kinds of reel_proxy_errors_total. Each failed request counts once, as the
// kind of its first failure.
const (
	ErrUpstream    = "upstream"     // the upstream refused, timed out or broke off the response
	ErrClientAbort = "client_abort" // the client went away before the response was complete
	ErrBadRequest  = "bad_request"  // the client's request body was malformed (answered 400)
)

// NewTransport returns the tuned upstream transport: large idle pool (the
// default keeps 2 idle connections per host), no transparent compression
// (bytes and SSE timing pass through as sent), HTTP/1.1. The read and write
// buffers stay at net/http's 4 KiB: large body reads and writes mostly go
// around them, and every pooled connection would pay for bigger ones.
func NewTransport(responseHeaderTimeout time.Duration) *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   4096,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: responseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
}

// New returns a Proxy for opts.
func New(opts Options) (*Proxy, error) {
	if opts.Upstream == nil || opts.Upstream.Host == "" {
		return nil, errors.New("new proxy: upstream URL with a host is required")
	}
	if opts.Upstream.Scheme != "http" && opts.Upstream.Scheme != "https" {
		return nil, fmt.Errorf("new proxy: upstream scheme %q: want http or https", opts.Upstream.Scheme)
	}
	if opts.Transport == nil {
		opts.Transport = NewTransport(opts.ResponseHeaderTimeout)
	}
	if opts.ErrorLog == nil {
		opts.ErrorLog = log.New(io.Discard, "", 0)
	}
	p := &Proxy{rec: opts.Recorder, m: opts.Metrics, log: opts.ErrorLog}
	if p.m == nil && p.rec != nil {
		p.m = p.rec.Metrics()
	}
	if p.m == nil {
		p.m = recorder.NewMetrics(nil)
	}
	target := opts.Upstream
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the client's Host, as without the proxy
			for _, h := range forwarded {
				if v, ok := pr.In.Header[h]; ok {
					pr.Out.Header[h] = v
				}
			}
		},
		Transport:  opts.Transport,
		BufferPool: bufferPool{},
		// The ReverseProxy would log every body-copy failure; the proxy logs
		// them itself, rate-limited (upstreamFailed).
		ErrorLog:       log.New(io.Discard, "", 0),
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
	}
	return p, nil
}

// forwarded are the headers ReverseProxy strips before Rewrite; the sidecar
// restores them so the upstream sees what it would see without reel.
var forwarded = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

// NewServer returns an http.Server serving p on addr with HTTP/1.1 and
// unencrypted HTTP/2 (h2c with prior knowledge) and per-connection ids.
func NewServer(addr string, p *Proxy) *http.Server {
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	return &http.Server{
		Addr:              addr,
		Handler:           p,
		ConnContext:       p.ConnContext,
		Protocols:         &protos,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
}

type connKey struct{}

// connState numbers the exchanges of one client connection.
type connState struct {
	id   int64
	next atomic.Int32
}

// ConnContext gives each accepted connection an id (Recorder.NewConn);
// install it as the http.Server's ConnContext (NewServer does).
func (p *Proxy) ConnContext(ctx context.Context, _ net.Conn) context.Context {
	var id int64
	if p.rec != nil {
		id = p.rec.NewConn()
	} else {
		id = p.conns.Add(1)
	}
	return context.WithValue(ctx, connKey{}, &connState{id: id})
}

type exchKey struct{}

// exchange is the per-request recording state shared by the handler, the
// body tees, ModifyResponse and ErrorHandler.
type exchange struct {
	rec            *recorder.Recording
	ctx            context.Context // the client request's context
	complete       atomic.Bool     // the upstream body reached EOF
	upstreamFailed atomic.Bool     // the upstream broke off the body: the abort that follows is not the client's
	body           *requestTee     // the request body, if any
}

type teeKey struct{}

// requestBody finds the request body tee of r (nil without a body).
func requestBody(r *http.Request, ex *exchange) *requestTee {
	if ex != nil {
		return ex.body
	}
	t, _ := r.Context().Value(teeKey{}).(*requestTee)
	return t
}

// ServeHTTP proxies one request and records it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var cid int64
	var cseq int32
	if cs, ok := r.Context().Value(connKey{}).(*connState); ok {
		cid, cseq = cs.id, cs.next.Add(1)-1
	}
	var ex *exchange
	if p.rec != nil {
		req := recorder.Request{
			Method: r.Method, Host: r.Host, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: r.Header,
		}
		conn := recorder.ConnInfo{ID: cid, Seq: cseq, Client: r.RemoteAddr}
		if p.rec.Want(req, conn) {
			ex = &exchange{rec: p.rec.Begin(start, conn)}
			ex.rec.SetRequest(req)
			ex.ctx = r.Context()
			r = r.WithContext(context.WithValue(r.Context(), exchKey{}, ex))
		}
	}
	if r.Body != nil && r.Body != http.NoBody {
		// The HTTP/1 server closes an unread request body once response
		// headers are written; the transport may still be sending it (or
		// checking it for bytes beyond Content-Length) and would then tear
		// down the upstream connection mid-response (golang/go#40747).
		http.NewResponseController(w).EnableFullDuplex()
		t := &requestTee{ReadCloser: r.Body, left: r.ContentLength}
		if ex != nil {
			t.rec = ex.rec
			ex.body = t
		} else {
			// errorHandler must find the tee: the ReverseProxy hands it a
			// request whose Body is wrapped.
			r = r.WithContext(context.WithValue(r.Context(), teeKey{}, t))
		}
		r.Body = t
	}
	defer func() {
		v := recover()
		end := time.Now()
		p.m.ProxySeconds.Observe(end.Sub(start).Seconds())
		aborted := v == http.ErrAbortHandler || r.Context().Err() != nil
		switch {
		case !aborted, ex != nil && (ex.complete.Load() || ex.upstreamFailed.Load()):
		case ex == nil && v == http.ErrAbortHandler && r.Context().Err() == nil:
			// Not recorded, so no tee saw the body: the ReverseProxy gave up
			// copying it while the client was still there.
			p.upstreamFailed(r, errors.New("read body: response cut short"))
		default:
			p.m.ProxyErrors.WithLabelValues(ErrClientAbort).Inc()
		}
		if ex != nil {
			if aborted {
				ex.rec.Fail(recorder.ErrClientAborted) // an upstream error recorded first wins
			}
			complete := ex.complete.Load()
			// Off the response's path: an event stream's last chunk is
			// written after this handler returns (Recorder.SubmitLater).
			p.rec.SubmitLater(ex.rec.BodyBytes(), func() *formats.Exchange { return ex.rec.Finish(end, complete) })
		}
		if v != nil {
			panic(v)
		}
	}()
	p.rp.ServeHTTP(w, r)
}

func (p *Proxy) modifyResponse(resp *http.Response) error {
	ex, _ := resp.Request.Context().Value(exchKey{}).(*exchange)
	if ex == nil {
		return nil
	}
	ex.rec.SetResponse(time.Now(), resp.StatusCode, resp.Header)
	if resp.Body == nil || resp.Body == http.NoBody {
		ex.complete.Store(true)
		return nil
	}
	resp.Body = &responseTee{ReadCloser: resp.Body, ex: ex, p: p, req: resp.Request}
	return nil
}

func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	ex, _ := r.Context().Value(exchKey{}).(*exchange)
	if r.Context().Err() != nil {
		// The client went away; the upstream request was cancelled with it.
		if ex != nil {
			ex.rec.Fail(recorder.ErrClientAborted)
		}
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	if t := requestBody(r, ex); t != nil {
		if berr := t.readErr(); berr != nil {
			// The transport failed because the client's body did: that is
			// the client's error, not the upstream's.
			p.m.ProxyErrors.WithLabelValues(ErrBadRequest).Inc()
			if ex != nil {
				ex.rec.Fail(fmt.Errorf("client: read request body: %w", berr))
			}
			w.WriteHeader(http.StatusBadRequest)
			return
		}
	}
	p.upstreamFailed(r, err)
	if ex != nil {
		ex.rec.Fail(fmt.Errorf("upstream: %w", err))
	}
	status := http.StatusBadGateway
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		status = http.StatusGatewayTimeout
	}
	w.WriteHeader(status)
}

// upstreamFailed counts an upstream failure and logs it, at most once a
// second: an upstream that is down fails every request, and the log must
// not become the outage.
func (p *Proxy) upstreamFailed(r *http.Request, err error) {
	p.m.ProxyErrors.WithLabelValues(ErrUpstream).Inc()
	now := time.Now().UnixNano()
	last := p.lastLog.Load()
	if now-last < int64(time.Second) || !p.lastLog.CompareAndSwap(last, now) {
		p.suppressed.Add(1)
		return
	}
	more := ""
	if n := p.suppressed.Swap(0); n > 0 {
		more = fmt.Sprintf(" (and %d more upstream failures since the last message)", n)
	}
	// Neither the path nor a URL goes into the log: they may carry
	// personal data the dataset only holds redacted.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	p.log.Printf("upstream failed: %s request: %v%s", r.Method, err, more)
}

// requestTee records the request body as the transport reads it, and
// reports EOF itself once Content-Length bytes have been read, so the
// transport's check for excess bytes never touches a body the server has
// already closed.
type requestTee struct {
	io.ReadCloser
	rec  *recorder.Recording // nil when not recording
	left int64               // bytes still expected; negative when unknown

	mu  sync.Mutex // guards err: the transport reads on its own goroutine
	err error      // the client body's read error, other than EOF
}

// readErr reports the client body's read error, if any.
func (t *requestTee) readErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *requestTee) Read(p []byte) (int, error) {
	if t.left == 0 {
		return 0, io.EOF
	}
	if t.left > 0 && int64(len(p)) > t.left {
		p = p[:t.left]
	}
	n, err := t.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		t.mu.Lock()
		t.err = err
		t.mu.Unlock()
	}
	if t.left > 0 {
		t.left -= int64(n)
		if t.left == 0 && err == nil {
			err = io.EOF
		}
	}
	if n > 0 && t.rec != nil {
		t.rec.RequestBody(p[:n])
	}
	return n, err
}

// responseTee records the response body, with arrival times, as the
// ReverseProxy reads it to forward it. The Recording defers the event-stream
// scan of what it copies to Finish, which a recording worker runs after the
// handler (Recorder.SubmitLater), off the forwarding path.
type responseTee struct {
	io.ReadCloser
	ex  *exchange
	p   *Proxy
	req *http.Request // the upstream request, for the log
}

func (t *responseTee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		t.ex.rec.ResponseBody(time.Now(), p[:n])
	}
	switch {
	case err == io.EOF:
		t.ex.complete.Store(true)
	case err != nil:
		if t.ex.ctx.Err() != nil {
			t.ex.rec.Fail(recorder.ErrClientAborted)
		} else if !t.ex.upstreamFailed.Swap(true) {
			t.p.upstreamFailed(t.req, fmt.Errorf("read body: %w", err))
			t.ex.rec.Fail(fmt.Errorf("upstream: read body: %w", err))
		}
	}
	return n, err
}

// bufferPool recycles the ReverseProxy's copy buffers.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }
