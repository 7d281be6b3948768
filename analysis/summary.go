package analysis

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// Summary holds every SPEC §6 metric of an analysed set of requests, overall,
// per frame and per breakdown. JSON keys are stable (docs: README, Analysis).
type Summary struct {
	Source   string        `json:"source"`      // "recording", "replay" or "mixed"
	Start    time.Time     `json:"start"`       // earliest t_sched
	End      time.Time     `json:"end"`         // latest request end
	Duration time.Duration `json:"duration_ns"` // End − Start
	Frame    time.Duration `json:"frame_ns"`    // frame length (Options.Frame)

	Requests int64 `json:"requests"` // requests analysed (after ExcludeFirst and Filter)
	OK       int64 `json:"ok"`       // requests with a 2xx or 3xx status
	Errors   int64 `json:"errors"`   // Requests − OK
	Excluded int64 `json:"excluded"` // left out by ExcludeFirst
	// Filtered counts requests Options.Filter left out; FilterText says
	// what it keeps (both absent without a filter).
	Filtered    int64        `json:"filtered,omitempty"`
	FilterText  string       `json:"filter,omitempty"` // what Options.Filter keeps (Filter.String())
	ErrorRate   float64      `json:"error_rate"`       // Errors ÷ Requests
	TimeoutRate float64      `json:"timeout_rate"`     // share of requests in the timeout class
	Classes     []ClassCount `json:"classes"`          // requests per status class, most first

	E2E      Quantiles `json:"e2e"`       // end-to-end latency from send
	E2ESched Quantiles `json:"e2e_sched"` // latency from the scheduled time (coordinated-omission-free)
	TTFB     Quantiles `json:"ttfb"`      // time to first byte
	TTFT     Quantiles `json:"ttft"`      // time to first token
	TTST     Quantiles `json:"ttst"`      // time from the first token event to the second
	TPOT     Quantiles `json:"tpot"`      // time per output token: (E2E − TTFT) ÷ (output tokens − 1)
	ITL      Quantiles `json:"itl"`       // per token-bearing event, pooled (µs resolution)
	ITLToken Quantiles `json:"itl_token"` // per token where usage gives more tokens than events
	Lag      Quantiles `json:"lag"`       // send − scheduled (replays only)
	// SessionDelay is over the turns that waited for a predecessor on the
	// shadow beyond their recorded schedule (replay --sessions); N = 0
	// otherwise. It is part of E2ESched, not of Lag.
	SessionDelay Quantiles `json:"session_delay"`

	// Histograms of e2e, ttft, tpot and itl, for distribution charts.
	Histograms map[string]Histogram `json:"histograms"`

	RequestRate         float64 `json:"request_rate"`             // requests/s
	Throughput          float64 `json:"throughput"`               // completed (OK) requests/s
	OutputTokens        int64   `json:"output_tokens"`            // of OK requests
	OutputTokenRate     float64 `json:"output_tokens_per_s"`      // OutputTokens ÷ duration
	PeakOutputTokenRate float64 `json:"peak_output_tokens_per_s"` // busiest 1-s bucket
	Concurrency         float64 `json:"concurrency"`              // ΣE2E ÷ duration (Little's law)
	PeakInFlight        int     `json:"peak_in_flight"`           // most requests in flight at once

	SLO              string  `json:"slo"`               // the SLO judged, as Options.SLO.String(); empty without one
	WindowQuantile   float64 `json:"window_quantile"`   // quantile each frame must keep within the SLO (Options.WindowQuantile)
	MeetingSLO       int64   `json:"meeting_slo"`       // requests meeting every bound
	Goodput          float64 `json:"goodput"`           // MeetingSLO ÷ duration, req/s
	GoodputShare     float64 `json:"goodput_share"`     // MeetingSLO ÷ Requests
	JudgedFrames     int     `json:"judged_frames"`     // frames with requests judged against the SLO
	CompliantFrames  int     `json:"compliant_frames"`  // judged frames whose window quantile meets every bound
	WindowCompliance float64 `json:"window_compliance"` // CompliantFrames ÷ JudgedFrames
	MeetsSLO         bool    `json:"meets_slo"`         // window compliance reaches Options.MinCompliance

	LongPrompt     int32   `json:"long_prompt_tokens"` // threshold in effect
	MeanBatchSize  float64 `json:"mean_batch_size"`    // 0 when not reported
	MeanQueueDepth float64 `json:"mean_queue_depth"`   // 0 when not reported

	Frames        []Frame `json:"frames"`         // per-frame table in time order, with the empty frames between (unless too sparse)
	Routes        []Group `json:"routes"`         // breakdown by method and path, most requests first
	Models        []Group `json:"models"`         // breakdown by model, most requests first
	PromptBuckets []Group `json:"prompt_buckets"` // breakdown by prompt-length bucket (Options.LengthBuckets), most requests first
	StatusClasses []Group `json:"status_classes"` // breakdown by status class, most requests first

	// Recording-only: prefix sharing (see PrefixSharing).
	Prefix PrefixSharing `json:"prefix"`
	// Cache is the prefix-cache reuse the server reported (cached_tokens).
	Cache CacheReuse `json:"cache,omitzero"`

	// Signals are the server-side series scraped beside the run, per frame
	// (LoadSignals); nil when none were scraped.
	Signals *Signals `json:"signals,omitempty"`
}

