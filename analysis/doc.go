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
// Quantiles are by nearest rank: the p-quantile of n values is the
// ⌈p·n⌉-th smallest. They are exact while the run's distributions (the
// run's, each frame's, each group's) hold at most Options.ExactValues values
// together (default 2^20, 8 MiB; sketch bins count against it too); beyond it the largest distributions become
// mergeable sketches (DDSketch's logarithmic bins with integer counts) whose
// quantiles are within SketchRelErr (1 %) of the exact ones, and
// Quantiles.RelErr says which are. Counts, means, standard deviations and
// maxima stay exact. An Analyzer keeps no row, so its memory grows with the
// number of frames and groups (a few KiB each), not with the requests, and
// the sketches of shards merge exactly.
package analysis
