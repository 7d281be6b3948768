package replayer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/internal/cputime"
)

// Sink receives result rows from one goroutine; *formats.Writer[formats.Result]
// is one.
type Sink interface {
	Write(*formats.Result) error
}

// DefaultRequestTimeout is reel replay's per-request timeout: long enough
// for a long generation, short enough that a hung target ends the run.
const DefaultRequestTimeout = 10 * time.Minute

// Options configure a replay. The zero value of every field works except
// Target.
type Options struct {
	Target    *url.URL  // the shadow: scheme, host and an optional base path
	Selection Selection // which exchanges; zero = all
	Loop      int       // replay the window this many times back to back; default 1
	Warmup    int       // requests drawn from the window (same mix) sent before the clock starts; default 0
	StartAt   time.Time // wall-clock start shared by shards; zero = now
	// MaxWait bounds a wait without sending (--start-at ahead or behind, a
	// gap at the run's speed); the run is refused beyond it (CheckClock).
	// 0 = DefaultMaxWait, < 0 = no bound.
	MaxWait time.Duration

	// Sessions replays conversations and agent loops closed loop within a
	// session (see SessionOptions); zero = off, every exchange on the
	// recorded clock.
	Sessions SessionOptions

	MaxInflight int           // cap on requests in flight; 0 = none. Held-back requests are counted and wait in lag.
	Conn        ConnMode      // default ConnPooled
	MaxConns    int           // ConnRecorded: connections kept at once (LRU); default 4096
	PoolConns   int           // ConnPooled: connections to the target at most; default DefaultPoolConns, < 0 = no limit
	Timeout     time.Duration // per request, from its send; 0 = none (reel replay: DefaultRequestTimeout)
	TLS         *tls.Config   // nil = Go's defaults

	Headers           http.Header // added to every request (credentials for the shadow go here); a Host entry sets the Host header
	ForwardHeaders    []string    // recorded headers replayed; nil = DefaultForwardHeaders; credentials never
	PinOutput         PinMode     // which requests get the API's output cap (max_tokens, max_output_tokens) := recorded output tokens; zero = none (reel replay: DefaultPinOutput)
	IgnoreEOS         bool        // ignore_eos on chat and completion requests (vLLM, SGLang): generate to the cap
	IncludeUsage      bool        // stream_options.include_usage on streaming requests
	AllowRecordedHost bool        // allow a target whose host was recorded (production!)

	RunID string // written in every row; default a time-based id

	// Workers > 0 sends through a fixed pool of that many goroutines (a
	// busy pool delays sends; the delay shows in lag). 0, the default, keeps
	// an elastic pool: a request goes to an idle sender or a new one, never
	// waiting for a response — unless the dispatcher is already running late
	// (the client is CPU-bound), when it waits for the next free sender.
	Workers    int
	SpinWindow time.Duration // precise-wait stretch before each due time; default DefaultSpinWindow

	// Analysis configures the summaries (SLO, window quantile, …); its Frame
	// and ExcludeFirst are taken from Selection.Frame and ExcludeFirst.
	Analysis     analysis.Options
	ExcludeFirst time.Duration // left out of the summaries (not of the results)

	Progress io.Writer // progress lines; nil = none
	Live     bool      // Progress is a terminal: one \r-updated line per frame

	// Step replays one frame at a time: after each frame's requests finish,
	// its summary is printed and StepWait is called (nil = go on at once);
	// the clock restarts for the next frame. StepWait returning ErrStop
	// ends the run cleanly.
	Step     bool
	StepWait func(ctx context.Context, f *analysis.Frame) error
}

// DefaultPoolConns bounds the pooled transport's connections. Requests
// beyond it wait inside the transport for a free connection (the wait shows
// in lag) instead of dialling a storm of new ones when the target slows —
// unbounded dialling collapsed the client at 20k req/s in bench/replay.
const DefaultPoolConns = 1024

