package capture

import (
	"net/http"
	"strings"
	"time"

	"github.com/reelkit/reel/recorder"
)

// Reasons an exchange is recorded with Complete=false. Each is also the
// reason label of the incomplete-exchanges counter, and the exchange's Error
// column reads "incomplete: REASON".
const (
	ReasonGap        = "gap"         // packets were lost (kernel drops, snap length, a segment never seen)
	ReasonClosed     = "closed"      // the connection was closed (FIN) before the message ended
	ReasonReset      = "reset"       // the connection was reset (RST) before the message ended
	ReasonUnfinished = "unfinished"  // the capture ended, or the connection went idle, before the message ended
	ReasonNoResponse = "no_response" // the request was seen but no response before the connection ended
	ReasonNoRequest  = "no_request"  // a response whose request was not captured (capture began mid-connection)
	ReasonBadHTTP    = "bad_http"    // the bytes did not parse as HTTP/1.1
	ReasonTooMany    = "too_many_pipelined"
)

// parser-internal outcomes that never become an exchange.
const (
	reasonBadHTTP = ReasonBadHTTP
	reasonGap     = ReasonGap
	reasonJunk    = "junk"     // bytes before the first start line: not a message
	reasonNotHTTP = "not_http" // a direction gave up after too much junk
)

// IncompleteError is the error recorded for an exchange that was not seen
// completely; Reason is one of the Reason constants.
type IncompleteError struct{ Reason string }

// Error is the exchange's error column: "incomplete: REASON".
func (e *IncompleteError) Error() string { return "incomplete: " + e.Reason }

// pending is one exchange on a connection, from its request's head (or the
// point where one must have been) until its response ends.
type pending struct {
	rec        *recorder.Recording
	method     string
	reqDone    bool
	reqReason  string
	respReason string
	reqLost    int64 // request body bytes missing from the capture
	respLost   int64
	informal   bool // the response being read is a 1xx interim response
	ack        uint32
	ackOK      bool // ack is the client's ACK when it sent the request's first byte
	// early: the response began before its request was delivered (see
	// next); the exchange waits in httpConn.early for the request, or for
	// the gap that lost it. respSeq is the server's sequence number where
	// the response began: a request sent after the client had received
	// exactly that much is the one it answers.
	early     bool
	joined    bool // was early, and its request's head has been parsed since
	respSeq   uint32
	respEnded bool      // the response ended while early; finish when the request is settled
	respEnd   time.Time // when it ended
}

// seqSource maps stream offsets to TCP numbers, so pairing can tell when
// responses were lost (see align).
type seqSource interface {
	// clientAck is the ACK number the client sent with request-stream offset pos.
	clientAck(pos int64) (uint32, bool)
	// serverSeq is the sequence number of response-stream offset pos.
	serverSeq(pos int64) (uint32, bool)
	// requestHeld reports whether the server has acknowledged request
	// bytes not yet delivered to the request parser: they were lost, or
	// reassembly holds them behind a lost segment.
	requestHeld() bool
}

// seqBefore reports a < b in TCP sequence space (modulo 2^32).
func seqBefore(a, b uint32) bool { return int32(a-b) < 0 }

// httpConn pairs the requests and responses of one TCP connection in order
// (keep-alive and pipelining) and feeds them to the recorder's Assembler.
type httpConn struct {
	e      *Engine
	id     int64
	client string
	seq    int32 // next ConnSeq

	req, resp *halfParser

	seqs      seqSource // nil: pair in order only
	reqStart  time.Time // first byte of the request being read
	respStart time.Time // first byte of the response being read
	reqPos    int64     // its stream offset
	respPos   int64
	curReq    *pending   // the request being read, nil between requests
	queue     []*pending // requests waiting for (the end of) their response, oldest first
	curResp   *pending   // the exchange whose response is being read
	early     []*pending // responses that began before their request was delivered, oldest first
}

