// Command fidelity measures whether a replay reproduces production's
// prefix-cache reuse, raw and redacted (issue #17, SPEC §9 "workload
// fidelity"). Traffic whose prompts share prefixes of arbitrary lengths —
// several system prompts, multi-turn conversations that re-send their
// earlier turns, agent loops that re-send a tool preamble and a growing
// scratchpad — goes through the reel sidecar (recording raw) into a
// simulated vLLM-like server tokenizing with o200k_base and caching 16-token
// blocks. The recording is redacted the way `reel redact` does it, and both
// datasets are replayed against fresh servers; the cached prompt tokens
// each server reported (usage.prompt_tokens_details.cached_tokens) are
// compared.
//
//	go run ./bench/fidelity                    # about 600 requests
//	go run ./bench/fidelity --sessions 120     # more traffic
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reelkit/reel/examples/simcluster/cluster"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/proxy"
	"github.com/reelkit/reel/redact"
	"github.com/reelkit/reel/replayer"
)

// config sizes a fidelity run.
type config struct {
	Dir      string        // work directory (datasets and results)
	Sessions int           // conversations + agent loops + one-shot groups
	Gap      time.Duration // wall time between requests (no two overlap)
	Scale    float64       // simulator time scale
	Seed     uint64
}

// tally is one side's prompt-token accounting.
type tally struct {
	Requests, Reporting int64
	Prompt, Cached      int64
}

func (t tally) reuse() float64 {
	if t.Prompt == 0 {
		return 0
	}
	return float64(t.Cached) / float64(t.Prompt)
}

// outcome is what a run measured.
type outcome struct {
	Production, Raw, Redacted tally
	Scheme                    string
	// RawBodyTokens and RedactedBodyTokens are the o200k prompt tokens of
	// the recorded request bodies, raw and redacted (replay's prompt_tokens
	// column repeats the recording's count).
	RawBodyTokens, RedactedBodyTokens int64
}

func main() {
	var cfg config
	flag.IntVar(&cfg.Sessions, "sessions", 60, "sessions of each kind (conversations, agent loops, one-shot groups)")
	flag.DurationVar(&cfg.Gap, "gap", 12*time.Millisecond, "wall time between requests")
	flag.Float64Var(&cfg.Scale, "time-scale", 20, "simulator time scale")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "traffic seed")
	flag.Parse()
	dir, err := os.MkdirTemp("", "reel-fidelity-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	cfg.Dir = dir
	out, err := run(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fidelity:", err)
		os.Exit(1)
	}
	out.write(os.Stdout)
}

func (o *outcome) write(w io.Writer) {
	fmt.Fprintf(w, "redaction scheme %s; simulator o200k_base, 16-token blocks\n", o.Scheme)
	fmt.Fprintf(w, "%-18s %8s %12s %12s %8s\n", "", "requests", "prompt tok", "cached tok", "reuse")
	for _, r := range []struct {
		name string
		t    tally
	}{{"production", o.Production}, {"raw replay", o.Raw}, {"redacted replay", o.Redacted}} {
		fmt.Fprintf(w, "%-18s %8d %12d %12d %7.2f%%\n", r.name, r.t.Requests, r.t.Prompt, r.t.Cached, 100*r.t.reuse())
	}
	fmt.Fprintf(w, "raw replay cached tokens vs production: %+.2f%%\n", 100*rel(o.Raw.Cached, o.Production.Cached))
	fmt.Fprintf(w, "redacted replay cached tokens vs raw replay: %+.2f%%\n", 100*rel(o.Redacted.Cached, o.Raw.Cached))
	fmt.Fprintf(w, "redacted prompt tokens (o200k) vs raw: %d vs %d, %+.2f%%\n", o.RedactedBodyTokens, o.RawBodyTokens, 100*rel(o.RedactedBodyTokens, o.RawBodyTokens))
}

func rel(b, a int64) float64 {
	if a == 0 {
		return 0
	}
	return float64(b-a) / float64(a)
}

func simOptions(cfg config) cluster.Options {
	return cluster.Options{TimeScale: cfg.Scale, Model: "sim-8b"} // the default tokenizer: o200k_base
}

