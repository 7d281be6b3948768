package recorder

import (
	"net/http"
	"testing"
	"time"
)

// A client that hangs up right after "data: [DONE]" lost nothing; one that
// hangs up mid-stream did.
func TestClientAbortAfterDone(t *testing.T) {
	for _, tc := range []struct {
		name         string
		body         string
		wantComplete bool
	}{
		{"after [DONE]", "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n", true},
		{"mid-stream", "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAssembler(Config{Recorder: "r"})
			start := time.Unix(1000, 0)
			rec := a.Begin(start, ConnInfo{ID: 1})
			rec.SetRequest(Request{Method: "POST", Host: "gw", Path: "/v1/chat/completions"})
			h := http.Header{"Content-Type": {"text/event-stream"}}
			rec.SetResponse(start.Add(10*time.Millisecond), 200, h)
			rec.ResponseBody(start.Add(20*time.Millisecond), []byte(tc.body))
			rec.Fail(ErrClientAborted)
			x := rec.Finish(start.Add(30*time.Millisecond), false)
			if x.Complete != tc.wantComplete {
				t.Fatalf("complete = %v, want %v (error %q)", x.Complete, tc.wantComplete, x.Error)
			}
			if tc.wantComplete && x.Error != "" {
				t.Fatalf("error = %q, want none", x.Error)
			}
			if !tc.wantComplete && x.Error != ErrClientAborted.Error() {
				t.Fatalf("error = %q, want %q", x.Error, ErrClientAborted)
			}
		})
	}
}
