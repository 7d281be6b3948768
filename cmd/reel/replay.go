package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/redact"
	"github.com/reelkit/reel/replayer"
)

const replayUsage = `usage: reel replay DATASET... --target URL --out DIR [flags]

Re-sends a recorded window to a shadow target on the original clock (request i
is due at start + (ts_i − ts_0)/speed), open loop, and writes one result/1 row
per request to DIR. Progress goes to stderr, the summary to stdout.

Sessions (--sessions, default infer): a conversation's next turn or an
agent's next step goes out at max(its scheduled time, its predecessor's end
on the shadow + the recorded think time), so a slower shadow never gets a
turn whose answer does not exist yet. Session starts and single-turn
traffic keep the recorded clock. session_delay_ns in the results is how
late a turn went because of its predecessor, apart from lag_ns.

A run is a measurement only when requests completed: reel replay exits 3
when none did, or when more than --max-error-rate of them failed, and
names the top causes with an example message each. Each run writes into a
directory of its own: an --out that holds another run's results is refused
(--append adds to that run); the shards of one run share --out and a run
id, and reel report merges them. Metric definitions: docs/metrics.md.

exit codes: 0 measured, 1 the run failed (dataset, results), 2 misuse,
3 not a measurement.

Examples:
  # rerun last Wednesday's 14:00 incident, 5 s frames, one frame at a time
  reel replay data/ --target http://shadow:8000 --out results/wed \
      --from 2026-11-25T14:00:00Z --to 2026-11-25T14:10:00Z --step

  # frames 12 to 20 of that window, twice as fast, with the shadow's API key
  reel replay data/ --target http://shadow:8000 --out results/x2 \
      --from 2026-11-25T14:00:00Z --frames 12:20 --speed 2 \
      --header-from-env Authorization=SHADOW_AUTH

  # capacity sweep: the highest speed that keeps p95 of every 5 s frame in SLO
  reel replay data/ --target http://shadow:8000 --out results/sweep \
      --speed 1,1.5,2,3 --slo ttft=300ms,e2e=5s --include-usage

  # scrape the shadow's vLLM and DCGM metrics on the run's clock (into results/wed.metrics);
  # the summary then says which server-side signal moves with the tail
  reel replay data/ --target http://shadow:8000 --out results/wed \
      --scrape http://shadow:8000/metrics --scrape http://shadow:9400/metrics --scrape-every 1s

  # conversations and agents wait for their answers (the default, --sessions infer);
  # compare with the recorded clock alone to see the queue a slow shadow would not have had
  reel replay data/ --target http://shadow:8000 --out results/sessions
  reel replay data/ --target http://shadow:8000 --out results/openloop --sessions off

  # shard 3 of 8 of a Kubernetes Indexed Job, all shards on one clock
  reel replay /data --target http://shadow:8000 --out /results \
      --shards 8 --shard-from-env JOB_COMPLETION_INDEX --start-at 2026-11-26T02:00:00Z

Flags:
`

