package replayer

import (
	"container/heap"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
)

// Sessions: open loop across sessions, closed loop within one.
//
// A session's first turn (and every exchange outside a session) keeps the
// recorded clock. A later turn goes out at
//
//	max(its scheduled time, end of its predecessors on the shadow + think)
//
// where think is the recorded gap from the predecessors' answer to this
// turn (analysis.Linker decides who the predecessors are), transformed by
// ThinkTime. So a slower shadow never receives a turn whose answer does
// not exist yet, and a faster one never receives it before its time.
//
// Rules for the cases production cannot show:
//
//   - A predecessor that fails on the shadow (an error status, a transport
//     error, a timeout) counts as answered when it failed: its successors
//     go on after their think time, with the recorded bodies (which carry
//     production's answer). A predecessor that is not sent (its body was
//     truncated at record time) counts as answered at its scheduled time.
//   - A predecessor outside the replay (before --from, filtered out,
//     another shard) or forgotten (idle longer than SessionOptions.Idle)
//     is not waited for.
//   - Turns that production ran concurrently (fan-out: several requests on
//     one predecessor, or still in flight when the next began) stay
//     concurrent: each waits only for what had ended before it started.
//
// How late a turn went out because of its predecessors is the result's
// session_delay_ns; lag_ns is measured from that later due time, so the
// dispatcher's precision and the shadow's slowness stay apart, and
// e2e_sched_ns still counts from the recorded schedule.

// SessionOptions configure --sessions. The zero value replays open loop
// (sessions off), as before sessions existed; reel replay's default is
// analysis.DefaultSessionMode.
type SessionOptions struct {
	Mode  analysis.SessionMode // default analysis.SessionsOff
	Think ThinkTime            // default: recorded think times, on the replay's clock (÷ speed)
	Idle  time.Duration        // a turn this long after its predecessor's end starts a new session; default analysis.DefaultSessionIdle
}

// ThinkTime says how long a session turn waits after its predecessors'
// answers on the shadow. The zero value keeps the recorded think time,
// compressed by --speed like the rest of the recorded clock (so that
// against an infinitely fast shadow a session replay is the open-loop
// replay, at every speed).
type ThinkTime struct {
	// Scale multiplies the recorded think time (after the speed); 0 means 1.
	Scale float64
	// Fixed, when Set, replaces every think time by Duration (not
	// compressed by the speed: it is a wall-clock choice).
	Fixed    bool
	Duration time.Duration
}

// ParseThinkTime parses "recorded", "scale:F" (F ≥ 0) or "fixed:D" (a
// duration such as 500ms).
func ParseThinkTime(s string) (ThinkTime, error) {
	s = strings.TrimSpace(s)
	kind, arg, _ := strings.Cut(s, ":")
	switch strings.ToLower(kind) {
	case "recorded", "":
		if arg == "" {
			return ThinkTime{}, nil
		}
	case "scale":
		f, err := strconv.ParseFloat(arg, 64)
		if err == nil && f >= 0 && f < 1e6 {
			if f == 0 {
				return ThinkTime{Fixed: true}, nil
			}
			return ThinkTime{Scale: f}, nil
		}
	case "fixed":
		d, err := time.ParseDuration(arg)
		if err == nil && d >= 0 {
			return ThinkTime{Fixed: true, Duration: d}, nil
		}
	}
	return ThinkTime{}, fmt.Errorf("think time %q: want recorded, scale:F (e.g. scale:0.5) or fixed:D (e.g. fixed:2s)", s)
}

func (t ThinkTime) String() string {
	switch {
	case t.Fixed:
		return "fixed:" + t.Duration.String()
	case t.Scale != 0 && t.Scale != 1:
		return "scale:" + strconv.FormatFloat(t.Scale, 'g', -1, 64)
	}
	return "recorded"
}

// at is the wait after the predecessors' end for a recorded think time of
// ns at speed.
func (t ThinkTime) at(ns int64, speed float64) int64 {
	if t.Fixed {
		return int64(t.Duration)
	}
	v := float64(ns) / speed
	if t.Scale > 0 {
		v *= t.Scale
	}
	return int64(v)
}

// mayBeAwaited reports whether a later turn may wait for x: in inferred
// mode only an exchange with a turn key can be continued.
func mayBeAwaited(mode analysis.SessionMode, x *formats.Exchange) bool {
	switch mode {
	case analysis.SessionsInferred:
		return x.TurnKey != 0
	case analysis.SessionsRecorded:
		return x.Session != ""
	}
	return false
}

// gate holds session turns until their predecessors have ended on the
// shadow, then hands them to the releaser at their due time.
type gate struct {
	think ThinkTime
	speed float64
	idle  int64 // ns of the recorded clock
	rel   *releaser

	mu    sync.Mutex           // guards turns, order
	turns map[int64]*turnState // turns a later one may wait for
	order []awaitedTurn        // turns in registration order, for forgetting
	head  int
}

// turnState is a turn as its successors see it.
type turnState struct {
	done    bool
	end     int64  // mono ns: the shadow's answer ended (or the turn failed or was skipped)
	waiters []*job // successors waiting for it
}

type awaitedTurn struct {
	id int64
	at int64 // recorded start (loop-shifted), ns
}

