package traffic

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/reelkit/reel/examples/simcluster/cluster"
)

// Incident is the weekly long-prompt window: while it lasts, Share of the
// requests carry prompts Factor times longer (a batch tenant summarising
// documents, in the story).
type Incident struct {
	// At is when the first window opens, from the start of the plan.
	At time.Duration
	// For is the window's length; 0 means no incident.
	For time.Duration
	// Every repeats the window with this period ("a week"); 0 means once.
	Every time.Duration
	// Factor multiplies the prompt length. Default 4.
	Factor float64
	// Share of the window's requests that get the long prompt, in (0, 1].
	// Default 0.5.
	Share float64
}

// active reports whether offset falls inside a window.
func (in *Incident) active(offset time.Duration) bool {
	if in.For <= 0 || offset < in.At {
		return false
	}
	d := offset - in.At
	if in.Every > 0 {
		d %= in.Every
	}
	return d < in.For
}

// Options configure a plan (NewPlanner) and, with Target, a run (Run).
// The zero value plans two minutes of bursty chat at the Azure trace's
// mean rate, with no incident.
type Options struct {
	// Trace drives arrivals and token counts when set (see
	// ReadAzureTrace); it is replayed from TraceOffset and wraps around.
	// Without it a two-state bursty process is used.
	Trace       []TraceRow
	TraceOffset time.Duration
	// Speed multiplies the arrival rate (2 = twice as many requests per
	// second; offsets shrink). Default 1.
	Speed float64
	// Rate is the bursty process's mean rate in requests/s. Default 5.5,
	// the Azure 2023 conversation trace's mean.
	Rate float64
	// Duration bounds the plan by offset. Default 2 minutes.
	Duration time.Duration
	// MaxRequests bounds the plan by count. Default 100,000.
	MaxRequests int
	// Seed makes the plan reproducible; equal options give equal plans.
	Seed uint64
	// Model goes into every body. Default "simcluster-8b".
	Model string
	// Incident is the long-prompt window.
	Incident Incident
	// SystemPrompts is how many distinct system prompts requests share.
	// Default 4.
	SystemPrompts int
	// MaxPromptTokens caps prompt length after the incident factor.
	// Default 16,000 (fits the simulator's 32k context with any trace output).
	MaxPromptTokens int
	// NaturalEOS leaves ignore_eos out, so the server decides the output
	// length (capped by max_tokens). By default ignore_eos is sent and the
	// output has exactly the trace's GeneratedTokens.
	NaturalEOS bool
	// NoStream sends non-streaming requests.
	NoStream bool
	// Sessions makes part of the traffic conversations and agent loops
	// (default: none).
	Sessions Sessions

	// Run only: the target's base URL, e.g. "http://127.0.0.1:8000".
	Target string
	// Client sends the requests. Default: a client with compression off
	// and a connection pool sized to MaxInFlight.
	Client *http.Client
	// MaxInFlight caps concurrent requests; a request due while the cap is
	// reached is skipped and counted, never delayed (open loop). Default 1024.
	MaxInFlight int
	// RequestTimeout bounds one request. Default 5 minutes.
	RequestTimeout time.Duration
	// OnResult, when set, is called once per finished request, one call at
	// a time.
	OnResult func(*Result)
}

// Planned is one request of the plan.
type Planned struct {
	Seq          int           // index in the plan, from 0
	Offset       time.Duration // due time from the start of the run
	Path         string        // "/v1/chat/completions"
	Body         []byte        // JSON request body
	PromptTokens int           // intended prompt length in tokens under the simulator's default tokenizer (o200k_base)
	MaxTokens    int
	Long         bool // inside the incident window and lengthened
	Stream       bool
	// Session is the session the request is a turn of; nil for a single
	// request. Run sends the later turns (see Sessions).
	Session *SessionPlan
}

