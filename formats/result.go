package formats

import "time"

// Result is one replayed request: a row of the result/1 schema. Offsets are
// nanoseconds; "from send" timings start at SentUnixNs, E2ESchedNs starts at
// the scheduled time so a saturated client cannot hide latency.
//
// The writer shreds rows by hand (shred.go): a field added, removed or
// moved here must be mirrored there, in schema order;
// TestShredMatchesReflection fails until it is.
type Result struct {
	RunID        string    `parquet:"run_id,dict"`                          // id of the replay run
	Shard        int32     `parquet:"shard,delta"`                          // shard index (--shard i/n), 0 when unsharded
	Recorder     string    `parquet:"recorder,dict"`                        // source exchange's recorder
	Seq          int64     `parquet:"seq,delta"`                            // source exchange's seq
	OrigTs       time.Time `parquet:"orig_ts,timestamp(microsecond),delta"` // the source exchange's ts; orders and partitions result sets
	Frame        time.Time `parquet:"frame,timestamp(microsecond),delta"`   // original wall-clock start of the frame
	ScheduledNs  int64     `parquet:"scheduled_ns,delta"`                   // due time, offset from run start
	SentUnixNs   int64     `parquet:"sent_unix_ns,delta"`                   // request written, ns since the Unix epoch
	LagNs        int64     `parquet:"lag_ns,delta"`                         // sent − scheduled
	Status       int32     `parquet:"status,delta"`                         // 0 when no response
	Error        string    `parquet:"error"`                                // transport or protocol error; empty if none
	TTFBNs       int64     `parquet:"ttfb_ns,delta"`                        // first response byte − sent (ns)
	TTFTNs       int64     `parquet:"ttft_ns,delta"`                        // first token-bearing SSE event − sent (ns); 0 if none
	TTSTNs       int64     `parquet:"ttst_ns,delta"`                        // second token event − first (ns); 0 if fewer than two
	E2ENs        int64     `parquet:"e2e_ns,delta"`                         // last byte (non-stream) or last token event (stream) − sent (ns)
	E2ESchedNs   int64     `parquet:"e2e_sched_ns,delta"`                   // the same end − scheduled (ns): coordinated-omission-free latency
	Events       int32     `parquet:"events,delta"`                         // SSE events received
	OutputTokens int32     `parquet:"output_tokens,delta"`                  // output tokens: from usage, else counted token events
	ITLUs        []int32   `parquet:"itl_us,list" parquet-element:",delta"` // inter-token latencies: gaps between token events (µs)
	BytesSent    int64     `parquet:"bytes_sent,delta"`                     // request bytes written
	BytesRecv    int64     `parquet:"bytes_received,delta"`                 // response bytes read
	BatchSize    int32     `parquet:"batch_size,delta"`                     // shadow's x-batch-size, -1 when absent
	QueueDepth   int32     `parquet:"queue_depth,delta"`                    // shadow's x-queue-depth, -1 when absent
	Method       string    `parquet:"method,dict"`                          // request method
	Path         string    `parquet:"path,dict"`                            // request path
	Model        string    `parquet:"model,dict"`                           // model of the request
	PromptTokens int32     `parquet:"prompt_tokens,delta"`                  // prompt tokens of the source exchange
	// SessionDelayNs (added in a later result/1 version) is how much later
	// than its recorded schedule a session turn became due because it
	// waited for its predecessor's answer on the shadow (replay
	// --sessions); 0 otherwise. LagNs is measured from that later due time.
	SessionDelayNs int64 `parquet:"session_delay_ns,delta"`

	// CachedTokens (added in a later result/1 version; optional, so NULL
	// in older files and when the shadow did not say).
	CachedTokens *int32 `parquet:"cached_tokens,optional"` // shadow's prompt tokens served from its prefix cache (usage); nil when not reported
}

// Time reports the original timestamp of the replayed exchange; it orders and
// partitions result sets.
func (r *Result) Time() time.Time { return r.OrigTs }
