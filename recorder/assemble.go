package recorder

import (
	"errors"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/redact"
	"github.com/reelkit/reel/sse"
)

// DefaultMaxBody is the body capture limit when Config.MaxBody is zero.
const DefaultMaxBody = 1 << 20

// DefaultContextHeaders are the batch-context headers recorded when
// Config.ContextHeaders is nil.
var DefaultContextHeaders = []string{"x-batch-size", "x-queue-depth"}

// Typed context headers: their values land in Exchange.BatchSize and
// Exchange.QueueDepth instead of Exchange.Context.
const (
	HeaderBatchSize  = "x-batch-size"
	HeaderQueueDepth = "x-queue-depth"
)

// ErrClientAborted is recorded when the client went away before the
// response was complete.
var ErrClientAborted = errors.New("client aborted")

// Config configures an Assembler. The zero value works.
type Config struct {
	Recorder string // recorder id written to every exchange (default "reel")
	Upstream string // upstream address written to every exchange
	// MaxBody caps the bytes kept of each request and response body
	// (default DefaultMaxBody). Longer bodies are kept truncated and
	// flagged; the sizes record the original length. Negative keeps none.
	MaxBody int64
	// ContextHeaders names the headers recorded as batch context (default
	// DefaultContextHeaders). x-batch-size and x-queue-depth fill the typed
	// columns; the others land in Exchange.Context. Response headers win over
	// request headers of the same name.
	ContextHeaders []string
	// SessionHeader names the request header holding the session key
	// (default "x-session-id").
	SessionHeader string
	// SessionFields are request-body fields (dotted paths, see
	// DefaultSessionFields) read into the session column when the header
	// is absent; the first present wins. Default none. They are read on
	// the pipeline's workers, from the raw body, before redaction.
	SessionFields []string
	// Epoch makes sequence numbers and connection ids unique across
	// restarts of a recorder on one dataset: both count up from
	// EpochBase(Epoch). New takes it from a formats.Writer sink
	// (Writer.Epoch, when it started). Zero (the default with other sinks):
	// both count from 1.
	Epoch time.Time
}

// EpochBase is the number a recorder whose Config.Epoch is epoch counts its
// sequence numbers and connection ids up from (the first is EpochBase+1):
// the epoch in unix milliseconds × 2^14. A later epoch's numbers are above
// an earlier one's as long as the earlier recorder handed out fewer than
// 2^14 numbers per millisecond of its life (16 million a second) and the
// clock did not step back. Zero for a zero epoch.
func EpochBase(epoch time.Time) int64 {
	if epoch.IsZero() || epoch.UnixMilli() <= 0 {
		return 0
	}
	return epoch.UnixMilli() << 14
}

// Assembler builds exchanges and hands out sequence numbers. It is safe for
// concurrent use; each Recording it returns is used by one exchange.
type Assembler struct {
	cfg     Config
	ctxKeys []contextKey // the non-typed context headers
	seq     atomic.Int64
	conns   atomic.Int64
	// lastUnsized is the length of the latest response body of unknown
	// length (an event stream, a chunked answer) kept whole: the next such
	// body starts with about that much room (growFrom).
	lastUnsized atomic.Int64
	// lastPieces is how many event-stream pieces the latest Recording to
	// finish deferred: the next one's room for them (pendingFrom).
	lastPieces atomic.Int64
}

// NewAssembler returns an Assembler for cfg.
func NewAssembler(cfg Config) *Assembler {
	if cfg.Recorder == "" {
		cfg.Recorder = "reel"
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxBody < 0 {
		cfg.MaxBody = 0
	}
	if cfg.ContextHeaders == nil {
		cfg.ContextHeaders = DefaultContextHeaders
	}
	if cfg.SessionHeader == "" {
		cfg.SessionHeader = "x-session-id"
	}
	a := &Assembler{cfg: cfg}
	a.seq.Store(EpochBase(cfg.Epoch))
	a.conns.Store(EpochBase(cfg.Epoch))
	for _, h := range cfg.ContextHeaders {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" || h == HeaderBatchSize || h == HeaderQueueDepth {
			continue
		}
		a.ctxKeys = append(a.ctxKeys, contextKey{name: h, canon: textproto.CanonicalMIMEHeaderKey(h)})
	}
	a.cfg.SessionHeader = textproto.CanonicalMIMEHeaderKey(cfg.SessionHeader)
	return a
}

