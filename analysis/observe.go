package analysis

import (
	"slices"
	"strings"

	"github.com/reelkit/reel/formats"
)

// missing marks a metric the request does not have (TTFT of a non-streaming
// response, TPOT with one output token, lag of a recording).
const missing = -1

// metric indexes the per-request latency columns.
const (
	colTTFB = iota
	colTTFT
	colTTST
	colTPOT
	colE2E
	colE2ESched
	colLag
	colSessionDelay // replay --sessions: only turns that waited for a predecessor
	numCols
)

// colOf maps SLO metrics to their columns.
var colOf = map[Metric]int{
	MetricTTFB: colTTFB, MetricTTFT: colTTFT, MetricTTST: colTTST, MetricTPOT: colTPOT,
	MetricE2E: colE2E, MetricE2ESched: colE2ESched, MetricLag: colLag, MetricSessionDelay: colSessionDelay,
}

// allMissing is an observation's latencies before a row's are known.
var allMissing = func() (lat [numCols]int64) {
	for i := range lat {
		lat[i] = missing
	}
	return lat
}()

// observation is one request, from a recording or a replay, in the shape
// every metric is computed from. It lives only while a row is added, on
// the adder's stack, and fromExchange and fromResult set each of its
// fields one by one: returned by value, or assigned a composite literal,
// it is built aside and copied, which cost more than filling it.
type observation struct {
	request // what the metrics read; the rest is admit's, the Filter's and the timeline's

	sched    int64 // t_sched, ns since epoch (recording: = send)
	send     int64 // t_send, ns since epoch
	runStart int64 // offset from the run's start, for ExcludeFirst; missing when unknown
	frame    int64 // frame start named by the row (replay), 0 when absent

	class               string  // status class, see classify
	itlUs               []int32 // gaps between token events, µs (borrowed from the row)
	method, path, model string
	prefix              []int64 // prefix block hashes (borrowed), recordings only
}

// request is what the metrics (Analyzer.addMetrics) read of an admitted
// observation: its breakdowns as the ids the Analyzer's dicts give them
// (Analyzer.identify), so that it holds no pointer and travels through
// metricsPipe as plain bytes.
type request struct {
	orig      int64 // original start (recording ts, replay orig_ts), ns since epoch: names frames
	lat       [numCols]int64
	bodyBytes int64

	outTokens, promptTokens int32
	cachedTokens            int32 // prompt tokens served from the prefix cache; -1 when not reported
	batch, queue            int32 // -1 when absent

	routeID, modelID, classID int32 // set by identify
	ok                        bool  // a 2xx or 3xx (set by identify)
}

// Status classes. OK requests are 2xx and 3xx.
const (
	ClassTimeout    = "timeout"
	ClassConnection = "connection"
	ClassCanceled   = "canceled"
	ClassTransport  = "error"
	ClassNoResponse = "no_response"
	ClassIncomplete = "incomplete"
)

// classify names a request's status class: the transport error kind when
// err is set, no_response for status 0, incomplete for a partially seen
// exchange, otherwise "2xx", "4xx" and so on.
func classify(status int32, err string, complete bool) string {
	if err != "" {
		e := strings.ToLower(err)
		switch {
		case strings.Contains(e, "timeout"), strings.Contains(e, "deadline exceeded"), strings.Contains(e, "timed out"):
			return ClassTimeout
		case strings.Contains(e, "canceled"), strings.Contains(e, "cancelled"):
			return ClassCanceled
		case strings.Contains(e, "refused"), strings.Contains(e, "reset"), strings.Contains(e, "broken pipe"),
			strings.Contains(e, "eof"), strings.Contains(e, "no such host"), strings.Contains(e, "connect"):
			return ClassConnection
		}
		return ClassTransport
	}
	if status == 0 {
		return ClassNoResponse
	}
	if !complete {
		return ClassIncomplete
	}
	if status >= 100 && status < 600 {
		return statusClasses[status/100-1]
	}
	return "other"
}

var statusClasses = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

func isOK(class string) bool { return class == "2xx" || class == "3xx" }

// tpotOf is SPEC §6 TPOT: (E2E − TTFT) / (output_tokens − 1) when both are
// known and output_tokens > 1.
func tpotOf(e2e, ttft int64, out int32) int64 {
	if out <= 1 || e2e < 0 || ttft < 0 || e2e < ttft {
		return missing
	}
	return (e2e - ttft) / int64(out-1)
}

// cachedOrMissing reads an optional cached_tokens column.
func cachedOrMissing(v *int32) int32 {
	if v == nil {
		return missing
	}
	return max(*v, 0)
}

func orMissing(v int64) int64 {
	if v <= 0 {
		return missing
	}
	return v
}