// DefaultMemoryLimit is the soft Go memory limit reel replay runs under by
// default (--memory-limit; $GOMEMLIMIT wins). At Go's GOGC of 100 the heap
// grows to twice what was live at the last collection, so a run's peak is
// twice its largest transient: a burst of late sends with every pooled
// connection busy, or a row group about to be written. A long run meets
// more of them than a short one, which made a 10M-exchange replay's max RSS
// 1.15-1.23× a 100k one's. Under the limit the collector runs earlier
// instead, only while the heap is near it: the replay's live heap is about
// 50-60 MB, so collections come about as often as before (docs/performance.md,
// #22 session 8). A run that holds more (large bodies, thousands of
// connections) collects more often; raise the limit or set 0 for none.
const DefaultMemoryLimit = 128 << 20

// startLead is how long after Run starts the first request is due (without
// --start-at).
const startLead = 50 * time.Millisecond

// ErrStop ends a step-mode run cleanly when returned by StepWait.
var ErrStop = errors.New("replay stopped")

// ErrEmptyWindow means the selection matched no exchange.
var ErrEmptyWindow = errors.New("no exchange matches the selection")

// RecordedHostError refuses a target that was recorded as a production
// host or upstream, by name or by address.
type RecordedHostError struct {
	Host     string // the target's host (or its Host header) refused
	Column   string // where the recording names it: "host" or "upstream"
	Recorded string // the recorded name, when it differs from Host
	Addr     string // the address both resolve to, when matched by address
}

// Error says which host was refused, why, and how to allow it.
func (e *RecordedHostError) Error() string {
	col := e.Column
	if col == "" {
		col = "host"
	}
	why := fmt.Sprintf("appears in the recording as a %s", col)
	switch {
	case e.Addr != "":
		why = fmt.Sprintf("is %s, like the recorded %s %q", e.Addr, col, e.Recorded)
	case e.Recorded != "" && e.Recorded != e.Host:
		why = fmt.Sprintf("is the recorded %s %q", col, e.Recorded)
	}
	return fmt.Sprintf("target host %q %s: refusing to replay against what may be production (pass --allow-recorded-host if it really is a shadow)", e.Host, why)
}

// Plan is a replay whose window has been read once: frames fixed, target
// checked, warm-up drawn. Run it once per speed.
type Plan struct {
	open Opener
	opts Options
	w    *window
}

// NewPlan reads the selected window once (streaming) and checks the target.
func NewPlan(ctx context.Context, open Opener, opts Options) (*Plan, error) {
	if opts.Target == nil || opts.Target.Host == "" {
		return nil, errors.New("no target: want a URL such as http://shadow:8000")
	}
	if opts.Target.Scheme != "http" && opts.Target.Scheme != "https" {
		return nil, fmt.Errorf("target %q: scheme must be http or https", opts.Target)
	}
	if err := validateHeaders(opts.Headers); err != nil {
		return nil, err
	}
	if opts.RunID == "" {
		opts.RunID = timeRunID(time.Now())
	}
	w, err := scan(ctx, open, &opts.Selection, opts.Warmup, &opts.Sessions)
	if err != nil {
		return nil, err
	}
	if w.selected == 0 {
		if w.total == 0 {
			return nil, fmt.Errorf("%w: the dataset has no exchange in the window", ErrEmptyWindow)
		}
		return nil, fmt.Errorf("%w: %d exchanges in the window, none passes the filters, sample and shard", ErrEmptyWindow, w.total)
	}
	if !opts.AllowRecordedHost {
		names := []string{opts.Target.Host}
		if h := opts.Headers.Get("Host"); h != "" {
			names = append(names, h) // --header 'Host: …' goes to the target too
		}
		if err := checkTarget(ctx, names, w.hosts); err != nil {
			return nil, err
		}
	}
	return &Plan{open: open, opts: opts, w: w}, nil
}

// Exchanges reports how many exchanges one pass replays (before --loop).
func (p *Plan) Exchanges() int64 { return p.w.selected }

// Span reports the selected window's first and last exchange times.
func (p *Plan) Span() (first, last time.Time) {
	return time.Unix(0, p.w.ts0).UTC(), time.Unix(0, p.w.last).UTC()
}

