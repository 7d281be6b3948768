// Command simcluster runs a simulated GPU LLM inference server (vLLM on one
// A100-class GPU with an 8B model, see package cluster) and, with
// --generate, production-shaped chat traffic against it or any other
// OpenAI-compatible target (package traffic).
//
//	go run ./examples/simcluster                          # serve on 127.0.0.1:8000
//	go run ./examples/simcluster --long-prompt-threshold 4096   # serve with the fix
//	go run ./examples/simcluster --generate --target http://127.0.0.1:8000 \
//	    --trace examples/simcluster/traffic/testdata/azure-llm-conv-2023-head600.csv --speed 0.8 --duration 2m \
//	    --incident-at 60s --incident-for 20s
//	go run ./examples/simcluster --generate --time-scale 10 --speed 10   # both in one process
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/examples/simcluster/cluster"
	"github.com/reelkit/reel/examples/simcluster/traffic"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, pflag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "simcluster:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("simcluster", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		co        cluster.Options
		to        traffic.Options
		listen    = fs.String("listen", "127.0.0.1:8000", "address to serve the simulated cluster on")
		usage     = fs.String("stream-usage", "asked", "when streams end with a usage chunk: asked (stream_options.include_usage) or always")
		generate  = fs.Bool("generate", false, "send generated traffic instead of only serving")
		tracePath = fs.String("trace", "", "Azure LLM trace CSV driving arrivals and token counts (default: built-in bursty process)")
		planOnly  = fs.Bool("plan", false, "with --generate: print the request plan as JSON lines (offset_ms, path, body) and send nothing")
	)
	fs.StringVar(&co.Model, "model", "", "model name served (default simcluster-8b)")
	fs.BoolVar(&co.StrictModel, "strict-model", false, "answer 404 to requests naming another model")
	fs.StringVar((*string)(&co.Tokenizer), "tokenizer", string(cluster.TokenizerO200k), "how prompt tokens are counted: o200k (the o200k_base BPE, as a real engine) or estimate (4 bytes per token, for hand-computed tests only)")
	fs.Float64Var(&co.TimeScale, "time-scale", 1, "run the simulation this many times faster than real time")
	fs.DurationVar(&co.MaxLag, "max-lag", 0, "how far the step loop may fall behind before simulated time slips (default 50ms; raise it with --time-scale on a busy machine)")
	fs.DurationVar(&co.StepBase, "step-base", 10*time.Millisecond, "fixed cost of one engine step")
	fs.DurationVar(&co.StepPerSeq, "step-per-seq", 300*time.Microsecond, "added step cost per sequence in the batch")
	fs.Float64Var(&co.PrefillTokensPerSec, "prefill-rate", 12000, "prefill throughput, tokens/s")
	fs.IntVar(&co.MaxBatchedTokens, "max-batched-tokens", 2048, "token budget of one step")
	fs.IntVar(&co.MaxNumSeqs, "max-num-seqs", 256, "largest running batch")
	fs.IntVar(&co.KVCapacityTokens, "kv-tokens", 131072, "KV-cache capacity in tokens")
	fs.IntVar(&co.MaxModelLen, "max-model-len", 32768, "largest prompt + output per request")
	fs.BoolVar(&co.DisablePrefixCache, "no-prefix-cache", false, "turn automatic prefix caching off")
	fs.IntVar(&co.LongPromptThreshold, "long-prompt-threshold", 0, "prompts of this many tokens or more use the separate long-prompt queue (0: off)")
	fs.IntVar(&co.MaxLongPrefills, "max-long-prefills", 1, "long prompts prefilling at once")
	fs.IntVar(&co.LongPrefillChunk, "long-prefill-chunk", 0, "prefill tokens per step for a long prompt (default max-batched-tokens/4)")
	fs.IntVar(&co.MeanOutputTokens, "mean-output", 186, "mean natural output length without ignore_eos")

	fs.StringVar(&to.Target, "target", "", "with --generate: base URL to send to (default: an in-process simulated cluster)")
	fs.DurationVar(&to.Duration, "duration", 2*time.Minute, "length of the generated traffic")
	fs.IntVar(&to.MaxRequests, "max-requests", 100000, "most requests to send")
	fs.DurationVar(&to.TraceOffset, "trace-offset", 0, "start this far into the trace")
	fs.Float64Var(&to.Speed, "speed", 1, "multiply the arrival rate")
	fs.Float64Var(&to.Rate, "rate", 5.5, "mean rate of the built-in bursty process, requests/s")
	fs.Uint64Var(&to.Seed, "seed", 0, "random seed of the plan")
	fs.DurationVar(&to.Incident.At, "incident-at", 0, "when the long-prompt window opens, from the start")
	fs.DurationVar(&to.Incident.For, "incident-for", 0, "length of the long-prompt window (0: no incident)")
	fs.DurationVar(&to.Incident.Every, "incident-every", 0, "repeat the window with this period, \"a week\" (0: once)")
	fs.Float64Var(&to.Incident.Factor, "long-factor", 4, "prompt length multiplier inside the window")
	fs.Float64Var(&to.Incident.Share, "long-share", 0.5, "share of the window's requests that get long prompts")
	fs.BoolVar(&to.NaturalEOS, "natural-eos", false, "do not send ignore_eos: the server picks output lengths up to max_tokens")
	fs.BoolVar(&to.NoStream, "no-stream", false, "send non-streaming requests")
	fs.IntVar(&to.MaxInFlight, "max-inflight", 1024, "most requests in flight; requests due beyond it are skipped")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `simcluster: a simulated GPU LLM server (OpenAI API, continuous batching) and a traffic generator.

usage:
  simcluster [flags]                        serve on --listen
  simcluster --generate [--target URL] ...  send chat traffic (to an in-process cluster without --target)

examples:
  go run ./examples/simcluster --long-prompt-threshold 4096
  go run ./examples/simcluster --generate --target http://127.0.0.1:8000 --trace examples/simcluster/traffic/testdata/azure-llm-conv-2023-head600.csv --speed 0.8 --incident-at 60s --incident-for 20s
  go run ./examples/simcluster --generate --time-scale 10 --speed 10 --duration 20s --incident-at 8s --incident-for 4s

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch *usage {
	case "asked":
	case "always":
		co.StreamUsage = cluster.UsageAlways
	default:
		return fmt.Errorf("--stream-usage %q: want asked or always", *usage)
	}
	if *tracePath != "" {
		f, err := os.Open(*tracePath)
		if err != nil {
			return fmt.Errorf("open trace: %w", err)
		}
		to.Trace, err = traffic.ReadAzureTrace(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", *tracePath, err)
		}
	}
	if !*generate {
		return serve(ctx, *listen, co, stdout)
	}
	if *planOnly {
		return printPlan(to, stdout)
	}
	return generateTraffic(ctx, co, to, stdout)
}

func serve(ctx context.Context, addr string, co cluster.Options, stdout io.Writer) error {
	srv, err := cluster.Start(ctx, addr, co)
	if err != nil {
		return err
	}
	o := srv.Cluster.Options()
	fmt.Fprintf(stdout, "simcluster: serving %s on %s (time scale %g, KV %d tokens, long-prompt queue %s)\n",
		o.Model, srv.URL, o.TimeScale, o.KVCapacityTokens, lane(o))
	fmt.Fprintf(stdout, "  try: curl -N %s/v1/chat/completions -d '{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,\"max_tokens\":20}'\n", srv.URL)
	return srv.Wait()
}

func lane(o cluster.Options) string {
	if o.LongPromptThreshold == 0 {
		return "off"
	}
	return fmt.Sprintf("on at %d tokens", o.LongPromptThreshold)
}

func printPlan(to traffic.Options, stdout io.Writer) error {
	p, err := traffic.NewPlanner(to)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	for {
		r, ok := p.Next()
		if !ok {
			return nil
		}
		line := struct {
			OffsetMs     float64         `json:"offset_ms"`
			Path         string          `json:"path"`
			PromptTokens int             `json:"prompt_tokens"`
			Long         bool            `json:"long"`
			Body         json.RawMessage `json:"body"`
		}{float64(r.Offset) / 1e6, r.Path, r.PromptTokens, r.Long, r.Body}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
}

func generateTraffic(ctx context.Context, co cluster.Options, to traffic.Options, stdout io.Writer) error {
	var srv *cluster.Server
	if to.Target == "" {
		var err error
		srv, err = cluster.Start(ctx, "127.0.0.1:0", co)
		if err != nil {
			return err
		}
		defer srv.Close(context.Background())
		to.Target = srv.URL
		fmt.Fprintf(stdout, "simcluster: in-process cluster on %s (time scale %g, long-prompt queue %s)\n", srv.URL, srv.Cluster.Options().TimeScale, lane(srv.Cluster.Options()))
	}
	fmt.Fprintf(stdout, "simcluster: sending %v of traffic to %s (speed %g, incident %s)\n", to.Duration, to.Target, to.Speed, incident(to.Incident))

	// A progress line every 10 s of run time.
	prog := &progress{}
	to.OnResult = prog.add
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-tick.C:
				prog.print(stdout, srv)
			case <-done:
				return
			}
		}
	}()
	sum, err := traffic.Run(ctx, to)
	close(done)
	if sum != nil {
		fmt.Fprintf(stdout, "simcluster: planned %d, sent %d, ok %d, failed %d, skipped %d, long %d, output tokens %d, max send lag %v, elapsed %v\n",
			sum.Planned, sum.Sent, sum.OK, sum.Failed, sum.Skipped, sum.Long, sum.OutputTokens, sum.MaxLag.Round(time.Microsecond), sum.Elapsed.Round(time.Millisecond))
		for k, n := range sum.Errors {
			fmt.Fprintf(stdout, "  errors: %s × %d\n", k, n)
		}
	}
	return err
}

func incident(in traffic.Incident) string {
	if in.For == 0 {
		return "none"
	}
	s := fmt.Sprintf("%g× prompts for %v at %v", in.Factor, in.For, in.At)
	if in.Every > 0 {
		s += fmt.Sprintf(" every %v", in.Every)
	}
	return s
}

// progress counts results between progress lines.
type progress struct {
	mu                     sync.Mutex // guards the fields below; add and print run on different goroutines
	ok, failed, long       int
	worstTTFT, worstLongTT time.Duration
}

func (p *progress) add(r *traffic.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Err != nil || r.Status/100 != 2 {
		p.failed++
		return
	}
	p.ok++
	if r.Long {
		p.long++
		p.worstLongTT = max(p.worstLongTT, r.TTFT)
	} else {
		p.worstTTFT = max(p.worstTTFT, r.TTFT)
	}
}

func (p *progress) print(w io.Writer, srv *cluster.Server) {
	p.mu.Lock()
	line := fmt.Sprintf("  last 10s: ok %d (long %d), failed %d, worst TTFT short %v long %v",
		p.ok, p.long, p.failed, p.worstTTFT.Round(time.Millisecond), p.worstLongTT.Round(time.Millisecond))
	p.ok, p.failed, p.long, p.worstTTFT, p.worstLongTT = 0, 0, 0, 0, 0
	p.mu.Unlock()
	if srv != nil {
		st := srv.Cluster.Stats()
		line += fmt.Sprintf("; server: running %d, waiting %d, KV %.0f%%", st.Running, st.Waiting, 100*st.KVUsage)
	}
	fmt.Fprintln(w, line)
}
