// Command memory-bench supports bench/memory/run.sh, which measures the peak
// memory (max RSS) of `reel replay`, `reel stats` and `reel report` at two
// run lengths. It writes the synthetic traffic they read and serves the
// streaming loopback target the replay sends to:
//
//	memory-bench accesslog -n 100000 -rate 5000 > access.jsonl   # for reel record --access-log
//	memory-bench dataset -out DIR -n 100000 -rate 5000           # streaming chat exchanges, TTFT and event gaps
//	memory-bench results -out DIR -n 10000000 -rate 5000         # result/1 rows as a replay of that traffic writes them
//	memory-bench server -addr 127.0.0.1:18095                    # an SSE chat endpoint answering at once
//	memory-bench server -addr 127.0.0.1:18095 -json              # the same, answering with a JSON completion
//
// Both generators make the same traffic for the same -n, -rate and -seed:
// small chat requests at a Poisson rate, log-normal latencies, and a burst of
// 4× longer prompts with a slower tail every 10 minutes (so stats has frames
// that stand out, as in a real recording).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/reelkit/reel/formats"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: memory-bench accesslog|dataset|server [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "accesslog":
		err = accessLog(os.Args[2:], os.Stdout)
	case "dataset":
		err = dataset(context.Background(), os.Args[2:])
	case "results":
		err = results(context.Background(), os.Args[2:])
	case "server":
		err = server(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "memory-bench:", err)
		os.Exit(1)
	}
}

// exchange is one synthetic request and what production answered.
type exchange struct {
	ts                  time.Time
	ttft, duration      time.Duration
	gaps                []int32 // µs between token events
	prompt, output      int32
	model, body, client string
}

// traffic generates the exchanges one at a time.
type traffic struct {
	rng  *rand.Rand
	t    time.Time
	mean time.Duration // mean inter-arrival
	buf  []int32
}

func newTraffic(rate float64, seed uint64) *traffic {
	return &traffic{
		rng:  rand.New(rand.NewPCG(seed, 0x6d656d)),
		t:    time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC),
		mean: time.Duration(float64(time.Second) / rate),
		buf:  make([]int32, 0, 64),
	}
}

var models = []string{"llama-3-8b", "llama-3-70b", "qwen-2.5-7b"}

