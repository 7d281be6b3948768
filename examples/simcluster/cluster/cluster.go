// Package cluster simulates a GPU LLM inference server — vLLM serving a
// 7–8B model on one A100-class GPU — well enough to show and test reel
// without a GPU. It speaks the OpenAI API (chat and completions, streaming
// SSE and JSON, /v1/models, Prometheus /metrics under vLLM's names) and
// behaves like continuous batching: one step loop schedules decodes,
// chunked prefills and admissions under a token budget and a KV-cache
// capacity, and each step takes time that grows with the tokens in it.
//
// A Cluster is an http.Handler plus a step loop:
//
//	c, err := cluster.New(cluster.Options{TimeScale: 10})
//	go c.Run(ctx)
//	http.Serve(ln, c)
//
// or, in one call, Start(ctx, "127.0.0.1:0", opts). Simulate runs the same
// scheduler in simulated time without HTTP.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ErrStopped is the error of requests cut off because the step loop ended.
var ErrStopped = errors.New("simulated server stopped")

// request is an HTTP request's side of a sequence. The step loop writes the
// fields above each atomic before storing it; the handler reads them after
// loading it.
type request struct {
	s       seq
	arrival time.Time
	notify  chan struct{} // capacity 1: "something changed", never blocks the loop

	canceled  atomic.Bool  // set by the handler when the client went away
	admitted  atomic.Bool  // batchAtAdmit and queueDepth in s are final
	generated atomic.Int64 // output tokens available to send
	done      atomic.Bool  // finish, cached and err are final

	// Written by the step loop only.
	finish    string
	cached    int
	err       error
	lastToken time.Time
}

func (r *request) signal() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// Cluster is one simulated inference server. Serve it with ServeHTTP (it
// is an http.Handler) while Run drives its step loop.
type Cluster struct {
	o       Options
	reg     *prometheus.Registry
	m       *metrics
	mux     *http.ServeMux
	created int64

	submit   chan *request
	cancels  atomic.Int64 // cancelled requests the loop has not removed yet
	waiting  atomic.Int64 // waiting-queue length after the last step (for 503s)
	running  atomic.Int64
	kvUsage  atomic.Uint64 // float64 bits
	steps    atomic.Int64
	started  atomic.Bool   // Run was called
	stopped  chan struct{} // closed when Run returns
	stopOnce sync.Once
	nextID   atomic.Uint64

	// seen holds the engine totals already added to the counters; the
	// step loop alone uses it.
	seen struct{ preemptions, cacheQueries, cacheHits int64 }
}

// New returns a Cluster with opts (zero fields take their defaults). It
// registers its metrics in its own registry.
func New(opts Options) (*Cluster, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Cluster{
		o:       o,
		reg:     prometheus.NewRegistry(),
		created: time.Now().Unix(),
		submit:  make(chan *request, 1024),
		stopped: make(chan struct{}),
	}
	c.m = newMetrics(c.reg, o.Model)
	c.mux = http.NewServeMux()
	c.mux.HandleFunc("POST /v1/chat/completions", c.handleChat)
	c.mux.HandleFunc("POST /v1/completions", c.handleCompletion)
	c.mux.HandleFunc("POST /v1/responses", c.handleResponses)
	c.mux.HandleFunc("POST /v1/messages", c.handleMessages)
	c.mux.HandleFunc("POST /v1/embeddings", c.handleEmbeddings)
	c.mux.HandleFunc("GET /v1/models", c.handleModels)
	c.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {})
	c.mux.Handle("GET /metrics", promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{}))
	c.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return c, nil
}

// Options returns the options in effect, defaults filled.
func (c *Cluster) Options() Options { return c.o }

// Registry returns the registry behind /metrics.
func (c *Cluster) Registry() *prometheus.Registry { return c.reg }

// ServeHTTP serves the OpenAI API, /metrics and /health.
func (c *Cluster) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

// Stats is a snapshot of the engine, as of its last step.
type Stats struct {
	Running, Waiting int
	KVUsage          float64 // 0..1
	Steps            int64
}

// Stats returns the state after the last step.
func (c *Cluster) Stats() Stats {
	return Stats{
		Running: int(c.running.Load()), Waiting: int(c.waiting.Load()),
		KVUsage: math.Float64frombits(c.kvUsage.Load()), Steps: c.steps.Load(),
	}
}

// Run drives the step loop until ctx is done, then fails every request
// still in the engine with ErrStopped and returns nil. A Cluster runs once.
func (c *Cluster) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("simcluster: Run called twice")
	}
	e := newEngine(&c.o)
	defer c.stop(e)

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	scale := c.o.TimeScale
	due := time.Now()
	for {
		if e.idle() {
			select {
			case r := <-c.submit:
				c.accept(e, r)
			case <-ctx.Done():
				return nil
			}
			due = time.Now()
		}
		c.drain(e)
		if n := c.cancels.Load(); n > 0 {
			e.remove(func(s *seq) bool { return s.req.canceled.Load() })
			c.cancels.Add(-n)
		}
		d, ok := e.schedule()
		now := time.Now()
		for _, s := range e.admitted {
			r := s.req
			c.m.queue.Observe(now.Sub(r.arrival).Seconds())
			c.m.promptLen.Observe(float64(s.prompt))
			c.m.promptTokens.Add(float64(s.prompt))
			r.admitted.Store(true)
			r.signal()
		}
		if !ok {
			// Nothing fits (cancellations left the queue blocked on KV that
			// frees only when running sequences finish): wait a base step.
			d = c.o.StepBase
		}
		due = due.Add(time.Duration(float64(d) / scale))
		if lag := now.Sub(due); lag > c.o.MaxLag {
			due = now.Add(-c.o.MaxLag)
		}
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return nil
			}
		}
		if ok {
			e.apply()
		}
		c.publish(e, time.Now())
	}
}

