package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/analysis/htmlreport"
	"github.com/reelkit/reel/examples/simcluster/cluster"
	"github.com/reelkit/reel/examples/simcluster/traffic"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/proxy"
	"github.com/reelkit/reel/redact"
	"github.com/reelkit/reel/replayer"
)

// story holds what the steps share.
type story struct {
	cfg config
	nb  *notebook
	slo analysis.SLO
	f   *findings

	recDir, baseDir, fixDir string
}

// runStory tells the story to w and returns what it found.
func runStory(ctx context.Context, cfg config, w io.Writer) (*findings, error) {
	slo, err := analysis.ParseSLO(cfg.SLO)
	if err != nil {
		return nil, fmt.Errorf("story slo: %w", err)
	}
	s := &story{
		cfg: cfg, nb: &notebook{w: w, start: time.Now()}, slo: slo,
		f:       &findings{cfg: cfg},
		recDir:  filepath.Join(cfg.Dir, "recording"),
		baseDir: filepath.Join(cfg.Dir, "results", "baseline"),
		fixDir:  filepath.Join(cfg.Dir, "results", "fix"),
	}
	s.nb.title("reel — the weekly incident, recorded, found, replayed and fixed")
	s.nb.title("Every Wednesday afternoon the chat service's TTFT tail spikes. This run records %s of one such",
		time.Duration(float64(cfg.Record)*cfg.TimeScale))
	s.nb.title("afternoon (in %s), finds the spike, replays it on a shadow and proves a fix.", cfg.Record)
	s.nb.title("Simulated GPU time runs ×%g: 1 s here is %g s on the simulated A100; all latencies below are wall clock.", cfg.TimeScale, cfg.TimeScale)
	s.nb.title("Output: %s", cfg.Dir)

	if err := s.record(ctx); err != nil {
		return nil, err
	}
	st, err := s.stats(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.chooseWindow(st); err != nil {
		return nil, err
	}
	if err := s.replay(ctx, "baseline", s.baseDir, cfg.server(false)); err != nil {
		return nil, err
	}
	if err := s.replay(ctx, "fix", s.fixDir, cfg.server(true)); err != nil {
		return nil, err
	}
	if err := s.judge(ctx); err != nil {
		return nil, err
	}
	s.conclude()
	return s.f, nil
}

// analysisOptions are the options every analysis of the story uses.
func (s *story) analysisOptions() analysis.Options {
	return analysis.Options{
		Frame: s.cfg.Frame, SLO: s.slo, LongPrompt: int32(s.cfg.LongPrompt),
		LengthBuckets: []int32{int32(s.cfg.LongPrompt)},
	}
}

// record runs steps 1–4: the production stand-in, the sidecar, the week's
// traffic through it, and closing the dataset.
func (s *story) record(ctx context.Context) error {
	cfg, nb := &s.cfg, s.nb
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	nb.section("Start the production stand-in")
	prod, err := cluster.Start(ctx, "127.0.0.1:0", cfg.server(false))
	if err != nil {
		return fmt.Errorf("start production simulator: %w", err)
	}
	defer prod.Close(context.Background())
	o := prod.Cluster.Options()
	nb.say("simcluster on %s: vLLM-like continuous batching, 8B model on one A100-40GB", prod.URL)
	nb.say("(decode step %s + %s/sequence, prefill %.0f tok/s, %d-token step budget, KV %d tokens,",
		o.StepBase, o.StepPerSeq, o.PrefillTokensPerSec, o.MaxBatchedTokens, o.KVCapacityTokens)
	nb.say(" one first-come-first-served queue as vLLM ships, prefix cache on), time ×%g", cfg.TimeScale)
	nb.cmd(fmt.Sprintf("go run ./examples/simcluster --listen 127.0.0.1:8000 --time-scale %g &", cfg.TimeScale))

	nb.section("Put the reel sidecar in front of it")
	key, err := redact.NewRandomKey()
	if err != nil {
		return err
	}
	keyFile := filepath.Join(cfg.Dir, "redact.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return fmt.Errorf("write redaction key: %w", err)
	}
	red, err := redact.New(redact.DefaultPolicy(), key)
	if err != nil {
		return fmt.Errorf("redactor: %w", err)
	}
	upstream, err := url.Parse(prod.URL)
	if err != nil {
		return fmt.Errorf("upstream url: %w", err)
	}
	var warnings atomic.Int64
	rec, w, err := recorder.OpenDataset(ctx, formats.WriterOptions{
		Dir: s.recDir, Recorder: "sidecar-1", Source: "proxy:" + prod.URL,
		Meta: map[string]string{"story": "weekly-incident"},
	}, red, recorder.Options{
		Config:   recorder.Config{Upstream: upstream.Host},
		Pipeline: recorder.PipelineOptions{Warn: func(error) { warnings.Add(1) }},
	})
	if err != nil {
		return fmt.Errorf("open recording: %w", err)
	}
	p, err := proxy.New(proxy.Options{Upstream: upstream, Recorder: rec})
	if err != nil {
		rec.Close(context.Background())
		return fmt.Errorf("sidecar: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rec.Close(context.Background())
		return fmt.Errorf("sidecar listen: %w", err)
	}
	sc, err := startScrape(ctx, s.recDir, "sidecar-1", prod.URL+"/metrics", cfg.ScrapeEvery)
	if err != nil {
		ln.Close()
		rec.Close(context.Background())
		return err
	}
	srv := proxy.NewServer(ln.Addr().String(), p)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	// On an early return the sidecar stops at once and the pipeline closes
	// what it has; the normal path below drains both first.
	recClosed := false
	defer func() {
		srv.Close()
		if !recClosed {
			rec.Close(context.Background())
		}
	}()
	sidecar := "http://" + ln.Addr().String()
	nb.say("reel record, sidecar mode, on %s → %s", sidecar, prod.URL)
	nb.say("redacted on the way to disk (lengths, structure and prefix sharing kept); key in %s", keyFile)
	nb.say("batch context from the server's x-batch-size and x-queue-depth headers; its /metrics scraped every %s", cfg.ScrapeEvery)
	nb.cmd(fmt.Sprintf("reel record --listen 127.0.0.1:8081 --upstream http://127.0.0.1:8000 --out %s \\", s.recDir),
		fmt.Sprintf("    --redact-key-file %s --scrape http://127.0.0.1:8000/metrics --scrape-every %s &", keyFile, cfg.ScrapeEvery))

	nb.section("Production traffic, with the weekly long-prompt job")
	var done, long atomic.Int64
	client := &http.Client{Transport: drainingTransport{&http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}}}
	defer client.CloseIdleConnections()
	topts := traffic.Options{
		Target: sidecar, Speed: cfg.TimeScale, Rate: cfg.Rate, Duration: cfg.Record, Seed: cfg.Seed,
		Incident:       traffic.Incident{At: cfg.IncidentAt, For: cfg.IncidentFor, Factor: cfg.LongFactor, Share: cfg.LongShare},
		RequestTimeout: 2 * time.Minute,
		Client:         client,
		OnResult: func(r *traffic.Result) {
			done.Add(1)
			if r.Long {
				long.Add(1)
			}
		},
	}
	nb.say("chat at %g req/s simulated (×%g = %g req/s here), bursty arrivals, prompts p50 ≈ 1k tokens;",
		cfg.Rate, cfg.TimeScale, cfg.Rate*cfg.TimeScale)
	nb.say("from +%s to +%s, %.0f%% of requests carry a document %g× longer (the Wednesday batch job)",
		cfg.IncidentAt, cfg.IncidentAt+cfg.IncidentFor, 100*cfg.LongShare, cfg.LongFactor)
	nb.cmd(fmt.Sprintf("go run ./examples/simcluster --generate --target http://127.0.0.1:8081 --seed %d \\", cfg.Seed),
		fmt.Sprintf("    --rate %g --speed %g --duration %s --incident-at %s --incident-for %s --long-share %g", cfg.Rate, cfg.TimeScale,
			cfg.Record, cfg.IncidentAt, cfg.IncidentFor, cfg.LongShare))
	start := time.Now()
	s.f.IncidentStart, s.f.IncidentEnd = start.Add(cfg.IncidentAt), start.Add(cfg.IncidentAt+cfg.IncidentFor)
	stopProgress := s.progress(ctx, start, &done, &long)
	sum, err := traffic.Run(ctx, topts)
	stopProgress()
	scraped, serr := sc.stop()
	if err != nil {
		return fmt.Errorf("traffic: %w", err)
	}
	if serr != nil {
		return serr
	}
	s.f.Sent, s.f.Failed = sum.Sent, sum.Failed
	nb.say("sent %d requests in %s: %d ok, %d failed, %d long-prompt; the burst ran %s → %s",
		sum.Sent, sum.Elapsed.Round(100*time.Millisecond), sum.OK, sum.Failed, sum.Long, clock(s.f.IncidentStart), clock(s.f.IncidentEnd))
	if sum.Skipped > 0 {
		nb.say("%d requests skipped at the generator's in-flight cap", sum.Skipped)
	}

	nb.section("Stop the recorder")
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("sidecar: %w", err)
	}
	recClosed = true
	if err := rec.Close(sctx); err != nil {
		return fmt.Errorf("close recording: %w", err)
	}
	ws := w.Stats()
	files, err := formats.ListFiles([]string{s.recDir})
	if err != nil {
		return fmt.Errorf("list recording: %w", err)
	}
	s.f.Recorded = ws.Records
	nb.say("%d exchanges written to %d Parquet file(s) under %s", ws.Records, len(files), s.recDir)
	nb.say("%d samples of the server's /metrics in %s (%d scrapes failed)", scraped.Written,
		formats.MetricsDir(s.recDir), scraped.Failed())
	if n := warnings.Load(); n > 0 {
		nb.say("the recorder warned %d time(s) (drops are counted in reel_recorder_dropped_total; traffic was not affected)", n)
	}
	nb.cmd("kill %2   # reel record: on SIGTERM it drains in-flight requests and closes its files")
	nb.cmd("reel inspect " + s.recDir)
	return nil
}