// maxAwaited bounds the finished turns kept for successors that may come.
const maxAwaited = 1 << 20

func newGate(so *SessionOptions, speed float64, rel *releaser) *gate {
	idle := so.Idle
	if idle <= 0 {
		idle = analysis.DefaultSessionIdle
	}
	return &gate{think: so.Think, speed: speed, idle: int64(idle), rel: rel, turns: map[int64]*turnState{}}
}

// register notes a turn successors may wait for; the dispatcher calls it
// in schedule order, before the turn's successors come. It also forgets
// finished turns idle for longer than the session bound.
func (g *gate) register(j *job) {
	if !j.it.awaited {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.turns[j.it.turn] = &turnState{}
	g.order = append(g.order, awaitedTurn{id: j.it.turn, at: j.it.at})
	for g.head < len(g.order) {
		t := g.order[g.head]
		st := g.turns[t.id]
		if st != nil && !st.done {
			break // in flight: kept (bounded by what is in flight)
		}
		if len(g.order)-g.head <= maxAwaited && t.at >= j.it.at-g.idle {
			break
		}
		delete(g.turns, t.id)
		g.head++
	}
	if g.head > 4096 && g.head*2 > len(g.order) {
		g.order = append(g.order[:0], g.order[g.head:]...)
		g.head = 0
	}
}

// admit decides j's fate at its scheduled time (the dispatcher has waited
// for it): true means send it now (j.due set); false means the gate keeps
// it and the releaser sends it later. now is the dispatcher's clock.
func (g *gate) admit(j *job, now int64) bool {
	j.due = j.sched
	if len(j.it.deps) == 0 {
		return true
	}
	g.mu.Lock()
	for _, d := range j.it.deps {
		st := g.turns[d]
		switch {
		case st == nil: // not replayed or forgotten: nothing to wait for
		case st.done:
			j.depEnd = max(j.depEnd, st.end)
		default:
			j.pending++
			st.waiters = append(st.waiters, j)
		}
	}
	pending := j.pending > 0
	g.mu.Unlock()
	if pending {
		return false
	}
	g.setDue(j)
	if j.due <= now {
		return true
	}
	g.rel.push(j)
	return false
}

// setDue fixes a turn's due time from its predecessors' end.
func (g *gate) setDue(j *job) {
	if j.depEnd > 0 {
		j.due = max(j.sched, j.depEnd+g.think.at(j.it.thinkNs, g.speed))
	}
	j.delay = j.due - j.sched
}

// finish records that turn id ended on the shadow at end (mono ns) and
// releases the successors that waited only for it.
func (g *gate) finish(id, end int64) {
	g.mu.Lock()
	st := g.turns[id]
	if st == nil {
		g.mu.Unlock()
		return
	}
	st.done, st.end = true, end
	var ready []*job
	for _, w := range st.waiters {
		w.depEnd = max(w.depEnd, end)
		if w.pending--; w.pending == 0 {
			ready = append(ready, w)
		}
	}
	st.waiters = nil
	g.mu.Unlock()
	for _, w := range ready {
		g.setDue(w)
		g.rel.push(w)
	}
}

// releaser sends the turns the gate let go, each at its due time, on a
// goroutine of its own so that the dispatcher stays on the recorded clock
// for everything else.
type releaser struct {
	ctx     context.Context
	send    func(j *job)
	spin    time.Duration
	precise bool

	mu      sync.Mutex // guards due, stopped
	due     dueHeap
	stopped bool
	wake    chan struct{} // a push or stop: look at the heap again
	done    chan struct{}
}

func newReleaser(ctx context.Context, spin time.Duration, precise bool, send func(j *job)) *releaser {
	r := &releaser{ctx: ctx, send: send, spin: spin, precise: precise, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go r.run()
	return r
}

func (r *releaser) push(j *job) {
	r.mu.Lock()
	heap.Push(&r.due, j)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// stop ends the releaser once its heap is empty; call after every turn has
// been sent (the sender's wait covers the turns the gate holds).
func (r *releaser) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	<-r.done
}

func (r *releaser) run() {
	defer close(r.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		r.mu.Lock()
		if len(r.due) == 0 {
			stopped := r.stopped
			r.mu.Unlock()
			if stopped {
				return
			}
			<-r.wake
			continue
		}
		next := r.due[0].due
		r.mu.Unlock()
		if d := time.Duration(next - mono()); d > r.spin && r.ctx.Err() == nil {
			// Sleep on the timer, but wake for a turn due earlier.
			timer.Reset(d - r.spin)
			select {
			case <-timer.C:
			case <-r.wake:
				timer.Stop()
			case <-r.ctx.Done():
				timer.Stop()
			}
			continue
		}
		if r.ctx.Err() == nil {
			_ = waitUntil(r.ctx, next, r.spin, timer, r.precise)
		}
		r.mu.Lock()
		j := heap.Pop(&r.due).(*job)
		r.mu.Unlock()
		r.send(j) // once ctx is done, the client fails it at once: a row saying so
	}
}

// dueHeap orders released turns by due time.
type dueHeap []*job

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, k int) bool { return h[i].due < h[k].due }
func (h dueHeap) Swap(i, k int)      { h[i], h[k] = h[k], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(*job)) }
func (h *dueHeap) Pop() any {
	old := *h
	j := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return j
}
