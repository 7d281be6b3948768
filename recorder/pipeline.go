package recorder

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reelkit/reel/formats"
)

// PipelineOptions configure a Recorder's pipeline: the bounded queue, the
// workers and where its figures go. The zero value works.
type PipelineOptions struct {
	Queue      int      // exchanges waiting at most (default 1024)
	QueueBytes int64    // body bytes waiting at most (default 16 MiB); bounds memory
	Workers    int      // goroutines enriching and redacting (default 1); one goroutine writes
	Metrics    *Metrics // default NewMetrics(nil)
	// PromptTokens counts the prompt tokens of exchanges the server sent no
	// usage for (EnrichWith). Default ApproxTokens, cheap enough for live
	// traffic; file imports (pcap, access logs) pass a BPE *Tokenizer,
	// which costs 2–10× more per exchange but is exact (docs/performance.md).
	PromptTokens TokenCounter
	// Warn receives sink errors, at most one a second (default: dropped;
	// they are always counted).
	Warn func(error)
	// Gather is how long a worker that woke for fewer than GatherExchanges
	// exchanges waits for more before it starts on them (default
	// DefaultGather; negative: no wait). Handled together, exchanges find
	// the redactor's tables and code and the writer's buffers still in the
	// caches the forwarding in between evicts. It delays an exchange's way
	// to the spool by at most that long (what kill -9 can lose grows by it).
	Gather time.Duration

	// maxBody is the recorder's body cap (Config.MaxBody), held again
	// after redaction; New sets it. 0: no cap.
	maxBody int64
}

// DefaultGather is PipelineOptions.Gather's default: at 500 exchanges a
// second a worker handles about ten at a time; the recording work of a
// streamed exchange in the live sidecar cost about a fifth less than when
// each was handled alone (docs/performance.md, "Proxy sidecar", session 8).
const DefaultGather = 20 * time.Millisecond

// GatherExchanges is how many queued exchanges end a worker's wait for more
// (PipelineOptions.Gather) early.
const GatherExchanges = 64

// pipeline carries exchanges from the capture sources to the Sink: a
// bounded queue, workers that Enrich and redact, and one writer. It is
// fail-open: Submit never blocks, and an exchange that cannot be queued or
// written is dropped and counted by reason.
//
// Exchanges travel as batches: what a source hands over at once
// (SubmitBatch: passive capture's exchanges of one ring block) is one
// channel send to a worker and one to the writer, so each goroutine wakes
// once per batch rather than once per exchange. A parked goroutine's
// wake-up costs the process a futex call and a context switch, more than
// an exchange's parsing on a quiet machine.
type pipeline struct {
	sink          Sink
	red           Redactor
	opts          PipelineOptions
	m             *Metrics
	sessionFields []string // Config.SessionFields

	mu     sync.RWMutex // guards closed and sending on queue
	closed bool
	queue  chan batch
	full   chan struct{} // a signal (buffer 1) that GatherExchanges are queued; see gather
	// stop is closed by Close before it takes mu, so a SubmitWait blocked
	// on a full queue (holding mu's read lock) gives up instead of holding
	// Close past its ctx.
	stop     chan struct{}
	stopOnce sync.Once

	queued   atomic.Int64 // exchanges in queue (its bound is opts.Queue)
	qbytes   atomic.Int64 // body bytes queued or being written
	lastWarn atomic.Int64 // unix ns of the last Warn call
	written  chan batch
	cpu      chan struct{}   // a token per stage that may run at once; see NewPipeline
	done     chan struct{}   // closed when the writer has closed the sink
	closeCtx context.Context // Close's ctx, set before the queue is closed
	closeErr error           // the sink's Close error, valid after done
}

