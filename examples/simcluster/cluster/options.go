package cluster

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// BlockTokens is the KV-cache block size in tokens (vLLM's default
// --block-size 16). Prefix-cache keys and KV accounting use whole blocks.
const BlockTokens = 16

// Tokenizer names how the simulator counts prompt tokens.
type Tokenizer string

const (
	// TokenizerO200k, the default, tokenizes with the o200k_base BPE
	// (tokens.go): token counts and 16-token KV blocks fall where a real
	// engine's would, and no redaction block lines up with them.
	TokenizerO200k Tokenizer = "o200k"
	// TokenizerEstimate counts four bytes of rendered prompt per token, so
	// a 16-token block is exactly 64 bytes. Only for tests that need token
	// counts computable by hand: its blocks line up with byte offsets, which
	// no real engine's do, and hide what prefix sharing to the token costs.
	TokenizerEstimate Tokenizer = "estimate"
)

// UsagePolicy says when a streamed response ends with a usage chunk.
type UsagePolicy int

const (
	// UsageWhenAsked sends the usage chunk only when the request sets
	// stream_options.include_usage, as OpenAI and vLLM do.
	UsageWhenAsked UsagePolicy = iota
	// UsageAlways sends it on every stream.
	UsageAlways
)

// Options configure a simulated server. The zero value simulates vLLM
// serving an 8B model (Llama-3.1-8B class, fp16) on one A100-40GB; each
// default below says where it comes from. Durations are simulated time:
// TimeScale maps them to wall time.
type Options struct {
	// Model is the name served on /v1/models and echoed in responses.
	// Default "simcluster-8b". Requests naming another model are served
	// anyway unless StrictModel is set (replays of recorded traffic name
	// production models).
	Model string
	// StrictModel rejects requests whose "model" differs from Model with
	// 404, as vLLM does.
	StrictModel bool
	// Tokenizer counts prompt tokens and cuts KV blocks. Default
	// TokenizerO200k.
	Tokenizer Tokenizer

	// TimeScale speeds the simulation up: 10 runs every step ten times
	// faster in wall time (a 10 ms step takes 1 ms). Default 1. Latencies
	// seen by clients and in /metrics are wall time.
	TimeScale float64

	// StepBase is the fixed cost of one engine step. Default 10 ms: a decode
	// step of a 7–8B fp16 model reads all ~16 GB of weights once, about
	// 8–10 ms at an A100's ~2 TB/s (SPEC §8).
	StepBase time.Duration
	// StepPerSeq is the added cost per sequence in the step. Default 0.3 ms
	// (SPEC §8; attention over each sequence's KV grows the step).
	StepPerSeq time.Duration
	// PrefillTokensPerSec is the prefill throughput. Default 12,000 tokens/s:
	// ~16 GFLOP per token for 8B parameters at ~60 % of an A100's
	// 312 TFLOP/s (SPEC §8).
	PrefillTokensPerSec float64

	// MaxBatchedTokens is the token budget of one step (chunked prefill plus
	// one token per decoding sequence). Default 2048, vLLM V1's
	// max_num_batched_tokens for the OpenAI server on A100-class GPUs.
	MaxBatchedTokens int
	// MaxNumSeqs caps the running batch. Default 256 (vLLM max_num_seqs).
	MaxNumSeqs int
	// KVCapacityTokens is the KV-cache size in tokens (prompt plus
	// generated, in 16-token blocks). A request is admitted only when its
	// prompt's blocks fit; running sequences that outgrow it are preempted
	// and recomputed, as vLLM does. Default 131072: Llama-3.1-8B needs
	// 128 KiB per token (32 layers × 8 KV heads × 128 dims × K,V × 2 bytes);
	// an A100-40GB at gpu_memory_utilization 0.9 leaves ~17 GB after 16 GB of
	// weights and ~3 GB of activations, which vLLM reports as ~8,200 GPU
	// blocks.
	KVCapacityTokens int
	// MaxModelLen caps prompt plus output tokens per request; longer prompts
	// get 400. Default 32768 (a common --max-model-len for Llama-3.1-8B on a
	// 40 GB card). Must not exceed KVCapacityTokens.
	MaxModelLen int

	// DisablePrefixCache turns off automatic prefix caching (vLLM V1 enables
	// it by default). With it on, the prompt's leading full 16-token blocks
	// whose chain hash was prefilled before skip prefill compute.
	DisablePrefixCache bool
	// PrefixCacheBlocks is the prefix cache's LRU capacity in blocks.
	// Default KVCapacityTokens/16. Cached blocks save compute only; the
	// simulator still charges each request's KV for its whole prompt.
	PrefixCacheBlocks int

	// LongPromptThreshold enables the separate long-prompt queue (the fix
	// in the weekly-incident story) when > 0: prompts of at least this many
	// tokens wait in their own queue, short prompts are admitted first, at
	// most MaxLongPrefills long prompts prefill at once, and each takes at
	// most LongPrefillChunk tokens of a step while short requests wait (what
	// is left of the budget when none do). This mirrors vLLM's
	// long_prefill_token_threshold / max_long_partial_prefills. It moves the
	// wait onto long prompts: short requests' TTFT recovers, the longest
	// prompts get slower. Default 0 (off: one first-come-first-served
	// queue, vLLM's default).
	LongPromptThreshold int
	// MaxLongPrefills caps concurrent long prefills. Default 1 (vLLM's
	// max_long_partial_prefills default).
	MaxLongPrefills int
	// LongPrefillChunk caps a long prompt's prefill tokens per step.
	// Default MaxBatchedTokens/4, so short prefills and decodes keep three
	// quarters of every step.
	LongPrefillChunk int

	// MeanOutputTokens is the mean of the simulated natural output length
	// when ignore_eos is not set: an exponential draw seeded by the request
	// body (deterministic), capped by max_tokens. Default 186, which gives
	// the Azure 2023 conversation trace's median of 129 output tokens
	// (129 / ln 2).
	MeanOutputTokens int

	// StreamUsage says when streams end with a usage chunk. Default
	// UsageWhenAsked.
	StreamUsage UsagePolicy

	// MaxWaiting bounds the waiting queue; requests beyond it get 503.
	// Default 8192.
	MaxWaiting int
	// MaxBodyBytes bounds a request body; larger bodies get 413.
	// Default 4 MiB.
	MaxBodyBytes int64
	// MaxLag is how far (wall time) the step loop may fall behind its
	// schedule before it stops catching up and lets simulated time slip,
	// as an overloaded machine would. Default 50 ms.
	MaxLag time.Duration
}

