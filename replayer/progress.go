package replayer

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
)

// collector owns everything downstream of the senders, on one goroutine:
// writing rows to the sink (a row leaves memory once the sink has it) and
// the run's analyzer, whose per-frame summaries are the progress lines and
// step summaries. What it keeps per frame in flight is three counters, so
// its memory does not grow with the run.
//
// Its mailbox never blocks a sender: a sender hands its row over and is
// free for the next request, so a collector that falls behind (a CPU-bound
// client: one goroutine among a thousand senders) holds rows waiting, a
// few hundred bytes each, not senders blocked with their stacks while new
// ones are started for the requests still due (a 1M replay kept 8,000
// senders blocked on a full channel). The collector takes what is waiting
// in one batch.
type collector struct {
	mu     sync.Mutex // guards queue and closed
	queue  []cmsg     // messages in the order senders produced them
	closed bool
	wake   chan struct{} // capacity 1: something was queued
	done   chan struct{}
	sink   Sink
	aopts  analysis.Options
	out    io.Writer  // nil = no progress
	outMu  sync.Mutex // guards writes to out (collector and dispatcher both print)
	tty    bool
	step   bool                          // frames are summarised by takeFrame, not when complete
	live   func() (sent, inflight int64) // read by the live line; set before the first send
	abort  func()                        // stops the run when the sink fails

	sent atomic.Int64 // requests dispatched, for the live line

	// Owned by the collector goroutine.
	all    *analysis.Analyzer
	frames map[int64]*frameState
	newest int64
	err    error
	sum    *analysis.Summary
}

// frameState tracks a frame whose results are still coming in.
type frameState struct {
	expected int64 // requests sent in the frame, known once closed
	got      int64
	closed   bool
}

// cmsg is one message to the collector, in the order senders produced them.
type cmsg struct {
	res      *formats.Result
	frameEnd time.Time // the dispatcher left this frame after sent requests
	sent     int64
	take     chan *analysis.Frame // reply with the frame's summary and forget it
	frame    time.Time
}

func newCollector(sink Sink, aopts analysis.Options, out io.Writer, tty, step bool, abort func()) *collector {
	c := &collector{
		wake: make(chan struct{}, 1), done: make(chan struct{}), sink: sink, aopts: aopts,
		out: out, tty: tty && out != nil, step: step, abort: abort,
		all: analysis.New(aopts), frames: map[int64]*frameState{},
	}
	return c
}

// start runs the collector; set live first.
func (c *collector) start() { go c.loop() }

func (c *collector) sentCount() int64 { return c.sent.Load() }