// newPipeline starts a pipeline writing to sink. red may be nil to record
// raw (unredacted) exchanges. Close it to flush and close the sink.
func newPipeline(sink Sink, red Redactor, opts PipelineOptions, sessionFields []string) *pipeline {
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = 16 << 20
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.Gather == 0 {
		opts.Gather = DefaultGather
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.PromptTokens == nil {
		opts.PromptTokens = ApproxTokens
	}
	p := &pipeline{
		sink: sink, red: red, opts: opts, m: opts.Metrics, sessionFields: sessionFields,
		// Every batch holds at least one exchange and queued never passes
		// opts.Queue, so a send on queue never finds it full.
		queue:   make(chan batch, opts.Queue),
		full:    make(chan struct{}, 1),
		written: make(chan batch, opts.Workers*4),
		// Recording work (redaction, Parquet encoding, a row group's
		// compression) runs while requests are being forwarded in the same
		// process. A goroutine keeps its P until it blocks or the runtime
		// preempts it after 10 ms, so if the workers and the writer held
		// every P at once, a forwarded request whose bytes had arrived would
		// wait that long for one. They therefore share GOMAXPROCS-1 tokens
		// (at least one): one P is always left for forwarding
		// (measured: docs/performance.md, "Recording leaves a P for
		// forwarding"). Fail-open covers the cost: a queue that then fills
		// drops exchanges (counted), never requests.
		cpu:  make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1)),
		done: make(chan struct{}),
		stop: make(chan struct{}),
	}
	var wg sync.WaitGroup
	for range opts.Workers {
		wg.Go(p.work)
	}
	go func() { wg.Wait(); close(p.written) }()
	go p.write()
	return p
}

// Submit queues x for recording without blocking. It reports false when x
// was dropped (queue full, byte bound reached, pipeline closed); the drop
// is counted. The pipeline owns x afterwards.
func (p *pipeline) Submit(x *formats.Exchange) bool {
	return p.SubmitBatch([]*formats.Exchange{x}) == 1
}

// SubmitBatch queues xs for recording as one batch, without blocking, and
// reports how many it queued: each exchange is admitted or dropped as
// Submit would (in order, so when the queue fills the tail is dropped),
// each drop counted. The pipeline owns the exchanges afterwards, not xs.
func (p *pipeline) SubmitBatch(xs []*formats.Exchange) int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.m.Dropped.WithLabelValues(DropClosed).Add(float64(len(xs)))
		return 0
	}
	its := make([]item, len(xs))
	for i, x := range xs {
		its[i] = item{x: x, size: int64(len(x.ReqBody) + len(x.RespBody))}
	}
	return p.enqueue(its)
}

// enqueue admits its in order as one batch (each within the queue's bounds,
// the others dropped and counted) and reports how many it queued. The
// caller holds mu's read lock and has checked that the queue is open.
func (p *pipeline) enqueue(its []item) int {
	b := its[:0]
	for _, it := range its {
		if p.qbytes.Add(it.size) > p.opts.QueueBytes && it.size > 0 {
			p.qbytes.Add(-it.size)
			p.m.Dropped.WithLabelValues(DropQueueBytes).Inc()
			continue
		}
		if p.queued.Add(1) > int64(p.opts.Queue) {
			p.queued.Add(-1)
			p.qbytes.Add(-it.size)
			p.m.Dropped.WithLabelValues(DropQueueFull).Inc()
			continue
		}
		b = append(b, it)
	}
	if len(b) == 0 {
		return 0
	}
	p.queue <- b // never blocks: see newPipeline
	q := p.queued.Load()
	if q >= GatherExchanges && q-int64(len(b)) < GatherExchanges {
		p.signalFull()
	}
	p.m.QueueDepth.Set(float64(q))
	return len(b)
}

// SubmitLater queues build, without blocking, for a recording worker to
// run; what it returns (nil: nothing) is recorded as a submitted exchange
// is. size is the body bytes the exchange will hold, charged against
// QueueBytes while it waits. The proxy hands an exchange over this way as
// its handler returns: a chunked response (an event stream) ends only
// when the server writes its last chunk after the handler, so assembling
// the exchange (the SSE scan at Recording.Finish) must not run first. On
// the worker it runs beside the exchange's redaction, and a worker
// gathering exchanges (PipelineOptions.Gather) is not woken for each one,
// where a goroutine per exchange cost a goroutine start and exit and a
// wake-up of the worker each time. It reports false when the exchange
// was dropped (queue full, byte bound, pipeline closed); the drop is
// counted.
func (p *pipeline) SubmitLater(size int64, build func() *formats.Exchange) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.m.Dropped.WithLabelValues(DropClosed).Inc()
		return false
	}
	return p.enqueue([]item{{size: size, build: build}}) == 1
}