func newHTTPConn(e *Engine, id int64, client string) *httpConn {
	c := &httpConn{e: e, id: id, client: client}
	c.req = newHalfParser(false, c, e.opts.MaxHeader)
	c.resp = newHalfParser(true, c, e.opts.MaxHeader)
	return c
}

func (c *httpConn) begin(start time.Time) *pending {
	p := &pending{rec: c.e.asm.Begin(start, recorder.ConnInfo{ID: c.id, Seq: c.seq, Client: c.client})}
	c.seq++
	return p
}

func (c *httpConn) msgStart(resp bool, ts time.Time, pos int64) {
	if resp {
		c.respStart, c.respPos = ts, pos
	} else {
		c.reqStart, c.reqPos = ts, pos
	}
}

func (c *httpConn) msgHead(resp bool, h *head, ts time.Time) framing {
	if !resp {
		var p *pending
		var ack uint32
		var ackOK bool
		if c.seqs != nil {
			ack, ackOK = c.seqs.clientAck(c.reqPos)
		}
		if e := c.claimEarly(ack, ackOK, false); e != nil {
			// Its response is being read, or was: join it.
			p = e
			p.joined = true
			p.rec.SetStart(c.reqStart)
		} else {
			p = c.begin(c.reqStart)
			c.push(p)
		}
		p.method = h.method
		p.rec.SetRequest(requestOf(h))
		p.ack, p.ackOK = ack, ackOK
		c.curReq = p
		switch {
		case h.chunked:
			return frameChunked
		case h.contentLength > 0:
			return frameLength
		}
		return frameNone
	}
	if h.status >= 100 && h.status < 200 && h.status != http.StatusSwitchingProtocols {
		// 100 Continue and friends: the final response follows.
		if c.curResp == nil {
			c.curResp = c.next(c.respStart)
		}
		c.curResp.informal = true
		return frameNone
	}
	if c.curResp == nil {
		c.curResp = c.next(c.respStart)
	}
	p := c.curResp
	p.informal = false
	if p.rec != nil {
		p.rec.SetResponse(c.respStart, h.status, h.header)
	}
	switch {
	case h.status == http.StatusSwitchingProtocols,
		p.method == http.MethodConnect && h.status >= 200 && h.status < 300:
		c.stop()
		return frameDead
	case p.method == http.MethodHead, h.status == http.StatusNoContent, h.status == http.StatusNotModified:
		return frameNone
	case h.chunked:
		return frameChunked
	case h.contentLength >= 0:
		return frameLength
	}
	return frameEOF
}

// next returns the oldest request without a response, or a placeholder
// exchange when the response has no request (capture began mid-connection).
func (c *httpConn) next(start time.Time) *pending {
	ok, uncertain := c.align()
	if !ok {
		c.e.stats.orphans.Add(1)
		return &pending{} // parsed for framing, not recorded
	}
	if len(c.queue) > 0 {
		p := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		if uncertain {
			p.respReason = ReasonGap // this response may belong to a request lost next to it
		}
		return p
	}
	p := c.begin(start)
	if c.seqs != nil {
		seq, seqOK := c.seqs.serverSeq(c.respPos)
		if c.seqs.requestHeld() && seqOK {
			// The server answered request bytes the capture has not
			// delivered yet: reassembly holds them behind a lost
			// segment, or they were lost. Its request comes later (or
			// its gap does); pairing it then keeps the exchange one row.
			p.early, p.respSeq = true, seq
			c.early = append(c.early, p)
			return p
		}
	}
	p.reqDone, p.reqReason = true, ReasonNoRequest
	return p
}

