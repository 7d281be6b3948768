package recorder

import (
	"context"
	"errors"
	"sync/atomic"
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
	p := newPipeline(sink, markRedactor{}, PipelineOptions{Queue: 4, QueueBytes: 64}, nil)
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

// stuckSink blocks every Write until release is closed, like a hung disk.
type stuckSink struct{ release chan struct{} }

func (s *stuckSink) Write(*formats.Exchange) error { <-s.release; return nil }
func (s *stuckSink) Close(context.Context) error   { return nil }

// With the sink stuck and the queue full, a SubmitWait waiting for room
// must not hold Close past its ctx: Close returns the ctx error and the
// waiting SubmitWait gets ErrPipelineClosed.
func TestCloseNotHeldBySubmitWait(t *testing.T) {
	sink := &stuckSink{release: make(chan struct{})}
	defer close(sink.release)
	// No gathering: the worker must hold one item, not wait on the queue for more.
	p := newPipeline(sink, nil, PipelineOptions{Queue: 1, Workers: 1, Gather: -1}, nil)
	// Fill everything between Submit and the sink: the writer's Write, the
	// written buffer, the worker and the queue. Give the goroutines time to
	// take items (bounded: on a loaded machine some Submits may just drop).
	for i := 0; i < 200 && p.queued.Load() == 0; i++ {
		p.Submit(&formats.Exchange{Seq: int64(i)})
		time.Sleep(time.Millisecond)
	}
	if p.queued.Load() == 0 {
		t.Fatal("queue never filled")
	}
	waitErr := make(chan error, 1)
	go func() { waitErr <- p.SubmitWait(context.Background(), &formats.Exchange{Seq: -1}) }()
	time.Sleep(20 * time.Millisecond) // let SubmitWait block on the full queue

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- p.Close(ctx) }()
	select {
	case err := <-closed:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want the ctx deadline (sink is stuck)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close blocked past its ctx by a waiting SubmitWait")
	}
	select {
	case err := <-waitErr:
		if !errors.Is(err, ErrPipelineClosed) {
			t.Fatalf("SubmitWait = %v, want ErrPipelineClosed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SubmitWait still blocked after Close")
	}
}

// The proxy hands exchanges over with SubmitLater as its handler returns;
// a shutdown right after must still record them: Close waits for the
// builds in flight, and refuses (counting a drop) only builds handed over
// after it began.
func TestSubmitLaterBeforeCloseIsKept(t *testing.T) {
	sink := &countSink{}
	p := newPipeline(sink, markRedactor{}, PipelineOptions{}, nil)
	release := make(chan struct{})
	const n = 50
	for i := range n {
		p.SubmitLater(0, func() *formats.Exchange {
			<-release // still building when Close begins
			return &formats.Exchange{Seq: int64(i), Method: "GET", Path: "/"}
		})
	}
	p.SubmitLater(0, func() *formats.Exchange { return nil }) // nothing to record
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- p.Close(ctx) }()
	time.Sleep(20 * time.Millisecond) // let Close begin and wait
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if sink.n != n {
		t.Fatalf("sink got %d exchanges, want %d", sink.n, n)
	}
	built := false
	p.SubmitLater(0, func() *formats.Exchange { built = true; return &formats.Exchange{} })
	if built {
		t.Fatal("SubmitLater after Close ran its build")
	}
	if got := counter(p.m.Dropped.WithLabelValues(DropClosed)); got != 1 {
		t.Fatalf("dropped{closed} = %v after one SubmitLater past Close, want 1", got)
	}
}

// gateSink counts the exchanges written, each Write waiting for release.
type gateSink struct {
	release chan struct{}
	n       atomic.Int64
}

func (s *gateSink) Write(*formats.Exchange) error { <-s.release; s.n.Add(1); return nil }
func (s *gateSink) Close(context.Context) error   { return nil }

// A SubmitLater build runs on a worker later, so the bytes it will hold
// are charged against QueueBytes when it is handed over: one that would
// pass the bound is dropped (counted) without running, and a build that
// makes nothing gives its charge back.
func TestSubmitLaterByteBound(t *testing.T) {
	sink := &gateSink{release: make(chan struct{})}
	p := newPipeline(sink, nil, PipelineOptions{QueueBytes: 100, Workers: 1, Gather: -1}, nil)
	body := func(n int) func() *formats.Exchange {
		return func() *formats.Exchange {
			return &formats.Exchange{Method: "POST", Path: "/", ReqBody: make([]byte, n)}
		}
	}
	if !p.SubmitLater(60, body(60)) { // built, then held by the stuck sink
		t.Fatal("first exchange dropped")
	}
	ran := false
	if p.SubmitLater(60, func() *formats.Exchange { ran = true; return nil }) {
		t.Fatal("exchange past the byte bound queued")
	}
	if got := counter(p.m.Dropped.WithLabelValues(DropQueueBytes)); got != 1 || ran {
		t.Fatalf("dropped{queue_bytes} = %v, build ran %v; want 1, false", got, ran)
	}
	// The sink, not the build, is released next: the writer holds the
	// pipeline's one CPU token (two cores) while the sink waits, so a
	// build queued behind it could not run until then.
	close(sink.release)
	waitCharged := func(want int64, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for p.qbytes.Load() != want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := p.qbytes.Load(); got != want {
			t.Fatalf("bytes charged %s: %d, want %d", what, got, want)
		}
	}
	waitCharged(0, "once the held exchange was written")
	built := make(chan struct{})
	if !p.SubmitLater(30, func() *formats.Exchange { close(built); return nil }) {
		t.Fatal("exchange within the byte bound dropped")
	}
	select {
	case <-built:
	case <-time.After(10 * time.Second):
		t.Fatal("a queued build did not run within 10s")
	}
	waitCharged(0, "after a build made nothing")
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := sink.n.Load(); got != 1 {
		t.Fatalf("sink got %d exchanges, want 1", got)
	}
}