func (o Options) withDefaults() (Options, error) {
	if o.Speed == 0 {
		o.Speed = 1
	}
	if o.Rate == 0 {
		o.Rate = 5.5
	}
	if o.Duration == 0 {
		o.Duration = 2 * time.Minute
	}
	if o.MaxRequests == 0 {
		o.MaxRequests = 100_000
	}
	if o.Model == "" {
		o.Model = "simcluster-8b"
	}
	if o.Incident.Factor == 0 {
		o.Incident.Factor = 4
	}
	if o.Incident.Share == 0 {
		o.Incident.Share = 0.5
	}
	if o.SystemPrompts == 0 {
		o.SystemPrompts = 4
	}
	if o.MaxPromptTokens == 0 {
		o.MaxPromptTokens = 16000
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = 1024
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 5 * time.Minute
	}
	if o.Sessions.Share > 0 {
		s, err := o.Sessions.withDefaults()
		if err != nil {
			return o, err
		}
		o.Sessions = s
	}
	switch {
	case !(o.Speed > 0 && o.Speed < 1e6) || !(o.Rate > 0 && o.Rate < 1e6) || o.Duration < 0 || o.MaxRequests < 0 || o.TraceOffset < 0:
		return o, errors.New("traffic options: speed and rate must be positive, duration, count and offset not negative")
	case !(o.Incident.Factor >= 1 && o.Incident.Factor <= 1000) || !(o.Incident.Share > 0 && o.Incident.Share <= 1) || o.Incident.For < 0 || o.Incident.Every < 0:
		return o, errors.New("traffic options: incident factor must be ≥ 1 and share in (0, 1]")
	case o.SystemPrompts < 1 || o.MaxPromptTokens < 16 || o.MaxInFlight < 1:
		return o, errors.New("traffic options: system prompts, max prompt tokens or max in flight too small")
	}
	return o, nil
}

// Planner yields a plan one request at a time, so a long plan never sits
// in memory.
type Planner struct {
	o        Options
	rng      *rand.Rand // arrivals, lengths, the incident and sessions
	text     *rand.Rand // bodies: kept apart, so prompt text never moves arrivals
	n        int
	sessions int // sessions started

	// Trace replay state.
	traceIdx  int
	traceBase time.Duration // offset added to the current lap of the trace
	traceSpan time.Duration // one lap's length

	// Bursty process state.
	now      time.Duration
	burst    bool
	switchAt time.Duration
}

// NewPlanner checks opts and returns a planner at the start of the plan.
func NewPlanner(opts Options) (*Planner, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// The tokenizer loads once per process (embedded vocabulary); a failure
	// shows here, so counting while planning cannot fail later.
	if _, err := messageTokens("user", ""); err != nil {
		return nil, err
	}
	p := &Planner{o: o, rng: rand.New(rand.NewPCG(o.Seed, 0x7265656c)), text: rand.New(rand.NewPCG(o.Seed, 0x74657874))}
	if len(o.Trace) > 0 {
		first, last := o.Trace[0].Time, o.Trace[len(o.Trace)-1].Time
		p.traceSpan = last.Sub(first) + last.Sub(first)/time.Duration(len(o.Trace))
		for p.traceIdx < len(o.Trace) && o.Trace[p.traceIdx].Time.Sub(first) < o.TraceOffset {
			p.traceIdx++
		}
		if p.traceIdx == len(o.Trace) {
			return nil, fmt.Errorf("traffic options: trace offset %v beyond the trace's %v", o.TraceOffset, last.Sub(first))
		}
		p.traceBase = -o.TraceOffset
	} else {
		p.switchAt = p.exp(time.Duration(float64(20*time.Second) / o.Speed))
	}
	return p, nil
}

// Plan returns the whole plan; for tests and small runs.
func Plan(opts Options) ([]Planned, error) {
	p, err := NewPlanner(opts)
	if err != nil {
		return nil, err
	}
	var out []Planned
	for {
		r, ok := p.Next()
		if !ok {
			return out, nil
		}
		out = append(out, r)
	}
}

