package replayer

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/sse"
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

// clientOptions configures a client; the zero value of each field works
// except Target.
type clientOptions struct {
	Target     *url.URL      // scheme and host of the shadow
	Mode       ConnMode      // default ConnPooled
	Timeout    time.Duration // per request, from the send; 0 = none
	TLS        *tls.Config   // nil = Go's defaults
	MaxConns   int           // ConnRecorded: idle connections kept at once, LRU; default 4096
	PoolConns  int           // ConnPooled: connections to the target at most; 0 = no limit
	BufferSize int           // response read buffer per request in flight; default 4 KiB (SSE reads grow it to 64 KiB on demand)
}

// client sends prepared requests over HTTP/1.1 and times them. It is the
// replayer's own lean client, not net/http's: the sender goroutine writes
// the pre-rendered request with one write, takes the send time when the
// write returns, then reads and parses the response on the same goroutine —
// no per-connection reader and writer goroutines, no hand-offs, no trace
// callbacks, no context per request (bench/replay profile, see
// docs/performance.md).
type client struct {
	opts   clientOptions
	ctx    context.Context // the run: cancelling it breaks every connection's I/O
	pooled *pool
	keyed  *keyed
	states sync.Pool // *exchange: a response's reader and parse state, reused
	bufs   sync.Pool // *[]byte read buffers for SSE bodies, grown by readStream
}

// exchange is the per-request state of a response, pooled: the reader
// attached to the connection, the parsed head and the body's framing.
type exchange struct {
	br   *bufio.Reader
	h    respHead
	body bodyReader
}

// newClient makes a client for one run; cancelling ctx fails every request
// in flight and every later one.
func newClient(ctx context.Context, opts clientOptions) *client {
	if opts.Mode == "" {
		opts.Mode = ConnPooled
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 4096
	}
	if opts.BufferSize <= 0 {
		opts.BufferSize = defaultBufferSize
	}
	dl := newDialer(ctx, opts.Target, opts.TLS, opts.Timeout)
	c := &client{
		opts:   opts,
		ctx:    ctx,
		pooled: &pool{dl: dl, max: max(opts.PoolConns, 0)},
		keyed:  &keyed{dl: dl, max: opts.MaxConns, byKey: map[string]*list.Element{}, lru: list.New()},
	}
	c.states.New = func() any { return &exchange{br: bufio.NewReaderSize(nil, opts.BufferSize)} }
	c.bufs.New = func() any { b := make([]byte, opts.BufferSize); return &b }
	return c
}

// Read buffers per request in flight: small, since they are what memory
// grows with under concurrency (two 64 KiB buffers each held ~130 MiB at
// 1,000 in flight). A head line longer than the reader's buffer is gathered
// (readLine); an SSE body's read buffer doubles while reads fill it, up to
// maxStreamRead.
const (
	defaultBufferSize = 4 << 10
	maxStreamRead     = 64 << 10
)

// close drops every idle connection.
func (c *client) close() {
	c.pooled.closeIdle()
	c.keyed.closeIdle()
}

// get returns a connection for a request: the recorded connection's own
// under ConnRecorded, else one from the pool.
func (c *client) get(ctx context.Context, key string) (*conn, error) {
	if c.opts.Mode == ConnRecorded && key != "" {
		return c.keyed.get(key)
	}
	return c.pooled.get(ctx)
}

// done gives a connection back after its response: kept when reusable,
// else closed.
func (c *client) done(cn *conn, reusable bool) {
	switch {
	case cn.key != "" && reusable:
		c.keyed.put(cn)
	case cn.key != "":
		cn.close()
	case reusable:
		c.pooled.put(cn)
	default:
		c.pooled.discard(cn)
	}
}

// flight is a request the dispatcher already wrote itself (see tryWrite):
// the sender goes on from the response.
type flight struct {
	cn   *conn
	send int64 // mono ns when the write returned
	err  error // the write failed
}