// progress prints a line every cfg.Progress while traffic runs.
func (s *story) progress(ctx context.Context, start time.Time, done, long *atomic.Int64) (stop func()) {
	if s.cfg.Progress <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(s.cfg.Progress)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				off := now.Sub(start)
				mark := ""
				if off >= s.cfg.IncidentAt && off < s.cfg.IncidentAt+s.cfg.IncidentFor+s.cfg.Progress {
					mark = "  ← long prompts arriving"
				}
				s.nb.say("  +%-4s %5d requests answered, %d of them long%s", off.Round(time.Second), done.Load(), long.Load(), mark)
			}
		}
	}()
	return func() { cancel(); <-finished }
}

// stats runs step 5: reel stats on the recording.
func (s *story) stats(ctx context.Context) (*analysis.Stats, error) {
	cfg, nb := &s.cfg, s.nb
	nb.section("reel stats: what does the recording say?")
	a, err := loadExchanges(ctx, s.recDir, s.analysisOptions(), time.Time{}, time.Time{}, nil)
	if err != nil {
		return nil, err
	}
	st := a.Stats()
	sum := st.Summary
	sig, err := analysis.LoadSignals(ctx, []string{s.recDir}, sum, analysis.SignalOptions{})
	if err != nil {
		return nil, fmt.Errorf("server-side signals: %w", err)
	}
	sum.Signals, s.f.Signals = sig, sig
	htmlPath := filepath.Join(s.cfg.Dir, "stats.html")
	if err := writeFile(filepath.Join(cfg.Dir, "stats.txt"), st.WriteText); err != nil {
		return nil, err
	}
	if err := writeFile(htmlPath, func(w io.Writer) error { return htmlreport.WriteStats(w, "reel stats: "+s.recDir, st) }); err != nil {
		return nil, err
	}
	nb.cmd(fmt.Sprintf("reel stats %s --frame %s --long-prompt %d --slo %s --html %s", s.recDir, cfg.Frame, cfg.LongPrompt, cfg.SLO, htmlPath))
	nb.say("%d requests, %.1f req/s, inter-arrival CV %.2f; prompt tokens p50 %d p99 %d; mean batch %.1f",
		sum.Requests, st.ArrivalRate, st.InterArrivalCV, st.PromptTokens.P50, st.PromptTokens.P99, sum.MeanBatchSize)
	nb.say("TTFT p50 %s p99 %s; window compliance %.0f%% of %d frames (p%g of TTFT ≤ SLO %s)",
		dur(sum.TTFT.P50), dur(sum.TTFT.P99), 100*sum.WindowCompliance, sum.JudgedFrames, 100*sum.WindowQuantile, cfg.SLO)
	nb.say("")
	if len(st.Outliers) == 0 {
		nb.say("no frame stands out")
	} else {
		nb.say("frames that stand out:")
		for _, e := range st.Outliers {
			nb.say("  %s", e.Explanation)
		}
	}
	var corr []string
	for _, c := range st.Correlations {
		if c.Valid {
			corr = append(corr, fmt.Sprintf("%s r=%.2f", c.Signal, c.R))
		}
	}
	nb.say("per-frame e2e p99 moves with: %s", strings.Join(corr, ", "))
	s.f.Episodes = st.Outliers
	s.f.Correlations = st.Correlations
	s.f.RecordedFrames = sum.Frames

	// The timeline, short requests' TTFT p99 per frame: what the pager saw.
	short, err := loadExchanges(ctx, s.recDir, s.analysisOptions(), time.Time{}, time.Time{}, shortOnly(cfg.LongPrompt))
	if err != nil {
		return nil, err
	}
	frames := short.Summary().Frames
	all := map[int64]analysis.Frame{}
	for _, f := range sum.Frames {
		all[f.Start.UnixNano()] = f
	}
	var worst time.Duration
	for _, f := range frames {
		worst = max(worst, f.TTFT.P99)
	}
	nb.say("")
	nb.say("timeline (short prompts < %d tokens; long share and batch over all requests):", cfg.LongPrompt)
	nb.say("  frame     req  long  batch  ttft p99")
	for _, f := range frames {
		af := all[f.Start.UnixNano()]
		mark := ""
		if s.f.inEpisode(f.Start) {
			mark = "  ◀ stands out"
		}
		nb.say("  %s %4d  %3.0f%%  %5.1f  %7s %-24s%s", clock(f.Start), af.Requests, 100*af.LongPromptShare,
			af.MeanBatchSize, dur(f.TTFT.P99), bar(f.TTFT.P99, worst, 24), mark)
	}
	// reel stats correlates frames' e2e p99, which long outputs dominate;
	// the pager watches TTFT. The same frames, by TTFT:
	var ttft, long, batch []float64
	for _, f := range frames {
		if af, ok := all[f.Start.UnixNano()]; ok && f.TTFT.N > 0 {
			ttft = append(ttft, float64(f.TTFT.P99))
			long = append(long, af.LongPromptShare)
			batch = append(batch, af.MeanBatchSize)
		}
	}
	s.f.TTFTvsLong, s.f.TTFTvsBatch = pearson(long, ttft), pearson(batch, ttft)
	nb.say("per-frame TTFT p99 (short prompts) moves with: long_prompt_share r=%.2f, batch_size r=%.2f",
		s.f.TTFTvsLong, s.f.TTFTvsBatch)
	return st, nil
}

