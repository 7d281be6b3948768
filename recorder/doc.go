// Package recorder turns observed HTTP traffic into exchange/1 records and
// carries them to disk without ever slowing the traffic down.
//
// One Recorder owns recording, and every source feeds it: the reverse-proxy
// sidecar (recorder/proxy), live packet capture and pcap import
// (recorder/capture), and access-log import (recorder/accesslog). The
// Recorder decides what is recorded (Filter and the sampling rule, see
// Recorder.Want), builds each exchange from request and response pieces as
// they are observed (an Assembler: capped bodies, arrival times, SSE timing
// through package sse, batch-context headers, sequence numbers and
// connection ids unique across restarts), derives the LLM request fields
// from the raw body (Enrich), and carries the exchange through a fail-open
// pipeline (bounded queue → enrich → redact → one writer) with Prometheus
// metrics, counting every drop by reason. OpenDataset wires a Recorder to a
// formats.Writer the one way reel record, the examples and the benchmarks
// all use.
//
// Close convention (as everywhere in reel): Close(ctx) stops, flushes and
// waits, giving up when ctx ends; figures a caller needs afterwards come
// from their own method (Metrics, the writer's Stats), never from Close.
package recorder
