package recorder

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// seqSink keeps the sequence numbers written, in order.
type seqSink struct {
	mu   sync.Mutex // guards seqs
	seqs []int64
}

func (s *seqSink) Write(x *formats.Exchange) error {
	s.mu.Lock()
	s.seqs = append(s.seqs, x.Seq)
	s.mu.Unlock()
	return nil
}
func (s *seqSink) Close(context.Context) error { return nil }

// SubmitBatch admits a batch's exchanges one by one under the same bounds
// as Submit: what fits is queued and written in order, the rest is dropped
// and counted by reason.
func TestSubmitBatchBounds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     PipelineOptions
		body     int
		closed   bool
		queued   int
		reason   string // of the drops
		dropped  int
		writeSeq []int64
	}{
		{name: "fits", opts: PipelineOptions{Queue: 16}, body: 10, queued: 10},
		{name: "queue bound", opts: PipelineOptions{Queue: 4}, body: 10, queued: 4, reason: DropQueueFull, dropped: 6},
		{name: "byte bound", opts: PipelineOptions{Queue: 16, QueueBytes: 100}, body: 40, queued: 2, reason: DropQueueBytes, dropped: 8},
		{name: "closed", opts: PipelineOptions{}, body: 10, closed: true, queued: 0, reason: DropClosed, dropped: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &seqSink{}
			p := newPipeline(sink, nil, tc.opts, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tc.closed {
				if err := p.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			var xs []*formats.Exchange
			for i := range 10 {
				xs = append(xs, &formats.Exchange{Seq: int64(i), ReqBody: make([]byte, tc.body)})
			}
			if got := p.SubmitBatch(xs); got != tc.queued {
				t.Errorf("SubmitBatch queued %d, want %d", got, tc.queued)
			}
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			want := make([]int64, tc.queued)
			for i := range want {
				want[i] = int64(i)
			}
			if !slices.Equal(sink.seqs, want) {
				t.Errorf("wrote %v, want %v", sink.seqs, want)
			}
			if tc.reason != "" {
				if got := counter(p.m.Dropped.WithLabelValues(tc.reason)); got != float64(tc.dropped) {
					t.Errorf("dropped{%s} = %v, want %d", tc.reason, got, tc.dropped)
				}
			}
			if q, b := p.queued.Load(), p.qbytes.Load(); q != 0 || b != 0 {
				t.Errorf("after Close: %d exchanges and %d bytes still charged", q, b)
			}
		})
	}
}