// maxEagerWrite bounds the requests the dispatcher writes itself: a larger
// one could fill the socket buffer and block the schedule.
const maxEagerWrite = 64 << 10

// tryWrite writes p on an idle pooled connection, when one is ready without
// waiting or dialling, and reports whether it did. The dispatcher calls it
// at low rates so that t_send does not wait for a sender goroutine to be
// woken on another thread (the largest part of lag's tail at 5k req/s).
func (c *client) tryWrite(key string, p *prepared, f *flight) bool {
	if len(p.wire) > maxEagerWrite || (c.opts.Mode == ConnRecorded && key != "") {
		return false
	}
	cn := c.pooled.tryGet()
	if cn == nil {
		return false
	}
	f.cn = cn
	f.send, f.err = c.write(cn, p)
	return true
}

// do sends p (unless f says the dispatcher wrote it) and fills res with
// status, timings (SPEC §6), tokens, bytes and the shadow's batch context.
// schedMono is the request's due time (mono ns) and startMono when the
// sender began; failures are recorded in res.Error.
func (c *client) do(ctx context.Context, key string, p *prepared, schedMono, startMono int64, res *formats.Result, f *flight) {
	res.BytesSent = int64(len(p.wire))
	send := startMono // until written: time a failure from when the sender began
	setSent := func() {
		res.SentUnixNs = unixNs(send)
		res.LagNs = send - schedMono
	}
	var cn *conn
	var err error
	if f != nil && f.cn != nil {
		cn, send, err = f.cn, f.send, f.err
	} else {
		if cn, err = c.get(ctx, key); err != nil {
			setSent()
			c.fail(res, send, schedMono, err)
			return
		}
		send, err = c.write(cn, p)
	}
	st := c.states.Get().(*exchange)
	defer c.states.Put(st)
	br := st.br
	defer br.Reset(nil)
	var first int64
	for attempt := 0; ; attempt++ {
		if err == nil {
			if first, err = c.awaitFirst(cn, br); err == nil {
				break
			}
		}
		// A reused connection that fails before any response byte was most
		// likely closed by the server while idle: retry once on a fresh one.
		if cn.reused && attempt == 0 && !isTimeout(err) && c.ctx.Err() == nil {
			if cn, err = c.redial(cn); err == nil {
				send, err = c.write(cn, p)
				continue
			}
		} else {
			c.done(cn, false)
		}
		setSent()
		c.fail(res, send, schedMono, err)
		return
	}
	setSent()
	h := &st.h
	if err := readHead(br, h); err != nil {
		c.done(cn, false)
		c.fail(res, send, schedMono, fmt.Errorf("read response: %w", noEOF(err)))
		res.BytesRecv = h.bytes
		return
	}
	res.Status = int32(h.status)
	res.BatchSize = h.batchSize
	res.QueueDepth = h.queueDepth
	res.TTFBNs = first - send
	body := &st.body
	body.reset(br, h, p.head || h.status == 204 || h.status == 304)
	var end int64
	if h.sse {
		bp := c.bufs.Get().(*[]byte)
		end, _, err = readStream(body, bp, send, res)
		c.bufs.Put(bp)
	} else {
		end, _, err = readBody(body, h.json, res)
	}
	res.BytesRecv = h.bytes + body.wire
	res.E2ENs = end - send
	res.E2ESchedNs = end - schedMono
	if err != nil {
		res.Error = errorText(c.canceled(fmt.Errorf("read response: %w", err)))
	}
	c.done(cn, err == nil && body.clean && !h.close && br.Buffered() == 0)
}

// write writes p on cn with one write and returns when it returned (t_send).
func (c *client) write(cn *conn, p *prepared) (send int64, err error) {
	if c.opts.Timeout > 0 {
		cn.nc.SetDeadline(time.Now().Add(c.opts.Timeout))
		if err := c.ctx.Err(); err != nil { // cancelled before the deadline was set: it may have undone the break
			return mono(), err
		}
	}
	_, err = cn.nc.Write(p.wire)
	send = mono()
	if err != nil {
		return send, fmt.Errorf("write request: %w", err)
	}
	return send, nil
}

