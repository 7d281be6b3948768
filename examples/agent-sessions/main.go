// Command agent-sessions shows why a replay must wait for answers when the
// traffic is conversations and agent loops. It records chat sessions and
// agent loops (each later turn carries the previous answer, sent a think
// time after it) from a simulated GPU server through reel's redacting
// sidecar, finds the sessions in the redacted recording (reel stats
// --sessions), and replays the same recording against a shadow twice as
// slow, twice: open loop on the recorded clock (--sessions off) and closed
// loop within each session (--sessions infer, reel's default). It prints
// what each replay says about the shadow's queue.
//
//	go run ./examples/agent-sessions            # about a minute
//	go run ./examples/agent-sessions --quick    # ~25 s, asserts the conclusions (CI)
//
// Open loop sends every later turn at its recorded time, before the slower
// shadow has produced the answer that turn carries: a load production never
// saw, which deepens the shadow's queue. With sessions, no turn goes out
// before its predecessor's answer ended; how much later than recorded it
// went is its session delay, reported apart from the dispatcher's lag.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/examples/simcluster/cluster"
	"github.com/reelkit/reel/examples/simcluster/traffic"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/proxy"
	"github.com/reelkit/reel/redact"
	"github.com/reelkit/reel/replayer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var fail *conclusionError
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
	case errors.As(err, &fail):
		fmt.Fprintln(os.Stderr, "agent-sessions:", err)
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "agent-sessions:", err)
		os.Exit(2)
	}
}

// conclusionError is a conclusion of the story that did not hold.
type conclusionError struct{ msg string }

func (e *conclusionError) Error() string { return e.msg }

