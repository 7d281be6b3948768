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
	RunID        string    `parquet:"run_id,dict"`
	Shard        int32     `parquet:"shard"`
	Recorder     string    `parquet:"recorder,dict"` // source exchange's recorder
	Seq          int64     `parquet:"seq"`           // source exchange's seq
	OrigTs       time.Time `parquet:"orig_ts,timestamp(microsecond)"`
	Frame        time.Time `parquet:"frame,timestamp(microsecond)"` // original wall-clock start of the frame
	ScheduledNs  int64     `parquet:"scheduled_ns"`                 // due time, offset from run start
	SentUnixNs   int64     `parquet:"sent_unix_ns"`                 // request written, ns since the Unix epoch
	LagNs        int64     `parquet:"lag_ns"`                       // sent − scheduled
	Status       int32     `parquet:"status"`                       // 0 when no response
	Error        string    `parquet:"error"`
	TTFBNs       int64     `parquet:"ttfb_ns"`
	TTFTNs       int64     `parquet:"ttft_ns"`
	TTSTNs       int64     `parquet:"ttst_ns"`
	E2ENs        int64     `parquet:"e2e_ns"`
	E2ESchedNs   int64     `parquet:"e2e_sched_ns"`
	Events       int32     `parquet:"events"`
	OutputTokens int32     `parquet:"output_tokens"`
	ITLUs        []int32   `parquet:"itl_us,list"`
	BytesSent    int64     `parquet:"bytes_sent"`
	BytesRecv    int64     `parquet:"bytes_received"`
	BatchSize    int32     `parquet:"batch_size"`  // shadow's x-batch-size, -1 when absent
	QueueDepth   int32     `parquet:"queue_depth"` // shadow's x-queue-depth, -1 when absent
	Method       string    `parquet:"method,dict"`
	Path         string    `parquet:"path,dict"`
	Model        string    `parquet:"model,dict"`
	PromptTokens int32     `parquet:"prompt_tokens"`
	// SessionDelayNs (added in a later result/1 version) is how much later
	// than its recorded schedule a session turn became due because it
	// waited for its predecessor's answer on the shadow (replay
	// --sessions); 0 otherwise. LagNs is measured from that later due time.
	SessionDelayNs int64 `parquet:"session_delay_ns"`

	// CachedTokens (added in a later result/1 version; optional, so NULL
	// in older files and when the shadow did not say).
	CachedTokens *int32 `parquet:"cached_tokens,optional"` // shadow's prompt tokens served from its prefix cache (usage); nil when not reported
}

// Time reports the original timestamp of the replayed exchange; it orders and
// partitions result sets.
func (r *Result) Time() time.Time { return r.OrigTs }