// Next returns the next request, or false when the plan is over.
func (p *Planner) Next() (Planned, bool) {
	if p.n >= p.o.MaxRequests {
		return Planned{}, false
	}
	offset, prompt, output := p.arrival()
	if offset >= p.o.Duration {
		return Planned{}, false
	}
	prompt, output = max(prompt, 8), max(output, 1)
	r := Planned{Seq: p.n, Offset: offset, Path: "/v1/chat/completions", MaxTokens: output, Stream: !p.o.NoStream}
	if p.o.Incident.active(offset) && p.rng.Float64() < p.o.Incident.Share {
		r.Long = true
		prompt = int(float64(prompt) * p.o.Incident.Factor)
	}
	r.PromptTokens = min(prompt, p.o.MaxPromptTokens)
	if p.o.Sessions.Share > 0 && !r.Long && p.rng.Float64() < p.o.Sessions.Share {
		r.Session = p.newSession()
	}
	r.Body = p.body(&r)
	p.n++
	return r, true
}

// arrival draws the next offset and token counts.
func (p *Planner) arrival() (time.Duration, int, int) {
	if t := p.o.Trace; len(t) > 0 {
		if p.traceIdx == len(t) {
			p.traceIdx = 0
			p.traceBase += p.traceSpan
		}
		row := t[p.traceIdx]
		p.traceIdx++
		at := p.traceBase + row.Time.Sub(t[0].Time)
		return time.Duration(float64(at) / p.o.Speed), row.ContextTokens, row.GeneratedTokens
	}
	// Two-state Markov-modulated Poisson process: calm at 0.6× the mean
	// rate for ~20 s, bursts at 2.6× for ~5 s (mean 1×), the shape of the
	// trace's per-second rate.
	for {
		rate := p.o.Rate * p.o.Speed * 0.6
		if p.burst {
			rate = p.o.Rate * p.o.Speed * 2.6
		}
		next := p.now + p.exp(time.Duration(float64(time.Second)/rate))
		if next < p.switchAt {
			p.now = next
			break
		}
		p.now = p.switchAt
		p.burst = !p.burst
		mean := 20 * time.Second
		if p.burst {
			mean = 5 * time.Second
		}
		p.switchAt = p.now + p.exp(time.Duration(float64(mean)/p.o.Speed))
	}
	// Log-normal lengths fitted to the trace: prompts p50 1020, p99 4142;
	// outputs p50 129, p99 601.
	prompt := int(1020 * math.Exp(0.603*p.rng.NormFloat64()))
	output := int(129 * math.Exp(0.661*p.rng.NormFloat64()))
	return p.now, min(prompt, 8192), min(output, 2048)
}

func (p *Planner) exp(mean time.Duration) time.Duration {
	return time.Duration(p.rng.ExpFloat64() * float64(mean))
}

type message struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

