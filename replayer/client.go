package replayer

import (
	"bytes"
	"container/list"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder/sse"
)

// ConnMode chooses how requests map to connections.
type ConnMode string

const (
	// ConnPooled lets one tuned transport reuse connections as it likes.
	ConnPooled ConnMode = "pooled"
	// ConnRecorded keeps one keep-alive connection per recorded connection
	// (recorder + conn_id): a request whose connection is still busy waits
	// for it, as it did in production, and the wait shows as lag.
	ConnRecorded ConnMode = "recorded"
)

// epoch anchors the monotonic clock every timing in a run is read from.
var epoch = time.Now()

// mono reads the monotonic clock as ns since epoch.
func mono() int64 { return int64(time.Since(epoch)) }

// unixNs converts a mono reading to ns since the Unix epoch.
func unixNs(m int64) int64 { return epoch.UnixNano() + m }

// clientOptions configures a client; the zero value of each field works.
type clientOptions struct {
	Mode       ConnMode      // default ConnPooled
	Timeout    time.Duration // per request, from the send; 0 = none
	TLS        *tls.Config   // nil = Go's defaults
	MaxConns   int           // ConnRecorded: connections kept open at once, LRU; default 4096
	PoolConns  int           // ConnPooled: connections to the target at most; 0 = no limit
	BufferSize int           // transport and body read buffers; default 64 KiB
}

// client sends prepared requests and times them.
type client struct {
	opts   clientOptions
	pooled *http.Transport

	mu    sync.Mutex               // guards conns and lru
	conns map[string]*list.Element // conn key → element of lru holding *connEntry
	lru   *list.List

	bufs sync.Pool // *[]byte read buffers for response bodies
}

type connEntry struct {
	key string
	t   *http.Transport
}

func newClient(opts clientOptions) *client {
	if opts.Mode == "" {
		opts.Mode = ConnPooled
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 4096
	}
	if opts.BufferSize <= 0 {
		opts.BufferSize = 64 << 10
	}
	c := &client{opts: opts, conns: map[string]*list.Element{}, lru: list.New()}
	c.pooled = c.transport(opts.PoolConns)
	c.bufs.New = func() any { b := make([]byte, opts.BufferSize); return &b }
	return c
}

// transport builds a transport tuned for replay; perHost > 0 caps its
// connections (1 for a recorded connection).
func (c *client) transport(perHost int) *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	idle := 8192
	if perHost > 0 {
		idle = min(perHost, idle)
	}
	return &http.Transport{
		Proxy:               nil, // a replay goes where it is told, never through $HTTP_PROXY
		DialContext:         d.DialContext,
		TLSClientConfig:     c.opts.TLS,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: idle,
		MaxConnsPerHost:     perHost,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // SSE events must arrive as sent, and bytes as on the wire
		WriteBufferSize:     c.opts.BufferSize,
		ReadBufferSize:      c.opts.BufferSize,
		TLSHandshakeTimeout: 10 * time.Second,
	}
}

// transportFor returns the transport for a recorded connection key.
func (c *client) transportFor(key string) *http.Transport {
	if c.opts.Mode != ConnRecorded || key == "" {
		return c.pooled
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.conns[key]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*connEntry).t
	}
	t := c.transport(1)
	c.conns[key] = c.lru.PushFront(&connEntry{key: key, t: t})
	for c.lru.Len() > c.opts.MaxConns {
		old := c.lru.Back()
		ce := old.Value.(*connEntry)
		c.lru.Remove(old)
		delete(c.conns, ce.key)
		ce.t.CloseIdleConnections()
	}
	return t
}

// close drops every idle connection.
func (c *client) close() {
	c.pooled.CloseIdleConnections()
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.Front(); e != nil; e = e.Next() {
		e.Value.(*connEntry).t.CloseIdleConnections()
	}
}

// timing collects the trace callbacks of one request; they run on the
// transport's goroutines.
type timing struct {
	wrote atomic.Int64 // mono ns when the request was written
	first atomic.Int64 // mono ns of the first response byte
}

