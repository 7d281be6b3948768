package recorder

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// slowSink takes a while per exchange, so a small queue fills up.
type slowSink struct{ countSink }

func (s *slowSink) Write(x *formats.Exchange) error {
	time.Sleep(200 * time.Microsecond)
	return s.countSink.Write(x)
}

// An import submits far faster than the sink writes: SubmitWait must keep
// every exchange (where Submit would drop), and refuse after Close.
func TestSubmitWaitLosesNothing(t *testing.T) {
	sink := &slowSink{}
	p := NewPipeline(sink, markRedactor{}, PipelineOptions{Queue: 4, QueueBytes: 64})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 300
	for i := range n {
		x := &formats.Exchange{Seq: int64(i), Method: "POST", Path: "/v1/chat/completions", ReqBody: make([]byte, 40)}
		if err := p.SubmitWait(ctx, x); err != nil {
			t.Fatalf("SubmitWait %d: %v", i, err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if sink.n != n {
		t.Fatalf("sink got %d exchanges, want %d", sink.n, n)
	}
	if err := p.SubmitWait(ctx, &formats.Exchange{}); !errors.Is(err, ErrPipelineClosed) {
		t.Fatalf("SubmitWait after Close = %v, want ErrPipelineClosed", err)
	}
}
