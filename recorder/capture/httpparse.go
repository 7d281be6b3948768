package capture

import (
	"bytes"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// Parser limits used when Options leaves them zero.
const (
	defaultMaxHeader = 64 << 10 // request/status line plus headers
	maxChunkLine     = 4 << 10  // a chunk-size line with extensions
	maxJunk          = 1 << 20  // bytes without an HTTP start line before a direction is given up
)

// parser states.
type pstate uint8

const (
	stHead      pstate = iota // between messages or inside a start line and headers
	stBody                    // Content-Length body: remain bytes left
	stChunkSize               // reading a chunk-size line into line
	stChunkData               // inside a chunk: remain bytes left
	stChunkCRLF               // the CRLF after a chunk's data
	stTrailer                 // trailer lines after the last chunk
	stBodyEOF                 // response body delimited by the end of the connection
	stDead                    // not HTTP/1.1 any more (upgrade, CONNECT, junk): bytes are ignored
)

// mark records that head's bytes from off on arrived at ts.
type mark struct {
	off int
	ts  time.Time
	pos int64 // stream offset of head[off]
}

const maxMarks = 32

// head is a parsed start line and header block.
type head struct {
	method, target, proto string // requests
	status                int    // responses
	header                http.Header
	contentLength         int64 // -1 when absent
	chunked               bool
}

// framing tells the parser how the body of the message whose head it just
// parsed is delimited.
type framing uint8

const (
	frameNone    framing = iota // no body
	frameLength                 // head.contentLength bytes
	frameChunked                // chunked transfer coding
	frameEOF                    // until the connection ends (responses only)
	frameDead                   // no body, and the connection stops being HTTP/1.1 (101, CONNECT)
)

// halfEvents receives what a halfParser finds. httpConn implements it.
type halfEvents interface {
	// msgStart: the first byte of a message, at offset pos of the stream
	// (gaps included), arrived at ts.
	msgStart(resp bool, ts time.Time, pos int64)
	// msgHead: the head of the current message is complete; the return value
	// says how its body is framed.
	msgHead(resp bool, h *head, ts time.Time) framing
	// msgBody: body bytes (de-chunked) that arrived at ts. data is only
	// valid during the call. lost > 0 reports bytes missing from the capture
	// at this point of the body (data is nil then).
	msgBody(resp bool, data []byte, lost int64, ts time.Time)
	// msgEnd: the current message ended at ts; reason is "" when it was seen
	// completely.
	msgEnd(resp bool, ts time.Time, reason string)
}

// halfParser parses one direction of an HTTP/1.1 connection incrementally.
// It keeps at most maxHeader bytes of an unfinished head and one chunk-size
// line; body bytes are passed on, never kept.
type halfParser struct {
	resp      bool
	ev        halfEvents
	maxHeader int

	st      pstate
	inMsg   bool   // a message has started and not ended
	head    []byte // start line and headers read so far (bounded by maxHeader)
	lineOK  bool   // the start line in head was validated
	line    []byte // chunk-size or trailer line read so far
	remain  int64  // body or chunk bytes left
	junk    int64  // bytes dropped since the last valid start line
	holed   bool   // bytes of the current message's body were lost
	dropped int    // junk bytes dropped from head during the current feedHead
	pos     int64  // stream offset after the bytes fed so far (gaps included)
	feedEnd int64  // stream offset just after the data being fed
	marks   []mark // arrival time of head bytes from off on (at most maxMarks)
	lastTs  time.Time
}

func newHalfParser(resp bool, ev halfEvents, maxHeader int) *halfParser {
	if maxHeader <= 0 {
		maxHeader = defaultMaxHeader
	}
	return &halfParser{resp: resp, ev: ev, maxHeader: maxHeader}
}

// feed parses data, which arrived at ts. It never retains data.
func (p *halfParser) feed(data []byte, ts time.Time) {
	p.lastTs = ts
	p.feedEnd = p.pos + int64(len(data))
	p.pos = p.feedEnd
	for len(data) > 0 {
		switch p.st {
		case stDead:
			return
		case stHead:
			data = p.feedHead(data, ts)
		case stBody, stChunkData:
			n := int64(len(data))
			if n > p.remain {
				n = p.remain
			}
			p.ev.msgBody(p.resp, data[:n], 0, ts)
			data = data[n:]
			p.remain -= n
			if p.remain == 0 {
				if p.st == stBody {
					p.end(ts, "")
				} else {
					p.st = stChunkCRLF
				}
			}
		case stChunkCRLF:
			// Tolerate a bare "\n"; anything else is a framing error.
			switch data[0] {
			case '\r':
				data = data[1:]
			case '\n':
				data = data[1:]
				p.st = stChunkSize
				p.line = p.line[:0]
			default:
				p.fail(ts)
			}
		case stChunkSize, stTrailer:
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				if len(p.line)+len(data) > maxChunkLine {
					p.fail(ts)
					continue
				}
				p.line = append(p.line, data...)
				return
			}
			if len(p.line)+i > maxChunkLine {
				p.fail(ts)
				continue
			}
			p.line = append(p.line, data[:i]...)
			data = data[i+1:]
			p.endLine(ts)
			p.line = p.line[:0]
		case stBodyEOF:
			p.ev.msgBody(p.resp, data, 0, ts)
			return
		}
	}
}