// RunID is the run's id, as written in every row.
func (p *Plan) RunID() string { return p.opts.RunID }

// Report is the outcome of one run.
type Report struct {
	RunID     string            // the run's id, as written in every row
	Shard     Shard             // the shard this process replayed
	Speed     float64           // time compression the window was replayed at (1 = recorded pace)
	Sent      int64             // requests sent
	Skipped   int64             // exchanges not sent (truncated bodies): no row
	HeldBack  int64             // requests that waited for a --max-inflight slot
	Pin       PinReport         // what --pin-output did to the sent requests
	StartLate time.Duration     // how late this process reached --start-at (its first requests' lag shows it)
	Stopped   bool              // step mode ended early
	Client    ClientLoad        // how busy the replayer itself was
	Summary   *analysis.Summary // the run's metrics
}

// ClientLoad is how busy the replayer was during a run: when its own
// dispatcher falls behind the schedule, lag and latency from schedule
// measure the client, not the target.
type ClientLoad struct {
	Sent      int64         // requests sent
	LateSends int64         // of them, handed to a sender SaturatedLag or more after their due time
	CPU       time.Duration // process CPU time (user + system) during the run
	Wall      time.Duration // the run's wall-clock time
	Cores     int           // GOMAXPROCS
}

// SaturatedLag is how late a send must leave for it to count as the
// client's own lateness (well above timer lateness, about 1 ms).
const SaturatedLag = saturatedLag

// CPUBound reports whether the client could not keep up: more than 1 % of
// the sends left SaturatedLag late (held-back requests of --max-inflight
// excepted: they count as held back, not late).
func (c ClientLoad) CPUBound() bool { return c.Sent > 0 && float64(c.LateSends) > 0.01*float64(c.Sent) }

// String says whether the client was CPU-bound and how much CPU it used,
// e.g. "client CPU-bound: 38.2 % of sends left ≥ 5ms late; reel used 1.10
// of 2 cores — lag and latency from schedule measure the client here, not
// the target"; empty when it kept up.
func (c ClientLoad) String() string {
	if !c.CPUBound() {
		return ""
	}
	used := ""
	if c.Wall > 0 && c.CPU > 0 {
		cores := c.CPU.Seconds() / c.Wall.Seconds()
		used = fmt.Sprintf("; reel used %.2f of %d cores", cores, c.Cores)
		if cores < 0.5*float64(c.Cores) {
			// Late with cores to spare: something else had them.
			used += " (the machine is busy with other work)"
		}
	}
	return fmt.Sprintf("client CPU-bound: %.1f %% of sends left ≥ %s late%s — lag and latency from schedule measure the client here, not the target (fewer requests per replayer: --shard, or a bigger machine)",
		100*float64(c.LateSends)/float64(c.Sent), SaturatedLag, used)
}

// Run replays the window once at speed (≤ 0 means 1), writing one row per
// sent request to sink. Requests that fail are rows with an error, not a
// failed run; Run fails only when the dataset or the sink does.
func (p *Plan) Run(ctx context.Context, sink Sink, speed float64) (*Report, error) {
	if speed <= 0 {
		speed = 1
	}
	if err := p.CheckClock(time.Now(), speed); err != nil {
		return nil, err
	}
	r := p.newRun(ctx, sink, speed)
	defer r.cancelReqs()
	defer r.c.close()

	pf := p.prefetch(r.reqCtx, r.rb)
	defer pf.drain()
	if len(p.w.warmup) > 0 {
		p.warm(r.reqCtx, r.c, r.rb)
	}
	r.startSending()
	runErr := r.pace(ctx, pf.jobs, r.startTime())
	pf.stop()
	r.snd.wait()
	if r.rel != nil {
		r.rel.stop()
	}
	r.snd.stop()
	r.closeFrame()
	pf.drain() // the reader has finished: its error is settled
	return r.finish(ctx, pf.err, runErr)
}

