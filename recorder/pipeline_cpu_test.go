package recorder

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// busyStages counts the redaction and write calls running at once.
type busyStages struct {
	now, peak atomic.Int32
	n         atomic.Int64
}

func (b *busyStages) enter() {
	v := b.now.Add(1)
	for {
		p := b.peak.Load()
		if v <= p || b.peak.CompareAndSwap(p, v) {
			break
		}
	}
	time.Sleep(50 * time.Microsecond) // long enough for stages to overlap if they may
}

func (b *busyStages) leave() { b.now.Add(-1) }

func (b *busyStages) RedactExchange(*formats.Exchange) { b.enter(); b.leave() }

func (b *busyStages) Write(*formats.Exchange) error { b.enter(); b.n.Add(1); b.leave(); return nil }

func (b *busyStages) Close(context.Context) error { return nil }

// TestPipelineLeavesAPForForwarding checks that the workers and the writer
// together never occupy more than GOMAXPROCS-1 Ps (at least one), so that a
// proxy in the same process always has a P to forward on.
func TestPipelineLeavesAPForForwarding(t *testing.T) {
	for _, procs := range []int{1, 2, 3} {
		t.Run("gomaxprocs="+strconv.Itoa(procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			b := &busyStages{}
			p := newPipeline(b, b, PipelineOptions{Workers: 4, Queue: 4096}, nil)
			const n = 400
			for i := range n {
				if !p.Submit(&formats.Exchange{Seq: int64(i)}) {
					t.Fatalf("exchange %d dropped", i)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if got := b.n.Load(); got != n {
				t.Fatalf("wrote %d of %d", got, n)
			}
			if want := int32(max(1, procs-1)); b.peak.Load() > want {
				t.Fatalf("%d stages ran at once, want at most %d", b.peak.Load(), want)
			}
			if procs == 3 && b.peak.Load() < 2 {
				t.Logf("stages never overlapped (peak %d): the bound was not exercised", b.peak.Load())
			}
		})
	}
}