// pearson is Pearson's r of xs and ys (0 when undefined).
func pearson(xs, ys []float64) float64 {
	n := float64(len(xs))
	if len(xs) < 3 || len(xs) != len(ys) {
		return 0
	}
	var sx, sy, sxx, syy, sxy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
		sxx, syy, sxy = sxx+xs[i]*xs[i], syy+ys[i]*ys[i], sxy+xs[i]*ys[i]
	}
	den := math.Sqrt((n*sxx - sx*sx) * (n*syy - sy*sy))
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

// chooseWindow picks the episode the story replays and prints the server's
// side of it.
func (s *story) chooseWindow(st *analysis.Stats) error {
	cfg, nb, f := &s.cfg, s.nb, s.f
	ep := f.incidentEpisode()
	if ep == nil {
		nb.say("")
		nb.say("stats did not flag the burst window %s → %s; replaying it anyway", clock(f.IncidentStart), clock(f.IncidentEnd))
		f.ReplayFrom = analysis.FrameOf(f.IncidentStart, time.Time{}, cfg.Frame).Add(-time.Duration(cfg.Lead) * cfg.Frame)
		f.ReplayTo = analysis.FrameOf(f.IncidentEnd, time.Time{}, cfg.Frame).Add(time.Duration(cfg.Tail+1) * cfg.Frame)
	} else {
		f.ReplayFrom = ep.Start.Add(-time.Duration(cfg.Lead) * cfg.Frame)
		f.ReplayTo = ep.End.Add(time.Duration(cfg.Tail) * cfg.Frame)
	}
	if sum := st.Summary; !sum.Start.IsZero() {
		first := analysis.FrameOf(sum.Start, time.Time{}, cfg.Frame)
		f.ReplayFrom = maxTime(f.ReplayFrom, first)
		f.ReplayTo = minTime(f.ReplayTo, sum.End)
	}
	if f.Signals != nil {
		nb.say("")
		nb.say("server side, from the scraped /metrics (reel stats prints it too):")
		nb.say("  %s", f.Signals.Explanation)
		if ep != nil {
			f.Server = serverViews(f.Signals, ep.Start, ep.End)
			for _, v := range f.Server {
				nb.say("  %-20s mean %5s in the flagged frames (max %s) vs %s elsewhere", v.Label, num(v.In), num(v.InMax), num(v.Out))
			}
		}
	}
	return nil
}