// claimEarly returns the early response that answers the request being
// parsed, if any, and takes it off the early list. A request sent when the
// client had received response data up to ack is answered by the response
// that begins there; early responses that began before ack answered
// requests the capture lost, and are settled as such. A request lost in a
// gap (lost) has no ack: it takes the oldest early response. A parsed
// request without a known ack takes none (it is paired in order, as
// without loss).
func (c *httpConn) claimEarly(ack uint32, ackOK, lost bool) *pending {
	for len(c.early) > 0 {
		p := c.early[0]
		switch {
		case lost || (ackOK && p.respSeq == ack):
		case ackOK && seqBefore(p.respSeq, ack):
			c.early[0] = nil
			c.early = c.early[1:]
			p.early = false
			p.reqDone, p.reqReason = true, ReasonGap
			c.settleEarly(p)
			continue
		default:
			return nil // it answers a later request
		}
		c.early[0] = nil
		c.early = c.early[1:]
		p.early = false
		return p
	}
	return nil
}

// settleEarly finishes an exchange that was early once its request is
// known (or known lost) and its response has ended.
func (c *httpConn) settleEarly(p *pending) {
	if p.respEnded && p.reqDone {
		c.finish(p, p.respEnd, "")
	}
}

func (c *httpConn) push(p *pending) {
	if len(c.queue) >= c.e.opts.MaxPipelined {
		q0, q1 := c.queue[0], c.queue[1]
		if !q0.ackOK || !q1.ackOK || q0.ack != q1.ack {
			// Requests sent one after another's response (not pipelined)
			// are waiting behind lost response bytes: give up the oldest;
			// align recognises its response if it turns up.
			c.queue[0] = nil
			c.queue = c.queue[1:]
			c.finish(q0, time.Time{}, ReasonTooMany)
		} else {
			// Pipelined far beyond the responses: give up on this
			// connection rather than hold their bodies or mispair.
			c.stop()
			for _, q := range c.queue {
				c.finish(q, time.Time{}, ReasonTooMany)
			}
			c.queue = c.queue[:0]
			p.reqReason = ReasonTooMany
		}
	}
	c.queue = append(c.queue, p)
}

// align uses TCP numbers to keep requests and responses paired when
// responses were lost (kernel drops, a capture that missed segments). The
// client's ACK when it sent a request says how much response data it had
// received. If a later request in the queue was sent after more response
// data than queue[0], and the response starting now lies at or beyond that
// point, the responses of the requests before it were lost: they are
// recorded incomplete. A response starting before queue[0]'s ACK answers a
// request given up already: align returns ok=false. Pipelined requests
// carry the same ACK and are paired in order. Placeholders for requests
// lost in a gap have no ACK; when one lies between queue[0] and the next
// request with an ACK, the pairing is uncertain and reported so.
func (c *httpConn) align() (ok, uncertain bool) {
	if c.seqs == nil {
		return true, false
	}
	s, known := c.seqs.serverSeq(c.respPos)
	if !known {
		return true, false
	}
	for len(c.queue) > 0 {
		q0 := c.queue[0]
		if q0.ackOK && seqBefore(s, q0.ack) {
			return false, false
		}
		j := 1
		for j < len(c.queue) && !c.queue[j].ackOK {
			j++
		}
		if j == len(c.queue) {
			return true, j > 1
		}
		qj := c.queue[j]
		if seqBefore(s, qj.ack) || (q0.ackOK && !seqBefore(q0.ack, qj.ack)) {
			return true, j > 1
		}
		for _, q := range c.queue[:j] {
			if q == c.curReq {
				c.curReq = nil
			}
			c.finish(q, c.resp.lastTs, ReasonGap)
		}
		clear(c.queue[:j])
		c.queue = c.queue[j:]
	}
	return true, false
}

func (c *httpConn) msgBody(resp bool, data []byte, lost int64, ts time.Time) {
	p := c.curReq
	if resp {
		p = c.curResp
	}
	if p == nil || p.rec == nil {
		return
	}
	switch {
	case lost > 0 && resp:
		p.respLost += lost
	case lost > 0:
		p.reqLost += lost
	case resp:
		p.rec.ResponseBody(ts, data)
	default:
		p.rec.RequestBody(data)
	}
}