// replayRun is one Run's state: the client and senders, the collector, the frame
// being sent and, with sessions, the gate and its releaser.
type replayRun struct {
	p          *Plan
	o          *Options
	rep        *Report
	speed      float64
	spin       time.Duration
	reqCtx     context.Context
	cancelReqs context.CancelFunc
	c          *client
	rb         *requestBuilder
	col        *collector
	snd        *sender
	gate       *gate         // nil with sessions off
	rel        *releaser     // nil with sessions off
	cpu0       time.Duration // process CPU time at the start (Report.Client)
	wall0      time.Time

	cur       time.Time // the frame being sent; zero before the first
	curIdx    int
	frameSent int64
}

func (p *Plan) newRun(ctx context.Context, sink Sink, speed float64) *replayRun {
	o := &p.opts
	spin := o.SpinWindow
	if spin <= 0 {
		spin = DefaultSpinWindow
	}
	pool := o.PoolConns
	switch {
	case pool == 0:
		pool = DefaultPoolConns
	case pool < 0:
		pool = 0
	}
	r := &replayRun{p: p, o: o, speed: speed, spin: spin, rep: &Report{RunID: o.RunID, Shard: o.Selection.Shard, Speed: speed, Pin: PinReport{Mode: o.PinOutput}},
		cpu0: cputime.Process(), wall0: time.Now()}
	r.rb = newRequestBuilder(o.Target, o.ForwardHeaders, o.Headers, o.PinOutput, o.IgnoreEOS, o.IncludeUsage)
	r.reqCtx, r.cancelReqs = context.WithCancel(ctx)
	r.c = newClient(r.reqCtx, clientOptions{Target: o.Target, Mode: o.Conn, Timeout: o.Timeout, TLS: o.TLS, MaxConns: o.MaxConns, PoolConns: pool})
	aopts := o.Analysis
	aopts.Frame = o.Selection.frame()
	aopts.ExcludeFirst = o.ExcludeFirst
	r.col = newCollector(sink, aopts, o.Progress, o.Live, o.Step, r.cancelReqs)
	return r
}

// prefetcher reads and builds requests ahead of their due times.
type prefetcher struct {
	jobs chan *job
	stop context.CancelFunc
	err  error // the dataset's error; settled once jobs is drained
}

func (p *Plan) prefetch(ctx context.Context, rb *requestBuilder) *prefetcher {
	readCtx, stop := context.WithCancel(ctx)
	pf := &prefetcher{jobs: make(chan *job, 1024), stop: stop}
	go func() {
		defer close(pf.jobs)
		cur := newCursor(readCtx, p.open, &p.opts.Selection, p.w, p.opts.Loop, &p.opts.Sessions)
		defer cur.close()
		for {
			it, err := cur.next()
			if err == io.EOF {
				return
			}
			if err != nil {
				if readCtx.Err() == nil {
					pf.err = err
				}
				return
			}
			j := &job{it: it}
			j.p, j.err = rb.build(it.x)
			select {
			case pf.jobs <- j:
			case <-readCtx.Done():
				return
			}
		}
	}()
	return pf
}

// drain stops the reader and waits for it.
func (pf *prefetcher) drain() {
	pf.stop()
	for range pf.jobs {
	}
}

// startSending starts the senders and, with sessions, the gate and the
// releaser; every request's row goes to the collector, and every session
// turn's end to the gate.
func (r *replayRun) startSending() {
	o := r.o
	send := func(j *job) {
		res := resultOf(o.RunID, int32(o.Selection.Shard.Index), j)
		r.c.do(r.reqCtx, connKey(j.it.x), j.p, j.due, mono(), res, &j.fl)
		if j.delay > 0 {
			res.E2ESchedNs += j.delay // from the recorded schedule, not the session's due time
		}
		if r.gate != nil && j.it.awaited {
			r.gate.finish(j.it.turn, mono())
		}
		r.col.add(res)
	}
	r.snd = newSender(r.reqCtx, r.c, o.Workers, o.MaxInflight, o.Conn == ConnRecorded, send)
	if o.Sessions.Mode != analysis.SessionsOff {
		precise := canSleepPrecise()
		r.rel = newReleaser(r.reqCtx, r.spin, precise, func(j *job) {
			j.eager = precise             // as the dispatcher's: write it here when a connection is idle
			_ = r.snd.dispatchReserved(j) // only a cancelled run fails it
		})
		r.gate = newGate(&o.Sessions, r.speed, r.rel)
	}
	r.col.live = func() (int64, int64) { return r.col.sentCount(), r.snd.active.Load() }
	r.col.start()
}

