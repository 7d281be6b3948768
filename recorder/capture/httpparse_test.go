package capture

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// recorder of parser events, as text, for comparing parses.
type eventLog struct {
	b       strings.Builder
	respFor []string // request methods, in order, for response framing
}

func (l *eventLog) msgStart(resp bool, ts time.Time, pos int64) {}

func (l *eventLog) msgHead(resp bool, h *head, ts time.Time) framing {
	if !resp {
		fmt.Fprintf(&l.b, "req %s %s|", h.method, h.target)
		l.respFor = append(l.respFor, h.method)
		switch {
		case h.chunked:
			return frameChunked
		case h.contentLength > 0:
			return frameLength
		}
		return frameNone
	}
	fmt.Fprintf(&l.b, "resp %d|", h.status)
	switch {
	case h.chunked:
		return frameChunked
	case h.contentLength >= 0:
		return frameLength
	}
	return frameEOF
}

func (l *eventLog) msgBody(resp bool, data []byte, lost int64, ts time.Time) {
	if lost > 0 {
		fmt.Fprintf(&l.b, "lost %d|", lost)
		return
	}
	l.b.Write(data)
}

func (l *eventLog) msgEnd(resp bool, ts time.Time, reason string) {
	fmt.Fprintf(&l.b, "|end %q|", reason)
}

const pipelined = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello" +
	"\r\nPUT /b?q=1 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nTrailer: x\r\n\r\n" +
	"GET /c HTTP/1.1\r\nHost: h\r\nX-Folded: a\r\n  b\r\n\r\n"

const wantPipelined = `req POST /a|hello|end ""|req PUT /b?q=1|abc|end ""|req GET /c||end ""|`

// TestParserSplits feeds the same bytes whole, byte by byte and in random
// pieces: the events must not depend on how TCP segmented the stream.
func TestParserSplits(t *testing.T) {
	parse := func(pieces [][]byte) string {
		var l eventLog
		p := newHalfParser(false, &l, 0)
		for _, piece := range pieces {
			p.feed(piece, time.Time{})
		}
		return l.b.String()
	}
	data := []byte(pipelined)
	if got := parse([][]byte{data}); got != wantPipelined {
		t.Fatalf("whole:\n got %s\nwant %s", got, wantPipelined)
	}
	var bytewise [][]byte
	for i := range data {
		bytewise = append(bytewise, data[i:i+1])
	}
	if got := parse(bytewise); got != wantPipelined {
		t.Fatalf("byte by byte:\n got %s\nwant %s", got, wantPipelined)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var pieces [][]byte
		for rest := data; len(rest) > 0; {
			n := 1 + r.IntN(min(len(rest), 40))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		if got := parse(pieces); got != wantPipelined {
			t.Fatalf("random split:\n got %s\nwant %s", got, wantPipelined)
		}
	}
}

func TestParserMalformed(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"bad content-length", "GET / HTTP/1.1\r\nContent-Length: x\r\n\r\nGET /ok HTTP/1.1\r\n\r\n",
			`|end "bad_http"|req GET /ok||end ""|`},
		{"conflicting content-length", "GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
			`|end "bad_http"|`},
		{"bad chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET /ok HTTP/1.1\r\n\r\n",
			`req POST /|` + `|end "bad_http"|req GET /ok||end ""|`},
		{"junk before request", "garbage\r\nmore garbage}GET /x HTTP/1.1\r\n\r\n", `req GET /x||end ""|`},
		{"header without colon", "GET / HTTP/1.1\r\nnocolon\r\n\r\n", `|end "bad_http"|`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var l eventLog
			newHalfParser(false, &l, 0).feed([]byte(tc.in), time.Time{})
			if got := l.b.String(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestParserBounded: a stream that never ends its head or its lines keeps
// at most maxHeader bytes, and a direction that never shows HTTP is given up.
func TestParserBounded(t *testing.T) {
	for _, resp := range []bool{false, true} {
		var l eventLog
		p := newHalfParser(resp, &l, 1024)
		junk := bytes.Repeat([]byte("x"), 4096)
		for range 2 * maxJunk / len(junk) {
			p.feed(junk, time.Time{})
			if len(p.head) > 1024 || cap(p.head) > 8192 {
				t.Fatalf("head holds %d bytes (cap %d)", len(p.head), cap(p.head))
			}
		}
		if p.st != stDead {
			t.Errorf("resp=%v: state %d after %d bytes of junk, want dead", resp, p.st, 2*maxJunk)
		}
		// A real head that is too long is bad_http, not buffered.
		l = eventLog{}
		p = newHalfParser(false, &l, 1024)
		p.feed([]byte("GET / HTTP/1.1\r\n"), time.Time{})
		for range 100 {
			p.feed([]byte("X-Long: "+strings.Repeat("v", 100)+"\r\n"), time.Time{})
		}
		if !strings.Contains(l.b.String(), "bad_http") || len(p.head) > 1024 {
			t.Errorf("long head: events %q, head %d bytes", l.b.String(), len(p.head))
		}
	}
}

func TestParserGaps(t *testing.T) {
	var l eventLog
	p := newHalfParser(true, &l, 0)
	p.feed([]byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"), time.Time{})
	p.gap(4, time.Time{})
	p.feed([]byte("xyz"), time.Time{})
	p.gap(100, time.Time{}) // lost a whole message
	p.feed([]byte("tail of it\r\nHTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"), time.Time{})
	p.feed([]byte("\r\n"), time.Time{})
	p.gap(5, time.Time{}) // lost between messages: a message must have been there
	want := `resp 200|abclost 4|xyz|end "gap"||end "gap"|resp 204||end ""||end "gap"|`
	if got := l.b.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// FuzzHalfParser: arbitrary bytes, split arbitrarily, with gaps, in either
// direction never panic and never buffer more than the limits.
func FuzzHalfParser(f *testing.F) {
	f.Add([]byte(pipelined), uint8(7), false)
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n\r\nrest"), uint8(3), true)
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching\r\n\r\nxx"), uint8(1), true)
	f.Fuzz(func(t *testing.T, data []byte, split uint8, resp bool) {
		var l eventLog
		p := newHalfParser(resp, &l, 512)
		step := int(split%64) + 1
		for i := 0; i < len(data); i += step {
			p.feed(data[i:min(i+step, len(data))], time.Time{})
			if split&0x80 != 0 && i%3 == 0 {
				p.gap(int64(split), time.Time{})
			}
			if len(p.head) > 512 || len(p.line) > maxChunkLine {
				t.Fatalf("buffered %d head bytes, %d line bytes", len(p.head), len(p.line))
			}
		}
		p.eof(split&1 == 0, "closed")
	})
}