// ClassCount counts requests of one status class.
type ClassCount struct {
	Class string  `json:"class"` // status class: "2xx", "4xx", ClassTimeout, …
	Count int64   `json:"count"` // requests in the class
	Share float64 `json:"share"` // Count ÷ Summary.Requests
}

// PrefixSharing measures prefix-cache potential from prefix_hashes: Ratio is
// the share of all prefix blocks whose hash an earlier request already had
// (blocks a perfect prefix cache would not prefill again); RequestShare is
// the share of requests whose first block was seen before. Capped means the
// hash memory filled and the ratios are lower bounds.
type PrefixSharing struct {
	Requests     int64   `json:"requests"`      // requests with prefix hashes
	Blocks       int64   `json:"blocks"`        // prefix blocks seen
	Reused       int64   `json:"reused"`        // blocks whose hash an earlier request already had
	Ratio        float64 `json:"ratio"`         // Reused ÷ Blocks
	RequestShare float64 `json:"request_share"` // share of requests whose first block was seen before
	Capped       bool    `json:"capped"`        // the hash memory filled (Options.MaxPrefixBlocks): ratios are lower bounds
}

// Frame is one window of the original timeline.
type Frame struct {
	Start           time.Time  `json:"start"`              // original wall-clock start
	Requests        int64      `json:"requests"`           // requests originally started in the frame
	OK              int64      `json:"ok"`                 // requests with a 2xx or 3xx status
	Errors          int64      `json:"errors"`             // Requests − OK
	Rate            float64    `json:"rate"`               // requests per second of original time
	E2E             Quantiles  `json:"e2e"`                // end-to-end latency from send
	E2ESched        Quantiles  `json:"e2e_sched"`          // latency from the scheduled time
	TTFT            Quantiles  `json:"ttft"`               // time to first token
	TPOT            Quantiles  `json:"tpot"`               // time per output token
	Lag             Quantiles  `json:"lag"`                // send − scheduled (replays only)
	OutputTokens    int64      `json:"output_tokens"`      // output tokens of OK requests
	MeanBatchSize   float64    `json:"mean_batch_size"`    // 0 when not reported
	MeanQueueDepth  float64    `json:"mean_queue_depth"`   // 0 when not reported
	MeanPrompt      float64    `json:"mean_prompt_tokens"` // mean known prompt length (tokens); 0 when none is known
	LongPromptShare float64    `json:"long_prompt_share"`  // share of known prompt lengths at least Summary.LongPrompt; 0 from Analyzer.Frame
	MeetingSLO      int64      `json:"meeting_slo"`        // requests meeting every SLO bound
	Cache           CacheReuse `json:"cache,omitzero"`     // prefix-cache reuse the server reported
	Judged          bool       `json:"judged"`             // has requests and an SLO to judge
	MeetsSLO        bool       `json:"meets_slo"`          // judged and its window quantile meets every bound
	Misses          []string   `json:"misses,omitempty"`   // why a judged frame missed the SLO: no OK request, or a metric's window quantile over its bound
}