// posOf returns the stream offset of rest, a suffix of the data being fed.
func (p *halfParser) posOf(rest []byte) int64 { return p.feedEnd - int64(len(rest)) }

// endLine handles a complete chunk-size or trailer line (without its "\n").
func (p *halfParser) endLine(ts time.Time) {
	line := bytes.TrimSuffix(p.line, []byte{'\r'})
	if p.st == stTrailer {
		if len(line) == 0 {
			p.end(ts, "")
		}
		return
	}
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimSpace(line)
	size, err := strconv.ParseInt(string(line), 16, 64)
	if err != nil || size < 0 || len(line) == 0 || len(line) > 15 {
		p.fail(ts)
		return
	}
	if size == 0 {
		p.st = stTrailer
		return
	}
	p.remain = size
	p.st = stChunkData
}

// feedHead consumes bytes of a start line and headers and returns the rest.
func (p *halfParser) feedHead(data []byte, ts time.Time) []byte {
	if !p.inMsg {
		// Blank lines between messages are allowed (RFC 9112 §2.2).
		i := 0
		for i < len(data) && (data[i] == '\r' || data[i] == '\n') {
			i++
		}
		data = data[i:]
		if len(data) == 0 {
			return nil
		}
		p.inMsg = true
		p.lineOK = false
		p.head = p.head[:0]
		p.marks = p.marks[:0]
		p.ev.msgStart(p.resp, ts, p.posOf(data))
	}
	if n := len(p.marks); !p.lineOK && n < maxMarks && (n == 0 || !p.marks[n-1].ts.Equal(ts)) {
		p.marks = append(p.marks, mark{len(p.head), ts, p.posOf(data)})
	}
	room := p.maxHeader - len(p.head)
	take := data
	if len(take) > room {
		take = take[:room]
	}
	from := len(p.head) - 3
	p.head = append(p.head, take...)
	if !p.lineOK {
		p.dropped = 0
		if !p.checkStartLine() {
			// Junk was dropped from head; what is left of it was kept.
			return data[len(take):]
		}
		if p.dropped > 0 && len(p.marks) > 0 {
			// The start line followed junk: restart the message's clock
			// at the arrival of its first byte.
			p.ev.msgStart(p.resp, p.marks[0].ts, p.marks[0].pos)
		}
		from = 0
	}
	if from < 0 {
		from = 0
	}
	end := headEnd(p.head, from)
	if end < 0 {
		if len(p.head) >= p.maxHeader {
			p.fail(ts)
		}
		return data[len(take):]
	}
	// The bytes of head after its end all came from take: give them back.
	rest := data[len(take)-(len(p.head)-end):]
	h, ok := parseHead(p.head[:end], p.resp)
	if !ok {
		p.fail(ts)
		return rest
	}
	p.junk = 0
	switch p.ev.msgHead(p.resp, h, ts) {
	case frameNone:
		p.end(ts, "")
	case frameLength:
		if h.contentLength == 0 {
			p.end(ts, "")
		} else {
			p.st, p.remain = stBody, h.contentLength
		}
	case frameChunked:
		p.st = stChunkSize
		p.line = p.line[:0]
	case frameEOF:
		p.st = stBodyEOF
	case frameDead:
		p.end(ts, "")
		p.st = stDead
	}
	return rest
}

// checkStartLine validates the first line in head once it is complete. On
// junk (the capture began mid-message, or after a gap) it drops lines until
// one looks like a start line, and reports whether head now begins with a
// valid start line.
func (p *halfParser) checkStartLine() bool {
	// Find where a start line begins, then drop what precedes it in one
	// copy: dropping line by line would be quadratic in the head size.
	off := 0
	for {
		i := bytes.IndexByte(p.head[off:], '\n')
		if i < 0 {
			if off == 0 && len(p.head) >= p.maxHeader {
				off = len(p.head)
			}
			p.dropJunk(off, false)
			return false
		}
		line := p.head[off : off+i]
		if validStartLine(line, p.resp) {
			p.dropJunk(off, true)
			p.lineOK = true
			return true
		}
		if w := startWithin(line, p.resp); w > 0 {
			// A body without a final newline runs into the next start line.
			off += w
			continue
		}
		off += i + 1
	}
}