type chatBody struct {
	Model         string         `json:"model"`
	Messages      []message      `json:"messages"`
	MaxTokens     int            `json:"max_tokens"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions map[string]any `json:"stream_options,omitempty"`
	IgnoreEOS     bool           `json:"ignore_eos,omitempty"`
	User          string         `json:"user"`
}

// body renders a chat request of r.PromptTokens tokens (to within a few)
// as the simulator counts them (cluster.Options.MessageTokens): a shared
// system prompt, a few earlier turns and the user's question; long
// requests carry a document to summarise.
func (p *Planner) body(r *Planned) []byte {
	g := p.text
	budget := r.PromptTokens
	sys := systemPrompt(g.IntN(p.o.SystemPrompts))
	sysTokens := mustTokens("system", sys)
	if sysTokens > budget/2 {
		sys = systemPrompt(-1)
		sysTokens = mustTokens("system", sys)
	}
	msgs := []message{{Role: "system", Content: sys}}
	budget -= sysTokens
	if r.Long {
		msgs = append(msgs, message{Role: "user", Content: fill(g, "user", "Summarise this document for the weekly report:\n", budget)})
	} else {
		turns := g.IntN(3)
		if r.Session != nil {
			turns = 0 // a session's history is its own, built turn by turn
		}
		for range turns {
			share := budget / (2*turns + 2)
			msgs = append(msgs, message{Role: "user", Content: fill(g, "user", "", share)})
			msgs = append(msgs, message{Role: "assistant", Content: fill(g, "assistant", "", share)})
			budget -= 2 * share
		}
		msgs = append(msgs, message{Role: "user", Content: fill(g, "user", "", budget)})
	}
	b := chatBody{
		Model: p.o.Model, Messages: msgs, MaxTokens: r.MaxTokens, Stream: r.Stream,
		IgnoreEOS: !p.o.NaturalEOS, User: fmt.Sprintf("user-%03d", g.IntN(500)),
	}
	if r.Stream {
		b.StreamOptions = map[string]any{"include_usage": true}
	}
	out, _ := json.Marshal(b) // only strings and numbers: cannot fail
	return out
}

// words are the filler of prompt text: each is one token of o200k_base
// with the space before it.
var words = strings.Fields(`the request latency queue batch token model prompt server cluster
	report customer order invoice weekly summary please explain why how what when error retry
	deploy rollout gateway region shard replica memory cache budget review update ticket status
	today yesterday meeting notes action owner metric alert page incident timeline root cause
	fix test result table chart value trend spike normal peak hour minute second user account`)

// messageTokens is the simulator's count for one message (default
// tokenizer).
func messageTokens(role, content string) (int, error) {
	return cluster.Options{}.MessageTokens(role, content)
}

// mustTokens is messageTokens once NewPlanner has loaded the tokenizer.
func mustTokens(role, content string) int {
	n, err := messageTokens(role, content)
	if err != nil {
		panic(err) // NewPlanner checked the tokenizer loads; it is loaded once
	}
	return n
}

// fill returns a role message's content of about tokens tokens: prefix and
// then words. A word after the prefix (or after the rendered "role: ") is
// one token, so the words needed are tokens less what the message costs
// with one word.
func fill(g *rand.Rand, role, prefix string, tokens int) string {
	return text(g, prefix, tokens-(mustTokens(role, text(nil, prefix, 1))-1))
}

// text is prefix followed by n pseudo-random words (the first one "the"
// when g is nil), each after a space but the first when prefix is empty;
// the prefix alone for n < 1.
func text(g *rand.Rand, prefix string, n int) string {
	var b strings.Builder
	b.Grow(len(prefix) + 8*max(n, 0))
	b.WriteString(prefix)
	for i := range max(n, 0) {
		if i > 0 || prefix != "" {
			b.WriteByte(' ')
		}
		w := words[0]
		if g != nil {
			w = words[g.IntN(len(words))]
		}
		b.WriteString(w)
	}
	return b.String()
}

// systemPrompt returns shared system prompt k (180 to 420 tokens), or a
// one-line prompt for k < 0.
func systemPrompt(k int) string {
	if k < 0 {
		return "You are a helpful assistant."
	}
	rules := []string{
		"Answer in the customer's language.", "Be concise and cite the ticket number.",
		"Never reveal internal hostnames.", "Prefer bullet points for steps.",
		"Escalate outages to the on-call engineer.", "Summaries fit in five lines.",
	}
	var b strings.Builder
	fmt.Fprintf(&b, "You are assistant #%d of the ACME support desk.", k)
	for i := 0; b.Len() < 4*(180+80*k); i++ {
		fmt.Fprintf(&b, " Rule %d: %s", i+1, rules[(i+k)%len(rules)])
	}
	return b.String()
}

// SimRequests converts a plan into cluster.Simulate's input, so the same
// traffic can be run in simulated time (deterministic, no sleeping).
// Outputs have exactly MaxTokens tokens, as with ignore_eos.
func SimRequests(plan []Planned) ([]cluster.SimRequest, error) {
	out := make([]cluster.SimRequest, len(plan))
	for i, r := range plan {
		prompt, err := cluster.RenderPrompt(r.Path, r.Body)
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", r.Seq, err)
		}
		out[i] = cluster.SimRequest{Arrival: r.Offset, Prompt: string(prompt), OutputTokens: r.MaxTokens}
	}
	return out, nil
}
