package recorder

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
)

// Sink stores exchanges; *formats.Writer[formats.Exchange] is one. Write is
// called from a single goroutine.
type Sink interface {
	Write(x *formats.Exchange) error
	Close() error
}

// Redactor redacts an exchange in place before it is written;
// *redact.Redactor is one. It must fail closed, reporting in x.RedactErr.
type Redactor interface {
	RedactExchange(x *formats.Exchange)
}

// Filter selects the exchanges to record. Empty lists match everything.
type Filter struct {
	// Paths are path prefixes ("/v1/chat/") or, when they contain glob
	// characters, path.Match patterns ("/v1/*/completions"): the --path
	// rule of analysis.MatchPath, the same in replay, stats and report.
	Paths   []string
	Methods []string // methods, case-insensitive
	Hosts   []string // hosts, case-insensitive, with or without the port
}

// Match reports whether an exchange with this method, host and path passes.
func (f *Filter) Match(method, host, p string) bool {
	if len(f.Methods) > 0 && !containsFold(f.Methods, method) {
		return false
	}
	if len(f.Hosts) > 0 {
		bare := host
		if i := strings.LastIndexByte(host, ':'); i > 0 && !strings.HasSuffix(host, "]") {
			bare = host[:i]
		}
		if !containsFold(f.Hosts, host) && !containsFold(f.Hosts, bare) {
			return false
		}
	}
	return len(f.Paths) == 0 || analysis.MatchPath(f.Paths, p)
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// PipelineOptions configure a Pipeline. The zero value works.
type PipelineOptions struct {
	Queue      int   // exchanges waiting at most (default 1024)
	QueueBytes int64 // body bytes waiting at most (default 16 MiB); bounds memory
	Workers    int   // goroutines enriching and redacting (default 1); one goroutine writes
	// Sample is the fraction of sessions recorded, in (0, 1); 0 or ≥ 1
	// records everything. The decision is a hash of the sample key, so a
	// session is recorded entirely or not at all.
	Sample  float64
	Filter  Filter
	Metrics *Metrics // default NewMetrics(nil)
	// Warn receives sink errors, at most one a second (default: dropped;
	// they are always counted).
	Warn func(error)
}

// Pipeline carries exchanges from the capture sources to the Sink: a
// bounded queue, workers that Enrich and redact, and one writer. It is
// fail-open: Submit never blocks, and an exchange that cannot be queued or
// written is dropped and counted by reason.
type Pipeline struct {
	sink    Sink
	red     Redactor
	opts    PipelineOptions
	m       *Metrics
	sampleT uint64 // hash threshold for sampling; MaxUint64 keeps all

	mu      sync.RWMutex // guards closed, closing, adding to later and sending on queue
	closed  bool
	closing bool           // Close has begun: SubmitLater refuses
	later   sync.WaitGroup // SubmitLater goroutines not yet submitted
	queue   chan item
	// stop is closed by Close before it takes mu, so a SubmitWait blocked
	// on a full queue (holding mu's read lock) gives up instead of holding
	// Close past its ctx.
	stop     chan struct{}
	stopOnce sync.Once

	queued   atomic.Int64 // exchanges in queue
	qbytes   atomic.Int64 // body bytes queued or being written
	lastWarn atomic.Int64 // unix ns of the last Warn call
	written  chan item
	cpu      chan struct{} // a token per stage that may run at once; see NewPipeline
	done     chan struct{} // closed when the writer has closed the sink
	closeErr error         // the sink's Close error, valid after done
}

// NewPipeline starts a pipeline writing to sink. red may be nil to record
// raw (unredacted) exchanges. Close it to flush and close the sink.
func NewPipeline(sink Sink, red Redactor, opts PipelineOptions) *Pipeline {
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	if opts.QueueBytes <= 0 {
		opts.QueueBytes = 16 << 20
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	p := &Pipeline{
		sink: sink, red: red, opts: opts, m: opts.Metrics,
		sampleT: math.MaxUint64,
		queue:   make(chan item, opts.Queue),
		written: make(chan item, opts.Workers*4),
		// Recording work (redaction, Parquet encoding, a row group's
		// compression) runs while requests are being forwarded in the same
		// process. A goroutine keeps its P until it blocks or the runtime
		// preempts it after 10 ms, so if the workers and the writer held
		// every P at once, a forwarded request whose bytes had arrived would
		// wait that long for one. They therefore share GOMAXPROCS-1 tokens
		// (at least one): one P is always left for forwarding. Measured on
		// 2 cores (bench/proxy -phases compare), this took 0.1 ms (JSON) and
		// 0.16 ms (SSE) off the added p50; an extra runtime.Gosched after
		// each exchange gained nothing. Fail-open covers the cost: a queue
		// that then fills drops exchanges (counted), never requests.
		cpu:  make(chan struct{}, max(1, runtime.GOMAXPROCS(0)-1)),
		done: make(chan struct{}),
		stop: make(chan struct{}),
	}
	if opts.Sample > 0 && opts.Sample < 1 {
		p.sampleT = uint64(opts.Sample * math.MaxUint64)
	}
	var wg sync.WaitGroup
	for range opts.Workers {
		wg.Go(p.work)
	}
	go func() { wg.Wait(); close(p.written) }()
	go p.write()
	return p
}

// Metrics returns the pipeline's metrics.
func (p *Pipeline) Metrics() *Metrics { return p.m }

// Want reports whether an exchange should be recorded at all: it passes the
// filter and its sample key (the session, else the connection) is sampled.
// Sources call it when the request line is known, before capturing bodies;
// a false answer is counted as skipped.
func (p *Pipeline) Want(method, host, path, sampleKey string) bool {
	if !p.opts.Filter.Match(method, host, path) {
		p.m.Skipped.WithLabelValues(SkipFiltered).Inc()
		return false
	}
	if p.sampleT != math.MaxUint64 {
		h := fnv.New64a()
		h.Write([]byte(sampleKey))
		if mix64(h.Sum64()) > p.sampleT {
			p.m.Skipped.WithLabelValues(SkipSampled).Inc()
			return false
		}
	}
	return true
}

// mix64 is the splitmix64 finaliser: FNV's high bits are poorly spread for
// short, similar keys ("session-1", "session-2").
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Submit queues x for recording without blocking. It reports false when x
// was dropped (queue full, byte bound reached, pipeline closed); the drop
// is counted. The pipeline owns x afterwards.
func (p *Pipeline) Submit(x *formats.Exchange) bool {
	size := int64(len(x.ReqBody) + len(x.RespBody))
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.m.Dropped.WithLabelValues(DropClosed).Inc()
		return false
	}
	if p.qbytes.Add(size) > p.opts.QueueBytes && size > 0 {
		p.qbytes.Add(-size)
		p.m.Dropped.WithLabelValues(DropQueueBytes).Inc()
		return false
	}
	select {
	case p.queue <- item{x, size}:
		p.m.QueueDepth.Set(float64(p.queued.Add(1)))
		return true
	default:
		p.qbytes.Add(-size)
		p.m.Dropped.WithLabelValues(DropQueueFull).Inc()
		return false
	}
}

// SubmitWait queues x for recording, waiting for room instead of dropping:
// for offline imports (pcap files, access logs), which must not lose rows
// to a full queue and have no client to keep waiting. It returns
// ErrPipelineClosed after Close, or ctx's error when ctx ends first. The
// pipeline owns x afterwards.
// SubmitLater runs build on a goroutine of its own and submits what it
// returns (nil: nothing), as Submit does. The proxy hands an exchange over
// this way as its handler returns: a chunked response (an event stream)
// ends only when the server writes its last chunk after the handler, and
// assembling the exchange and waking a recording worker would otherwise
// come first. Close waits for these goroutines before it closes the queue.
func (p *Pipeline) SubmitLater(build func() *formats.Exchange) {
	p.mu.RLock()
	if p.closing {
		p.mu.RUnlock()
		p.m.Dropped.WithLabelValues(DropClosed).Inc()
		return
	}
	p.later.Add(1)
	p.mu.RUnlock()
	go func() {
		defer p.later.Done()
		if x := build(); x != nil {
			p.Submit(x)
		}
	}()
}

func (p *Pipeline) SubmitWait(ctx context.Context, x *formats.Exchange) error {
	size := int64(len(x.ReqBody) + len(x.RespBody))
	// Wait for the byte bound without holding the lock, so Close is never
	// held up; an exchange larger than the bound goes in alone.
	for p.qbytes.Load()+size > p.opts.QueueBytes && p.queued.Load() > 0 {
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
	select {
	case p.queue <- item{x, size}:
		p.m.QueueDepth.Set(float64(p.queued.Add(1)))
		return nil
	case <-ctx.Done():
		p.qbytes.Add(-size)
		return ctx.Err()
	case <-p.stop:
		p.qbytes.Add(-size)
		return ErrPipelineClosed
	}
}

// ErrPipelineClosed is returned by SubmitWait after Close.
var ErrPipelineClosed = errors.New("recording pipeline closed")

// work enriches and redacts queued exchanges.
func (p *Pipeline) work() {
	for it := range p.queue {
		x := it.x
		p.m.QueueDepth.Set(float64(p.queued.Add(-1)))
		p.cpu <- struct{}{}
		Enrich(x)
		if p.red != nil {
			p.red.RedactExchange(x)
			if x.RedactErr != "" {
				p.m.RedactionErrors.Inc()
			}
		}
		<-p.cpu
		p.written <- it
	}
}

// write hands exchanges to the sink one at a time, then closes it.
func (p *Pipeline) write() {
	defer close(p.done)
	for it := range p.written {
		x := it.x
		p.cpu <- struct{}{}
		start := time.Now()
		err := p.sink.Write(x)
		p.m.WriteSeconds.Observe(time.Since(start).Seconds())
		<-p.cpu
		if err != nil {
			p.m.Dropped.WithLabelValues(DropWrite).Inc()
			p.warn(fmt.Errorf("write exchange %d: %w", x.Seq, err))
		} else {
			p.m.Recorded.Inc()
			p.m.Bytes.Add(float64(len(x.ReqBody) + len(x.RespBody)))
		}
		p.qbytes.Add(-it.size)
	}
	p.closeErr = p.sink.Close()
}

// item is a queued exchange and the bytes Submit charged for it (redaction
// may change the bodies' size later).
type item struct {
	x    *formats.Exchange
	size int64
}

func (p *Pipeline) warn(err error) {
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
func (p *Pipeline) Close(ctx context.Context) error {
	p.stopOnce.Do(func() { close(p.stop) })
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	later := make(chan struct{})
	go func() { p.later.Wait(); close(later) }()
	select {
	case <-later:
	case <-ctx.Done(): // what they submit from now on is dropped, counted
	}
	p.mu.Lock()
	if !p.closed {
		p.closed = true
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
