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
	Source   string        `json:"source"` // "recording", "replay" or "mixed"
	Start    time.Time     `json:"start"`  // earliest t_sched
	End      time.Time     `json:"end"`    // latest request end
	Duration time.Duration `json:"duration_ns"`
	Frame    time.Duration `json:"frame_ns"`

	Requests int64 `json:"requests"`
	OK       int64 `json:"ok"`
	Errors   int64 `json:"errors"`
	Excluded int64 `json:"excluded"` // left out by ExcludeFirst
	// Filtered counts requests Options.Filter left out; FilterText says
	// what it keeps (both absent without a filter).
	Filtered    int64        `json:"filtered,omitempty"`
	FilterText  string       `json:"filter,omitempty"`
	ErrorRate   float64      `json:"error_rate"`
	TimeoutRate float64      `json:"timeout_rate"`
	Classes     []ClassCount `json:"classes"`

	E2E      Quantiles `json:"e2e"`
	E2ESched Quantiles `json:"e2e_sched"`
	TTFB     Quantiles `json:"ttfb"`
	TTFT     Quantiles `json:"ttft"`
	TTST     Quantiles `json:"ttst"`
	TPOT     Quantiles `json:"tpot"`
	ITL      Quantiles `json:"itl"`       // per token-bearing event, pooled (µs resolution)
	ITLToken Quantiles `json:"itl_token"` // per token where usage gives more tokens than events
	Lag      Quantiles `json:"lag"`

	// Histograms of e2e, ttft, tpot and itl, for distribution charts.
	Histograms map[string]Histogram `json:"histograms"`

	RequestRate         float64 `json:"request_rate"`  // requests/s
	Throughput          float64 `json:"throughput"`    // completed (OK) requests/s
	OutputTokens        int64   `json:"output_tokens"` // of OK requests
	OutputTokenRate     float64 `json:"output_tokens_per_s"`
	PeakOutputTokenRate float64 `json:"peak_output_tokens_per_s"` // busiest 1-s bucket
	Concurrency         float64 `json:"concurrency"`              // ΣE2E ÷ duration (Little's law)
	PeakInFlight        int     `json:"peak_in_flight"`

	SLO              string  `json:"slo"`
	WindowQuantile   float64 `json:"window_quantile"`
	MeetingSLO       int64   `json:"meeting_slo"`   // requests meeting every bound
	Goodput          float64 `json:"goodput"`       // MeetingSLO ÷ duration, req/s
	GoodputShare     float64 `json:"goodput_share"` // MeetingSLO ÷ Requests
	JudgedFrames     int     `json:"judged_frames"`
	CompliantFrames  int     `json:"compliant_frames"`
	WindowCompliance float64 `json:"window_compliance"`
	MeetsSLO         bool    `json:"meets_slo"`

	LongPrompt     int32   `json:"long_prompt_tokens"` // threshold in effect
	MeanBatchSize  float64 `json:"mean_batch_size"`    // 0 when not reported
	MeanQueueDepth float64 `json:"mean_queue_depth"`   // 0 when not reported

	Frames        []Frame `json:"frames"`
	Routes        []Group `json:"routes"`
	Models        []Group `json:"models"`
	PromptBuckets []Group `json:"prompt_buckets"`
	StatusClasses []Group `json:"status_classes"`

	// Recording-only: prefix sharing (see PrefixSharing).
	Prefix PrefixSharing `json:"prefix"`

	// Signals are the server-side series scraped beside the run, per frame
	// (LoadSignals); nil when none were scraped.
	Signals *Signals `json:"signals,omitempty"`
}

// ClassCount counts requests of one status class.
type ClassCount struct {
	Class string  `json:"class"`
	Count int64   `json:"count"`
	Share float64 `json:"share"`
}

// PrefixSharing measures prefix-cache potential from prefix_hashes: Ratio is
// the share of all prefix blocks whose hash an earlier request already had
// (blocks a perfect prefix cache would not prefill again); RequestShare is
// the share of requests whose first block was seen before. Capped means the
// hash memory filled and the ratios are lower bounds.
type PrefixSharing struct {
	Requests     int64   `json:"requests"`
	Blocks       int64   `json:"blocks"`
	Reused       int64   `json:"reused"`
	Ratio        float64 `json:"ratio"`
	RequestShare float64 `json:"request_share"`
	Capped       bool    `json:"capped"`
}

