package formats

import "time"

// Schema names and versions written to every file's key-value metadata under
// MetaSchema. Changing a column is a version bump (see docs/schema.md).
const (
	ExchangeSchema = "exchange/1"
	ResultSchema   = "result/1"
)

// Values of Exchange.PromptTokensSource.
const (
	TokensFromUsage    = "usage"
	TokensFromEstimate = "estimate"
	TokensFromTrace    = "trace" // an imported trace's own length (reel import)
	// TokensFromEstimateMin is an estimate of a prompt holding parts reel
	// cannot count (an image by URL, audio, a file): the rest, a lower bound.
	TokensFromEstimateMin = "estimate_min"
)

// Exchange is one recorded request/response pair: a row of the exchange/1
// schema. Column names are a contract with data teams (docs/schema.md); never
// rename one without bumping the schema version.
//
// Times are nanoseconds unless the name says otherwise; durations are measured
// from the request's first byte (TsUnixNs). Zero means "not observed" for the
// optional timings (TTFT on a non-streaming response, for example).
//
// The writer shreds rows by hand (shred.go): a field added, removed or
// moved here must be mirrored there, in schema order;
// TestShredMatchesReflection fails until it is.
type Exchange struct {
	Ts       time.Time `parquet:"ts,timestamp(microsecond),delta"` // request start, UTC, µs precision
	TsUnixNs int64     `parquet:"ts_unix_ns,delta"`                // request start, ns since the Unix epoch
	Recorder string    `parquet:"recorder,dict"`                   // recorder id
	Seq      int64     `parquet:"seq,delta"`                       // per-recorder sequence number, from 1
	ConnID   int64     `parquet:"conn_id"`                         // recorder-local connection id
	ConnSeq  int32     `parquet:"conn_seq"`                        // index of this exchange on its connection, from 0
	Session  string    `parquet:"session,dict"`                    // session key (header or client), may be empty
	Client   string    `parquet:"client,dict"`                     // client address (redacted by policy)

	Method         string            `parquet:"method,dict"`                                           // HTTP method
	Host           string            `parquet:"host,dict"`                                             // Host / :authority
	Path           string            `parquet:"path,dict"`                                             // URL path (redacted)
	Query          string            `parquet:"query"`                                                 // raw query string, without "?" (redacted)
	ReqHeaders     map[string]string `parquet:"req_headers" parquet-key:",dict" parquet-value:",dict"` // allow-listed request headers; others keep only presence and length (redacted)
	ReqContentType string            `parquet:"req_content_type,dict"`                                 // request Content-Type
	ReqBody        []byte            `parquet:"req_body"`                                              // request body, redacted, at most --max-body bytes
	ReqBodyBytes   int64             `parquet:"req_body_bytes,delta"`                                  // original size on the wire, before truncation/redaction
	ReqBodyTrunc   bool              `parquet:"req_body_truncated"`                                    // ReqBody holds only the first --max-body bytes

	Model              string  `parquet:"model,dict"`                // model of an LLM request body
	Stream             bool    `parquet:"stream"`                    // the request asked for streaming ("stream": true)
	MaxTokens          int32   `parquet:"max_tokens,delta"`          // max_tokens of the request (tokens); 0 if absent
	PromptTokens       int32   `parquet:"prompt_tokens,delta"`       // prompt tokens: from the response's usage, else estimated
	PromptTokensSource string  `parquet:"prompt_tokens_source,dict"` // TokensFromUsage, TokensFromEstimate or TokensFromTrace
	PrefixHashes       []int64 `parquet:"prefix_hashes,list"`        // keyed hash chain over the prompt's blocks
	Topic              string  `parquet:"topic,dict"`                // label from the policy's topic rules, else empty

	Status          int32             `parquet:"status,delta"`                                           // 0 when no response arrived
	RespHeaders     map[string]string `parquet:"resp_headers" parquet-key:",dict" parquet-value:",dict"` // allow-listed response headers (redacted)
	RespContentType string            `parquet:"resp_content_type,dict"`                                 // response Content-Type
	RespBody        []byte            `parquet:"resp_body"`                                              // response body (SSE bodies as the event stream), redacted, capped
	RespBodyBytes   int64             `parquet:"resp_body_bytes,delta"`                                  // original response body size (bytes)
	TTFBNs          int64             `parquet:"ttfb_ns,delta"`                                          // first response byte − ts
	DurationNs      int64             `parquet:"duration_ns,delta"`                                      // last response byte − ts
	Events          int32             `parquet:"events,delta"`                                           // SSE events in the response
	TTFTNs          int64             `parquet:"ttft_ns,delta"`                                          // first token-bearing SSE event − ts
	EventGapsUs     []int32           `parquet:"event_gaps_us,list" parquet-element:",delta"`            // gaps between consecutive token-bearing SSE events (µs)
	OutputTokens    int32             `parquet:"output_tokens,delta"`                                    // output tokens: from usage, else counted token events

	BatchSize  int32             `parquet:"batch_size,delta"`  // from the x-batch-size context header, -1 when absent
	QueueDepth int32             `parquet:"queue_depth,delta"` // from the x-queue-depth context header, -1 when absent
	Upstream   string            `parquet:"upstream,dict"`     // upstream address the proxy forwarded to (empty for passive capture)
	Context    map[string]string `parquet:"context"`           // other configured context headers
	Complete   bool              `parquet:"complete"`          // request and response were both seen to the end
	Error      string            `parquet:"error"`             // what went wrong (upstream error, reset, capture gap); empty if nothing
	RedactErr  string            `parquet:"redaction_error"`   // why a body was stored empty (fail closed); empty if redaction succeeded

	// Turn links (added in a later exchange/1 version; zero in older files
	// and when not an LLM conversation): keyed digests computed from the
	// raw bodies at record time, so that conversations and agent loops can
	// be found after redaction. An exchange B continues A when
	// B.ParentTurnKey == A.TurnKey (see docs/schema.md and analysis.Linker).
	TurnKey       int64 `parquet:"turn_key"`        // digest of the request's conversation followed by this exchange's answer
	ParentTurnKey int64 `parquet:"parent_turn_key"` // digest of the request's conversation up to its last answered assistant message

	// CachedTokens (added in a later exchange/1 version; optional, so NULL
	// in older files and when the server did not say).
	CachedTokens *int32 `parquet:"cached_tokens,optional"` // prompt tokens served from the server's prefix cache (usage); nil when not reported
}

// Time reports when the exchange started; it orders and partitions datasets.
func (e *Exchange) Time() time.Time { return time.Unix(0, e.TsUnixNs).UTC() }
