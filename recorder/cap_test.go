package recorder

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// keepSink keeps what it is given.
type keepSink struct{ xs []*formats.Exchange }

func (s *keepSink) Write(x *formats.Exchange) error { s.xs = append(s.xs, x); return nil }
func (s *keepSink) Close(context.Context) error     { return nil }

// growRedactor stands in for redaction that lengthens a body (a cut
// compressed body decompressed and compressed again whole).
type growRedactor struct{}

func (growRedactor) RedactExchange(x *formats.Exchange) {
	x.ReqBody = bytes.Repeat(x.ReqBody, 3)
	x.RespBody = bytes.Repeat(x.RespBody, 3)
}

// The body cap (--max-body) holds for what is stored, after redaction.
func TestMaxBodyHoldsAfterRedaction(t *testing.T) {
	sink := &keepSink{}
	r := New(sink, growRedactor{}, Options{Config: Config{MaxBody: 100}, Wait: true})
	r.Record(&formats.Exchange{Method: "POST", Path: "/v1/chat/completions",
		ReqBody: make([]byte, 80), ReqBodyBytes: 80, RespBody: make([]byte, 90), RespBodyBytes: 90})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(sink.xs) != 1 {
		t.Fatalf("%d exchanges written", len(sink.xs))
	}
	x := sink.xs[0]
	if len(x.ReqBody) != 100 || !x.ReqBodyTrunc || len(x.RespBody) != 100 || x.RespBodyBytes <= 100 {
		t.Errorf("stored req %d B (truncated %v), resp %d B of %d: want both cut at 100 and marked", len(x.ReqBody), x.ReqBodyTrunc, len(x.RespBody), x.RespBodyBytes)
	}
}