// dropJunk discards n bytes from the front of head. found says a start line
// follows them. When head is left without one, the "message" it held was
// never one: the parser waits for the next start line.
func (p *halfParser) dropJunk(n int, found bool) {
	if n == 0 {
		return
	}
	p.junk += int64(n)
	p.dropped += n
	p.head = append(p.head[:0], p.head[n:]...)
	keep := p.marks[:0]
	for i, m := range p.marks {
		m.off -= n
		if m.off > 0 || i == len(p.marks)-1 || p.marks[i+1].off-n > 0 {
			if m.off < 0 {
				m.pos -= int64(m.off)
				m.off = 0
			}
			keep = append(keep, m)
		}
	}
	p.marks = keep
	if found {
		return
	}
	if p.junk > maxJunk {
		p.st = stDead
		p.inMsg = false
		p.ev.msgEnd(p.resp, p.lastTs, reasonNotHTTP)
		return
	}
	if len(bytes.TrimLeft(p.head, "\r\n")) == 0 {
		p.head = p.head[:0]
		p.inMsg = false
		p.ev.msgEnd(p.resp, p.lastTs, reasonJunk)
	}
}

// gap reports n bytes lost from the capture before the next data. A gap
// inside a body of known length only punches a hole in it; anywhere else the
// current message (or the one that must have been there) ends incomplete and
// the parser looks for the next start line.
func (p *halfParser) gap(n int64, ts time.Time) {
	switch p.st {
	case stDead:
		p.pos += n
		return
	case stBody, stChunkData:
		if n < p.remain {
			p.ev.msgBody(p.resp, nil, n, ts)
			p.remain -= n
			p.holed = true
			p.pos += n
			return
		}
		if n == p.remain && p.st == stBody {
			p.ev.msgBody(p.resp, nil, n, ts)
			p.pos += n
			p.end(ts, reasonGap)
			return
		}
	case stBodyEOF:
		p.ev.msgBody(p.resp, nil, n, ts)
		p.holed = true
		p.pos += n
		return
	}
	if !p.inMsg {
		// Whole bytes of a message we never saw the start of.
		p.inMsg = true
		p.ev.msgStart(p.resp, ts, p.pos)
	}
	p.pos += n
	p.end(ts, reasonGap)
}

// eof ends the direction: clean is true on FIN, false when the connection
// was reset, timed out or the capture ended.
func (p *halfParser) eof(clean bool, reason string) {
	if p.st == stBodyEOF && clean {
		p.end(p.lastTs, "")
	} else if p.inMsg {
		p.end(p.lastTs, reason)
	}
	p.st = stDead
}

// fail ends the current message as malformed and resynchronises.
func (p *halfParser) fail(ts time.Time) {
	p.end(ts, reasonBadHTTP)
}

func (p *halfParser) end(ts time.Time, reason string) {
	wasIn := p.inMsg
	if p.holed && reason == "" {
		reason = reasonGap
	}
	p.holed = false
	p.inMsg = false
	p.head = p.head[:0]
	p.line = p.line[:0]
	p.remain = 0
	if p.st != stDead {
		p.st = stHead
	}
	if wasIn {
		p.ev.msgEnd(p.resp, ts, reason)
	}
}

// headEnd returns the index just after the blank line ending a header block
// in b, searching from from, or -1.
func headEnd(b []byte, from int) int {
	for {
		i := bytes.IndexByte(b[from:], '\n')
		if i < 0 {
			return -1
		}
		i += from
		switch {
		case i+1 < len(b) && b[i+1] == '\n':
			return i + 2
		case i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n':
			return i + 3
		}
		from = i + 1
	}
}