// Config reports the configuration in effect, defaults filled in.
func (a *Assembler) Config() Config { return a.cfg }

// NewConn hands out the id of a new client connection: from 1, or above
// EpochBase(Config.Epoch).
func (a *Assembler) NewConn() int64 { return a.conns.Add(1) }

// ConnInfo identifies the connection an exchange arrived on.
type ConnInfo struct {
	ID     int64  // connection id from NewConn; 0 when the source has none (access logs)
	Seq    int32  // index of the exchange on the connection, from 0
	Client string // client address (host:port)
}

// Request is the request line and headers of an exchange.
type Request struct {
	Method   string      // GET, POST, …
	Host     string      // Host header (HTTP/1.1) or :authority (HTTP/2)
	Path     string      // escaped path, without the query
	RawQuery string      // query without the '?'
	Header   http.Header // request headers; read, not retained
}

// Begin starts an exchange whose first request byte was seen at start and
// assigns its sequence number.
func (a *Assembler) Begin(start time.Time, conn ConnInfo) *Recording {
	r := &Recording{a: a, start: start}
	r.x.Recorder = a.cfg.Recorder
	r.x.Seq = a.seq.Add(1)
	r.x.ConnID = conn.ID
	r.x.ConnSeq = conn.Seq
	r.x.Client = conn.Client
	r.x.Upstream = a.cfg.Upstream
	r.x.BatchSize, r.x.QueueDepth = -1, -1
	return r
}

// Recording is one exchange being observed. Its methods are safe to call
// from the goroutine reading the request body and the one reading the
// response at the same time. Finish ends it.
type Recording struct {
	a     *Assembler
	start time.Time

	mu       sync.Mutex // guards everything below
	x        formats.Exchange
	reqHdr   http.Header
	respAt   time.Time
	lastByte time.Time
	scanner  *sse.Scanner // non-nil for event-stream responses
	// respGrow is the first capacity of a response body of unknown length
	// (growFrom); 0 when a Content-Length sized it.
	respGrow int
	timeline sse.Timeline
	// pending are the pieces of RespBody not yet scanned, in order, from
	// RespBody[scanned:] on (see ResponseBody).
	pending  []piece
	scanned  int
	pieces   int // pieces deferred so far
	err      error
	finished bool
}

// Seq reports the exchange's sequence number.
func (r *Recording) Seq() int64 { return r.x.Seq }

// SetRequest records the request line and headers. The header is read, not
// retained.
func (r *Recording) SetRequest(req Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.x.Method = req.Method
	r.x.Host = req.Host
	r.x.Path = req.Path
	r.x.Query = req.RawQuery
	r.x.ReqHeaders = headerMap(req.Header)
	r.x.ReqBody = presize(r.x.ReqBody, req.Header, r.a.cfg.MaxBody)
	r.x.ReqContentType = req.Header.Get("Content-Type")
	r.x.Session = req.Header.Get(r.a.cfg.SessionHeader)
	r.reqHdr = contextOnly(req.Header, r.a)
}

// SetStart moves the exchange's start (its first request byte) to start.
// A passive capture that saw the response first — the request held behind
// a lost segment — learns the request's time only later.
func (r *Recording) SetStart(start time.Time) {
	r.mu.Lock()
	r.start = start
	r.mu.Unlock()
}

// RequestBody records the next piece of the request body.
func (r *Recording) RequestBody(p []byte) {
	r.mu.Lock()
	r.x.ReqBody, r.x.ReqBodyTrunc = appendCapped(r.x.ReqBody, p, r.a.cfg.MaxBody, r.x.ReqBodyTrunc, growStart)
	r.x.ReqBodyBytes += int64(len(p))
	r.mu.Unlock()
}