// The simulator runs 20× faster than real time in production and 10× in
// the shadow: the same simulated GPU, half as fast on the wall clock.
// Both run at most maxSeqs sequences at once (a small card), so that load
// production never had queues in the shadow.
const (
	prodScale   = 20
	shadowScale = 10
	maxSeqs     = 6
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("agent-sessions", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "a shorter recording, and exit 1 when a conclusion does not hold")
	out := fs.String("out", "", "directory for the recording and results (default: a temporary one, removed)")
	seed := fs.Uint64("seed", 1, "traffic seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir := *out
	if dir == "" {
		d, err := os.MkdirTemp("", "agent-sessions-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	recDir := filepath.Join(dir, "recording")
	dur := 12 * time.Second
	if *quick {
		dur = 5 * time.Second
	}

	// 1. Record sessions through the sidecar.
	prod, err := cluster.Start(ctx, "127.0.0.1:0", cluster.Options{TimeScale: prodScale, MaxNumSeqs: maxSeqs})
	if err != nil {
		return fmt.Errorf("production server: %w", err)
	}
	defer prod.Close(context.Background())
	sum, err := record(ctx, prod.URL, recDir, traffic.Options{
		Rate: 14, Duration: dur, Seed: *seed, SystemPrompts: 2,
		Sessions: traffic.Sessions{Share: 0.8, Turns: 5, Think: 400 * time.Millisecond, AgentShare: 0.5, Steps: 8, AgentThink: 20 * time.Millisecond},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "recorded %d requests: %d sessions (conversations and agent loops), %d later turns\n", sum.Sent, sum.Sessions, sum.FollowUps)
	fmt.Fprintf(stdout, "  $ reel record --listen 127.0.0.1:8081 --upstream %s --out %s\n\n", prod.URL, recDir)

	// 2. Find them in the redacted recording.
	st, err := analysis.SessionStatsOf(ctx, []string{recDir}, formats.ReaderOptions{}, analysis.SessionsInferred, analysis.LinkerOptions{})
	if err != nil {
		return fmt.Errorf("session stats: %w", err)
	}
	fmt.Fprintf(stdout, "  $ reel stats %s\n", recDir)
	if err := st.WriteText(stdout); err != nil {
		return err
	}

	// 3. Replay against a shadow twice as slow, without and with sessions.
	fmt.Fprintf(stdout, "\nreplaying against a shadow twice as slow (simulator --time-scale %d instead of %d):\n", shadowScale, prodScale)
	runs := map[analysis.SessionMode]*outcome{}
	for _, mode := range []analysis.SessionMode{analysis.SessionsOff, analysis.SessionsInferred} {
		o, err := replay(ctx, recDir, filepath.Join(dir, "results-"+mode.String()), mode)
		if err != nil {
			return err
		}
		runs[mode] = o
		fmt.Fprintf(stdout, "  $ reel replay %s --target SHADOW --out %s --sessions %s\n", recDir, filepath.Join(dir, "results-"+mode.String()), mode)
	}
	off, on := runs[analysis.SessionsOff], runs[analysis.SessionsInferred]
	fmt.Fprintf(stdout, "\n%-34s %14s %14s\n", "", "--sessions off", "--sessions infer")
	row := func(name string, a, b any) { fmt.Fprintf(stdout, "%-34s %14v %14v\n", name, a, b) }
	row("later turns sent before the answer", off.early, on.early)
	row("shadow queue depth (mean)", fmt.Sprintf("%.2f", off.sum.MeanQueueDepth), fmt.Sprintf("%.2f", on.sum.MeanQueueDepth))
	row("peak in flight", off.sum.PeakInFlight, on.sum.PeakInFlight)
	row("ttft p99", off.sum.TTFT.P99.Round(time.Millisecond), on.sum.TTFT.P99.Round(time.Millisecond))
	row("e2e from schedule p99", off.sum.E2ESched.P99.Round(time.Millisecond), on.sum.E2ESched.P99.Round(time.Millisecond))
	row("dispatcher lag p99", off.sum.Lag.P99.Round(time.Microsecond), on.sum.Lag.P99.Round(time.Microsecond))
	row("turns delayed by their session", off.sum.SessionDelay.N, on.sum.SessionDelay.N)
	row("session delay p50 / p99", "-", fmt.Sprintf("%v / %v", on.sum.SessionDelay.P50.Round(time.Millisecond), on.sum.SessionDelay.P99.Round(time.Millisecond)))
	fmt.Fprintf(stdout, `
Open loop sent %d later turns before the slower shadow had produced the
answer they carry: load production never had, so the queue it reports is
deeper than the one a slower server would really see. With sessions every
turn waited for its answer plus the recorded think time; the shadow's
slowness shows as session delay (and in e2e from schedule), the
dispatcher's own precision stays in lag.
`, off.early)
	if *quick {
		switch {
		case on.early != 0:
			return &conclusionError{fmt.Sprintf("with sessions, %d turns went out before their predecessor's answer", on.early)}
		case off.early == 0:
			return &conclusionError{"open loop sent no turn early: the shadow was not slower?"}
		case on.sum.SessionDelay.N == 0:
			return &conclusionError{"no turn was delayed by its session against a slower shadow"}
		case on.sum.MeanQueueDepth >= off.sum.MeanQueueDepth:
			return &conclusionError{fmt.Sprintf("the shadow's queue was not shallower with sessions (%.2f) than open loop (%.2f)", on.sum.MeanQueueDepth, off.sum.MeanQueueDepth)}
		}
	}
	return nil
}

// record runs the traffic through a redacting sidecar in front of target
// into dir.
func record(ctx context.Context, target, dir string, opts traffic.Options) (*traffic.Summary, error) {
	red, err := redact.New(redact.DefaultPolicy(), []byte("agent-sessions-example-key-0123"))
	if err != nil {
		return nil, err
	}
	up, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	rec, _, err := recorder.OpenDataset(ctx, formats.WriterOptions{Dir: dir, Recorder: "sidecar-1", Source: "proxy:" + target},
		red, recorder.Options{Config: recorder.Config{Upstream: up.Host}, Pipeline: recorder.PipelineOptions{Queue: 1 << 14, QueueBytes: 256 << 20}})
	if err != nil {
		return nil, fmt.Errorf("open recording: %w", err)
	}
	p, err := proxy.New(proxy.Options{Upstream: up, Recorder: rec})
	if err != nil {
		rec.Close(context.Background())
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rec.Close(context.Background())
		return nil, err
	}
	srv := &http.Server{Handler: p}
	go srv.Serve(ln)
	opts.Target = "http://" + ln.Addr().String()
	sum, err := traffic.Run(ctx, opts)
	srv.Close()
	if cerr := rec.Close(context.Background()); err == nil && cerr != nil {
		err = fmt.Errorf("close recording: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	return sum, nil
}

// outcome is one replay: its summary and how many later turns it sent
// before their predecessor's answer had ended on the shadow.
type outcome struct {
	sum   *analysis.Summary
	early int
}

// replay replays recDir against a fresh slow shadow with mode into dir.
func replay(ctx context.Context, recDir, dir string, mode analysis.SessionMode) (*outcome, error) {
	shadow, err := cluster.Start(ctx, "127.0.0.1:0", cluster.Options{TimeScale: shadowScale, MaxNumSeqs: maxSeqs})
	if err != nil {
		return nil, fmt.Errorf("shadow: %w", err)
	}
	defer shadow.Close(context.Background())
	target, err := url.Parse(shadow.URL)
	if err != nil {
		return nil, err
	}
	ropts := replayer.Options{
		Target: target, RunID: "sessions-" + mode.String(), Timeout: time.Minute,
		AllowRecordedHost: true, // the shadow runs on this machine, like the recorded server
		Sessions:          replayer.SessionOptions{Mode: mode},
	}
	open := replayer.OpenDataset([]string{recDir}, formats.ReaderOptions{})
	plan, err := replayer.NewPlan(ctx, open, ropts)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	sink, err := formats.NewWriter[formats.Result](ctx, formats.WriterOptions{
		Dir: dir, Recorder: replayer.WriterName(ropts.Selection.Shard), Source: "replay:" + ropts.RunID,
		Meta: replayer.ResultMeta(ropts, 1, []string{recDir}),
	})
	if err != nil {
		return nil, err
	}
	rep, err := plan.Run(ctx, sink, 1)
	if cerr := sink.Close(context.Background()); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("replay --sessions %s: %w", mode, err)
	}
	early, err := earlyTurns(ctx, recDir, dir)
	if err != nil {
		return nil, err
	}
	return &outcome{sum: rep.Summary, early: early}, nil
}

// earlyTurns counts the later turns of the recording (as reel infers them)
// whose replay went out before their predecessor's replay had ended.
func earlyTurns(ctx context.Context, recDir, resDir string) (int, error) {
	type key struct {
		rec string
		seq int64
	}
	type span struct{ sent, end int64 }
	rows := map[key]span{}
	rr, err := formats.OpenReader[formats.Result](ctx, []string{resDir}, formats.ReaderOptions{})
	if err != nil {
		return 0, err
	}
	for {
		r, err := rr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			rr.Close()
			return 0, err
		}
		rows[key{r.Recorder, r.Seq}] = span{r.SentUnixNs, r.SentUnixNs + r.E2ENs}
	}
	rr.Close()
	xr, err := formats.OpenReader[formats.Exchange](ctx, []string{recDir}, formats.ReaderOptions{Columns: append(analysis.LinkColumns(), "recorder", "seq")})
	if err != nil {
		return 0, err
	}
	defer xr.Close()
	l := analysis.NewLinker(analysis.SessionsInferred, analysis.LinkerOptions{})
	var keys []key
	early := 0
	for ord := int64(0); ; ord++ {
		x, err := xr.Next()
		if err == io.EOF {
			return early, nil
		}
		if err != nil {
			return 0, err
		}
		keys = append(keys, key{x.Recorder, x.Seq})
		for _, d := range l.Link(ord, "", x).Deps {
			child, parent := rows[keys[ord]], rows[keys[d]]
			if child.sent != 0 && parent.end != 0 && child.sent < parent.end {
				early++
			}
		}
	}
}
