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