// validStartLine reports whether line (without "\n") is a request line
// (METHOD SP target SP HTTP/1.x) or a status line (HTTP/1.x SP 3DIGIT).
func validStartLine(line []byte, resp bool) bool {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if resp {
		return len(line) >= 12 && bytes.HasPrefix(line, []byte("HTTP/1.")) && line[8] == ' ' &&
			isDigit(line[9]) && isDigit(line[10]) && isDigit(line[11]) && (len(line) == 12 || line[12] == ' ')
	}
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 || sp > 32 {
		return false
	}
	for _, c := range line[:sp] {
		if !(c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	rest := line[sp+1:]
	sp2 := bytes.LastIndexByte(rest, ' ')
	if sp2 <= 0 {
		return false
	}
	proto := rest[sp2+1:]
	return len(proto) == 8 && bytes.HasPrefix(proto, []byte("HTTP/1.")) && isDigit(proto[7])
}

// methods are the request methods startWithin recognises at the end of a
// run of capital letters.
var methods = []string{"OPTIONS", "CONNECT", "DELETE", "PATCH", "TRACE", "POST", "HEAD", "GET", "PUT"}

// startWithin finds a start line that begins inside line (after junk such
// as the tail of a body) and returns its offset, or 0.
func startWithin(line []byte, resp bool) int {
	if resp {
		if i := bytes.Index(line, []byte("HTTP/1.")); i > 0 && validStartLine(line[i:], true) {
			return i
		}
		return 0
	}
	t := bytes.TrimSuffix(line, []byte{'\r'})
	sp2 := bytes.LastIndexByte(t, ' ')
	if sp2 <= 0 {
		return 0
	}
	sp1 := bytes.LastIndexByte(t[:sp2], ' ')
	if sp1 <= 0 {
		return 0
	}
	start := sp1
	for start > 0 && t[start-1] >= 'A' && t[start-1] <= 'Z' {
		start--
	}
	run := string(t[start:sp1])
	for _, m := range methods {
		if strings.HasSuffix(run, m) {
			start = sp1 - len(m)
			break
		}
	}
	if start == 0 || start == sp1 || !validStartLine(line[start:], false) {
		return 0
	}
	return start
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// parseHead parses a complete head block (ending in a blank line).
func parseHead(b []byte, resp bool) (*head, bool) {
	// One string for the whole head: names and values are substrings of
	// it, and the values share one backing array, so a head costs a few
	// allocations whatever its number of headers.
	text := string(b)
	n := strings.Count(text, "\n")
	h := &head{contentLength: -1, header: make(http.Header, n)}
	vals := make([]string, 0, n)
	first := true
	var lastKey string
	for len(text) > 0 {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			i = len(text)
		}
		line := strings.TrimSuffix(text[:i], "\r")
		if i < len(text) {
			text = text[i+1:]
		} else {
			text = ""
		}
		if first {
			first = false
			if !parseStartLine(h, line, resp) {
				return nil, false
			}
			continue
		}
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			// Obsolete line folding: continue the previous value.
			if lastKey == "" {
				return nil, false
			}
			vs := h.header[lastKey]
			vs[len(vs)-1] += " " + strings.TrimSpace(line)
			continue
		}
		colon := strings.IndexByte(line, ':')
		if colon <= 0 {
			return nil, false
		}
		key := textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(line[:colon]))
		val := strings.TrimSpace(line[colon+1:])
		if vs, dup := h.header[key]; dup {
			h.header[key] = append(vs[:len(vs):len(vs)], val)
		} else {
			vals = append(vals, val)
			h.header[key] = vals[len(vals)-1 : len(vals) : len(vals)]
		}
		lastKey = key
	}
	if te := h.header.Values("Transfer-Encoding"); len(te) > 0 {
		last := te[len(te)-1]
		if i := strings.LastIndexByte(last, ','); i >= 0 {
			last = last[i+1:]
		}
		h.chunked = strings.EqualFold(strings.TrimSpace(last), "chunked")
	}
	if cl := h.header.Values("Content-Length"); len(cl) > 0 && !h.chunked {
		n, err := strconv.ParseInt(strings.TrimSpace(cl[0]), 10, 64)
		if err != nil || n < 0 {
			return nil, false
		}
		for _, v := range cl[1:] {
			if m, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil || m != n {
				return nil, false
			}
		}
		h.contentLength = n
	}
	return h, true
}

func parseStartLine(h *head, line string, resp bool) bool {
	if resp {
		// HTTP/1.1 200 OK
		if len(line) < 12 {
			return false
		}
		h.proto = line[:8]
		code, err := strconv.Atoi(line[9:12])
		if err != nil || code < 100 || code > 999 {
			return false
		}
		h.status = code
		return true
	}
	sp := strings.IndexByte(line, ' ')
	sp2 := strings.LastIndexByte(line, ' ')
	if sp <= 0 || sp2 <= sp {
		return false
	}
	h.method, h.target, h.proto = line[:sp], strings.TrimSpace(line[sp+1:sp2]), line[sp2+1:]
	return h.target != ""
}