// startTime is when the first request is due (mono ns): a short lead-in
// that lets the reader fill the queue and the dispatcher reach its precise
// wait, or --start-at.
func (r *replayRun) startTime() int64 {
	o := r.o
	if o.StartAt.IsZero() {
		return mono() + int64(startLead)
	}
	d := time.Until(o.StartAt)
	if d < 0 {
		r.rep.StartLate = -d
		r.col.printf("replay: shard %s reached --start-at %s late by %s; its first requests are late by as much (see lag)\n",
			o.Selection.Shard, o.StartAt.UTC().Format(time.RFC3339Nano), (-d).Round(time.Microsecond))
	}
	return mono() + int64(d)
}

// pace is the dispatcher: it sends each job at its due time, start + (at −
// base)/speed, frame by frame (step mode restarts the clock per frame),
// and hands session turns to the gate. It returns why it stopped early.
func (r *replayRun) pace(ctx context.Context, jobs <-chan *job, start int64) error {
	runStart, base := start, r.p.w.ts0
	precise := canSleepPrecise()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var prevSched int64          // the previous request's due time: its gap sizes the precise wait
	avgGap := int64(time.Second) // moving mean of the gaps: the rate decides how precisely to wait
	for j := range jobs {
		if !j.it.frame.Equal(r.cur) {
			if !r.cur.IsZero() {
				restart, err := r.nextFrame(ctx)
				if err != nil || r.rep.Stopped {
					return err
				}
				if restart {
					start, base = mono(), j.it.at
				}
			}
			r.cur, r.curIdx, r.frameSent = j.it.frame, j.it.frameIdx, 0
		}
		j.sched = start + int64(float64(j.it.at-base)/r.speed)
		j.off = j.sched - runStart
		j.due = j.sched
		if j.err != nil {
			r.rep.Skipped++
			if r.gate != nil { // counts as answered at its scheduled time
				r.gate.register(j)
				r.gate.finish(j.it.turn, j.sched)
			}
			continue
		}
		gap := max(j.sched-prevSched, 0)
		avgGap += (min(gap, int64(time.Second)) - avgGap) / 16
		window, fine := pace(r.spin, gap, avgGap, precise)
		j.eager = fine // at low rates the dispatcher writes the request itself
		r.announce(j.sched, j.it.at)
		if err := waitUntil(r.reqCtx, j.sched, window, timer, fine); err != nil {
			return err
		}
		prevSched = j.sched
		if err := r.dispatch(j); err != nil {
			return err
		}
		r.frameSent++
		r.col.sent.Add(1)
		r.rep.Sent++
		r.rep.Pin.add(j.p.pin)
	}
	return nil
}

// dispatch sends j now, or, for a session turn whose predecessors have not
// ended on the shadow (or whose think time has not passed), leaves it to
// the gate: it is sent later and counted now.
func (r *replayRun) dispatch(j *job) error {
	if r.gate == nil {
		return r.snd.dispatch(j)
	}
	r.gate.register(j)
	if len(j.it.deps) == 0 {
		return r.snd.dispatch(j)
	}
	r.snd.reserve() // before the gate can hand it to the releaser
	if !r.gate.admit(j, mono()) {
		return nil
	}
	return r.snd.dispatchReserved(j)
}

