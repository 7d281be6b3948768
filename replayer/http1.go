package replayer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// This file owns the replayer's HTTP/1.1 response parsing: the status line,
// headers, interim responses and body framing (Content-Length, chunked with
// trailers, close-delimited). It reads from the connection's bufio.Reader on
// the sender's goroutine and keeps nothing beyond what one request needs.

// Limits on what a response may send before its body; a larger or garbled
// head is an error row, never unbounded memory.
const (
	maxHeadBytes   = 256 << 10 // status line + headers (+ trailers) of one response
	maxHeadLine    = 64 << 10  // one status or header line
	maxHeaderLines = 512       // header (or trailer) lines of one response
	maxInterim     = 16        // 1xx responses before the final one
)

// errHead marks a response the parser refuses (garbled, oversized,
// unsupported framing); its rows' errors start with "protocol".
var errHead = errors.New("malformed response")

func headErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errHead, fmt.Sprintf(format, a...))
}

// respHead is what the replayer needs of a response head. Nothing in it
// points into the reader's buffer.
type respHead struct {
	status     int
	contentLen int64 // -1: not given
	chunked    bool
	close      bool   // the connection cannot carry another request
	sse        bool   // Content-Type text/event-stream
	json       bool   // Content-Type mentions json
	batchSize  int32  // X-Batch-Size, -1 when absent or not a number
	queueDepth int32  // X-Queue-Depth, -1 when absent or not a number
	bytes      int64  // head bytes on the wire, interim responses included
	long       []byte // a line longer than the reader's buffer, gathered (kept across responses)
}

// readHead reads the final response head (skipping 1xx interim responses)
// into h. A response that has not sent a byte yet fails with the read error
// itself (io.EOF on a closed idle connection), so the caller can tell "no
// response at all" from a broken one.
func readHead(br *bufio.Reader, h *respHead) error {
	h.bytes = 0
	for range maxInterim + 1 {
		if err := readOneHead(br, h); err != nil {
			return err
		}
		if h.status >= 200 || h.status == 101 {
			if h.status == 101 {
				return headErr("unexpected 101 Switching Protocols")
			}
			return nil
		}
	}
	return headErr("more than %d interim (1xx) responses", maxInterim)
}

// readOneHead reads one status line and its headers.
func readOneHead(br *bufio.Reader, h *respHead) error {
	start := h.bytes
	*h = respHead{contentLen: -1, batchSize: -1, queueDepth: -1, bytes: start, long: h.long}
	line, err := readLine(br, h, start)
	if err != nil {
		return err
	}
	// HTTP/1.x SP 3DIGIT [SP reason]
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || (line[7] != '0' && line[7] != '1') || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return headErr("malformed status line %q", clip(line))
	}
	http10 := line[7] == '0'
	st := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return headErr("malformed status code in %q", clip(line))
		}
		st = st*10 + int(c-'0')
	}
	if st < 100 {
		return headErr("status %d out of range", st)
	}
	h.status = st
	keepAlive := false
	for n := 0; ; n++ {
		line, err := readLine(br, h, start)
		if err != nil {
			return noEOF(err)
		}
		if len(line) == 0 {
			break
		}
		if n >= maxHeaderLines {
			return headErr("more than %d header lines", maxHeaderLines)
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue // obsolete line folding: a continuation of a header we don't read
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(name) == 0 || bytes.ContainsAny(name, " \t") {
			return headErr("malformed header line %q", clip(line))
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 {
				return headErr("bad Content-Length %q", clip(value))
			}
			if h.contentLen >= 0 && h.contentLen != n {
				return headErr("conflicting Content-Length values")
			}
			h.contentLen = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			last := value
			if i := bytes.LastIndexByte(value, ','); i >= 0 {
				last = bytes.TrimSpace(value[i+1:])
			}
			switch {
			case bytes.EqualFold(last, []byte("chunked")):
				h.chunked = true
			case bytes.EqualFold(value, []byte("identity")):
			default:
				return headErr("unsupported Transfer-Encoding %q", clip(value))
			}
		case bytes.EqualFold(name, []byte("Connection")):
			for tok := range bytes.SplitSeq(value, []byte(",")) {
				tok = bytes.TrimSpace(tok)
				if bytes.EqualFold(tok, []byte("close")) {
					h.close = true
				} else if bytes.EqualFold(tok, []byte("keep-alive")) {
					keepAlive = true
				}
			}
		case bytes.EqualFold(name, []byte("Content-Type")):
			h.sse = len(value) >= 17 && bytes.EqualFold(value[:17], []byte("text/event-stream"))
			h.json = containsFold(value, "json")
		case bytes.EqualFold(name, []byte("X-Batch-Size")):
			h.batchSize = atoi32(value)
		case bytes.EqualFold(name, []byte("X-Queue-Depth")):
			h.queueDepth = atoi32(value)
		}
	}
	if http10 && !keepAlive {
		h.close = true
	}
	if h.chunked {
		h.contentLen = -1 // Transfer-Encoding wins (RFC 9112 §6.3)
	}
	return nil
}