// ErrOptions is wrapped by New for invalid options.
var ErrOptions = errors.New("invalid simcluster options")

// withDefaults fills zero fields and validates the result.
func (o Options) withDefaults() (Options, error) {
	if o.Model == "" {
		o.Model = "simcluster-8b"
	}
	switch o.Tokenizer {
	case "":
		o.Tokenizer = TokenizerO200k
	case TokenizerEstimate, TokenizerO200k:
	default:
		return o, fmt.Errorf("simcluster: unknown tokenizer %q (want %s or %s)", o.Tokenizer, TokenizerO200k, TokenizerEstimate)
	}
	if o.TimeScale == 0 {
		o.TimeScale = 1
	}
	if o.StepBase == 0 {
		o.StepBase = 10 * time.Millisecond
	}
	if o.StepPerSeq == 0 {
		o.StepPerSeq = 300 * time.Microsecond
	}
	if o.PrefillTokensPerSec == 0 {
		o.PrefillTokensPerSec = 12000
	}
	if o.MaxBatchedTokens == 0 {
		o.MaxBatchedTokens = 2048
	}
	if o.MaxNumSeqs == 0 {
		o.MaxNumSeqs = 256
	}
	if o.KVCapacityTokens == 0 {
		o.KVCapacityTokens = 131072
	}
	if o.MaxModelLen == 0 {
		o.MaxModelLen = min(32768, o.KVCapacityTokens)
	}
	if o.PrefixCacheBlocks == 0 {
		o.PrefixCacheBlocks = o.KVCapacityTokens / BlockTokens
	}
	if o.MaxLongPrefills == 0 {
		o.MaxLongPrefills = 1
	}
	if o.LongPrefillChunk == 0 {
		o.LongPrefillChunk = max(1, o.MaxBatchedTokens/4)
	}
	if o.MeanOutputTokens == 0 {
		o.MeanOutputTokens = 186
	}
	if o.MaxWaiting == 0 {
		o.MaxWaiting = 8192
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.MaxLag == 0 {
		o.MaxLag = 50 * time.Millisecond
	}
	switch {
	case !(o.TimeScale > 0 && o.TimeScale <= 1e4):
		return o, fmt.Errorf("%w: time scale %v not in (0, 10000]", ErrOptions, o.TimeScale)
	case o.StepBase < 0 || o.StepPerSeq < 0 || !(o.PrefillTokensPerSec > 0) || math.IsInf(o.PrefillTokensPerSec, 0):
		return o, fmt.Errorf("%w: negative step cost or prefill rate", ErrOptions)
	case o.MaxBatchedTokens < 1 || o.MaxNumSeqs < 1 || o.MaxWaiting < 1:
		return o, fmt.Errorf("%w: batch limits must be positive", ErrOptions)
	case o.KVCapacityTokens < BlockTokens:
		return o, fmt.Errorf("%w: KV capacity %d below one block", ErrOptions, o.KVCapacityTokens)
	case o.MaxModelLen < 2 || o.MaxModelLen > o.KVCapacityTokens:
		return o, fmt.Errorf("%w: max model len %d must be in [2, KV capacity %d]", ErrOptions, o.MaxModelLen, o.KVCapacityTokens)
	case o.LongPromptThreshold < 0 || o.MaxLongPrefills < 0 || o.LongPrefillChunk < 1:
		return o, fmt.Errorf("%w: long-prompt queue settings", ErrOptions)
	case o.MeanOutputTokens < 1 || o.PrefixCacheBlocks < 0 || o.MaxBodyBytes < 1:
		return o, fmt.Errorf("%w: output, cache or body limits", ErrOptions)
	}
	return o, nil
}

// stepCost is the simulated duration of a step with seqs sequences and
// prefill prompt tokens computed.
func (o *Options) stepCost(seqs, prefill int) time.Duration {
	return o.StepBase + time.Duration(seqs)*o.StepPerSeq +
		time.Duration(float64(prefill)/o.PrefillTokensPerSec*float64(time.Second))
}