// do sends p and fills res with status, timings (SPEC §6), tokens, bytes and
// the shadow's batch context. schedMono is the request's due time (mono ns)
// and startMono when the sender began; failures are recorded in res.Error.
func (c *client) do(ctx context.Context, connKey string, p *prepared, schedMono, startMono int64, res *formats.Result) {
	tm := &timing{}
	trace := &httptrace.ClientTrace{
		WroteRequest:         func(httptrace.WroteRequestInfo) { tm.wrote.Store(mono()) },
		GotFirstResponseByte: func() { tm.first.Store(mono()) },
	}
	if c.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
	}
	ctx = httptrace.WithClientTrace(ctx, trace)
	req, err := http.NewRequestWithContext(ctx, p.method, p.url, nil)
	if err != nil {
		c.fail(res, startMono, schedMono, fmt.Errorf("build request: %w", err))
		return
	}
	req.Header = p.header
	if len(p.body) > 0 {
		body := p.body
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	res.BytesSent = p.headBytes + int64(len(p.body))
	resp, err := c.transportFor(connKey).RoundTrip(req)
	send := tm.wrote.Load()
	if send == 0 {
		send = startMono // never written: time it from when the sender began
	}
	res.SentUnixNs = unixNs(send)
	res.LagNs = send - schedMono
	if err != nil {
		c.fail(res, send, schedMono, err)
		return
	}
	defer resp.Body.Close()
	res.Status = int32(resp.StatusCode)
	res.BatchSize = headerInt(resp.Header, "X-Batch-Size")
	res.QueueDepth = headerInt(resp.Header, "X-Queue-Depth")
	recv := int64(len(resp.Proto) + len(resp.Status) + 3)
	for k, vs := range resp.Header {
		for _, v := range vs {
			recv += int64(len(k) + len(v) + 4)
		}
	}
	if f := tm.first.Load(); f > 0 {
		res.TTFBNs = f - send
	}
	bp := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(bp)
	var end, n int64
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		end, n, err = readStream(resp.Body, *bp, send, res)
	} else {
		end, n, err = readBody(resp.Body, *bp, resp.Header.Get("Content-Type"), res)
	}
	res.BytesRecv = recv + n
	res.E2ENs = end - send
	res.E2ESchedNs = end - schedMono
	if err != nil {
		res.Error = errorText(fmt.Errorf("read response: %w", err))
	}
}

// fail records a request that got no response.
func (c *client) fail(res *formats.Result, at, schedMono int64, err error) {
	res.Error = errorText(err)
	now := mono()
	res.E2ENs = now - at
	res.E2ESchedNs = now - schedMono
}

// maxEventBytes bounds one SSE event's data; longer events are truncated by
// the scanner, never held whole.
const maxEventBytes = 4 << 20

// readStream reads an SSE body with recorder/sse, the scanner and token
// classification the recorder uses, so recorded and replayed timings mean
// the same: TTFT/TTST/ITL from token-bearing events (SPEC §6), output tokens
// from usage when present, else the token events. E2E ends at the last token
// event, or at the last byte when there was none.
func readStream(body io.Reader, buf []byte, send int64, res *formats.Result) (end, n int64, err error) {
	sc := sse.NewScanner(sse.Options{MaxEvent: maxEventBytes})
	var tl sse.Timeline
	emit := func(ev *sse.Event) { tl.Observe(ev) }
	for {
		k, rerr := body.Read(buf)
		now := time.Now()
		if k > 0 {
			n += int64(k)
			sc.Feed(buf[:k], now, emit)
		}
		if rerr != nil {
			sc.Flush(now, emit)
			if rerr != io.EOF {
				err = rerr
			}
			end = int64(now.Sub(epoch))
			break
		}
	}
	res.Events = int32(min(tl.Events, math.MaxInt32))
	res.OutputTokens = int32(min(tl.OutputTokens(), math.MaxInt32))
	if tl.TokenEvents > 0 {
		res.TTFTNs = int64(tl.FirstToken.Sub(epoch)) - send
		end = int64(tl.LastToken.Sub(epoch))
	}
	if len(tl.GapsUs) > 0 {
		res.TTSTNs = int64(tl.GapsUs[0]) * 1000
		res.ITLUs = tl.GapsUs
	}
	return end, n, err
}

// maxUsageBody bounds the non-streaming body read to find a usage block.
const maxUsageBody = 1 << 20

// readBody reads a non-streaming body to its last byte; JSON bodies up to
// maxUsageBody are parsed for usage.completion_tokens.
func readBody(body io.Reader, scratch []byte, contentType string, res *formats.Result) (end, n int64, err error) {
	if strings.Contains(contentType, "json") {
		var buf bytes.Buffer
		n, err = io.CopyBuffer(&buf, io.LimitReader(body, maxUsageBody), scratch)
		if err == nil && n == maxUsageBody {
			var m int64
			m, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{body}, scratch)
			n += m
		} else if err == nil {
			var u struct {
				Usage *struct {
					CompletionTokens int32 `json:"completion_tokens"`
				} `json:"usage"`
			}
			if json.Unmarshal(buf.Bytes(), &u) == nil && u.Usage != nil {
				res.OutputTokens = u.Usage.CompletionTokens
			}
		}
		return mono(), n, err
	}
	n, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{body}, scratch)
	return mono(), n, err
}

func headerInt(h http.Header, name string) int32 {
	v := h.Get(name)
	if v == "" {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil {
		return -1
	}
	return int32(n)
}

// errorText turns a request error into a short, stable text for the error
// column: the class first ("timeout", "refused", …), then the detail.
func errorText(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timeout: " + err.Error()
	case errors.Is(err, context.Canceled):
		return "canceled: " + err.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused: " + err.Error()
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF):
		return "reset: " + err.Error()
	}
	return err.Error()
}
