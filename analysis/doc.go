// Package analysis is reel's one implementation of the SPEC §6 metrics. It
// reads recorded exchanges (production latencies seen by the recorder) and
// replay results alike, maps each row to one observation, and reports exact
// quantiles, error classes, throughput, concurrency, goodput and window
// compliance overall, per frame and per route, model, prompt-length bucket
// and status class. Stats adds what a recording tells about its traffic
// (arrival process, sizes, prefix sharing, frames that stand out and their
// likely cause) and Compare judges two runs with bootstrap confidence
// intervals.
//
// Definitions follow SPEC §6 exactly:
//
//	TTFT      t_1 − t_send (t_i: i-th SSE event carrying ≥ 1 token)
//	TTST      t_2 − t_1
//	E2E       last byte (non-stream) or last token event (stream) − t_send
//	E2ESched  same end − t_sched
//	TPOT      (E2E − TTFT) / (output_tokens − 1), only when output_tokens > 1
//	ITL       each gap t_i − t_{i−1}, pooled over requests; per token when
//	          usage gives more tokens than events
//	lag       t_send − t_sched
//	goodput   requests meeting every SLO (each ≤) ÷ duration
//	window compliance  share of frames whose chosen quantile (p95 by
//	          default) meets the SLO
//	throughput completed/s, output tokens/s, peak 1-s output tokens/s
//	concurrency ΣE2E ÷ duration, and peak in flight
//
// Quantiles are exact, by nearest rank: the p-quantile of n values is the
// ⌈p·n⌉-th smallest. Memory: an Analyzer keeps about 100 bytes of numbers per
// request (never bodies, strings or lists) plus one counter per distinct ITL
// microsecond value, so a million-row result set needs about 100 MB.
package analysis
