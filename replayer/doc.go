// Package replayer re-sends a recorded window of exchanges to a shadow target
// on the original clock: request i is due at start + (ts_i − ts_0)/speed,
// measured from one monotonic start, and sent open-loop so a slow target never
// delays later sends.
//
// The package is a pipeline of four parts, one file each:
//
//   - schedule.go: which exchanges are replayed and when (window, frames,
//     filters, sampling, shards, loops) — streamed in time order from a
//     [Source], in memory that does not grow with the dataset;
//   - dispatch.go, sleep_*.go: how the dispatcher waits for an absolute due
//     time (pace and waitUntil: sleep until just before, then a short
//     precise wait) and the senders it hands each request to without
//     waiting for responses; the pacing loop itself, which walks the
//     schedule and calls them, is Plan.Run's, in run.go;
//   - request.go, client.go, conn.go, http1.go: the replayer's own lean
//     HTTP/1.1 client — each request rebuilt and pre-rendered once (never
//     forwarding recorded credentials), written and its response read on
//     the sender's goroutine over pooled or per-recorded-connection
//     keep-alive connections (TLS included), timed per SPEC §6 (TTFB, TTFT,
//     TTST, inter-token gaps via sse, end-to-end from send and
//     from schedule);
//   - run.go: a whole run — the pacing loop, target safety, warm-up, step
//     mode, progress, result rows to a [Sink], summaries and the speed
//     sweep through analysis, the one implementation of reel's metrics.
//
// The replayer never reads flags, files or the environment: cmd/reel opens the
// dataset and the result writer and passes them in.
package replayer