// run records, redacts and replays; see the package comment.
func run(ctx context.Context, cfg config) (*outcome, error) {
	rawDir := filepath.Join(cfg.Dir, "raw")
	redDir := filepath.Join(cfg.Dir, "redacted")
	out := &outcome{}
	var err error
	if out.Production, err = record(ctx, cfg, rawDir); err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	red, err := redact.New(redact.DefaultPolicy(), []byte("fidelity-bench-key-0123456789"))
	if err != nil {
		return nil, err
	}
	out.Scheme = redact.SchemeOf(red.Fingerprint())
	if err := redactDataset(ctx, red, rawDir, redDir); err != nil {
		return nil, fmt.Errorf("redact: %w", err)
	}
	if out.RawBodyTokens, err = bodyTokens(ctx, cfg, rawDir); err != nil {
		return nil, err
	}
	if out.RedactedBodyTokens, err = bodyTokens(ctx, cfg, redDir); err != nil {
		return nil, err
	}
	if out.Raw, err = replay(ctx, cfg, rawDir); err != nil {
		return nil, fmt.Errorf("raw replay: %w", err)
	}
	if out.Redacted, err = replay(ctx, cfg, redDir); err != nil {
		return nil, fmt.Errorf("redacted replay: %w", err)
	}
	return out, nil
}

// bodyTokens counts the prompt tokens of a dataset's request bodies under
// the simulator's tokenizer.
func bodyTokens(ctx context.Context, cfg config, dir string) (int64, error) {
	var n int64
	err := eachExchange(ctx, dir, func(x *formats.Exchange) error {
		k, err := simOptions(cfg).PromptTokens(x.Path, x.ReqBody)
		n += int64(k)
		return err
	})
	return n, err
}

// record sends the traffic through a raw-recording sidecar into a fresh
// simulator and returns what the simulator reported.
func record(ctx context.Context, cfg config, dir string) (tally, error) {
	var t tally
	prod, err := cluster.Start(ctx, "127.0.0.1:0", simOptions(cfg))
	if err != nil {
		return t, err
	}
	defer prod.Close(context.Background())
	upstream, _ := url.Parse(prod.URL)
	rec, _, err := recorder.OpenDataset(ctx, formats.WriterOptions{Dir: dir, Recorder: "sidecar", Source: "proxy:" + prod.URL},
		nil, recorder.Options{Config: recorder.Config{Upstream: upstream.Host}})
	if err != nil {
		return t, err
	}
	p, err := proxy.New(proxy.Options{Upstream: upstream, Recorder: rec})
	if err != nil {
		rec.Close(context.Background())
		return t, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rec.Close(context.Background())
		return t, err
	}
	srv := proxy.NewServer(ln.Addr().String(), p)
	go srv.Serve(ln)
	client := &http.Client{Timeout: time.Minute}
	next := time.Now()
	for _, body := range traffic(cfg) {
		time.Sleep(time.Until(next))
		next = next.Add(cfg.Gap)
		resp, err := client.Post("http://"+ln.Addr().String()+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			srv.Close()
			rec.Close(context.Background())
			return t, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			srv.Close()
			rec.Close(context.Background())
			return t, fmt.Errorf("production answered %d: %s", resp.StatusCode, b)
		}
	}
	srv.Close()
	if err := rec.Close(context.Background()); err != nil {
		return t, err
	}
	err = eachExchange(ctx, dir, func(x *formats.Exchange) error {
		t.Requests++
		t.Prompt += int64(x.PromptTokens)
		if x.CachedTokens != nil {
			t.Reporting++
			t.Cached += int64(*x.CachedTokens)
		}
		return nil
	})
	return t, err
}

// redactDataset redacts every exchange of a raw dataset into dst, as
// `reel redact` does.
func redactDataset(ctx context.Context, red *redact.Redactor, src, dst string) error {
	w, err := formats.NewWriter[formats.Exchange](ctx, formats.WriterOptions{Dir: dst, Recorder: "sidecar",
		Source: "redact:" + src, RedactionFingerprint: red.Fingerprint(), NoSpool: true})
	if err != nil {
		return err
	}
	err = eachExchange(ctx, src, func(x *formats.Exchange) error {
		red.RedactExchange(x)
		if x.RedactErr != "" {
			return fmt.Errorf("exchange %d: %s", x.Seq, x.RedactErr)
		}
		return w.Write(x)
	})
	if cerr := w.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

func eachExchange(ctx context.Context, dir string, f func(*formats.Exchange) error) error {
	r, err := formats.OpenReader[formats.Exchange](ctx, []string{dir}, formats.ReaderOptions{})
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		x, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := f(x); err != nil {
			return err
		}
	}
}

// resultTally is a Sink that adds up the shadow's usage.
type resultTally struct{ t tally }

func (s *resultTally) Write(r *formats.Result) error {
	s.t.Requests++
	if r.Status != http.StatusOK {
		return fmt.Errorf("shadow answered %d: %s", r.Status, r.Error)
	}
	s.t.Prompt += int64(r.PromptTokens)
	if r.CachedTokens != nil {
		s.t.Reporting++
		s.t.Cached += int64(*r.CachedTokens)
	}
	return nil
}

