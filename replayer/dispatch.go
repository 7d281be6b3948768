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
// sleeping on Go's timer and waits precisely. Go's timers wake up to a
// millisecond late (the runtime's poller sleeps in whole milliseconds, more
// on a loaded machine), so the last stretch is a precise sleep (Linux, see
// sleepPrecise) or a yield loop.
const DefaultSpinWindow = 2 * time.Millisecond

// minSpin is the shortest precise wait: below it a timer's wake-up error
// (tens of µs when idle) would show in lag.
const minSpin = 50 * time.Microsecond

// spinFor is the spinning window (where precise sleeps are unavailable)
// before a due time gap after the previous one: at most window and at most
// three quarters of the gap, so that at thousands of requests per second
// the dispatcher sleeps a little between requests instead of spinning away
// the core its senders need (the fractions measured are in
// docs/performance.md, "Absolute due times, sleep then a precise wait").
func spinFor(window time.Duration, gap int64) time.Duration {
	return max(min(window, time.Duration(gap*3/4)), minSpin)
}

// coarseGap: while requests come closer together than this on average
// (above 10k req/s), they are paced by Go's timer alone, with no precise
// wait: one wake-up sends every request that came due meanwhile, where a
// precise wait per request cost more CPU than the request itself
// (docs/performance.md, "The dispatcher's wait"). Lag then grows to the
// timer's lateness, up to about a millisecond when the process is idle.
const coarseGap = 100 * time.Microsecond

// pace chooses how the dispatcher waits for a request due gap ns after the
// previous one, avgGap the recent mean: the stretch before the due time that
// is waited precisely, and whether by precise sleeps (canSleep) rather than
// spinning.
func pace(window time.Duration, gap, avgGap int64, canSleep bool) (time.Duration, bool) {
	switch {
	case time.Duration(avgGap) < coarseGap:
		return 0, false
	case canSleep:
		return window, true
	}
	return spinFor(window, gap), false
}

// yieldEvery spaces the yields of the precise wait: runtime.Gosched takes
// the scheduler's global lock, and yielding on every loop turn made the
// spinning dispatcher the hottest user of that lock (bench/replay profile).
const yieldEvery = 5 * time.Microsecond

// preciseTail is how long before a due time a precise (nanosleep) wait
// stops sleeping and spins: about the sleep's usual overshoot.
const preciseTail = 20 * time.Microsecond

