// Package recorder turns observed HTTP traffic into exchange/1 records and
// carries them to disk without ever slowing the traffic down.
//
// It owns what every capture source shares: an Assembler that builds one
// formats.Exchange from request and response pieces as they are observed
// (capped bodies, arrival times, SSE timing, batch-context headers,
// sequence numbers), Enrich, which derives the LLM request fields from the
// raw body, and a fail-open Pipeline (bounded queue → redact → write) with
// Prometheus metrics. The sources live in subpackages: recorder/proxy (the
// reverse-proxy sidecar) and recorder/capture (passive packet capture);
// sse is the event-stream scanner they and the replayer use.
package recorder
