package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// SimRequest is one request for Simulate.
type SimRequest struct {
	// Arrival is when the request reaches the server, from the start.
	Arrival time.Duration
	// Prompt, when set, is the rendered prompt text (RenderPrompt): it is
	// tokenized under Options.Tokenizer for PromptTokens, and its 16-token
	// blocks feed the prefix cache.
	Prompt string
	// PromptTokens is the prompt length when Prompt is empty.
	PromptTokens int
	// OutputTokens is exactly how many tokens to generate (as with
	// ignore_eos and max_tokens).
	OutputTokens int
}

// SimResult is the simulated timing of one SimRequest, in simulated time.
type SimResult struct {
	Queue        time.Duration // arrival → admission to the running batch
	TTFT         time.Duration // arrival → first token
	E2E          time.Duration // arrival → last token
	MaxITL       time.Duration // longest gap between consecutive tokens
	MeanITL      time.Duration // (E2E − TTFT) / (output tokens − 1)
	PromptTokens int
	OutputTokens int
	CachedTokens int  // prompt tokens served by the prefix cache
	BatchAtAdmit int  // sequences in the step that admitted it (x-batch-size)
	QueueDepth   int  // requests waiting when it arrived (x-queue-depth)
	Preemptions  int  // times its KV was evicted and recomputed
	Long         bool // went through the long-prompt queue
	Err          error
}

// ErrRejected marks a SimResult whose request the server would refuse.
var ErrRejected = errors.New("request rejected")

// maxSimSteps bounds Simulate so a bad input cannot spin forever.
const maxSimSteps = 50_000_000

// Simulate runs the scheduler on reqs in simulated time, without HTTP or
// sleeping, and returns one result per request in the order given. It is
// deterministic: the same options and requests give the same results. Use
// it for what-if questions ("would the long-prompt queue have helped?") and
// for tests that must not depend on the machine's speed.
func Simulate(ctx context.Context, opts Options, reqs []SimRequest) ([]SimResult, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	e := newEngine(&o)
	out := make([]SimResult, len(reqs))
	seqs := make([]*seq, len(reqs))
	order := make([]int, len(reqs))
	for i, r := range reqs {
		order[i] = i
		s := &seq{prompt: r.PromptTokens, outLen: r.OutputTokens, idx: i}
		if r.Prompt != "" {
			ids, err := textTokens(o.Tokenizer, []byte(r.Prompt))
			if err != nil {
				return nil, err
			}
			s.prompt = max(len(ids), 1)
			s.hashes = blockHashes(ids)
		}
		out[i].PromptTokens = s.prompt
		switch {
		case s.prompt < 1 || s.outLen < 1:
			out[i].Err = fmt.Errorf("%w: prompt and output need at least one token", ErrRejected)
		case s.prompt+s.outLen > o.MaxModelLen:
			out[i].Err = fmt.Errorf("%w: %d tokens exceed max model len %d", ErrRejected, s.prompt+s.outLen, o.MaxModelLen)
		default:
			seqs[i] = s
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(reqs[a].Arrival - reqs[b].Arrival) })

	firstToken := make([]time.Duration, len(reqs))
	lastToken := make([]time.Duration, len(reqs))
	var now time.Duration
	next := 0
	for steps := 0; ; steps++ {
		if steps > maxSimSteps {
			return nil, fmt.Errorf("simulate: no end after %d steps", maxSimSteps)
		}
		if steps%4096 == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("simulate: %w", ctx.Err())
		}
		for next < len(order) && reqs[order[next]].Arrival <= now {
			if s := seqs[order[next]]; s != nil {
				e.enqueue(s)
			}
			next++
		}
		if e.idle() {
			if next == len(order) {
				break
			}
			now = reqs[order[next]].Arrival
			continue
		}
		d, ok := e.schedule()
		if !ok {
			return nil, fmt.Errorf("simulate: scheduler stalled with %d waiting", e.numWaiting())
		}
		for _, s := range e.admitted {
			out[s.idx].Queue = now - reqs[s.idx].Arrival
		}
		now += d
		e.apply()
		for _, s := range e.emitted {
			i := s.idx
			if s.generated == 1 {
				firstToken[i] = now
			} else if gap := now - lastToken[i]; gap > out[i].MaxITL {
				out[i].MaxITL = gap
			}
			lastToken[i] = now
		}
		for _, s := range e.finished {
			i, r := s.idx, &out[s.idx]
			arr := reqs[i].Arrival
			r.TTFT, r.E2E = firstToken[i]-arr, lastToken[i]-arr
			r.OutputTokens, r.CachedTokens = s.generated, s.cached
			r.BatchAtAdmit, r.QueueDepth = s.batchAtAdmit, s.queueDepth
			r.Preemptions, r.Long = s.preemptions, s.long
			if s.generated > 1 {
				r.MeanITL = (r.E2E - r.TTFT) / time.Duration(s.generated-1)
			}
		}
	}
	return out, nil
}