// replay runs one replay of the chosen window against a fresh simulator.
func (s *story) replay(ctx context.Context, name, dir string, opts cluster.Options) error {
	cfg, nb, f := &s.cfg, s.nb, s.f
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	port, flags := 8100, ""
	if opts.LongPromptThreshold > 0 {
		port, flags = 8101, fmt.Sprintf(" --long-prompt-threshold %d", opts.LongPromptThreshold)
		nb.section("Replay the incident against a shadow with the long-prompt queue (the fix)")
	} else {
		nb.section("Replay the incident against a shadow copy of production")
	}
	shadow, err := cluster.Start(ctx, "127.0.0.1:0", opts)
	if err != nil {
		return fmt.Errorf("start %s shadow: %w", name, err)
	}
	defer shadow.Close(context.Background())
	target, err := url.Parse(shadow.URL)
	if err != nil {
		return fmt.Errorf("shadow url: %w", err)
	}
	open := replayer.OpenDataset([]string{s.recDir}, formats.ReaderOptions{})
	ropts := replayer.Options{
		Target:    target,
		Selection: replayer.Selection{From: f.ReplayFrom, To: f.ReplayTo, Frame: cfg.Frame},
		Timeout:   2 * time.Minute, RunID: name,
		// The shadow runs on this machine, like the recorded server: the
		// recorded-host guard would refuse 127.0.0.1.
		AllowRecordedHost: true,
		Analysis:          s.analysisOptions(),
	}
	plan, err := replayer.NewPlan(ctx, open, ropts)
	if err != nil {
		return fmt.Errorf("plan %s replay: %w", name, err)
	}
	sink, err := formats.NewWriter[formats.Result](ctx, formats.WriterOptions{
		Dir: dir, Recorder: replayer.WriterName(ropts.Selection.Shard), Source: "replay:" + name,
		Meta: replayer.ResultMeta(ropts, 1, []string{s.recDir}),
	})
	if err != nil {
		return fmt.Errorf("open %s results: %w", name, err)
	}
	sc, err := startScrape(ctx, dir, name, shadow.URL+"/metrics", cfg.ScrapeEvery)
	if err != nil {
		sink.Close(context.Background())
		return err
	}
	first, last := plan.Span()
	nb.say("simcluster%s on %s; %d exchanges %s → %s on the original clock",
		flags, shadow.URL, plan.Exchanges(), clock(first), clock(last))
	nb.cmd(fmt.Sprintf("go run ./examples/simcluster --listen 127.0.0.1:%d --time-scale %g%s &", port, cfg.TimeScale, flags))
	nb.cmd(fmt.Sprintf("reel replay %s --target http://127.0.0.1:%d --out %s \\", s.recDir, port, dir),
		fmt.Sprintf("    --from %s --to %s --frame %s --allow-recorded-host --scrape http://127.0.0.1:%d/metrics",
			rfc(f.ReplayFrom), rfc(f.ReplayTo), cfg.Frame, port))
	rep, err := plan.Run(ctx, sink, 1)
	if _, serr := sc.stop(); err == nil && serr != nil {
		err = serr
	}
	if cerr := sink.Close(context.Background()); err == nil && cerr != nil {
		err = fmt.Errorf("close %s results: %w", name, cerr)
	}
	if err != nil {
		return fmt.Errorf("%s replay: %w", name, err)
	}
	sum := rep.Summary
	nb.say("sent %d: %d ok, %d errors; send lag p99 %s (how late reel was against the recorded clock)",
		rep.Sent, sum.OK, sum.Errors, dur(sum.Lag.P99))
	nb.say("all requests: TTFT p50 %s p99 %s; results in %s", dur(sum.TTFT.P50), dur(sum.TTFT.P99), dir)
	if name == "baseline" {
		f.BaselineLagP99 = sum.Lag.P99
	} else {
		f.FixLagP99 = sum.Lag.P99
	}
	return nil
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := write(fh); err != nil {
		fh.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fh.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// num prints a gauge value compactly.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 1:
		return fmt.Sprintf("%.2f", v)
	case v < 100:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
