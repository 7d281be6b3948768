package replayer

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reelkit/reel/formats"
)

// DefaultSpinWindow is how long before a due time the dispatcher stops
// sleeping and waits precisely. Go's timers wake up to a millisecond late
// (more on a loaded machine), so the last stretch is a yield loop.
const DefaultSpinWindow = 2 * time.Millisecond

// minSpin is the shortest precise wait: below it a timer's wake-up error
// (tens of µs when idle) would show in lag.
const minSpin = 50 * time.Microsecond

// spinFor is the precise-wait window before a due time gap after the
// previous one: at most window and at most three quarters of the gap, so
// that at thousands of requests per second the dispatcher sleeps a little
// between requests instead of spinning away the core its senders need. On
// 2 shared cores (bench/replay, 5k req/s) a window as long as the gap gave
// lag p99 1.8–3.6 ms, half the gap 1.2 ms, three quarters 0.8–1.1 ms; at
// 1k req/s three quarters gave 0.54 ms against 0.70 ms for half.
func spinFor(window time.Duration, gap int64) time.Duration {
	return max(min(window, time.Duration(gap*3/4)), minSpin)
}

// yieldEvery spaces the yields of the precise wait: runtime.Gosched takes
// the scheduler's global lock, and yielding on every loop turn made the
// spinning dispatcher the hottest user of that lock (bench/replay profile).
const yieldEvery = 5 * time.Microsecond

// waitUntil returns at the monotonic time due (ns, see mono): it sleeps until
// spin before it, then spins on the clock, yielding every yieldEvery so the
// senders it just started (and anything else runnable) get the processor.
// The first turn always yields. It never waits for a due time already past.
func waitUntil(ctx context.Context, due int64, spin time.Duration, timer *time.Timer) error {
	var yielded int64
	for {
		now := mono()
		d := time.Duration(due - now)
		if d <= 0 {
			return nil
		}
		if d > spin {
			timer.Reset(d - spin)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			}
			continue
		}
		if yielded == 0 || time.Duration(now-yielded) >= yieldEvery {
			runtime.Gosched()
			yielded = mono()
		}
	}
}

// job is one request on its way out.
type job struct {
	it    item
	p     *prepared
	err   error // the request could not be built: written as an error row, not sent
	sched int64 // due time, mono ns
	off   int64 // due time, ns from the run's start
}

// sender sends jobs open-loop. By default it keeps an elastic pool: a job
// goes to an idle sender goroutine when one is waiting, else to a new one
// that stays for later jobs — so sends never wait for responses, and the
// goroutines' grown stacks are reused instead of grown again per request (a
// goroutine per request collapsed at 20k req/s in bench/replay). With
// workers > 0 the pool is fixed: a busy pool delays the send, which shows
// in lag.
type sender struct {
	ctx      context.Context
	c        *client
	send     func(j *job) // fills and emits the result
	workers  chan *job    // fixed pool, or idle elastic workers waiting
	fixed    bool
	inflight sync.WaitGroup
	sem      chan struct{}         // --max-inflight slots; nil = unbounded
	serial   bool                  // ConnRecorded: one request at a time per recorded connection, in order
	conns    map[string]*connQueue // serial: queues by connection key; dispatcher goroutine only
	held     atomic.Int64          // requests that waited for a slot
	active   atomic.Int64          // requests in flight now
}

func newSender(ctx context.Context, c *client, workers, maxInflight int, serial bool, send func(*job)) *sender {
	s := &sender{ctx: ctx, c: c, send: send, serial: serial, conns: map[string]*connQueue{}}
	if maxInflight > 0 {
		s.sem = make(chan struct{}, maxInflight)
	}
	s.workers = make(chan *job)
	if workers > 0 {
		s.fixed = true
		for range workers {
			go s.work(nil)
		}
	}
	return s
}

// work sends first (if any), then every job it is handed until stop.
func (s *sender) work(first *job) {
	if first != nil {
		s.run(first)
	}
	for j := range s.workers {
		s.run(j)
	}
}

// dispatch hands j to a sender now. Only a full --max-inflight blocks it: the
// request is held back until a slot frees, and the wait shows as lag.
func (s *sender) dispatch(j *job) error {
	if s.sem != nil {
		select {
		case s.sem <- struct{}{}:
		default:
			s.held.Add(1)
			select {
			case s.sem <- struct{}{}:
			case <-s.ctx.Done():
				return s.ctx.Err()
			}
		}
	}
	s.inflight.Add(1)
	s.active.Add(1)
	if s.serial {
		if key := connKey(j.it.x); key != "" {
			s.enqueue(key, j)
			return nil
		}
	}
	if s.fixed {
		s.workers <- j
		return nil
	}
	select {
	case s.workers <- j: // an idle worker takes it
	default:
		go s.work(j) // none idle: one more worker, kept for later jobs
	}
	return nil
}

func (s *sender) run(j *job) {
	s.send(j)
	s.active.Add(-1)
	if s.sem != nil {
		<-s.sem
	}
	s.inflight.Done()
}

// connQueue serialises one recorded connection: like the production
// client on a keep-alive connection, a request goes out only after the
// previous response, and in recorded order. Waiting shows in lag.
type connQueue struct {
	mu      sync.Mutex // guards q and running
	q       []*job
	running bool
}

// enqueue appends j to its connection's queue, starting the queue's
// goroutine when idle; it never blocks the dispatcher.
func (s *sender) enqueue(key string, j *job) {
	cq := s.conns[key]
	if cq == nil {
		if len(s.conns) >= maxConnQueues {
			s.sweep()
		}
		cq = &connQueue{}
		s.conns[key] = cq
	}
	cq.mu.Lock()
	cq.q = append(cq.q, j)
	start := !cq.running
	cq.running = true
	cq.mu.Unlock()
	if start {
		go s.drain(cq)
	}
}

// maxConnQueues bounds the idle connection queues kept between sweeps.
const maxConnQueues = 1 << 16

// sweep forgets idle connection queues, so memory follows the connections
// in flight, not the recording's size.
func (s *sender) sweep() {
	for k, cq := range s.conns {
		cq.mu.Lock()
		idle := !cq.running
		cq.mu.Unlock()
		if idle {
			delete(s.conns, k)
		}
	}
}

func (s *sender) drain(cq *connQueue) {
	for {
		cq.mu.Lock()
		if len(cq.q) == 0 {
			cq.running = false
			cq.q = nil
			cq.mu.Unlock()
			return
		}
		j := cq.q[0]
		cq.q[0] = nil
		cq.q = cq.q[1:]
		cq.mu.Unlock()
		s.run(j)
	}
}

// wait blocks until every dispatched request has finished.
func (s *sender) wait() { s.inflight.Wait() }

// stop ends the workers; call after wait.
func (s *sender) stop() { close(s.workers) }

// resultOf starts the result row of a job.
func resultOf(runID string, shard int32, j *job) *formats.Result {
	x := j.it.x
	return &formats.Result{
		RunID:        runID,
		Shard:        shard,
		Recorder:     x.Recorder,
		Seq:          x.Seq,
		OrigTs:       x.Time(),
		Frame:        j.it.frame,
		ScheduledNs:  j.off,
		BatchSize:    -1,
		QueueDepth:   -1,
		Method:       x.Method,
		Path:         x.Path,
		Model:        x.Model,
		PromptTokens: x.PromptTokens,
	}
}