// SetResponse records the status line and headers, which arrived at at
// (the time to first byte).
func (r *Recording) SetResponse(at time.Time, status int, header http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.respAt = at
	r.x.Status = int32(status)
	r.x.RespHeaders = headerMap(header)
	r.x.RespContentType = header.Get("Content-Type")
	r.x.RespBody = presize(r.x.RespBody, header, r.a.cfg.MaxBody)
	if cap(r.x.RespBody) == 0 {
		r.respGrow = r.a.growFrom()
	}
	if isEventStream(r.x.RespContentType) {
		r.scanner = sse.NewScanner(sse.Options{})
	}
	r.applyContext(r.reqHdr)
	r.applyContext(header)
}

// ResponseBody records the next piece of the response body, which arrived
// at at. It copies p and returns; event-stream bodies are scanned with each
// piece's arrival time, but pieces that fit under the body cap are scanned
// later — together, at Finish or ScanPending, or maxPending at a time — so
// that a proxy forwards the bytes without waiting for the scan, and the
// scan runs over a whole stream with its state in the caches rather than a
// piece at a time between other streams' pieces.
func (r *Recording) ResponseBody(at time.Time, p []byte) {
	if len(p) == 0 {
		return
	}
	r.mu.Lock()
	from := len(r.x.RespBody)
	r.x.RespBody, _ = appendCapped(r.x.RespBody, p, r.a.cfg.MaxBody, false, r.respGrow)
	r.x.RespBodyBytes += int64(len(p))
	r.lastByte = at
	if r.scanner != nil {
		switch {
		case len(r.x.RespBody)-from != len(p):
			r.scanPending()
			r.scanner.Feed(p, at, r.observe) // past the cap: the copy is not whole
			r.scanned = len(r.x.RespBody)
		case len(r.pending) == maxPending:
			r.scanPending()
			fallthrough
		default:
			if r.pending == nil {
				r.pending = make([]piece, 0, r.a.pendingFrom())
			}
			r.pending = append(r.pending, piece{to: len(r.x.RespBody), at: at})
			r.pieces++
		}
	}
	r.mu.Unlock()
}

// piece is the end (in RespBody) and arrival time of a response piece
// waiting to be scanned.
type piece struct {
	to int
	at time.Time
}

// maxPending bounds the pieces a Recording keeps unscanned (32 bytes
// each): a stream of more is scanned that many pieces at a time.
const maxPending = 256

// BodyBytes is the request and response body bytes the exchange holds so
// far (what Recorder.SubmitLater charges against the queue's byte bound).
func (r *Recording) BodyBytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(len(r.x.ReqBody) + len(r.x.RespBody))
}

// ScanPending scans the event-stream pieces ResponseBody deferred, if any.
func (r *Recording) ScanPending() {
	r.mu.Lock()
	r.scanPending()
	r.mu.Unlock()
}

func (r *Recording) scanPending() {
	for _, pc := range r.pending {
		r.scanner.Feed(r.x.RespBody[r.scanned:pc.to], pc.at, r.observe)
		r.scanned = pc.to
	}
	r.pending = r.pending[:0]
}

func (r *Recording) observe(ev *sse.Event) { r.timeline.Observe(ev) }

// Fail records what went wrong; the first error wins.
func (r *Recording) Fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
}