// Frame is one window of the original timeline.
type Frame struct {
	Start           time.Time `json:"start"` // original wall-clock start
	Requests        int64     `json:"requests"`
	OK              int64     `json:"ok"`
	Errors          int64     `json:"errors"`
	Rate            float64   `json:"rate"` // requests per second of original time
	E2E             Quantiles `json:"e2e"`
	E2ESched        Quantiles `json:"e2e_sched"`
	TTFT            Quantiles `json:"ttft"`
	TPOT            Quantiles `json:"tpot"`
	Lag             Quantiles `json:"lag"`
	OutputTokens    int64     `json:"output_tokens"`
	MeanBatchSize   float64   `json:"mean_batch_size"`  // 0 when not reported
	MeanQueueDepth  float64   `json:"mean_queue_depth"` // 0 when not reported
	MeanPrompt      float64   `json:"mean_prompt_tokens"`
	LongPromptShare float64   `json:"long_prompt_share"`
	MeetingSLO      int64     `json:"meeting_slo"`
	Judged          bool      `json:"judged"`    // has requests and an SLO to judge
	MeetsSLO        bool      `json:"meets_slo"` // judged and its window quantile meets every bound
	Misses          []string  `json:"misses,omitempty"`
}

// Group is one breakdown key (a route, model, prompt bucket or status class).
type Group struct {
	Key      string    `json:"key"`
	Requests int64     `json:"requests"`
	OK       int64     `json:"ok"`
	Errors   int64     `json:"errors"`
	E2E      Quantiles `json:"e2e"`
	TTFT     Quantiles `json:"ttft"`
	TPOT     Quantiles `json:"tpot"`
}

