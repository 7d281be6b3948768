package recorder

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
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

// TestPipelineLeavesAPForForwarding checks that the workers, the writer and
// the proxy's SubmitLater goroutines together never occupy more than
// GOMAXPROCS-1 Ps (at least one), so that a proxy in the same process
// always has a P to forward on.
func TestPipelineLeavesAPForForwarding(t *testing.T) {
	for _, procs := range []int{1, 2, 3} {
		t.Run("gomaxprocs="+strconv.Itoa(procs), func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			b := &busyStages{}
			p := newPipeline(b, b, PipelineOptions{Workers: 4, Queue: 4096}, nil)
			const n = 400
			for i := range n {
				x := &formats.Exchange{Seq: int64(i)}
				if i%2 == 1 { // half as the proxy hands them over
					p.SubmitLater(0, func() *formats.Exchange { return x })
				} else if !p.Submit(x) {
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

// BenchmarkPipelinePaced is the pipeline's own cost per exchange at a live
// sidecar's pace: one exchange every interval, so every stage that waits
// for the next exchange parks and is woken for it, as in `reel record`
// (the back-to-back benchmarks never let a stage park). Redaction and the
// sink do nothing, so what is measured is the hand-over: goroutine
// starts, channel wake-ups, idle Ps spinning up. cpu-ns/op is the whole
// process's user+system CPU per exchange, the pacing loop's own timer
// wake-ups included (the same in every sub-benchmark: compare them with
// each other, in one run). Submit is the queued path (passive capture);
// SubmitLater the proxy's; pace-only writes to the sink on the pacing
// goroutine, the floor the other two are compared with.
// Measured: docs/performance.md, "Proxy sidecar", round 4.
func BenchmarkPipelinePaced(b *testing.B) {
	const interval = time.Millisecond
	for _, mode := range []string{"pace-only", "Submit", "SubmitLater"} {
		b.Run(mode, func(b *testing.B) {
			sink := &countSink{}
			p := newPipeline(sink, nil, PipelineOptions{}, nil)
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			start := time.Now()
			i := 0
			for b.Loop() {
				time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
				i++
				x := &formats.Exchange{Seq: int64(i)}
				switch mode {
				case "pace-only": // the floor: the sink written on the pacing goroutine
					sink.Write(x)
				case "Submit":
					p.Submit(x)
				default:
					p.SubmitLater(0, func() *formats.Exchange { return x })
				}
			}
			if err := p.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			if got := sink.n; got != b.N {
				b.Fatalf("wrote %d of %d", got, b.N)
			}
			cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