// awaitFirst waits for the first response byte on cn and returns when it
// arrived.
func (c *client) awaitFirst(cn *conn, br *bufio.Reader) (first int64, err error) {
	br.Reset(cn.nc)
	if _, err := br.Peek(1); err != nil {
		return 0, fmt.Errorf("read response: %w", noEOF(err)) // EOF: closed without a byte
	}
	return mono(), nil
}

// redial closes a failed connection and dials a fresh one in its place
// (the same pool slot, the same recorded connection).
func (c *client) redial(old *conn) (*conn, error) {
	old.close()
	cn, err := c.pooled.dl.dial(old.key)
	if err != nil && old.key == "" {
		c.pooled.release()
	}
	return cn, err
}

// canceled turns the I/O error of a run cancelled mid-request (the run
// breaks connections with a past deadline) into a cancellation.
func (c *client) canceled(err error) error {
	if cerr := c.ctx.Err(); cerr != nil && isTimeout(err) && !errors.Is(err, cerr) {
		return cerr // the I/O error's "timeout" text would misclassify the row
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// fail records a request that got no (complete) response.
func (c *client) fail(res *formats.Result, at, schedMono int64, err error) {
	res.Error = errorText(c.canceled(err))
	now := mono()
	res.E2ENs = now - at
	res.E2ESchedNs = now - schedMono
}

// maxEventBytes bounds one SSE event's data; longer events are truncated by
// the scanner, never held whole.
const maxEventBytes = 4 << 20

// readStream reads an SSE body with sse, the scanner and token
// classification the recorder uses, so recorded and replayed timings mean
// the same: TTFT/TTST/ITL from token-bearing events (SPEC §6), output tokens
// from usage when present, else the token events. E2E ends at the last token
// event, or at the last byte when there was none. *bp is the read buffer,
// replaced by a larger one while reads fill it.
func readStream(body io.Reader, bp *[]byte, send int64, res *formats.Result) (end, n int64, err error) {
	sc := sse.NewScanner(sse.Options{MaxEvent: maxEventBytes})
	var tl sse.Timeline
	emit := func(ev *sse.Event) { tl.Observe(ev) }
	for {
		buf := *bp
		k, rerr := body.Read(buf)
		now := time.Now()
		if k > 0 {
			n += int64(k)
			sc.Feed(buf[:k], now, emit)
		}
		if k == len(buf) && len(buf) < maxStreamRead { // a fast stream: read more at a time
			*bp = make([]byte, 2*len(buf))
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
	if tl.HasUsage {
		res.CachedTokens = tl.Usage.CachedColumn()
	}
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
// maxUsageBody are parsed for their usage (output and cached tokens).
func readBody(body io.Reader, isJSON bool, res *formats.Result) (end, n int64, err error) {
	if isJSON {
		var buf bytes.Buffer
		n, err = io.Copy(&buf, io.LimitReader(body, maxUsageBody))
		if err == nil && n == maxUsageBody {
			var m int64
			m, err = io.Copy(io.Discard, body)
			n += m
		} else if err == nil {
			if u, ok := sse.ResponseUsage(buf.Bytes()); ok {
				res.OutputTokens = int32(min(u.CompletionTokens, math.MaxInt32))
				res.CachedTokens = u.CachedColumn()
			}
		}
		return mono(), n, err
	}
	n, err = io.Copy(io.Discard, body)
	return mono(), n, err
}

// errorText turns a request error into a short, stable text for the error
// column: the class first ("timeout", "refused", …), then the detail.
func errorText(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled: " + err.Error()
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timeout: " + err.Error()
	case errors.Is(err, errHead):
		return "protocol: " + err.Error()
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused: " + err.Error()
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF):
		return "reset: " + err.Error()
	}
	return err.Error()
}
