package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/reelkit/reel/examples/simcluster/cluster"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/replayer/analysis"
)

// keepFunc selects rows by prompt length; nil keeps every row.
type keepFunc func(promptTokens int32) bool

// shortOnly keeps the requests whose prompt is below the long-prompt line.
func shortOnly(long int) keepFunc {
	return func(p int32) bool { return p > 0 && int(p) < long }
}

// loadExchanges reads a recording into a new Analyzer, rows in [from, to)
// (zero: open) that keep selects.
func loadExchanges(ctx context.Context, dir string, opt analysis.Options, from, to time.Time, keep keepFunc) (*analysis.Analyzer, error) {
	a := analysis.New(opt)
	err := each[formats.Exchange](ctx, dir, from, to, func(x *formats.Exchange) {
		if keep == nil || keep(x.PromptTokens) {
			a.AddExchange(x)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read recording: %w", err)
	}
	return a, nil
}

// loadResults reads replay results into a new Analyzer, rows whose
// original start is in [from, to) that keep selects.
func loadResults(ctx context.Context, dir string, opt analysis.Options, from, to time.Time, keep keepFunc) (*analysis.Analyzer, error) {
	a := analysis.New(opt)
	err := each[formats.Result](ctx, dir, from, to, func(r *formats.Result) {
		if keep == nil || keep(r.PromptTokens) {
			a.AddResult(r)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	return a, nil
}

// each calls fn for every row of the dataset under dir, in time order.
func each[T formats.Record](ctx context.Context, dir string, from, to time.Time, fn func(*T)) error {
	r, err := formats.OpenReader[T](ctx, []string{dir}, formats.ReaderOptions{From: from, To: to})
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		row, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		fn(row)
	}
}

// gauges samples the simulated server's engine state while traffic runs:
// what a Prometheus scrape of vLLM's num_requests_waiting/running and
// gpu_cache_usage_perc would show, per frame.
//
// Hook: once recorder/scrape exists, the sidecar records these from the
// server's /metrics itself and this in-process sampler goes away; the
// story then reads the scraped series from the dataset.
type gauges struct {
	c     *cluster.Cluster
	frame time.Duration

	mu     sync.Mutex // guards frames
	frames map[int64]*gaugeFrame
}

// gaugeFrame is the server's state over one frame.
type gaugeFrame struct {
	samples                int
	maxWaiting             int
	sumWaiting, sumRunning int
	sumKVUsage             float64
}

func newGauges(c *cluster.Cluster, frame time.Duration) *gauges {
	return &gauges{c: c, frame: frame, frames: map[int64]*gaugeFrame{}}
}

// run samples every interval until ctx ends.
func (g *gauges) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			g.sample(now)
		}
	}
}

func (g *gauges) sample(now time.Time) {
	s := g.c.Stats()
	start := analysis.FrameOf(now, time.Time{}, g.frame).UnixNano()
	g.mu.Lock()
	defer g.mu.Unlock()
	f := g.frames[start]
	if f == nil {
		f = &gaugeFrame{}
		g.frames[start] = f
	}
	f.samples++
	f.maxWaiting = max(f.maxWaiting, s.Waiting)
	f.sumWaiting += s.Waiting
	f.sumRunning += s.Running
	f.sumKVUsage += s.KVUsage
}

// serverView summarises the gauges inside and outside [from, to).
type serverView struct {
	InWaiting, OutWaiting float64 // mean requests waiting
	InMaxWaiting          int
	InRunning, OutRunning float64 // mean running batch
	InKV, OutKV           float64 // mean KV-cache usage, 0..1
	InFrames, OutFrames   int
}

func (g *gauges) view(from, to time.Time) serverView {
	g.mu.Lock()
	defer g.mu.Unlock()
	var v serverView
	var in, out struct {
		n             int
		wait, run, kv float64
	}
	for start, f := range g.frames {
		side := &out
		if start >= from.UnixNano() && start < to.UnixNano() {
			side = &in
			v.InFrames++
			v.InMaxWaiting = max(v.InMaxWaiting, f.maxWaiting)
		} else {
			v.OutFrames++
		}
		side.n += f.samples
		side.wait += float64(f.sumWaiting)
		side.run += float64(f.sumRunning)
		side.kv += f.sumKVUsage
	}
	if in.n > 0 {
		v.InWaiting, v.InRunning, v.InKV = in.wait/float64(in.n), in.run/float64(in.n), in.kv/float64(in.n)
	}
	if out.n > 0 {
		v.OutWaiting, v.OutRunning, v.OutKV = out.wait/float64(out.n), out.run/float64(out.n), out.kv/float64(out.n)
	}
	return v
}

// drainingTransport reads what is left of a response body before closing
// it, as a well-behaved client does: the connection goes back to the pool,
// and a stream's end (after data: [DONE]) reaches the sidecar before the
// client hangs up, so the exchange is recorded complete rather than as a
// client abort.
type drainingTransport struct{ http.RoundTripper }

func (t drainingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(r)
	if err == nil && resp.Body != nil {
		resp.Body = &drainingBody{ReadCloser: resp.Body}
	}
	return resp, err
}

type drainingBody struct{ io.ReadCloser }

// maxDrain bounds what Close reads: a stream's tail after [DONE] is a few
// bytes; anything longer is not worth waiting for.
const maxDrain = 64 << 10

func (b *drainingBody) Close() error {
	io.Copy(io.Discard, io.LimitReader(b.ReadCloser, maxDrain))
	return b.ReadCloser.Close()
}