// replay replays dir against a fresh simulator at the recorded pace.
func replay(ctx context.Context, cfg config, dir string) (tally, error) {
	shadow, err := cluster.Start(ctx, "127.0.0.1:0", simOptions(cfg))
	if err != nil {
		return tally{}, err
	}
	defer shadow.Close(context.Background())
	target, _ := url.Parse(shadow.URL)
	plan, err := replayer.NewPlan(ctx, replayer.OpenDataset([]string{dir}, formats.ReaderOptions{}),
		replayer.Options{Target: target, AllowRecordedHost: true, Timeout: time.Minute, RunID: filepath.Base(dir)})
	if err != nil {
		return tally{}, err
	}
	sink := &resultTally{}
	if _, err := plan.Run(ctx, sink, 1); err != nil {
		return tally{}, err
	}
	return sink.t, nil
}

// traffic renders the request bodies in send order: sessions of three
// kinds interleaved, each turn re-sending everything before it.
func traffic(cfg config) []string {
	rng := rand.New(rand.NewPCG(cfg.Seed, 17))
	systems := make([]string, 5)
	for i := range systems {
		systems[i] = prose(rng, 40+rng.IntN(400)) // arbitrary, non-aligned lengths
	}
	tools := "You can call these tools. " + prose(rng, 350)
	type session struct {
		msgs  []message
		turns int
		agent bool
	}
	var live []*session
	for i := range cfg.Sessions {
		live = append(live,
			&session{msgs: []message{{"system", systems[i%len(systems)]}}, turns: 2 + rng.IntN(5)},                                   // conversation
			&session{msgs: []message{{"system", tools}, {"user", prose(rng, 20+rng.IntN(60))}}, turns: 3 + rng.IntN(5), agent: true}, // agent loop
			&session{msgs: []message{{"system", systems[rng.IntN(len(systems))]}}, turns: 1})                                         // one-shot
	}
	var bodies []string
	for len(live) > 0 {
		k := rng.IntN(len(live))
		s := live[k]
		switch {
		case s.agent && len(s.msgs) > 2:
			// The tool's result joins the scratchpad after the last call.
			s.msgs = append(s.msgs, message{"user", "Tool result: " + prose(rng, 10+rng.IntN(120))})
		case !s.agent:
			s.msgs = append(s.msgs, message{"user", prose(rng, 5+rng.IntN(80))})
		}
		bodies = append(bodies, chatBody(s.msgs))
		// The answer the client keeps and re-sends: an assistant turn.
		if s.agent {
			s.msgs = append(s.msgs, message{"assistant", "Thought: " + prose(rng, 10+rng.IntN(40)) + " Action: lookup_order(" + fmt.Sprint(rng.IntN(99999)) + ")"})
		} else {
			s.msgs = append(s.msgs, message{"assistant", prose(rng, 10+rng.IntN(90))})
		}
		if s.turns--; s.turns == 0 {
			live = append(live[:k], live[k+1:]...)
		}
	}
	return bodies
}

type message struct{ Role, Content string }

func chatBody(msgs []message) string {
	var b strings.Builder
	b.WriteString(`{"model":"sim-8b","max_tokens":4,"ignore_eos":true,"messages":[`)
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"role":%q,"content":%q}`, m.Role, m.Content)
	}
	b.WriteString("]}")
	return b.String()
}

var vocabulary = strings.Fields(`the a of to and in is for on that with your order please refund
	delivery customer account ticket support agent status tracking shipped warehouse invoice payment
	card address change cancel return policy within days business week month Monday Tuesday Friday
	we you they it can will would should could may must not never always also only just still
	check confirm update escalate explain summarise apologise reply respond review verify resolve
	quickly carefully politely clearly briefly error timeout retry failed succeeded pending queued
	product item package parcel box label courier region London Berlin Paris Tokyo Shanghai`)

// prose is n words of varied English: capitalised sentence starts,
// punctuation, now and then a number.
func prose(rng *rand.Rand, n int) string {
	var b strings.Builder
	start := true
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		w := vocabulary[rng.IntN(len(vocabulary))]
		switch {
		case rng.IntN(25) == 0:
			w = fmt.Sprint(rng.IntN(100000))
		case start:
			w = strings.ToUpper(w[:1]) + w[1:]
		}
		b.WriteString(w)
		start = false
		switch rng.IntN(12) {
		case 0:
			b.WriteString(".")
			start = true
		case 1:
			b.WriteString(",")
		}
	}
	return b.String() + "."
}