// Group is one breakdown key (a route, model, prompt bucket or status class).
type Group struct {
	Key      string     `json:"key"`            // route ("METHOD path"), model, prompt bucket or status class
	Requests int64      `json:"requests"`       // requests with the key
	OK       int64      `json:"ok"`             // requests with a 2xx or 3xx status
	Errors   int64      `json:"errors"`         // Requests − OK
	E2E      Quantiles  `json:"e2e"`            // end-to-end latency from send
	TTFT     Quantiles  `json:"ttft"`           // time to first token
	TPOT     Quantiles  `json:"tpot"`           // time per output token
	Cache    CacheReuse `json:"cache,omitzero"` // prefix-cache reuse the server reported
}

// Summary computes every metric from what was added so far.
func (a *Analyzer) Summary() *Summary {
	t := &a.tot
	n := t.n
	s := &Summary{
		Frame:          a.opt.Frame,
		Requests:       n,
		Excluded:       a.excluded,
		Filtered:       a.filtered,
		FilterText:     a.opt.Filter.String(),
		SLO:            a.opt.SLO.String(),
		WindowQuantile: a.opt.WindowQuantile,
	}
	switch {
	case a.recordings > 0 && a.replays > 0:
		s.Source = "mixed"
	case a.recordings > 0:
		s.Source = "recording"
	case a.replays > 0:
		s.Source = "replay"
	}
	if n == 0 {
		s.Frames = []Frame{}
		s.Histograms = map[string]Histogram{}
		return s
	}
	s.Start = time.Unix(0, a.tl.minStart).UTC()
	s.End = time.Unix(0, a.tl.maxEnd).UTC()
	s.Duration = time.Duration(max(a.tl.maxEnd-a.tl.minStart, 0))
	secs := s.Duration.Seconds()
	rate := func(x float64) float64 {
		if secs <= 0 {
			return 0
		}
		return x / secs
	}

	s.OK, s.OutputTokens = t.ok, t.outTokens
	s.Cache = t.cache.reuse()
	s.Errors = s.Requests - s.OK
	s.ErrorRate = float64(s.Errors) / float64(n)
	if t.batchN > 0 {
		s.MeanBatchSize = t.batchSum / float64(t.batchN)
	}
	if t.queueN > 0 {
		s.MeanQueueDepth = t.queueSum / float64(t.queueN)
	}

	s.Histograms = map[string]Histogram{}
	for c, name := range charted {
		s.Histograms[name] = trimHist(a.hist[c])
	}
	s.E2E, s.E2ESched, s.TTFB = a.lat[colE2E].quantiles(), a.latOf(&a.lat, colE2ESched).quantiles(), a.lat[colTTFB].quantiles()
	s.TTFT, s.TTST, s.TPOT, s.Lag = a.lat[colTTFT].quantiles(), a.lat[colTTST].quantiles(), a.lat[colTPOT].quantiles(), a.lat[colLag].quantiles()
	itl := a.tl.itl()
	s.ITL, s.ITLToken = itl.quantiles(), a.tl.itlToken().quantiles()
	s.SessionDelay = a.lat[colSessionDelay].quantiles()
	s.Histograms["itl"] = histogramOfDist(itl)

	s.RequestRate = rate(float64(n))
	s.Throughput = rate(float64(s.OK))
	s.OutputTokenRate = rate(float64(s.OutputTokens))
	for _, v := range a.tl.tokensSec.all() {
		s.PeakOutputTokenRate = max(s.PeakOutputTokenRate, v)
	}
	s.PeakOutputTokenRate = math.Round(s.PeakOutputTokenRate*1000) / 1000
	s.Concurrency = rate(a.tl.sumE2E / 1e9)
	s.PeakInFlight = a.tl.peakFlight

	if !a.opt.SLO.IsZero() {
		s.MeetingSLO = t.meets
		s.Goodput = rate(float64(t.meets))
		s.GoodputShare = float64(t.meets) / float64(n)
	}

	long := a.longPrompt()
	if long != math.MaxInt32 { // else no prompt length is known
		s.LongPrompt = long
	}
	s.Frames = a.frameTable(long)
	if !a.opt.SLO.IsZero() {
		for _, f := range s.Frames {
			if f.Judged {
				s.JudgedFrames++
				if f.MeetsSLO {
					s.CompliantFrames++
				}
			}
		}
		if s.JudgedFrames > 0 {
			s.WindowCompliance = float64(s.CompliantFrames) / float64(s.JudgedFrames)
		}
		s.MeetsSLO = s.JudgedFrames > 0 && s.WindowCompliance >= a.opt.MinCompliance
	}

	s.Routes = groups(a.byRoute.groups, a.routes.names, s)
	s.Models = groups(a.byModel.groups, a.models.names, s)
	s.PromptBuckets = groups(a.byBucket.groups, append(bucketNames(a.opt.LengthBuckets), "unknown"), s)
	s.StatusClasses = groups(a.byClass.groups, a.classes.names, s)
	for _, g := range s.StatusClasses {
		s.Classes = append(s.Classes, ClassCount{Class: g.Key, Count: g.Requests, Share: float64(g.Requests) / float64(n)})
		if g.Key == ClassTimeout {
			s.TimeoutRate = float64(g.Requests) / float64(n)
		}
	}

	p := a.tl.prefix
	s.Prefix = PrefixSharing{Requests: p.requests, Blocks: p.blocks, Reused: p.reuse, Capped: p.capped}
	if p.blocks > 0 {
		s.Prefix.Ratio = float64(p.reuse) / float64(p.blocks)
	}
	if p.requests > 0 {
		s.Prefix.RequestShare = float64(p.sharing) / float64(p.requests)
	}
	return s
}

