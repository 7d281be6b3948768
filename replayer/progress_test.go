package replayer

import (
	"sync"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
)

// blockingSink holds every Write until released, keeping the rows in order.
type blockingSink struct {
	release chan struct{}
	mu      sync.Mutex
	seqs    []int64
}

func (s *blockingSink) Write(r *formats.Result) error {
	<-s.release
	s.mu.Lock()
	s.seqs = append(s.seqs, r.Seq)
	s.mu.Unlock()
	return nil
}

// TestCollectorNeverBlocksSenders: while the sink is stuck, senders still
// hand over their rows at once (a sender blocked on the collector is a
// goroutine and its stack kept per request), and once the sink moves every
// row reaches it, in the order handed over, before close returns.
func TestCollectorNeverBlocksSenders(t *testing.T) {
	sink := &blockingSink{release: make(chan struct{})}
	c := newCollector(sink, analysis.Options{}, nil, false, false, func() {})
	c.start()
	const n = 20000 // more than any channel buffer the collector had
	handed := make(chan struct{})
	frame := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	go func() {
		for i := range n {
			c.add(&formats.Result{Seq: int64(i), Frame: frame, Status: 200, E2ENs: 1e6})
		}
		close(handed)
	}()
	select {
	case <-handed:
	case <-time.After(10 * time.Second):
		t.Fatal("senders blocked on a collector whose sink is stuck")
	}
	close(sink.release)
	sum, err := c.close()
	if err != nil {
		t.Fatal(err)
	}
	if sum.Requests != n {
		t.Errorf("summary counts %d requests, want %d", sum.Requests, n)
	}
	if len(sink.seqs) != n {
		t.Fatalf("sink got %d rows, want %d", len(sink.seqs), n)
	}
	for i, s := range sink.seqs {
		if s != int64(i) {
			t.Fatalf("row %d is seq %d: out of order", i, s)
		}
	}
}