// Finish ends the exchange at end and returns it, raw (not yet enriched or
// redacted). complete says the source saw the whole exchange; it is forced
// false when an error was recorded. Finish may be called once; later calls
// return nil.
func (r *Recording) Finish(end time.Time, complete bool) *formats.Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		return nil
	}
	r.finished = true
	x := &r.x
	x.Ts = r.start.UTC()
	x.TsUnixNs = r.start.UnixNano()
	if !r.respAt.IsZero() {
		x.TTFBNs = int64(r.respAt.Sub(r.start))
	}
	last := r.lastByte
	if last.IsZero() {
		last = r.respAt
	}
	if last.IsZero() {
		last = end
	}
	x.DurationNs = int64(last.Sub(r.start))
	if r.respGrow > 0 && int64(len(x.RespBody)) == x.RespBodyBytes && len(x.RespBody) > 0 {
		r.a.lastUnsized.Store(int64(len(x.RespBody)))
	}
	if r.scanner != nil {
		r.a.lastPieces.Store(int64(r.pieces))
		r.scanPending()
		r.scanner.Flush(last, r.observe)
		tl := &r.timeline
		x.Events = int32(min(tl.Events, 1<<31-1))
		if !tl.FirstToken.IsZero() {
			x.TTFTNs = int64(tl.FirstToken.Sub(r.start))
		}
		x.EventGapsUs = tl.GapsUs
		x.OutputTokens = int32(min(tl.OutputTokens(), 1<<31-1))
		if tl.HasUsage && tl.Usage.PromptTokens > 0 {
			x.PromptTokens = int32(min(tl.Usage.PromptTokens, 1<<31-1))
			x.PromptTokensSource = formats.TokensFromUsage
		}
		if tl.HasUsage {
			x.CachedTokens = tl.Usage.CachedColumn()
		}
		if tl.Done && errors.Is(r.err, ErrClientAborted) {
			// The client hung up after the stream's end marker, as many SSE
			// clients do: nothing of the exchange was lost.
			r.err = nil
			complete = true
		}
		r.scanner = nil
	}
	if r.err != nil {
		x.Error = r.err.Error()
		complete = false
	}
	x.Complete = complete
	out := *x
	return &out
}

func (r *Recording) applyContext(h http.Header) {
	if h == nil {
		return
	}
	if v := h.Get(canonBatchSize); v != "" {
		r.x.BatchSize = parseInt32(v)
	}
	if v := h.Get(canonQueueDepth); v != "" {
		r.x.QueueDepth = parseInt32(v)
	}
	for _, k := range r.a.ctxKeys {
		if v := h.Get(k.canon); v != "" {
			if r.x.Context == nil {
				r.x.Context = make(map[string]string, len(r.a.ctxKeys))
			}
			r.x.Context[k.name] = v
		}
	}
}

// contextKey is a context header's name: lower-case as the context column
// keeps it, and canonical, which http.Header.Get looks up without
// allocating.
type contextKey struct{ name, canon string }

// The typed context headers' canonical names.
var (
	canonBatchSize  = textproto.CanonicalMIMEHeaderKey(HeaderBatchSize)
	canonQueueDepth = textproto.CanonicalMIMEHeaderKey(HeaderQueueDepth)
)

// contextOnly copies the context headers of h, so the request header map is
// not retained.
func contextOnly(h http.Header, a *Assembler) http.Header {
	var out http.Header
	take := func(k string) {
		if v := h.Get(k); v != "" {
			if out == nil {
				out = make(http.Header, 2)
			}
			out.Set(k, v)
		}
	}
	take(canonBatchSize)
	take(canonQueueDepth)
	for _, k := range a.ctxKeys {
		take(k.canon)
	}
	return out
}

// parseInt32 parses a batch-context value; -1 when it is not a number.
func parseInt32(v string) int32 {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || n < 0 {
		return -1
	}
	return int32(n)
}

// dropHeaders are never recorded: hop-by-hop headers.
var dropHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Proxy-Authenticate": true,
}

// credentialHeaders are recorded by presence and length only, even
// without redaction (--raw): a replay takes its secrets from the
// environment, never from the dataset, but whether a request carried one
// is part of the traffic.
var credentialHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Set-Cookie": true,
}