// SubmitWait queues x for recording, waiting for room instead of dropping:
// for offline imports (pcap files, access logs), which must not lose rows
// to a full queue and have no client to keep waiting. It returns
// ErrPipelineClosed after Close, or ctx's error when ctx ends first; either
// drop is counted (reason closed). The pipeline owns x afterwards.
func (p *pipeline) SubmitWait(ctx context.Context, x *formats.Exchange) error {
	err := p.submitWait(ctx, x)
	if err != nil {
		p.m.Dropped.WithLabelValues(DropClosed).Inc()
	}
	return err
}

func (p *pipeline) submitWait(ctx context.Context, x *formats.Exchange) error {
	size := int64(len(x.ReqBody) + len(x.RespBody))
	// Wait for room without holding the lock, so Close is never held up;
	// an exchange larger than the byte bound goes in alone.
	for (p.qbytes.Load()+size > p.opts.QueueBytes || p.queued.Load() >= int64(p.opts.Queue)) && p.queued.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.stop:
			return ErrPipelineClosed
		case <-time.After(time.Millisecond):
		}
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrPipelineClosed
	}
	p.qbytes.Add(size)
	// Several SubmitWaits may pass the wait above at once and take queue
	// slots beyond opts.Queue; each batch still has one exchange, so the
	// channel (opts.Queue batches) is what they wait on then.
	p.queued.Add(1)
	select {
	case p.queue <- batch{{x: x, size: size}}:
		q := p.queued.Load()
		if q >= GatherExchanges {
			p.signalFull()
		}
		p.m.QueueDepth.Set(float64(q))
		return nil
	case <-ctx.Done():
		p.queued.Add(-1)
		p.qbytes.Add(-size)
		return ctx.Err()
	case <-p.stop:
		p.queued.Add(-1)
		p.qbytes.Add(-size)
		return ErrPipelineClosed
	}
}

// signalFull ends a worker's gather wait: GatherExchanges are queued.
func (p *pipeline) signalFull() {
	select {
	case p.full <- struct{}{}:
	default: // a signal is already pending
	}
}

// ErrPipelineClosed is returned by a waiting Record (Options.Wait) after
// Close.
var ErrPipelineClosed = errors.New("recording pipeline closed")

// work enriches and redacts queued exchanges, a batch at a time.
func (p *pipeline) work() {
	var wait *time.Timer
	for b := range p.queue {
		if p.opts.Gather > 0 && len(b) < GatherExchanges {
			b, wait = p.gather(b, wait)
		}
		p.m.QueueDepth.Set(float64(p.queued.Add(-int64(len(b)))))
		p.cpu <- struct{}{}
		b = p.build(b)
		for _, it := range b {
			p.prepare(it.x)
		}
		<-p.cpu
		if len(b) > 0 {
			p.written <- b
		}
	}
}

// build runs the builds of b's items handed over by SubmitLater and
// returns b without those that built nothing, each item's size now what
// its exchange holds.
func (p *pipeline) build(b batch) batch {
	kept := b[:0]
	for _, it := range b {
		if it.build != nil {
			x := it.build()
			it.build = nil
			size := int64(0)
			if x != nil {
				size = int64(len(x.ReqBody) + len(x.RespBody))
			}
			p.qbytes.Add(size - it.size) // the charge now is what x holds
			it.x, it.size = x, size
			if x == nil {
				continue
			}
		}
		kept = append(kept, it)
	}
	clear(b[len(kept):]) // drop references to what was not kept
	return kept
}

// gather adds what is queued within opts.Gather of b's arrival to b, up to
// GatherExchanges exchanges. It sleeps through the wait rather than
// receiving each batch as it is queued: a receive would wake the worker
// once per exchange, the cost the wait is there to share. Submitters
// end the wait early when the queue reaches GatherExchanges (p.full), and
// Close ends it (p.stop). wait is the worker's timer (nil at first),
// returned for the next call.
func (p *pipeline) gather(b batch, wait *time.Timer) (batch, *time.Timer) {
	select {
	case <-p.full: // a signal left from before this wait
	default:
	}
	if p.queued.Load() < GatherExchanges {
		if wait == nil {
			wait = time.NewTimer(p.opts.Gather)
		} else {
			wait.Reset(p.opts.Gather)
		}
		select {
		case <-wait.C:
		case <-p.full:
			wait.Stop()
		case <-p.stop:
			wait.Stop()
		}
	}
	for len(b) < GatherExchanges {
		select {
		case more, ok := <-p.queue:
			if !ok {
				return b, wait
			}
			b = append(b, more...)
		default:
			return b, wait
		}
	}
	return b, wait
}

