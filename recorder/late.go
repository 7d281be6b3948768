package recorder

import (
	"sync"
	"time"

	"github.com/reelkit/reel/formats"
)

// lateDelay is how long the late goroutine gathers SubmitLater builds
// before it runs them and submits them as one batch. A sidecar finishes
// hundreds to thousands of exchanges a second; one wake-up of that
// goroutine, of a worker and of the writer per batch instead of per
// exchange saves each exchange a goroutine start and their futex calls and
// context switches (docs/performance.md, "Proxy sidecar"). The exchanges
// reach the sink that much later; nothing waits for them.
const lateDelay = 5 * time.Millisecond

// lateQueue holds SubmitLater builds until the late goroutine takes them.
type lateQueue struct {
	mu      sync.Mutex // guards pending
	pending []func() *formats.Exchange
	spare   []func() *formats.Exchange // the previous batch's slice, for reuse
	wake    chan struct{}              // one token: pending became non-empty
}

// add queues build and reports whether pending was empty (the late
// goroutine must then be woken).
func (q *lateQueue) add(build func() *formats.Exchange) (first bool) {
	q.mu.Lock()
	first = len(q.pending) == 0
	q.pending = append(q.pending, build)
	q.mu.Unlock()
	return first
}

// take returns what is pending and empties it.
func (q *lateQueue) take() []func() *formats.Exchange {
	q.mu.Lock()
	fs := q.pending
	q.pending, q.spare = q.spare[:0], nil
	q.mu.Unlock()
	return fs
}

// runLate runs the SubmitLater builds, a batch every lateDelay at most,
// until Close closes the wake channel and nothing is left.
func (p *pipeline) runLate() {
	var xs []*formats.Exchange
	for range p.late.wake {
		time.Sleep(lateDelay)
		fs := p.late.take()
		xs = xs[:0]
		for _, build := range fs {
			if x := build(); x != nil {
				xs = append(xs, x)
			}
		}
		if len(xs) > 0 {
			p.SubmitBatch(xs)
		}
		clear(xs) // the pipeline owns them now
		clear(fs)
		p.late.mu.Lock()
		p.late.spare = fs[:0]
		p.late.mu.Unlock()
		p.later.Add(-len(fs))
	}
}