// headerMap flattens h into lower-case names with values joined by ", ".
// The redactor applies the final header policy.
func headerMap(h http.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	m := make(map[string]string, len(h))
	for k, vs := range h {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if dropHeaders[ck] || len(vs) == 0 {
			continue
		}
		v := vs[0]
		if len(vs) > 1 {
			v = strings.Join(vs, ", ")
		}
		if credentialHeaders[ck] {
			v = redact.CredentialMarker(len(v))
		}
		lk, ok := lowerNames[k]
		if !ok {
			lk = strings.ToLower(k)
		}
		m[lk] = v
	}
	return m
}

// lowerNames holds the lower-case spelling of common header names, so that
// recording them does not allocate.
var lowerNames = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Cache-Control", "Content-Encoding",
		"Content-Length", "Content-Type", "Date", "Host", "Origin", "Referer", "Server", "User-Agent", "Vary",
		"X-Batch-Size", "X-Queue-Depth", "X-Request-Id", "X-Session-Id", "X-Forwarded-For", "X-Forwarded-Host",
		"X-Forwarded-Proto", "Forwarded", "Openai-Organization", "Openai-Processing-Ms", "Openai-Version",
		"X-Stainless-Lang", "X-Stainless-Package-Version", "X-Stainless-Os", "X-Stainless-Arch",
		"X-Stainless-Runtime", "X-Stainless-Runtime-Version", "Anthropic-Version", "Request-Id"} {
		m[k] = strings.ToLower(k)
	}
	return m
}()

// appendCapped appends p to dst keeping at most limit bytes; the flag
// reports whether anything was cut. A buffer that must grow doubles, from
// at least start.
func appendCapped(dst, p []byte, limit int64, trunc bool, start int) ([]byte, bool) {
	room := limit - int64(len(dst))
	if room <= 0 {
		return dst, trunc || len(p) > 0
	}
	if int64(len(p)) > room {
		p, trunc = p[:room], true
	}
	if need := len(dst) + len(p); need > cap(dst) {
		// Double, from start, up to the cap: a body of unknown length
		// (an event stream, chunked) then costs at most about twice its size
		// and a few copies, where a large presize cost a typical stream three
		// times its size.
		n := int64(max(2*cap(dst), need, start, growStart))
		dst = append(make([]byte, 0, max(min(n, limit), int64(need))), dst...)
	}
	return append(dst, p...), trunc
}

// growStart is the smallest capture buffer allocated for a body whose length
// was not announced: an event stream's first events or a small chunked body.
const growStart = 1 << 10

// maxGrowFrom bounds the first buffer of a body of unknown length, so that
// one long stream does not make the next short ones hold its size.
const maxGrowFrom = 64 << 10

// growFrom is the first capacity for a response body of unknown length:
// the latest such body's length and an eighth more (streams of one service
// are alike), from growStart up to maxGrowFrom. A typical stream then
// needs one buffer instead of a doubling series of them (each a copy).
func (a *Assembler) growFrom() int {
	n := a.lastUnsized.Load()
	return int(min(max(n+n/8, growStart), maxGrowFrom, max(a.cfg.MaxBody, 1)))
}

// pendingFrom is the first capacity of a Recording's deferred pieces: room
// for as many as the latest stream had, within [8, maxPending].
func (a *Assembler) pendingFrom() int {
	return int(min(max(a.lastPieces.Load(), 8), maxPending))
}

// presize gives an empty body buffer the capacity the Content-Length in h
// announces, up to limit, so that capturing it does not grow and copy it.
// Bodies of unknown length (event streams, chunked) grow as they arrive.
func presize(b []byte, h http.Header, limit int64) []byte {
	if len(b) > 0 || cap(b) > 0 || limit <= 0 {
		return b
	}
	n := int64(-1)
	if v := h.Get("Content-Length"); v != "" {
		if c, err := strconv.ParseInt(v, 10, 64); err == nil {
			n = c
		}
	}
	if n <= 0 {
		return b
	}
	return make([]byte, 0, min(n, limit))
}

func isEventStream(ct string) bool {
	return len(ct) >= 17 && strings.EqualFold(ct[:17], "text/event-stream")
}