// accept hands a new request to the engine.
func (c *Cluster) accept(e *engine, r *request) { e.enqueue(&r.s) }

// drain accepts every request submitted since the last step.
func (c *Cluster) drain(e *engine) {
	for {
		select {
		case r := <-c.submit:
			c.accept(e, r)
		default:
			return
		}
	}
}

// publish hands the step's tokens to their handlers and updates metrics.
// Metrics are updated before any handler is woken, so a client that has
// its last token also finds it counted in /metrics.
func (c *Cluster) publish(e *engine, now time.Time) {
	c.m.genTokens.Add(float64(len(e.emitted)))
	c.m.stepTokens.Observe(float64(e.lastStepPrefill + len(e.emitted)))
	c.m.steps.Inc()
	c.m.preemptions.Add(float64(e.preemptions - c.seen.preemptions))
	c.m.cacheQueries.Add(float64(e.cacheQueries - c.seen.cacheQueries))
	c.m.cacheHits.Add(float64(e.cacheHits - c.seen.cacheHits))
	c.seen.preemptions, c.seen.cacheQueries, c.seen.cacheHits = e.preemptions, e.cacheQueries, e.cacheHits
	c.m.running.Set(float64(len(e.running)))
	c.m.waiting.Set(float64(e.numWaiting()))
	c.m.waitingLong.Set(float64(len(e.waitingLong)))
	c.m.kvUsage.Set(e.kvUsage())
	c.running.Store(int64(len(e.running)))
	c.waiting.Store(int64(e.numWaiting()))
	c.kvUsage.Store(math.Float64bits(e.kvUsage()))
	c.steps.Store(e.steps)
	for _, s := range e.finished {
		c.m.e2e.Observe(now.Sub(s.req.arrival).Seconds())
		c.m.success.WithLabelValues(s.finish).Inc()
	}
	for _, s := range e.emitted {
		r := s.req
		if s.generated == 1 {
			c.m.ttft.Observe(now.Sub(r.arrival).Seconds())
		} else {
			c.m.itl.Observe(now.Sub(r.lastToken).Seconds())
		}
		r.lastToken = now
		r.generated.Store(int64(s.generated))
		if s.generated < s.outLen {
			r.signal()
		}
	}
	for _, s := range e.finished {
		r := s.req
		r.finish, r.cached = s.finish, s.cached
		r.done.Store(true)
		r.signal()
	}
}

// stop fails everything left in the engine and in the submit queue.
// Handlers that submit after the final drain see stopped closed and the
// request not done, and fail it themselves.
func (c *Cluster) stop(e *engine) {
	c.drain(e)
	e.remove(func(s *seq) bool {
		s.req.err = ErrStopped
		s.req.done.Store(true)
		s.req.signal()
		return true
	})
	c.stopOnce.Do(func() { close(c.stopped) })
}

// Server is a Cluster listening on a TCP address.
type Server struct {
	Cluster *Cluster
	// URL is the base URL, e.g. "http://127.0.0.1:41234".
	URL    string
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
}

// Start listens on addr (default "127.0.0.1:0"; loopback unless you say
// otherwise), serves a new Cluster and runs its step loop until ctx is done
// or Close is called.
func Start(ctx context.Context, addr string, opts Options) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	c, err := New(opts)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Server{Cluster: c, URL: "http://" + ln.Addr().String(), cancel: cancel, done: make(chan struct{})}
	hs := &http.Server{Handler: c, ReadHeaderTimeout: 10 * time.Second}
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		c.Run(ctx)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	go func() {
		defer close(s.done)
		select {
		case <-ctx.Done():
		case err := <-serveErr:
			if !errors.Is(err, http.ErrServerClosed) {
				s.err = fmt.Errorf("serve: %w", err)
			}
			cancel()
		}
		<-loopDone // in-flight handlers now see ErrStopped and finish
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		if err := hs.Shutdown(sctx); err != nil {
			hs.Close()
		}
	}()
	return s, nil
}

// Close stops the server and waits for it to finish, or returns ctx's
// error when ctx ends first (the server then stops in the background).
func (s *Server) Close(ctx context.Context) error {
	s.cancel()
	select {
	case <-s.done:
		return s.err
	case <-ctx.Done():
		return fmt.Errorf("close simcluster: %w", ctx.Err())
	}
}

// Wait blocks until the server stops (its ctx ended or Close was called).
func (s *Server) Wait() error {
	<-s.done
	return s.err
}