// waitUntil returns at the monotonic time due (ns, see mono): it sleeps on
// timer until spin before it; then, when precise (see sleepPrecise), it
// sleeps on the thread until preciseTail before it; then it spins on the
// clock, yielding every yieldEvery so the senders it just started (and
// anything else runnable) get the processor. The first turn always yields.
// It never waits for a due time already past.
func waitUntil(ctx context.Context, due int64, spin time.Duration, timer *time.Timer, precise bool) error {
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
		if precise && d > preciseTail && yielded != 0 {
			// The sleeping thread keeps its processor: yielded first, so the
			// sender just handed a request runs now instead of waiting to be
			// stolen by another processor.
			sleepPrecise(d - preciseTail)
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
	eager bool   // the dispatcher may write the request itself (see client.tryWrite)
	fl    flight // what the dispatcher wrote
	it    item
	p     *prepared
	err   error // the request could not be built: written as an error row, not sent
	sched int64 // due time on the recorded schedule, mono ns
	off   int64 // sched, ns from the run's start

	// Session turns (see gate): when the turn is due after its
	// predecessors (due − sched is its session delay), and what it waits
	// for. Guarded by the gate's mutex until released.
	due     int64 // mono ns; sched outside sessions
	delay   int64 // due − sched
	pending int   // predecessors not yet ended on the shadow
	depEnd  int64 // latest end of the ended ones, mono ns
}

// sender sends jobs open-loop through a pool of sender goroutines. A job
// goes to the most recently idle sender (its stack and connection are still
// warm), else to a new sender that stays for later jobs — so a send never
// waits for a response, and grown stacks are reused instead of grown again
// per request (a goroutine per request collapsed at 20k req/s in
// bench/replay). One exception keeps a CPU-bound client from collapsing:
// when the dispatcher itself is late (saturatedLag behind the due time, so
// the processors, not the target, are the bottleneck) a job with no idle
// sender waits in a queue for the next sender to finish instead of starting
// another one: more goroutines and connections would only add work, and
// the dispatcher, one goroutine among them, would fall further behind.
// Likewise, when every connection the pool allows is busy, a new sender
// would only wait inside the pool for one: the job waits in the queue
// instead, as a job rather than a goroutine with its stack, and is sent
// when a connection frees, just as soon (the sender that frees it takes the
// job). So the senders are at most about the pool's size, however far the
// requests waiting for a connection run behind (a CPU-bound client at 10k
// req/s kept 46,000 sender goroutines, 590 MB, in a 1M replay).
// Queued jobs are taken first by every sender that finishes. The queue is
// only for a client whose senders are turning over: when none has finished
// for saturatedLag they are waiting on the target (a stalled shadow), not
// on the processors, and a job queued behind them would wait for the stall
// to end: the closed loop an open-loop replay must never become. Then a
// sender is added after all, and one more for the queue's head at each
// dispatch until the queue is empty. With workers > 0 the pool is fixed: a
// busy pool delays the send, which shows in lag.
type sender struct {
	ctx      context.Context
	c        *client
	send     func(j *job) // fills and emits the result
	limit    int          // fixed pool size; 0 = elastic
	inflight sync.WaitGroup
	sem      chan struct{}         // --max-inflight slots; nil = unbounded
	serial   bool                  // ConnRecorded: one request at a time per recorded connection, in order
	connsMu  sync.Mutex            // guards conns (the dispatcher and the session releaser dispatch)
	conns    map[string]*connQueue // serial: queues by connection key
	held     atomic.Int64          // requests that waited for a slot
	late     atomic.Int64          // requests handed out saturatedLag or more after their due time
	active   atomic.Int64          // requests in flight now
	lastDone atomic.Int64          // mono ns when a sender last finished a request; 0 = none yet

	mu      sync.Mutex // guards idle, queue, workers
	idle    []*worker  // idle senders, the most recently idle last
	queue   []*job     // jobs waiting for a sender (fixed pool full, or client saturated); at most maxQueued
	workers int        // senders started
	taken   sync.Cond  // signalled when a sender takes a queued job (L = &mu)
}

// maxQueued bounds the jobs waiting for a sender; beyond it the dispatcher
// waits too (and stops reading ahead), so memory stays bounded however far
// behind the client falls.
const maxQueued = 1024

// worker is one sender goroutine's mailbox.
type worker struct{ jobs chan *job }

// saturatedLag is how late the dispatcher must be handing out a job before
// it counts the client as CPU-bound and queues instead of adding a sender.
// Well above the coarse pacing's timer lateness (about 1 ms).
const saturatedLag = 5 * time.Millisecond

func newSender(ctx context.Context, c *client, workers, maxInflight int, serial bool, send func(*job)) *sender {
	s := &sender{ctx: ctx, c: c, send: send, serial: serial, conns: map[string]*connQueue{}, limit: max(workers, 0)}
	s.taken.L = &s.mu
	if maxInflight > 0 {
		s.sem = make(chan struct{}, maxInflight)
	}
	return s
}

// work runs j, then queued jobs, then whatever it is handed while idle,
// until its mailbox closes.
func (s *sender) work(w *worker, j *job) {
	for {
		s.run(j)
		s.mu.Lock()
		if len(s.queue) > 0 {
			j = s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.taken.Signal()
			s.mu.Unlock()
			continue
		}
		s.idle = append(s.idle, w)
		s.mu.Unlock()
		var ok bool
		if j, ok = <-w.jobs; !ok {
			return
		}
	}
}

// dispatch hands j to a sender now. Only a full --max-inflight blocks it: the
// request is held back until a slot frees, and the wait shows as lag.
func (s *sender) dispatch(j *job) error {
	s.reserve()
	return s.dispatchReserved(j)
}

// reserve counts a request that will be dispatched (dispatchReserved) —
// perhaps by another goroutine, later — so that wait waits for it too.
func (s *sender) reserve() { s.inflight.Add(1) }

// dispatchReserved is dispatch for a request already reserved. On an error
// (ctx done while held back) the request is not sent and its reservation is
// released.
func (s *sender) dispatchReserved(j *job) error {
	heldBack := false
	if s.sem != nil {
		select {
		case s.sem <- struct{}{}:
		default:
			heldBack = true
			s.held.Add(1)
			select {
			case s.sem <- struct{}{}:
			case <-s.ctx.Done():
				s.inflight.Done()
				return s.ctx.Err()
			}
		}
	}
	s.active.Add(1)
	if s.serial {
		if key := connKey(j.it.x); key != "" {
			s.enqueue(key, j)
			return nil
		}
	}
	if j.eager && j.p != nil {
		s.c.tryWrite(connKey(j.it.x), j.p, &j.fl)
	}
	late := time.Duration(mono()-j.due) > saturatedLag // from the due time: a session turn is late by design, not by saturation
	if late && !heldBack {
		s.late.Add(1)
	}
	turningOver := mono()-s.lastDone.Load() < int64(saturatedLag)
	saturated := s.limit == 0 && late && turningOver
	s.mu.Lock()
	poolBound := s.poolBoundLocked()
	if s.limit == 0 && !turningOver && !poolBound && len(s.queue) > 0 {
		q := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.taken.Signal()
		s.workers++
		go s.work(&worker{jobs: make(chan *job, 1)}, q)
	}
	for {
		if n := len(s.idle); n > 0 {
			w := s.idle[n-1]
			s.idle[n-1] = nil
			s.idle = s.idle[:n-1]
			s.mu.Unlock()
			w.jobs <- j
			return nil
		}
		if (s.limit == 0 || s.workers < s.limit) && !(saturated && s.workers > 0) && !(poolBound && j.fl.cn == nil) {
			s.workers++
			s.mu.Unlock()
			go s.work(&worker{jobs: make(chan *job, 1)}, j)
			return nil
		}
		if len(s.queue) < maxQueued {
			s.queue = append(s.queue, j)
			s.mu.Unlock()
			return nil
		}
		s.taken.Wait() // every sender is busy and the queue is full: a sender finishing frees a place
		poolBound = s.poolBoundLocked()
	}
}

// poolBoundLocked reports whether a new sender would only wait for a
// pooled connection: the pool is elastic, has senders, and every
// connection it allows is open and busy. mu is held.
func (s *sender) poolBoundLocked() bool {
	return s.limit == 0 && s.workers > 0 && s.c != nil && s.c.pooled.full()
}

func (s *sender) run(j *job) {
	s.send(j)
	s.lastDone.Store(mono())
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
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
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
// in flight, not the recording's size. connsMu is held.
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

// stop ends the senders; call after wait.
func (s *sender) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.idle {
		close(w.jobs)
	}
	s.idle = nil
}

// resultOf starts the result row of a job.
func resultOf(runID string, shard int32, j *job) *formats.Result {
	x := j.it.x
	return &formats.Result{
		RunID:          runID,
		Shard:          shard,
		Recorder:       x.Recorder,
		Seq:            x.Seq,
		OrigTs:         x.Time(),
		Frame:          j.it.frame,
		ScheduledNs:    j.off,
		SessionDelayNs: j.delay,
		BatchSize:      -1,
		QueueDepth:     -1,
		Method:         x.Method,
		Path:           x.Path,
		Model:          x.Model,
		PromptTokens:   x.PromptTokens,
	}
}