// prepare enriches and redacts x.
func (p *pipeline) prepare(x *formats.Exchange) {
	if x.Session == "" && len(p.sessionFields) > 0 && !x.ReqBodyTrunc {
		x.Session = sessionFromBody(x.ReqBody, p.sessionFields)
	}
	req := parseRequest(x) // once, for enrichment and the turn links
	enrichRequest(x, p.opts.PromptTokens, req)
	if p.red != nil {
		if rr, ok := p.red.(requestRedactor); ok {
			rr.RedactExchangeRequest(x, req)
		} else {
			p.red.RedactExchange(x)
		}
		if x.RedactErr != "" {
			p.m.RedactionErrors.Inc()
		}
		capRedacted(x, p.opts.maxBody)
	}
}

// unsaver is a sink that counts exchanges it accepted and lost later
// (formats.Writer: a disk full until shutdown, a removed spool).
type unsaver interface{ Unsaved() int64 }

// countLost adds the sink's newly lost exchanges to dropped{lost}; lost is
// what was counted so far.
func (p *pipeline) countLost(lost *int64) {
	if u, ok := p.sink.(unsaver); ok {
		if n := u.Unsaved(); n > *lost {
			p.m.Dropped.WithLabelValues(DropLost).Add(float64(n - *lost))
			*lost = n
		}
	}
}

// write hands exchanges to the sink one at a time, a batch per turn, then
// closes it.
func (p *pipeline) write() {
	defer close(p.done)
	var lost int64
	defer p.countLost(&lost)
	for b := range p.written {
		p.cpu <- struct{}{}
		for _, it := range b {
			p.writeOne(it)
			p.countLost(&lost)
		}
		<-p.cpu
	}
	p.closeErr = p.sink.Close(p.closeCtx)
}

func (p *pipeline) writeOne(it item) {
	x := it.x
	start := time.Now()
	err := p.sink.Write(x)
	p.m.WriteSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		p.m.Dropped.WithLabelValues(DropWrite).Inc()
		p.warn(fmt.Errorf("write exchange %d: %w (exchange dropped, traffic unaffected)", x.Seq, err))
	} else {
		p.m.Recorded.Inc()
		p.m.Bytes.Add(float64(len(x.ReqBody) + len(x.RespBody)))
	}
	p.qbytes.Add(-it.size)
}

// capRedacted holds the body cap after redaction: a redacted body can be
// longer than the raw one it came from (a compressed body cut at the cap
// decompresses, and is compressed again, whole; invalid UTF-8 becomes
// U+FFFD), and --max-body promises the bytes stored.
func capRedacted(x *formats.Exchange, limit int64) {
	if limit <= 0 {
		return
	}
	if int64(len(x.ReqBody)) > limit {
		x.ReqBody, x.ReqBodyTrunc = x.ReqBody[:limit], true
	}
	if int64(len(x.RespBody)) > limit {
		x.RespBody = x.RespBody[:limit]
		// exchange/1 marks a cut response by a body shorter than its size.
		x.RespBodyBytes = max(x.RespBodyBytes, limit+1)
	}
}

// item is a queued exchange and the bytes Submit charged for it (redaction
// may change the bodies' size later).
type item struct {
	x    *formats.Exchange
	size int64
	// build makes x on a worker (SubmitLater); nil once x is made.
	build func() *formats.Exchange
}

// batch is what one channel send carries through the pipeline.
type batch []item

func (p *pipeline) warn(err error) {
	if p.opts.Warn == nil {
		return
	}
	now := time.Now().UnixNano()
	last := p.lastWarn.Load()
	if now-last < int64(time.Second) || !p.lastWarn.CompareAndSwap(last, now) {
		return
	}
	p.opts.Warn(err)
}

// Close stops accepting exchanges, writes what is queued and closes the
// sink. If ctx ends first, Close returns its error and leaves the rest to
// the sink's spool; the writer goroutine finishes in the background.
func (p *pipeline) Close(ctx context.Context) error {
	p.stopOnce.Do(func() { close(p.stop) })
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.closeCtx = ctx
		close(p.queue)
	}
	p.mu.Unlock()
	select {
	case <-p.done:
		if p.closeErr != nil {
			return fmt.Errorf("close sink: %w", p.closeErr)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("drain recording queue: %w", ctx.Err())
	}
}