// readLine reads one CRLF- (or LF-) terminated line without its terminator,
// counting it against the head limit; the slice is valid until the next read.
// The reader's buffer is small (a few KiB per request in flight): a longer
// line, up to maxHeadLine, is gathered in h.long.
func readLine(br *bufio.Reader, h *respHead, start int64) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		h.long = append(h.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) && len(h.long) <= maxHeadLine {
			line, err = br.ReadSlice('\n')
			h.long = append(h.long, line...)
		}
		line = h.long
		if len(line) > maxHeadLine {
			err = bufio.ErrBufferFull
		}
	}
	h.bytes += int64(len(line))
	if h.bytes-start > maxHeadBytes || errors.Is(err, bufio.ErrBufferFull) {
		return nil, headErr("response head larger than %d bytes or a line longer than %d", maxHeadBytes, maxHeadLine)
	}
	if err != nil {
		if len(line) > 0 && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// noEOF turns an EOF in the middle of a response into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func atoi32(b []byte) int32 {
	n, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil {
		return -1
	}
	return int32(n)
}

// containsFold reports whether b contains the lower-case ASCII word s, in
// any case.
func containsFold(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if bytes.EqualFold(b[i:i+len(s)], []byte(s)) {
			return true
		}
	}
	return false
}

// clip shortens a garbled line for an error message.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// bodyReader reads one response body off the connection's reader, framed by
// its head. It is reused: reset it per response.
type bodyReader struct {
	br      *bufio.Reader
	h       *respHead
	left    int64 // bytes left in the body (Content-Length) or the current chunk
	inChunk bool  // chunked: inside a chunk's data
	done    bool  // the body ended as framed
	clean   bool  // it ended where its framing says: the connection may be reused
	trailer int64 // trailer bytes read
	wire    int64 // body bytes on the wire: data, chunk framing, trailer
}

// reset prepares b for the body of h; noBody is true for HEAD requests and
// statuses without a body (1xx, 204, 304).
func (b *bodyReader) reset(br *bufio.Reader, h *respHead, noBody bool) {
	*b = bodyReader{br: br, h: h, left: h.contentLen}
	if noBody || (!h.chunked && h.contentLen == 0) {
		b.done, b.clean = true, true
	}
}

// Read implements io.Reader, returning io.EOF at the end of the body.
func (b *bodyReader) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	switch {
	case b.h.chunked:
		return b.readChunked(p)
	case b.h.contentLen >= 0:
		n, err := b.readLeft(p)
		if b.left == 0 {
			b.done, b.clean = true, true
			return n, nil
		}
		return n, err
	default: // close-delimited: the body ends when the server closes
		n, err := b.br.Read(p)
		b.wire += int64(n)
		if err == io.EOF {
			b.done = true
		}
		return n, err
	}
}

func (b *bodyReader) readChunked(p []byte) (int, error) {
	for !b.inChunk {
		line, err := b.chunkLine()
		if err != nil {
			return 0, err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // chunk extensions are ignored
		}
		line = bytes.TrimSpace(line)
		size, err := strconv.ParseUint(string(line), 16, 62)
		if err != nil || len(line) == 0 {
			return 0, headErr("malformed chunk size %q", clip(line))
		}
		if size == 0 {
			if err := b.readTrailer(); err != nil {
				return 0, err
			}
			b.done, b.clean = true, true
			return 0, io.EOF
		}
		b.left, b.inChunk = int64(size), true
	}
	n, err := b.readLeft(p)
	if b.left == 0 {
		b.inChunk = false
		line, lerr := b.chunkLine() // the CRLF after the data
		if lerr != nil {
			return n, lerr
		}
		if len(line) != 0 {
			return n, headErr("chunk data longer than its size")
		}
		return n, nil
	}
	return n, err
}

// readLeft reads at most the b.left bytes still due of a sized body or
// chunk; an end of input before them is io.ErrUnexpectedEOF.
func (b *bodyReader) readLeft(p []byte) (int, error) {
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.br.Read(p)
	b.left -= int64(n)
	b.wire += int64(n)
	if err != nil && b.left > 0 {
		return n, noEOF(err)
	}
	return n, nil
}

// chunkLine reads a chunk-size line or the CRLF after a chunk.
func (b *bodyReader) chunkLine() ([]byte, error) {
	line, err := b.br.ReadSlice('\n')
	b.wire += int64(len(line))
	if errors.Is(err, bufio.ErrBufferFull) || len(line) > 4096 {
		return nil, headErr("chunk line too long")
	}
	if err != nil {
		return nil, noEOF(err)
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// readTrailer skips the trailer fields after the last chunk, bounded like a head.
func (b *bodyReader) readTrailer() error {
	partial := false // inside a line longer than the reader's buffer
	for n := 0; ; n++ {
		line, err := b.br.ReadSlice('\n')
		b.trailer += int64(len(line))
		b.wire += int64(len(line))
		if b.trailer > maxHeadBytes || n > maxHeaderLines {
			return headErr("trailer larger than %d bytes or %d lines", maxHeadBytes, maxHeaderLines)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			partial = true // skipped through
			continue
		}
		if err != nil {
			return noEOF(err)
		}
		if !partial && len(bytes.TrimRight(line, "\r\n")) == 0 {
			return nil
		}
		partial = false
	}
}