// fromResult maps a replay result row into o.
func (o *observation) fromResult(r *formats.Result) {
	o.send, o.sched, o.runStart = r.SentUnixNs, r.SentUnixNs-r.LagNs, r.ScheduledNs
	o.orig = o.sched
	if !r.OrigTs.IsZero() {
		o.orig = r.OrigTs.UnixNano()
	}
	o.frame = 0
	if !r.Frame.IsZero() {
		o.frame = r.Frame.UnixNano()
	}
	o.class = classify(r.Status, r.Error, true)
	o.lat = allMissing
	o.itlUs = r.ITLUs
	o.outTokens, o.promptTokens, o.cachedTokens = r.OutputTokens, r.PromptTokens, cachedOrMissing(r.CachedTokens)
	o.batch, o.queue = r.BatchSize, r.QueueDepth
	o.bodyBytes = r.BytesSent
	o.method, o.path, o.model = r.Method, r.Path, r.Model
	o.prefix = nil
	o.lat[colLag] = r.LagNs
	if r.SessionDelayNs > 0 {
		o.lat[colSessionDelay] = r.SessionDelayNs
	}
	if isOK(o.class) {
		o.lat[colTTFB] = orMissing(r.TTFBNs)
		o.lat[colTTFT] = orMissing(r.TTFTNs)
		o.lat[colTTST] = orMissing(r.TTSTNs)
		o.lat[colE2E] = orMissing(r.E2ENs)
		o.lat[colE2ESched] = orMissing(r.E2ESchedNs)
		o.lat[colTPOT] = tpotOf(o.lat[colE2E], o.lat[colTTFT], r.OutputTokens)
	}
}

// maxRecordedGaps is the recorder's cap on event_gaps_us (sse
// MaxGaps); a full list may miss the last gaps.
const maxRecordedGaps = 1 << 16

// exchangeColumns are the exchange/1 columns fromExchange reads: AddDataset
// decodes only these (the bodies and headers are most of a recorded row).
// Every Exchange field read here must be listed;
// TestExchangeColumnsCoverAnalysis fails otherwise.
var exchangeColumns = []string{
	"ts_unix_ns", "status", "error", "complete", // time, outcome
	"ttfb_ns", "duration_ns", "ttft_ns", "event_gaps_us", // timings
	"output_tokens", "prompt_tokens", "req_body_bytes", "prefix_hashes", // workload
	"batch_size", "queue_depth", "cached_tokens", // server state
	"method", "path", "model", // breakdowns and filters
}

// ExchangeColumns are the exchange/1 columns the analysis reads from a
// recording (what AddDataset decodes by default).
func ExchangeColumns() []string { return slices.Clone(exchangeColumns) }

// fromExchange maps a recorded exchange: t_send is the request's first byte
// and there is no schedule, so E2E from schedule equals E2E and lag is
// missing. event_gaps_us are the gaps between token-bearing events, so the
// first gap is TTST, and a stream's E2E ends at its last token event
// (ttft_ns + Σ event_gaps_us) rather than at its last byte (duration_ns,
// which includes a trailing usage chunk and [DONE]).
func (o *observation) fromExchange(x *formats.Exchange) {
	o.orig, o.sched, o.send, o.runStart, o.frame = x.TsUnixNs, x.TsUnixNs, x.TsUnixNs, missing, 0
	o.class = classify(x.Status, x.Error, x.Complete)
	o.lat = allMissing
	o.itlUs = x.EventGapsUs
	o.outTokens, o.promptTokens, o.cachedTokens = x.OutputTokens, x.PromptTokens, cachedOrMissing(x.CachedTokens)
	o.batch, o.queue = x.BatchSize, x.QueueDepth
	o.bodyBytes = x.ReqBodyBytes
	o.method, o.path, o.model = x.Method, x.Path, x.Model
	o.prefix = x.PrefixHashes
	if isOK(o.class) {
		o.lat[colTTFB] = orMissing(x.TTFBNs)
		o.lat[colE2E] = orMissing(x.DurationNs)
		o.lat[colE2ESched] = o.lat[colE2E]
		o.lat[colTTFT] = orMissing(x.TTFTNs)
		if o.lat[colTTFT] > 0 && len(x.EventGapsUs) > 0 {
			o.lat[colTTST] = int64(x.EventGapsUs[0]) * 1000
		}
		if o.lat[colTTFT] > 0 && len(x.EventGapsUs) < maxRecordedGaps {
			// Stream: E2E ends at the last token event, t_1 + Σ gaps.
			var sum int64 // µs; at most 2^16 gaps of 2^31 µs, far from overflowing as ns
			for _, g := range x.EventGapsUs {
				sum += int64(g)
			}
			o.lat[colE2E] = o.lat[colTTFT] + sum*1000
			o.lat[colE2ESched] = o.lat[colE2E]
		}
		o.lat[colTPOT] = tpotOf(o.lat[colE2E], o.lat[colTTFT], x.OutputTokens)
	}
}