func (c *httpConn) msgEnd(resp bool, ts time.Time, reason string) {
	if reason == reasonJunk || reason == reasonNotHTTP {
		if reason == reasonNotHTTP {
			c.e.stats.notHTTP.Add(1)
		}
		return
	}
	if !resp {
		p := c.curReq
		c.curReq = nil
		if p == nil {
			// The request ended before its head was parsed: it was lost
			// (gap) or malformed. If its response came early, that is its
			// exchange; otherwise keep its place in the pairing order.
			if p = c.claimEarly(0, false, true); p == nil {
				p = c.begin(c.reqStart)
				c.push(p)
			}
		}
		p.reqDone = true
		if p.reqReason == "" {
			p.reqReason = reason
		}
		c.settleEarly(p)
		return
	}
	p := c.curResp
	if p != nil && p.informal {
		if reason == "" {
			return // the final response follows on the same exchange
		}
		p.informal = false
	}
	c.curResp = nil
	if p == nil {
		// The response ended before its head was parsed.
		if len(c.queue) == 0 {
			c.e.stats.addIncomplete(reason)
			return
		}
		p = c.next(c.respStart)
	}
	if p.respReason == "" {
		p.respReason = reason
	}
	if p.early || (p.joined && !p.reqDone) {
		// Its request is not settled yet: finish once it is.
		p.respEnded, p.respEnd = true, ts
		return
	}
	c.finish(p, ts, "")
}

// finish ends p at end. The reason recorded for its request or response
// wins over fallback.
func (c *httpConn) finish(p *pending, end time.Time, fallback string) {
	if p.rec == nil {
		return // a response to a request already given up
	}
	reason := p.reqReason
	if reason == "" {
		reason = p.respReason
	}
	if reason == "" {
		reason = fallback
	}
	if reason == "" && !p.reqDone {
		reason = ReasonUnfinished
	}
	if reason != "" {
		p.rec.Fail(&IncompleteError{Reason: reason})
	}
	if end.IsZero() {
		end = c.respStart
	}
	x := p.rec.Finish(end, reason == "")
	if x == nil {
		return
	}
	x.ReqBodyBytes += p.reqLost
	x.RespBodyBytes += p.respLost
	if reason != "" {
		c.e.stats.addIncomplete(reason)
	}
	c.e.emit(x)
}

// stop marks the connection as no longer HTTP/1.1 (upgrade, CONNECT).
func (c *httpConn) stop() {
	c.req.st = stDead
	c.resp.st = stDead
}

// drain ends the connection after both parsers saw their end: an exchange
// whose response was being read, and requests still waiting for one, are
// recorded incomplete.
func (c *httpConn) drain() {
	for _, p := range c.early { // requests never delivered
		p.early = false
		p.reqDone, p.reqReason = true, ReasonNoRequest
		if p.respEnded {
			c.finish(p, p.respEnd, "")
		}
	}
	c.early = nil
	if p := c.curReq; p != nil && p.joined && p.respEnded {
		c.finish(p, p.respEnd, ReasonUnfinished) // joined an early response, its request never ended
	}
	if p := c.curResp; p != nil {
		c.curResp = nil
		c.finish(p, c.resp.lastTs, ReasonUnfinished)
	}
	for _, p := range c.queue {
		reason := p.reqReason
		if reason == "" {
			reason = ReasonNoResponse
		}
		c.finish(p, c.req.lastTs, reason)
	}
	c.queue = nil
	c.curReq = nil
}

// requestOf converts a parsed request head into the Assembler's Request.
func requestOf(h *head) recorder.Request {
	target := h.target
	host := h.header.Get("Host")
	if i := strings.Index(target, "://"); i > 0 && !strings.HasPrefix(target, "/") {
		// absolute-form: scheme://host/path?query
		rest := target[i+3:]
		j := strings.IndexByte(rest, '/')
		if j < 0 {
			j = len(rest)
		}
		if host == "" {
			host = rest[:j]
		}
		target = rest[j:]
		if target == "" {
			target = "/"
		}
	}
	path, query, _ := strings.Cut(target, "?")
	return recorder.Request{Method: h.method, Host: host, Path: path, RawQuery: query, Header: h.header}
}