func (g *traffic) next() exchange {
	g.t = g.t.Add(time.Duration(g.rng.ExpFloat64() * float64(g.mean)))
	// A burst of long prompts (and a slower tail) for 30 s every 10 min.
	burst := g.t.Sub(g.t.Truncate(10*time.Minute)) < 30*time.Second
	prompt := int32(math.Exp(5.5 + 0.6*g.rng.NormFloat64())) // median ~250 tokens
	ttftMu := math.Log(0.08)                                 // median 80 ms
	if burst && g.rng.IntN(3) == 0 {
		prompt *= 4
		ttftMu = math.Log(0.4)
	}
	prompt = max(prompt, 4)
	out := int32(8 + g.rng.IntN(24))
	ttft := time.Duration(math.Exp(ttftMu+0.5*g.rng.NormFloat64()) * float64(time.Second))
	g.buf = g.buf[:0]
	dur := ttft
	for range out - 1 {
		gap := int32(math.Exp(math.Log(20_000) + 0.3*g.rng.NormFloat64())) // ~20 ms per token
		g.buf = append(g.buf, gap)
		dur += time.Duration(gap) * time.Microsecond
	}
	dur += time.Millisecond // the trailing [DONE]
	m := models[g.rng.IntN(len(models))]
	body := fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"question %d"}]}`, m, out, g.rng.IntN(1_000_000))
	return exchange{ts: g.t, ttft: ttft, duration: dur, gaps: g.buf, prompt: prompt, output: out, model: m, body: body,
		client: "10.0.0." + strconv.Itoa(1+g.rng.IntN(200))}
}

type genFlags struct {
	n    int
	rate float64
	seed uint64
}

func (f *genFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.n, "n", 100_000, "exchanges")
	fs.Float64Var(&f.rate, "rate", 5000, "mean arrival rate, exchanges/s (Poisson)")
	fs.Uint64Var(&f.seed, "seed", 1, "random seed")
}

// parseGenerator parses a generator's flags: the traffic and -out.
func parseGenerator(name string, args []string) (genFlags, string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var f genFlags
	f.register(fs)
	out := fs.String("out", "", name+" directory (required)")
	if err := fs.Parse(args); err != nil {
		return f, "", err
	}
	if err := f.check(); err != nil {
		return f, "", err
	}
	if *out == "" {
		return f, "", fmt.Errorf("want -out DIR")
	}
	return f, *out, nil
}

func (f *genFlags) check() error {
	if f.n < 1 || f.rate <= 0 {
		return fmt.Errorf("want -n ≥ 1 and -rate > 0")
	}
	return nil
}

// accessLog writes nginx escape=json access-log lines in the format
// recorder/accesslog documents (non-streaming: an access log has no token
// timings).
func accessLog(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("accesslog", flag.ContinueOnError)
	var f genFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	w := bufio.NewWriterSize(stdout, 1<<20)
	g := newTraffic(f.rate, f.seed)
	enc := json.NewEncoder(w)
	for range f.n {
		x := g.next()
		end := x.ts.Add(x.duration)
		line := map[string]string{
			"msec":                   fmt.Sprintf("%d.%03d", end.Unix(), end.Nanosecond()/1e6),
			"request_time":           fmt.Sprintf("%.3f", x.duration.Seconds()),
			"upstream_response_time": fmt.Sprintf("%.3f", x.duration.Seconds()),
			"upstream_header_time":   fmt.Sprintf("%.3f", x.ttft.Seconds()),
			"remote_addr":            x.client,
			"host":                   "prod.example",
			"request_method":         "POST",
			"request_uri":            "/v1/chat/completions",
			"status":                 "200",
			"content_type":           "application/json",
			"request_length":         strconv.Itoa(len(x.body) + 200),
			"content_length":         strconv.Itoa(len(x.body)),
			"body_bytes_sent":        "600",
			"request_body":           x.body,
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	return w.Flush()
}

// dataset writes streaming chat exchanges (TTFT, event gaps, prompt and
// output tokens) straight through the formats writer.
func dataset(ctx context.Context, args []string) error {
	f, out, err := parseGenerator("dataset", args)
	if err != nil {
		return err
	}
	w, err := formats.NewWriter[formats.Exchange](ctx, formats.WriterOptions{Dir: out, Recorder: "bench", Source: "bench/memory", NoSpool: true})
	if err != nil {
		return fmt.Errorf("open dataset: %w", err)
	}
	g := newTraffic(f.rate, f.seed)
	for i := range f.n {
		e := g.next()
		x := formats.Exchange{
			Ts: e.ts, TsUnixNs: e.ts.UnixNano(), Recorder: "bench", Seq: int64(i + 1),
			ConnID: int64(i%512 + 1), ConnSeq: int32(i / 512), Client: e.client,
			Method: "POST", Host: "prod.example", Path: "/v1/chat/completions",
			ReqContentType: "application/json", ReqBody: []byte(e.body), ReqBodyBytes: int64(len(e.body)),
			Model: e.model, Stream: true, MaxTokens: e.output, PromptTokens: e.prompt, PromptTokensSource: "usage",
			Status: 200, RespContentType: "text/event-stream", RespBodyBytes: 600,
			TTFBNs: int64(e.ttft) - 200_000, DurationNs: int64(e.duration), TTFTNs: int64(e.ttft),
			Events: e.output + 2, EventGapsUs: append([]int32(nil), e.gaps...), OutputTokens: e.output,
			BatchSize: -1, QueueDepth: -1, Complete: true,
		}
		if err := w.Write(&x); err != nil {
			w.Close(context.Background())
			return fmt.Errorf("write: %w", err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		return fmt.Errorf("close dataset: %w", err)
	}
	return nil
}

// results writes the result rows a replay of the traffic at speed 1 would
// write (sent 0.2–1.2 ms late), for `reel report` at lengths a replay on
// this machine would take hours to reach.
func results(ctx context.Context, args []string) error {
	f, out, err := parseGenerator("results", args)
	if err != nil {
		return err
	}
	w, err := formats.NewWriter[formats.Result](ctx, formats.WriterOptions{Dir: out, Recorder: "bench", Source: "replay:bench", NoSpool: true})
	if err != nil {
		return fmt.Errorf("open results: %w", err)
	}
	g := newTraffic(f.rate, f.seed)
	var t0 time.Time
	runStart := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC).UnixNano()
	for i := range f.n {
		e := g.next()
		if i == 0 {
			t0 = e.ts
		}
		lag := int64(200_000 + g.rng.IntN(1_000_000))
		sched := int64(e.ts.Sub(t0))
		var ttst int64
		if len(e.gaps) > 0 {
			ttst = int64(e.gaps[0]) * 1000
		}
		e2e := int64(e.duration) - int64(time.Millisecond)
		r := formats.Result{
			RunID: "bench", Recorder: "bench", Seq: int64(i + 1), OrigTs: e.ts, Frame: e.ts.Truncate(5 * time.Second),
			ScheduledNs: sched, SentUnixNs: runStart + sched + lag, LagNs: lag, Status: 200,
			TTFBNs: int64(e.ttft) - 200_000, TTFTNs: int64(e.ttft), TTSTNs: ttst, E2ENs: e2e, E2ESchedNs: e2e + lag,
			Events: e.output + 2, OutputTokens: e.output, ITLUs: append([]int32(nil), e.gaps...),
			BytesSent: int64(len(e.body)), BytesRecv: 600, BatchSize: -1, QueueDepth: -1,
			Method: "POST", Path: "/v1/chat/completions", Model: e.model, PromptTokens: e.prompt,
		}
		if err := w.Write(&r); err != nil {
			w.Close(context.Background())
			return fmt.Errorf("write: %w", err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		return fmt.Errorf("close results: %w", err)
	}
	return nil
}

// server answers every chat request at once with a short OpenAI-style stream
// of -tokens token events and usage (or, with -json, the same completion as
// one JSON body), so the replayer's side of a replay is what is measured.
func server(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:18095", "listen address")
	tokens := fs.Int("tokens", 4, "token events per response")
	asJSON := fs.Bool("json", false, "answer with a JSON completion instead of an event stream (cheaper per request: for replays at high rates)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var body []byte
	contentType := "text/event-stream"
	if *asJSON {
		contentType = "application/json"
		body = fmt.Appendf(body, `{"choices":[{"message":{"role":"assistant","content":"%s"}}],"usage":{"prompt_tokens":10,"completion_tokens":%d}}`,
			strings.Repeat("t ", *tokens), *tokens)
	} else {
		for i := range *tokens {
			body = fmt.Appendf(body, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d \"}}]}\n\n", i)
		}
		body = fmt.Appendf(body, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", *tokens)
	}
	return http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
}