// Frame summarises the frame starting at start from what was added so far
// (replay progress and step mode); false when it has no request. Its
// long-prompt share is left zero: the threshold needs the whole run.
func (a *Analyzer) Frame(start time.Time) (Frame, bool) {
	i, ok := a.frameIdx[start.UnixNano()]
	if !ok {
		return Frame{}, false
	}
	return a.frame1(a.frames[i], math.MaxInt32), true
}

// longPrompt returns the long-prompt threshold: the option, else twice the
// median known prompt length (at least 1).
func (a *Analyzer) longPrompt() int32 {
	if a.opt.LongPrompt > 0 {
		return a.opt.LongPrompt
	}
	if a.prompt.n == 0 {
		return math.MaxInt32
	}
	return int32(min(max(2*a.prompt.quantile(0.5), 1), math.MaxInt32))
}

func bucketNames(bounds []int32) []string {
	if len(bounds) == 3 {
		return []string{
			fmt.Sprintf("short (<%d)", bounds[0]),
			fmt.Sprintf("medium (<%d)", bounds[1]),
			fmt.Sprintf("long (<%d)", bounds[2]),
			fmt.Sprintf("very long (≥%d)", bounds[2]),
		}
	}
	names := make([]string, 0, len(bounds)+1)
	lo := int32(0)
	for _, b := range bounds {
		names = append(names, fmt.Sprintf("%d–%d", lo, b-1))
		lo = b
	}
	return append(names, fmt.Sprintf("≥%d", lo))
}