// replayFlags holds reel replay's command line.
type replayFlags struct {
	target, out, runID                 string
	from, to, startAt                  timeValue
	frames                             string
	frame, exclude, timeout, stepPause time.Duration
	filter                             analysis.Filter // --path, --model, --prompt-tokens
	methods, matchHeader               []string
	sample                             float64
	loop, warmup, maxInflight, workers int
	speeds                             []float64
	slo                                analysis.SLO
	sloText                            string
	shard                              replayer.Shard
	shardFromEnv                       string
	shards                             int
	conn                               string
	headers                            http.Header
	headersFromEnv                     []string
	forward                            []string
	pinOutput                          pinValue
	includeUsage, allowHost            bool
	ignoreEOS                          bool
	insecure, step, skipBad, quiet     bool
	appendRun                          bool
	maxErrorRate                       float64
	maxWait                            time.Duration
	memoryLimit                        int64
	scrape                             scrapeFlags // --scrape (scrape.go)
	sessions                           sessionsValue
	thinkTime                          string
	sessionIdle                        time.Duration
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := replayFlags{headers: http.Header{}}
	fs := pflag.NewFlagSet("replay", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageFunc(fs, replayUsage)
	fs.StringVar(&f.target, "target", "", "shadow base URL (required)")
	fs.StringVar(&f.out, "out", "", "results directory (required)")
	fs.StringVar(&f.runID, "run-id", "", "run id written in every row (default: time-based; shards of one run derive a shared one from --start-at and the selection)")
	fs.BoolVar(&f.appendRun, "append", false, "add these results to the run already in --out (default: refuse an --out holding another run's results)")
	fs.Var(&f.from, "from", "window start on the recording's clock (RFC 3339, or -DURATION before now)")
	fs.Var(&f.to, "to", "window end, exclusive (RFC 3339, or +DURATION after --from)")
	fs.DurationVar(&f.frame, "frame", replayer.DefaultFrame, "frame length; frames are aligned to it on the wall clock")
	fs.StringVar(&f.frames, "frames", "", "frames A..B (inclusive): indexes from the window's first frame (12..20; 12:20 also works), or times (14:00:05..14:01:00, RFC 3339)")
	registerRequestFilter(fs, &f.filter, "replay only")
	fs.Var(newListValue(nil, &f.methods, true), "method", "replay only these methods (repeatable)")
	fs.StringArrayVar(&f.matchHeader, "match-header", nil, "replay only exchanges whose recorded header matches 'Name: value' (repeatable)")
	fs.Var(newFractionValue(1, &f.sample), "sample", "replay this fraction of sessions (or exchanges), deterministically")
	fs.IntVar(&f.loop, "loop", 1, "replay the window this many times back to back")
	fs.Var(newFloatListValue([]float64{1}, &f.speeds), "speed", "time compression; a list (1,1.5,2) runs a sweep and reports the highest meeting --slo")
	fs.Var(sloValue{&f.slo, &f.sloText}, "slo", "SLO bounds, e.g. ttft=300ms,tpot=50ms,e2e=5s (required with a speed list; docs/metrics.md)")
	fs.IntVar(&f.warmup, "warmup", 0, "send this many requests drawn from the window before the clock starts")
	fs.DurationVar(&f.exclude, "exclude-first", 0, "leave the first span of the run out of the summaries")
	fs.IntVar(&f.maxInflight, "max-inflight", 0, "cap on requests in flight (0: none); held-back requests wait in lag")
	fs.StringVar(&f.conn, "conn", string(replayer.ConnPooled), "connections: pooled (a tuned pool) or recorded (one per recorded connection)")
	fs.DurationVar(&f.timeout, "timeout", replayer.DefaultRequestTimeout, "per-request timeout from its send (0: none)")
	fs.Var(newHeaderValue(f.headers), "header", "header for the shadow, 'Name: value' (repeatable; 'Host: name' sets the virtual host; '' clears)")
	fs.StringArrayVar(&f.headersFromEnv, "header-from-env", nil, "header for the shadow from the environment, Name=ENV_VAR (repeatable)")
	fs.Var(newListValue(replayer.DefaultForwardHeaders, &f.forward, true), "forward-header", "recorded headers to replay, added to the defaults ('' clears them); credentials are never replayed")
	registerPinOutput(fs, &f.pinOutput, "cap each request's output at the recorded output tokens (max_tokens; max_output_tokens for /v1/responses): server (where the count is the server's usage or a trace's), true (every recorded count, counted stream events too) or false")
	fs.BoolVar(&f.ignoreEOS, "ignore-eos", false, "also ask chat and completion requests to generate to the cap (vLLM's and SGLang's ignore_eos; OpenAI's API rejects it); default: when pinning and the target says it is vLLM, SGLang or the simulator")
	fs.BoolVar(&f.includeUsage, "include-usage", false, "ask streams for usage (stream_options.include_usage)")
	fs.BoolVar(&f.allowHost, "allow-recorded-host", false, "allow a target whose host (or its addresses) appears in the recording as a host or upstream (production!)")
	fs.BoolVar(&f.insecure, "insecure-skip-verify", false, "do not verify the target's TLS certificate")
	fs.Var(shardValue{&f.shard}, "shard", "replay share i/n of the connections (0-based)")
	fs.IntVar(&f.shards, "shards", 0, "shard count, with --shard-from-env")
	fs.StringVar(&f.shardFromEnv, "shard-from-env", "", "read the shard index from this variable (JOB_COMPLETION_INDEX)")
	fs.Var(&f.startAt, "start-at", "start the clock at this wall-clock time (RFC 3339, or +DURATION from now), shared by all shards")
	fs.BoolVar(&f.step, "step", false, "replay one frame at a time: summary, then wait for Enter (q to quit)")
	fs.DurationVar(&f.stepPause, "step-pause", 0, "with --step, pause this long between frames instead of waiting for Enter")
	fs.BoolVar(&f.skipBad, "skip-bad", false, "skip dataset files that cannot be read or have corrupt pages (warned) instead of failing")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress lines")
	registerSessions(fs, &f.sessions, "conversations and agent loops: infer (a turn that carries an earlier answer waits for it), recorded (the session column: each turn waits for those that ended before it began) or off (every request on the recorded clock)")
	fs.StringVar(&f.thinkTime, "think-time", "recorded", "with --sessions, the wait after a predecessor's answer: recorded (compressed by --speed), scale:F or fixed:D")
	fs.DurationVar(&f.sessionIdle, "session-idle", analysis.DefaultSessionIdle, "with --sessions, a turn this long after its predecessor's answer starts a new session")
	fs.DurationVar(&f.maxWait, "max-wait", replayer.DefaultMaxWait, "refuse a run that would wait longer than this without sending: --start-at ahead or behind, or a gap in the window at --speed (-1s: no bound)")
	fs.Float64Var(&f.maxErrorRate, "max-error-rate", replayer.DefaultMaxErrorRate, "exit 3 (not a measurement) when more than this share of requests fails (1: never); a run where no request completed always exits 3")
	f.scrape.register(fs, "the shadow's")
	fs.IntVar(&f.workers, "workers", 0, "send through a fixed pool of this many senders (0: an elastic pool that delays a send only while the replayer itself is CPU-bound); for >10k req/s of short requests on a small machine")
	fs.Var(newSizeValue(replayer.DefaultMemoryLimit, &f.memoryLimit), "memory-limit", "soft Go heap limit (ignored when $GOMEMLIMIT is set; 0: none)")
	if helped, err := parseFlags(fs, args, "reel replay --help", stdout); helped || err != nil {
		return err
	}
	const hint = "reel replay DATASET --target http://shadow:8000 --out results"
	if fs.NArg() == 0 {
		return &usageError{msg: "no dataset given", hint: hint}
	}
	switch {
	case f.target == "" && f.out == "":
		return &usageError{msg: "--target and --out are required", hint: hint}
	case f.target == "":
		return &usageError{msg: "--target is required: the shadow to replay against", hint: hint}
	case f.out == "":
		return &usageError{msg: "--out is required: a directory for this run's results", hint: hint}
	}
	paths := fs.Args()
	if err := f.scrape.check(hint); err != nil {
		return err
	}
	opts, speeds, err := replayOptions(&f, os.LookupEnv)
	if err != nil {
		return err
	}
	if _, err := formats.ListFiles(paths); err != nil {
		return fmt.Errorf("open dataset: %w", err) // after the flags: misuse is reported first
	}
	if f.scrape.enabled() && opts.Selection.Shard.Index > 0 {
		// Every shard would scrape the same endpoints on the same clock and
		// store the same samples once per shard; shard 0 keeps them for all.
		fmt.Fprintf(stderr, "reel replay: shard %s leaves --scrape to shard 0 (one copy of the shadow's metrics per run)\n", opts.Selection.Shard)
		f.scrape.urls = nil
	}
	if len(speeds) > 1 && opts.Analysis.SLO.IsZero() {
		return &usageError{msg: "a speed sweep needs --slo to judge each speed", hint: "reel replay DATASET --target URL --out DIR --speed 1,1.5,2 --slo e2e=5s"}
	}
	if !f.quiet {
		opts.Progress = stderr
		opts.Live = isTerminal(stderr)
	}
	if f.step {
		opts.StepWait = replayStepWait(f.stepPause, os.Stdin, stderr)
	}

	noteRedactionSchemes("reel replay", paths, stderr)
	explicitID := opts.RunID != ""
	if !explicitID {
		opts.RunID = replayer.DefaultRunID(opts, paths, speeds)
	}
	if opts.RunID, err = replayer.CheckResultsDir(f.out, opts.RunID, explicitID, opts.Selection.Shard, f.appendRun); err != nil {
		return &usageError{msg: err.Error(), hint: hint + "/" + opts.RunID}
	}
	defaultMemoryLimit(f.memoryLimit)
	open := replayer.OpenDataset(paths, formats.ReaderOptions{SkipBad: f.skipBad,
		Warn: func(err error) { fmt.Fprintf(stderr, "reel replay: warning: %v\n", err) }})
	plan, err := replayer.NewPlan(ctx, open, opts)
	if err != nil {
		var rh *replayer.RecordedHostError
		if errors.As(err, &rh) {
			return &usageError{msg: err.Error(), hint: hint + " --allow-recorded-host"}
		}
		return err
	}
	if err := plan.CheckClock(time.Now(), slices.Min(speeds)); err != nil {
		return &usageError{msg: err.Error(), hint: hint + " --from 2026-11-25T14:00:00Z --to +10m"}
	}
	if opts.PinOutput != replayer.PinOff && !fs.Changed("ignore-eos") {
		// ignore_eos where the target is known to take it (one GET
		// /v1/models per run, after the target safety check): the output
		// then matches the recording's, not just its cap. Anywhere else it
		// is left out, since a server that rejects unknown fields would fail
		// every request.
		ok, server := plan.ProbeIgnoreEOS(ctx)
		opts.IgnoreEOS = ok
		if !f.quiet {
			if ok {
				fmt.Fprintf(stderr, "reel replay: the target is %s: pinned requests also get ignore_eos (--ignore-eos=false to leave it out)\n", server)
			} else {
				if server == "" {
					server = "did not say which server it is on GET /v1/models"
				} else {
					server = "is " + server + ", not vLLM, SGLang or the simulator"
				}
				fmt.Fprintf(stderr, "reel replay: the target %s: outputs are capped at the recorded count without ignore_eos and may end sooner (--ignore-eos forces it)\n", server)
			}
		}
	}
	first, last := plan.Span()
	if !f.quiet {
		start := "now"
		if !opts.StartAt.IsZero() {
			start = "at --start-at " + opts.StartAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(stderr, "replay %s: %d exchanges recorded %s → %s (shard %s) to %s, starting %s (%s wall clock)\n",
			plan.RunID(), plan.Exchanges(), first.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano),
			opts.Selection.Shard, redactedURL(opts.Target), start, time.Now().UTC().Format(time.RFC3339))
		fmt.Fprintln(stderr, "progress: one line per frame, each frame named by its start on the recording's clock (UTC)")
	}
	tallies := map[float64]*replayer.TallySink{}
	newSink := func(speed float64) (replayer.Sink, error) {
		dir, metricsDir := replayer.ResultDirs(f.out, speed, len(speeds) > 1)
		wopts := replayer.ResultWriterOptions(dir, opts, speed, paths)
		w, err := formats.NewWriter[formats.Result](ctx, wopts)
		if err != nil {
			return nil, err
		}
		tally := &replayer.TallySink{Sink: w}
		tallies[speed] = tally
		return f.scrape.withScrape(ctx, tally, metricsDir, wopts.Recorder, stderr)
	}
	measured := func(rep *replayer.Report) error {
		if rep == nil || rep.Summary == nil {
			return nil
		}
		return replayer.CheckMeasured(rep.Summary, tallies[rep.Speed].Causes(), f.maxErrorRate)
	}
	if len(speeds) == 1 {
		sink, err := newSink(speeds[0])
		if err != nil {
			return fmt.Errorf("open results: %w", err)
		}
		rep, runErr := plan.Run(ctx, sink, speeds[0])
		var closeErr error
		if c, ok := sink.(ctxCloser); ok {
			closeErr = c.Close(context.WithoutCancel(ctx))
		}
		if rep != nil && rep.Summary != nil {
			if f.scrape.enabled() && closeErr == nil {
				attachSignals(ctx, []string{f.out}, rep.Summary, nil, formats.ReaderOptions{}, stderr)
			}
			writeReplayReport(stdout, rep, tallies[rep.Speed].Causes())
		}
		if runErr != nil {
			return runErr
		}
		if closeErr != nil {
			return fmt.Errorf("close results: %w", closeErr)
		}
		if err := measured(rep); err != nil && !rep.Stopped {
			return &exitError{code: exitNoMeasurement, msg: "reel replay: " + err.Error()}
		}
		return nil
	}
	sr, err := plan.Sweep(ctx, speeds, newSink)
	if sr != nil {
		writeReplaySweep(stdout, sr, opts.Analysis.SLO)
	}
	if err != nil || sr == nil {
		return err
	}
	// A sweep measured something when one of its speeds did: overload at
	// the higher speeds is the sweep's finding, not a broken run.
	var firstErr error
	for _, rep := range sr.Runs {
		if err := measured(rep); err == nil {
			return nil
		} else if firstErr == nil {
			firstErr = fmt.Errorf("speed %g: %w", rep.Speed, err)
		}
	}
	if firstErr != nil {
		return &exitError{code: exitNoMeasurement, msg: "reel replay: no speed of the sweep is a measurement; " + firstErr.Error()}
	}
	return nil
}

// replayOptions turns the flags into replayer options and the speed list;
// env looks up environment variables (os.LookupEnv outside tests).
func replayOptions(f *replayFlags, env func(string) (string, bool)) (replayer.Options, []float64, error) {
	var o replayer.Options
	bad := func(format string, args ...any) error {
		return &usageError{msg: fmt.Sprintf(format, args...), hint: "reel replay --help"}
	}
	u, err := url.Parse(f.target)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return o, nil, bad("--target %q: want http://host:port[/base]", f.target)
	}
	o.Target = u
	sel := &o.Selection
	if sel.From, err = f.from.resolve("--from", time.Now(), "now"); err != nil {
		return o, nil, bad("%v", err)
	}
	if sel.To, err = f.to.resolve("--to", sel.From, "--from"); err != nil {
		return o, nil, bad("%v", err)
	}
	if o.StartAt, err = f.startAt.resolve("--start-at", time.Now(), "now"); err != nil {
		return o, nil, bad("%v", err)
	}
	if !sel.To.IsZero() && !sel.To.After(sel.From) {
		return o, nil, bad("--to must come after --from")
	}
	if f.frame <= 0 {
		return o, nil, bad("--frame %s: want a positive duration", f.frame)
	}
	sel.Frame = f.frame
	if f.frames != "" {
		fr, err := replayer.ParseFrameRange(f.frames, sel.From)
		if err != nil {
			return o, nil, bad("--frames: %v", err)
		}
		sel.Frames = fr
	}
	sel.Paths, sel.Models = f.filter.Paths, f.filter.Models
	sel.MinPromptTokens, sel.MaxPromptTokens = f.filter.MinPromptTokens, f.filter.MaxPromptTokens
	sel.Methods = f.methods
	for _, h := range f.matchHeader {
		m, err := replayer.ParseHeaderMatch(h)
		if err != nil {
			return o, nil, bad("--match-header: %v", err)
		}
		sel.Headers = append(sel.Headers, m)
	}
	sel.Sample = f.sample
	switch {
	case f.shard.Count > 1 && f.shardFromEnv != "":
		return o, nil, bad("give --shard or --shard-from-env, not both")
	case f.shard.Count > 1:
		sel.Shard = f.shard
	case f.shardFromEnv != "":
		v, ok := env(f.shardFromEnv)
		if !ok {
			return o, nil, bad("--shard-from-env %s: the variable is not set", f.shardFromEnv)
		}
		if f.shards < 1 {
			return o, nil, bad("--shard-from-env needs --shards N")
		}
		s, err := replayer.ParseShard(strings.TrimSpace(v) + "/" + strconv.Itoa(f.shards))
		if err != nil {
			return o, nil, bad("--shard-from-env %s=%q: %v", f.shardFromEnv, v, err)
		}
		sel.Shard = s
	}
	if f.loop < 1 || f.warmup < 0 || f.maxInflight < 0 {
		return o, nil, bad("--loop must be ≥ 1, --warmup and --max-inflight ≥ 0")
	}
	o.Loop, o.Warmup, o.MaxInflight, o.Workers = f.loop, f.warmup, f.maxInflight, f.workers
	think, err := replayer.ParseThinkTime(f.thinkTime)
	if err != nil {
		return o, nil, bad("--think-time: %v", err)
	}
	if f.sessionIdle <= 0 {
		return o, nil, bad("--session-idle %s: want a positive duration", f.sessionIdle)
	}
	o.Sessions = replayer.SessionOptions{Mode: f.sessions.mode, Think: think, Idle: f.sessionIdle}
	o.Analysis.SLO = f.slo
	o.ExcludeFirst = f.exclude
	switch replayer.ConnMode(f.conn) {
	case replayer.ConnPooled, replayer.ConnRecorded:
		o.Conn = replayer.ConnMode(f.conn)
	default:
		return o, nil, bad("--conn %q: want pooled or recorded", f.conn)
	}
	o.Timeout = f.timeout
	if f.insecure {
		o.TLS = &tls.Config{InsecureSkipVerify: true}
	}
	o.Headers = f.headers.Clone()
	if o.Headers == nil {
		o.Headers = http.Header{}
	}
	for _, h := range f.headersFromEnv {
		k, name, ok := strings.Cut(h, "=")
		if !ok || k == "" || name == "" {
			return o, nil, bad("--header-from-env %q: want Name=ENV_VAR", h)
		}
		v, set := env(name)
		if !set {
			return o, nil, bad("--header-from-env %s: $%s is not set", k, name)
		}
		o.Headers.Add(k, v)
	}
	o.ForwardHeaders = f.forward
	if o.ForwardHeaders == nil {
		o.ForwardHeaders = []string{} // cleared: replay no recorded header
	}
	o.PinOutput, o.IgnoreEOS, o.IncludeUsage, o.AllowRecordedHost = f.pinOutput.mode, f.ignoreEOS, f.includeUsage, f.allowHost
	o.Step = f.step
	o.RunID = f.runID
	o.MaxWait = f.maxWait
	return o, f.speeds, nil
}