// nextFrame closes the frame just sent; in step mode it waits for the
// frame's requests, prints its summary and asks StepWait whether to go on,
// and reports that the clock restarts for the next frame.
func (r *replayRun) nextFrame(ctx context.Context) (restart bool, err error) {
	r.col.endFrame(r.cur, r.frameSent)
	if !r.o.Step {
		return false, nil
	}
	r.snd.wait()
	f := r.col.takeFrame(r.cur)
	r.col.printStep(r.curIdx, f)
	if r.o.StepWait != nil {
		if err := r.o.StepWait(ctx, f); err != nil {
			r.cur = time.Time{}
			if errors.Is(err, ErrStop) {
				r.rep.Stopped = true
				return false, nil
			}
			return false, err
		}
	}
	return true, nil
}

// closeFrame closes the last frame once its requests have finished.
func (r *replayRun) closeFrame() {
	if r.cur.IsZero() {
		return
	}
	r.col.endFrame(r.cur, r.frameSent)
	if r.o.Step {
		r.col.printStep(r.curIdx, r.col.takeFrame(r.cur))
	}
}

// finish closes the collector and chooses the run's error: the sink's,
// then the dataset's, then the dispatcher's (unless ctx ended it), then
// ctx's.
func (r *replayRun) finish(ctx context.Context, readErr, runErr error) (*Report, error) {
	rep := r.rep
	sum, sinkErr := r.col.close()
	rep.Summary = sum
	rep.HeldBack = r.snd.held.Load()
	rep.Client = ClientLoad{Sent: rep.Sent, LateSends: r.snd.late.Load(), CPU: cputime.Process() - r.cpu0, Wall: time.Since(r.wall0), Cores: runtime.GOMAXPROCS(0)}
	if rep.Skipped > 0 {
		r.col.printf("replay: skipped %d exchanges whose request body was truncated at record time\n", rep.Skipped)
	}
	switch {
	case sinkErr != nil:
		return rep, fmt.Errorf("write results: %w", sinkErr)
	case readErr != nil:
		return rep, readErr
	case runErr != nil && ctx.Err() == nil:
		return rep, runErr
	case ctx.Err() != nil:
		return rep, ctx.Err()
	}
	return rep, nil
}

// warm sends the warm-up sample, at most 32 at a time, and waits for it; its
// results are not recorded.
func (p *Plan) warm(ctx context.Context, c *client, rb *requestBuilder) {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, x := range p.w.warmup {
		pr, err := rb.build(x)
		if err != nil {
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res formats.Result
			now := mono()
			c.do(ctx, connKey(x), pr, now, now, &res, nil)
			<-sem
		}()
	}
	wg.Wait()
}

// SweepReport is the outcome of a speed sweep.
type SweepReport struct {
	Runs []*Report // one per speed run, in the order run
	// Best is the highest speed whose run met the SLO; 0 when none did.
	Best float64
}

// Sweep runs the window once per speed, each into the sink newSink returns
// (closed after its run when it has a Close(ctx) error method, as
// *formats.Writer does), and reports the highest
// speed that meets the SLO of Options.Analysis.
func (p *Plan) Sweep(ctx context.Context, speeds []float64, newSink func(speed float64) (Sink, error)) (*SweepReport, error) {
	sr := &SweepReport{}
	for i, s := range speeds {
		if i > 0 {
			p.opts.StartAt = time.Time{} // only the first run waits for a shared start
		}
		sink, err := newSink(s)
		if err != nil {
			return sr, fmt.Errorf("speed %g: open results: %w", s, err)
		}
		rep, err := p.Run(ctx, sink, s)
		if cl, ok := sink.(interface{ Close(context.Context) error }); ok {
			if cerr := cl.Close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
				err = fmt.Errorf("close results: %w", cerr)
			}
		}
		if rep != nil {
			sr.Runs = append(sr.Runs, rep)
		}
		if err != nil {
			return sr, fmt.Errorf("speed %g: %w", s, err)
		}
		if rep.Summary != nil && rep.Summary.MeetsSLO && s > sr.Best {
			sr.Best = s
		}
	}
	return sr, nil
}