// groups lists the non-empty groups, most requests first.
func groups(accs []*groupAcc, names []string, all *Summary) []Group {
	if len(names) == 1 && all.Requests > 0 {
		// One group holds every request: its metrics are the summary's.
		return []Group{{Key: names[0], Requests: all.Requests, OK: all.OK, Errors: all.Errors, E2E: all.E2E, TTFT: all.TTFT, TPOT: all.TPOT, Cache: all.Cache}}
	}
	var out []Group
	for g, acc := range accs {
		if acc.n == 0 {
			continue
		}
		out = append(out, Group{Key: names[g], Requests: acc.n, OK: acc.ok, Errors: acc.n - acc.ok,
			E2E: acc.dist(groupE2E).quantiles(), TTFT: acc.dist(groupTTFT).quantiles(), TPOT: acc.dist(groupTPOT).quantiles(), Cache: acc.cache.reuse()})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Requests > out[j].Requests })
	return out
}

// maxGapFrames bounds how many empty frames are filled in between frames
// with requests; sparser timelines list only frames with requests.
const maxGapFrames = 100_000

// inTimeOrder returns the frame accumulators sorted by start.
func (a *Analyzer) inTimeOrder() []*frameAcc {
	fs := slices.Clone(a.frames)
	slices.SortFunc(fs, func(x, y *frameAcc) int { return cmpInt(x.start, y.start) })
	return fs
}

// frameTable computes the per-frame table in time order, with empty frames
// between the first and the last listed.
func (a *Analyzer) frameTable(long int32) []Frame {
	accs := a.inTimeOrder()
	f := int64(a.opt.Frame)
	first, last := accs[0].start, accs[len(accs)-1].start
	span := last - first // negative when the times are so far apart it overflows
	fill := span >= 0 && span/f+1 <= maxGapFrames

	var out []Frame
	prev := first - f
	for _, acc := range accs {
		if fill {
			for t := prev + f; t < acc.start; t += f {
				out = append(out, Frame{Start: time.Unix(0, t).UTC()})
			}
		}
		prev = acc.start
		out = append(out, a.frame1(acc, long))
	}
	return out
}

func (a *Analyzer) frame1(acc *frameAcc, long int32) Frame {
	c := &acc.c
	fr := Frame{Start: time.Unix(0, acc.start).UTC(), Requests: c.n, OK: c.ok, Errors: c.n - c.ok,
		OutputTokens: c.outTokens, MeetingSLO: c.meets, Cache: c.cache.reuse()}
	fr.Rate = float64(c.n) / a.opt.Frame.Seconds()
	if c.batchN > 0 {
		fr.MeanBatchSize = c.batchSum / float64(c.batchN)
	}
	if c.queueN > 0 {
		fr.MeanQueueDepth = c.queueSum / float64(c.queueN)
	}
	if c.promptN > 0 {
		fr.MeanPrompt = c.promptSum / float64(c.promptN)
		if long != math.MaxInt32 {
			fr.LongPromptShare = float64(acc.prompt.atLeast(int64(long))) / float64(c.promptN)
		}
	}
	fr.E2E = acc.lat[colE2E].quantiles()
	fr.E2ESched = a.latOf(&acc.lat, colE2ESched).quantiles()
	fr.TTFT = acc.lat[colTTFT].quantiles()
	fr.TPOT = acc.lat[colTPOT].quantiles()
	fr.Lag = acc.lat[colLag].quantiles()
	if !a.opt.SLO.IsZero() && fr.Requests > 0 {
		fr.Judged = true
		if fr.OK == 0 {
			fr.Misses = append(fr.Misses, "no successful request")
		}
		for _, m := range a.opt.SLO.metrics() {
			d := a.latOf(&acc.lat, colOf[m])
			if d.n == 0 {
				continue
			}
			v := time.Duration(d.quantile(a.opt.WindowQuantile))
			if bound := a.opt.SLO.Bounds[m]; v > bound {
				fr.Misses = append(fr.Misses, fmt.Sprintf("%s.%s %s > %s", m, quantileName(a.opt.WindowQuantile), fmtDur(v), fmtDur(bound)))
			}
		}
		fr.MeetsSLO = len(fr.Misses) == 0
	}
	return fr
}

// quantileName names a quantile as the reports do: p50, p95, p99.9, max.
func quantileName(p float64) string {
	if p >= 1 {
		return "max"
	}
	s := fmt.Sprintf("p%g", p*100)
	return s
}
