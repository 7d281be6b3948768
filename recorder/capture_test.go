package recorder

import (
	"bytes"
	"net/http"
	"testing"
	"time"
)

// TestCaptureGrowth: a body of unknown length (an event stream, a chunked
// answer) starts with no buffer and grows by doubling from growStart, so it
// never holds much more than twice its bytes, and never more than the cap;
// a Content-Length still sizes the buffer exactly.
func TestCaptureGrowth(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	event := []byte("data: {\"choices\":[{\"delta\":{\"content\":\"token \"}}]}\n\n")
	for _, tt := range []struct {
		name    string
		header  http.Header
		maxBody int64
		events  int
		wantCap func(n int) (lo, hi int) // bounds of the final capacity for n bytes kept
	}{
		{"event stream, one event", http.Header{"Content-Type": {"text/event-stream"}}, 0, 1,
			func(int) (int, int) { return growStart, growStart }},
		{"event stream, typical", http.Header{"Content-Type": {"text/event-stream"}}, 0, 40,
			func(n int) (int, int) { return n, 2 * n }},
		{"event stream, long", http.Header{"Content-Type": {"text/event-stream"}}, 0, 2000,
			func(n int) (int, int) { return n, 2 * n }},
		{"event stream past the cap", http.Header{"Content-Type": {"text/event-stream"}}, 3000, 2000,
			func(int) (int, int) { return 3000, 3000 }},
		{"chunked JSON", http.Header{"Content-Type": {"application/json"}}, 0, 100,
			func(n int) (int, int) { return n, 2 * n }},
		{"content length", http.Header{"Content-Type": {"application/json"}, "Content-Length": {"2700"}}, 0, 50,
			func(int) (int, int) { return 2700, 2700 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAssembler(Config{MaxBody: tt.maxBody})
			r := a.Begin(t0, ConnInfo{})
			r.SetRequest(Request{Method: "POST", Header: http.Header{}})
			r.SetResponse(t0, 200, tt.header)
			if _, known := tt.header["Content-Length"]; !known && cap(r.x.RespBody) != 0 {
				t.Fatalf("a body of unknown length was presized to %d", cap(r.x.RespBody))
			}
			var want []byte
			for i := range tt.events {
				r.ResponseBody(t0.Add(time.Duration(i)*time.Millisecond), event)
				want = append(want, event...)
			}
			limit := tt.maxBody
			if limit == 0 {
				limit = DefaultMaxBody
			}
			if int64(len(want)) > limit {
				want = want[:limit]
			}
			got, c := r.x.RespBody, cap(r.x.RespBody)
			if !bytes.Equal(got, want) {
				t.Fatalf("kept %d bytes, want %d (or different bytes)", len(got), len(want))
			}
			if lo, hi := tt.wantCap(len(got)); c < lo || c > hi {
				t.Fatalf("capacity %d for %d bytes, want %d..%d", c, len(got), lo, hi)
			}
			x := r.Finish(t0.Add(time.Second), true)
			if x.RespBodyBytes != int64(tt.events*len(event)) {
				t.Fatalf("body bytes %d, want %d", x.RespBodyBytes, tt.events*len(event))
			}
		})
	}
}

// TestCaptureStartsAtLastStreamSize: a body of unknown length starts with
// room for about as much as the previous one kept, so a stream like the
// one before fills one buffer instead of a doubling series; a long stream
// lends the next at most maxGrowFrom, and a truncated one lends nothing.
func TestCaptureStartsAtLastStreamSize(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	event := []byte("data: {\"choices\":[{\"delta\":{\"content\":\"token \"}}]}\n\n")
	stream := func(a *Assembler, events int) (firstCap, finalCap int) {
		r := a.Begin(t0, ConnInfo{})
		r.SetRequest(Request{Method: "POST", Header: http.Header{}})
		r.SetResponse(t0, 200, http.Header{"Content-Type": {"text/event-stream"}})
		for i := range events {
			r.ResponseBody(t0, event)
			if i == 0 {
				firstCap = cap(r.x.RespBody)
			}
		}
		finalCap = cap(r.x.RespBody)
		r.Finish(t0.Add(time.Second), true)
		return firstCap, finalCap
	}
	a := NewAssembler(Config{})
	if first, _ := stream(a, 80); first != growStart {
		t.Fatalf("first stream started at %d, want %d", first, growStart)
	}
	n := 80 * len(event)
	if first, final := stream(a, 80); first < n || first > n+n/8 || final != first {
		t.Fatalf("a stream like the previous one started at %d and ended at %d for %d bytes, want one buffer of %d..%d", first, final, n, n, n+n/8)
	}
	stream(a, 4000) // 208 KB
	if first, _ := stream(a, 1); first != maxGrowFrom {
		t.Fatalf("after a long stream the next started at %d, want the bound %d", first, maxGrowFrom)
	}
	capped := NewAssembler(Config{MaxBody: 3000})
	stream(capped, 200) // cut at the cap: says nothing about the next
	if first, _ := stream(capped, 1); first != growStart {
		t.Fatalf("after a truncated stream the next started at %d, want %d", first, growStart)
	}
}