// post queues m for the collector without waiting.
func (c *collector) post(m cmsg) {
	c.mu.Lock()
	c.queue = append(c.queue, m)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

func (c *collector) add(r *formats.Result) { c.post(cmsg{res: r}) }

func (c *collector) endFrame(f time.Time, sent int64) { c.post(cmsg{frameEnd: f, sent: sent}) }

// takeFrame returns the summary of frame f once every result sent before
// the call has been collected, and stops tracking f.
func (c *collector) takeFrame(f time.Time) *analysis.Frame {
	reply := make(chan *analysis.Frame, 1)
	c.post(cmsg{take: reply, frame: f})
	return <-reply
}

// close collects what is left and returns the run's summary and the first
// sink error.
func (c *collector) close() (*analysis.Summary, error) {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	<-c.done
	return c.sum, c.err
}

// maxSpareBatch bounds the capacity of the batch buffer kept for reuse.
const maxSpareBatch = 8192

// take swaps the waiting messages for spare (emptied, for the senders to
// fill next) and reports whether the collector was closed.
func (c *collector) take(spare []cmsg) (batch []cmsg, closed bool) {
	if cap(spare) > maxSpareBatch {
		spare = nil // a backlog's buffer: let it go
	}
	clear(spare)
	c.mu.Lock()
	batch, c.queue = c.queue, spare[:0]
	closed = c.closed
	c.mu.Unlock()
	return batch, closed
}

func (c *collector) printf(format string, args ...any) {
	if c.out != nil {
		c.outMu.Lock()
		defer c.outMu.Unlock()
		if c.tty {
			io.WriteString(c.out, "\r\033[K")
		}
		fmt.Fprintf(c.out, format, args...)
	}
}

func (c *collector) loop() {
	defer close(c.done)
	var tick <-chan time.Time
	if c.tty {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		tick = t.C
	}
	var batch []cmsg
	for {
		select {
		case <-c.wake:
			var closed bool
			batch, closed = c.take(batch)
			for i := range batch {
				c.handle(batch[i])
			}
			if closed {
				c.finish()
				return
			}
		case <-tick:
			c.liveLine()
		}
	}
}

func (c *collector) state(f int64) *frameState {
	st := c.frames[f]
	if st == nil {
		st = &frameState{}
		c.frames[f] = st
		c.newest = max(c.newest, f)
	}
	return st
}

func (c *collector) handle(m cmsg) {
	switch {
	case m.res != nil:
		if c.err == nil {
			if err := c.sink.Write(m.res); err != nil {
				c.err = err
				c.abort()
			}
		}
		c.all.AddResult(m.res)
		st := c.state(m.res.Frame.UnixNano())
		st.got++
		c.maybeDone(m.res.Frame.UnixNano(), st)
	case m.take != nil:
		delete(c.frames, m.frame.UnixNano())
		m.take <- c.frameOf(m.frame)
	default:
		st := c.state(m.frameEnd.UnixNano())
		st.expected += m.sent
		st.closed = true
		c.maybeDone(m.frameEnd.UnixNano(), st)
	}
}

// frameOf summarises a frame so far (an empty frame when nothing came back).
func (c *collector) frameOf(start time.Time) *analysis.Frame {
	if f, ok := c.all.Frame(start); ok {
		return &f
	}
	return &analysis.Frame{Start: start}
}

// maybeDone prints a frame's line once all its requests are back.
func (c *collector) maybeDone(f int64, st *frameState) {
	if c.step || !st.closed || st.got < st.expected {
		return
	}
	if c.out != nil {
		c.outMu.Lock()
		if c.tty {
			io.WriteString(c.out, "\r\033[K")
		}
		analysis.WriteFrameLine(c.out, c.frameOf(time.Unix(0, f).UTC()))
		c.outMu.Unlock()
	}
	delete(c.frames, f)
}

// liveLine redraws the line of the newest frame on a terminal.
func (c *collector) liveLine() {
	st := c.frames[c.newest]
	if st == nil || c.live == nil {
		return
	}
	sent, inflight := c.live()
	f := c.frameOf(time.Unix(0, c.newest).UTC())
	c.outMu.Lock()
	defer c.outMu.Unlock()
	fmt.Fprintf(c.out, "\r\033[Krec %s  sent %d  in flight %d  ok %d err %d  e2e p99 %s  lag p99 %s",
		time.Unix(0, c.newest).UTC().Format("15:04:05"), sent, inflight, f.OK, f.Errors,
		analysis.FormatDuration(f.E2E.P99), analysis.FormatDuration(f.Lag.P99))
}

func (c *collector) finish() {
	c.step = false
	for f, st := range c.frames { // frames whose end marker never came (a stopped run)
		if st.got > 0 {
			st.closed, st.expected = true, st.got
			c.maybeDone(f, st)
		}
	}
	c.sum = c.all.Summary()
	if c.tty {
		c.outMu.Lock()
		io.WriteString(c.out, "\r\033[K")
		c.outMu.Unlock()
	}
}

// printStep prints a step-mode frame summary: sent, ok, e2e p50/p95/p99,
// TTFT p99, lag p99 and the shadow's mean batch size.
func (c *collector) printStep(idx int, f *analysis.Frame) {
	if c.out == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "frame %d (recorded %s)  sent %d ok %d err %d", idx, f.Start.UTC().Format("2006-01-02 15:04:05"), f.Requests, f.OK, f.Errors)
	if f.E2E.N > 0 {
		fmt.Fprintf(&b, "  e2e p50 %s p95 %s p99 %s", analysis.FormatDuration(f.E2E.P50), analysis.FormatDuration(f.E2E.P95), analysis.FormatDuration(f.E2E.P99))
	}
	if f.TTFT.N > 0 {
		fmt.Fprintf(&b, "  ttft p99 %s", analysis.FormatDuration(f.TTFT.P99))
	}
	if f.Lag.N > 0 {
		fmt.Fprintf(&b, "  lag p99 %s", analysis.FormatDuration(f.Lag.P99))
	}
	if f.MeanBatchSize > 0 {
		fmt.Fprintf(&b, "  batch %.1f", f.MeanBatchSize)
	}
	b.WriteByte('\n')
	c.printf("%s", b.String())
}