// replayStepWait pauses between frames: a fixed pause, or a line on in
// ("q" quits).
func replayStepWait(pause time.Duration, in io.Reader, stderr io.Writer) func(context.Context, *analysis.Frame) error {
	if pause > 0 {
		return func(ctx context.Context, _ *analysis.Frame) error {
			select {
			case <-time.After(pause):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	lines := make(chan string)
	go func() { // one reader for the whole run; it ends with stdin
		br := bufio.NewReader(in)
		for {
			s, err := br.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- s
		}
	}()
	return func(ctx context.Context, _ *analysis.Frame) error {
		fmt.Fprint(stderr, "Enter: next frame, q: quit > ")
		select {
		case s, ok := <-lines:
			if !ok || strings.TrimSpace(s) == "q" {
				return replayer.ErrStop
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// redactedURL drops any user info from a URL before it is printed or stored.
func redactedURL(u *url.URL) string { return redact.CleanURL(u.String()) }

// writeReplayReport prints the run's own figures, the top causes of its
// failed requests, then the analysis summary (the same text reel report
// prints).
func writeReplayReport(w io.Writer, r *replayer.Report, causes *analysis.Causes) {
	fmt.Fprintf(w, "run %s  speed %g  shard %s  sent %d", r.RunID, r.Speed, r.Shard, r.Sent)
	if r.HeldBack > 0 {
		fmt.Fprintf(w, "  held back by --max-inflight %d", r.HeldBack)
	}
	if r.Skipped > 0 {
		fmt.Fprintf(w, "  skipped %d (truncated bodies)", r.Skipped)
	}
	if r.StartLate > 0 {
		fmt.Fprintf(w, "  started %s after --start-at", r.StartLate.Round(time.Microsecond))
	}
	if r.Stopped {
		fmt.Fprint(w, "  (stopped)")
	}
	fmt.Fprintln(w)
	if line := r.Pin.String(r.Sent); line != "" {
		fmt.Fprintln(w, line)
	}
	if line := r.Client.String(); line != "" {
		fmt.Fprintln(w, line)
	}
	if causes != nil && causes.Failed() > 0 {
		fmt.Fprintf(w, "failed requests by cause (%d in all):\n", causes.Failed())
		for _, c := range causes.Top(5) {
			fmt.Fprintf(w, "  %6d  %s\n          e.g. %s\n", c.Count, c.Name, c.Example)
		}
	}
	r.Summary.WriteText(w)
}

// writeReplaySweep prints one line per speed and the verdict.
func writeReplaySweep(w io.Writer, sr *replayer.SweepReport, slo analysis.SLO) {
	fmt.Fprintf(w, "speed sweep against SLO %s\n", slo)
	fmt.Fprintf(w, "%-7s %-5s %9s %9s %9s %9s %10s %8s\n", "speed", "meets", "req/s", "e2e p95", "ttft p99", "lag p99", "goodput", "windows")
	for _, r := range sr.Runs {
		s := r.Summary
		meets := "no"
		if s.MeetsSLO {
			meets = "yes"
		}
		fmt.Fprintf(w, "%-7g %-5s %9.1f %9s %9s %9s %10.1f %7.1f%%\n", r.Speed, meets, s.RequestRate,
			analysis.FormatDuration(s.E2E.P95), analysis.FormatDuration(s.TTFT.P99), analysis.FormatDuration(s.Lag.P99),
			s.Goodput, 100*s.WindowCompliance)
	}
	if sr.Best > 0 {
		fmt.Fprintf(w, "highest speed meeting the SLO: %g\n", sr.Best)
	} else {
		fmt.Fprintln(w, "no speed met the SLO")
	}
}