// Summary computes every metric from what was added so far. It sorts
// copies of one metric column at a time, so its extra memory is one column.
func (a *Analyzer) Summary() *Summary {
	n := len(a.frame)
	s := &Summary{
		Frame:          a.opt.Frame,
		Requests:       int64(n),
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
	s.Start = time.Unix(0, a.minStart).UTC()
	s.End = time.Unix(0, a.maxEnd).UTC()
	s.Duration = time.Duration(max(a.maxEnd-a.minStart, 0))
	secs := s.Duration.Seconds()
	rate := func(x float64) float64 {
		if secs <= 0 {
			return 0
		}
		return x / secs
	}

	var meeting int64
	var batchSum, queueSum float64
	var batchN, queueN int64
	for i := 0; i < n; i++ {
		if a.flags[i]&flagOK != 0 {
			s.OK++
			s.OutputTokens += int64(a.out[i])
		}
		if a.flags[i]&flagMeets != 0 {
			meeting++
		}
		if a.batch[i] > 0 {
			batchSum += float64(a.batch[i])
			batchN++
		}
		if a.queue[i] >= 0 {
			queueSum += float64(a.queue[i])
			queueN++
		}
	}
	s.Errors = s.Requests - s.OK
	s.ErrorRate = float64(s.Errors) / float64(n)
	if batchN > 0 {
		s.MeanBatchSize = batchSum / float64(batchN)
	}
	if queueN > 0 {
		s.MeanQueueDepth = queueSum / float64(queueN)
	}

	scratch := make([]int64, 0, n)
	s.Histograms = map[string]Histogram{}
	all := func(col int) Quantiles {
		scratch = scratch[:0]
		for _, v := range a.lat[col] {
			if v != missing {
				scratch = append(scratch, v)
			}
		}
		switch col {
		case colE2E:
			s.Histograms["e2e"] = histogramOf(scratch)
		case colTTFT:
			s.Histograms["ttft"] = histogramOf(scratch)
		case colTPOT:
			s.Histograms["tpot"] = histogramOf(scratch)
		}
		return summarize(scratch)
	}
	s.E2E, s.E2ESched, s.TTFB = all(colE2E), all(colE2ESched), all(colTTFB)
	s.TTFT, s.TTST, s.TPOT, s.Lag = all(colTTFT), all(colTTST), all(colTPOT), all(colLag)
	s.ITL, s.ITLToken = a.itl.quantiles(), a.itlToken.quantiles()
	s.Histograms["itl"] = histogramOfDist(&a.itl)

	s.RequestRate = rate(float64(n))
	s.Throughput = rate(float64(s.OK))
	s.OutputTokenRate = rate(float64(s.OutputTokens))
	for _, v := range a.tokensSec {
		s.PeakOutputTokenRate = max(s.PeakOutputTokenRate, v)
	}
	s.PeakOutputTokenRate = math.Round(s.PeakOutputTokenRate*1000) / 1000
	s.Concurrency = rate(a.sumE2E / 1e9)
	s.PeakInFlight = a.peakFlight

	if !a.opt.SLO.IsZero() {
		s.MeetingSLO = meeting
		s.Goodput = rate(float64(meeting))
		s.GoodputShare = float64(meeting) / float64(n)
	}

	long := a.longPrompt()
	if long != math.MaxInt32 { // else no prompt length is known
		s.LongPrompt = long
	}
	s.Frames = a.frames(long, &scratch)
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

	s.Routes = a.groups(a.route, a.routes.names, &scratch, s)
	s.Models = a.groups(a.model, a.models.names, &scratch, s)
	bucket, names := a.buckets()
	s.PromptBuckets = a.groups(bucket, names, &scratch, s)
	classKeys := make([]int32, n)
	for i, c := range a.class {
		classKeys[i] = int32(c)
	}
	s.StatusClasses = a.groups(classKeys, a.classes.names, &scratch, s)
	for _, g := range s.StatusClasses {
		s.Classes = append(s.Classes, ClassCount{Class: g.Key, Count: g.Requests, Share: float64(g.Requests) / float64(n)})
		if g.Key == ClassTimeout {
			s.TimeoutRate = float64(g.Requests) / float64(n)
		}
	}

	p := a.prefix
	s.Prefix = PrefixSharing{Requests: p.requests, Blocks: p.blocks, Reused: p.reuse, Capped: p.capped}
	if p.blocks > 0 {
		s.Prefix.Ratio = float64(p.reuse) / float64(p.blocks)
	}
	if p.requests > 0 {
		s.Prefix.RequestShare = float64(p.sharing) / float64(p.requests)
	}
	return s
}

// longPrompt returns the long-prompt threshold: the option, else twice the
// median known prompt length (at least 1).
func (a *Analyzer) longPrompt() int32 {
	if a.opt.LongPrompt > 0 {
		return a.opt.LongPrompt
	}
	known := make([]int32, 0, len(a.prompt))
	for _, p := range a.prompt {
		if p > 0 {
			known = append(known, p)
		}
	}
	if len(known) == 0 {
		return math.MaxInt32
	}
	slices.Sort(known)
	return max(2*known[rank(0.5, len(known))], 1)
}

// buckets assigns each request its prompt-length bucket.
func (a *Analyzer) buckets() ([]int32, []string) {
	bounds := a.opt.LengthBuckets
	names := bucketNames(bounds)
	unknown := int32(len(names))
	names = append(names, "unknown")
	keys := make([]int32, len(a.prompt))
	for i, p := range a.prompt {
		if p <= 0 {
			keys[i] = unknown
			continue
		}
		keys[i] = int32(sort.Search(len(bounds), func(j int) bool { return p < bounds[j] }))
	}
	return keys, names
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

// grouping orders request indices by key with a counting sort.
type grouping struct {
	order []int32
	off   []int // group g is order[off[g]:off[g+1]]
}

func groupBy(keys []int32, k int) grouping {
	off := make([]int, k+1)
	for _, g := range keys {
		off[g+1]++
	}
	for g := 1; g <= k; g++ {
		off[g] += off[g-1]
	}
	pos := slices.Clone(off[:k])
	order := make([]int32, len(keys))
	for i, g := range keys {
		order[pos[g]] = int32(i)
		pos[g]++
	}
	return grouping{order: order, off: off}
}

func (a *Analyzer) quantilesOf(col int, idx []int32, scratch *[]int64) Quantiles {
	buf := (*scratch)[:0]
	c := a.lat[col]
	for _, i := range idx {
		if v := c[i]; v != missing {
			buf = append(buf, v)
		}
	}
	*scratch = buf
	return summarize(buf)
}

func (a *Analyzer) groups(keys []int32, names []string, scratch *[]int64, all *Summary) []Group {
	if len(names) == 1 && len(keys) > 0 {
		// One group holds every request: its metrics are the summary's.
		return []Group{{Key: names[0], Requests: all.Requests, OK: all.OK, Errors: all.Errors, E2E: all.E2E, TTFT: all.TTFT, TPOT: all.TPOT}}
	}
	gr := groupBy(keys, len(names))
	var out []Group
	for g, name := range names {
		idx := gr.order[gr.off[g]:gr.off[g+1]]
		if len(idx) == 0 {
			continue
		}
		grp := Group{Key: name, Requests: int64(len(idx))}
		for _, i := range idx {
			if a.flags[i]&flagOK != 0 {
				grp.OK++
			}
		}
		grp.Errors = grp.Requests - grp.OK
		grp.E2E = a.quantilesOf(colE2E, idx, scratch)
		grp.TTFT = a.quantilesOf(colTTFT, idx, scratch)
		grp.TPOT = a.quantilesOf(colTPOT, idx, scratch)
		out = append(out, grp)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Requests > out[j].Requests })
	return out
}

// maxGapFrames bounds how many empty frames are filled in between frames
// with requests; sparser timelines list only frames with requests.
const maxGapFrames = 100_000

// frames computes the per-frame table in time order, with empty frames
// between the first and the last listed.
func (a *Analyzer) frames(long int32, scratch *[]int64) []Frame {
	gr := groupBy(a.frame, len(a.frameStart))
	idxs := make([]int, len(a.frameStart))
	for i := range idxs {
		idxs[i] = i
	}
	sort.Slice(idxs, func(i, j int) bool { return a.frameStart[idxs[i]] < a.frameStart[idxs[j]] })
	f := int64(a.opt.Frame)
	first, last := a.frameStart[idxs[0]], a.frameStart[idxs[len(idxs)-1]]
	span := last - first // negative when the times are so far apart it overflows
	fill := span >= 0 && span/f+1 <= maxGapFrames

	var out []Frame
	prev := first - f
	for _, fi := range idxs {
		start := a.frameStart[fi]
		if fill {
			for t := prev + f; t < start; t += f {
				out = append(out, Frame{Start: time.Unix(0, t).UTC()})
			}
		}
		prev = start
		out = append(out, a.frame1(start, gr.order[gr.off[fi]:gr.off[fi+1]], long, scratch))
	}
	return out
}

func (a *Analyzer) frame1(start int64, idx []int32, long int32, scratch *[]int64) Frame {
	fr := Frame{Start: time.Unix(0, start).UTC(), Requests: int64(len(idx))}
	fr.Rate = float64(len(idx)) / a.opt.Frame.Seconds()
	var batchSum, queueSum, promptSum float64
	var batchN, queueN, promptN, longN int64
	for _, i := range idx {
		if a.flags[i]&flagOK != 0 {
			fr.OK++
			fr.OutputTokens += int64(a.out[i])
		}
		if a.flags[i]&flagMeets != 0 {
			fr.MeetingSLO++
		}
		if b := a.batch[i]; b > 0 {
			batchSum += float64(b)
			batchN++
		}
		if q := a.queue[i]; q >= 0 {
			queueSum += float64(q)
			queueN++
		}
		if p := a.prompt[i]; p > 0 {
			promptSum += float64(p)
			promptN++
			if p >= long {
				longN++
			}
		}
	}
	fr.Errors = fr.Requests - fr.OK
	if batchN > 0 {
		fr.MeanBatchSize = batchSum / float64(batchN)
	}
	if queueN > 0 {
		fr.MeanQueueDepth = queueSum / float64(queueN)
	}
	if promptN > 0 {
		fr.MeanPrompt = promptSum / float64(promptN)
		fr.LongPromptShare = float64(longN) / float64(promptN)
	}
	fr.E2E = a.quantilesOf(colE2E, idx, scratch)
	fr.E2ESched = a.quantilesOf(colE2ESched, idx, scratch)
	fr.TTFT = a.quantilesOf(colTTFT, idx, scratch)
	fr.TPOT = a.quantilesOf(colTPOT, idx, scratch)
	fr.Lag = a.quantilesOf(colLag, idx, scratch)
	if !a.opt.SLO.IsZero() && fr.Requests > 0 {
		fr.Judged = true
		if fr.OK == 0 {
			fr.Misses = append(fr.Misses, "no successful request")
		}
		for _, m := range a.opt.SLO.metrics() {
			q := a.quantilesOf(colOf[m], idx, scratch)
			if q.N == 0 {
				continue
			}
			v := time.Duration(quantileOf(*scratch, a.opt.WindowQuantile))
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
