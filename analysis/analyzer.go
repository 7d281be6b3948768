package analysis

import (
	"math"
	"time"

	"github.com/reelkit/reel/formats"
)

// Options configure an Analyzer. The zero value works.
type Options struct {
	// Frame is the window the timeline is cut into (default DefaultFrame). Frames are
	// named by their original wall-clock start.
	Frame time.Duration
	// Origin aligns frames: frame k starts at Origin + k·Frame. Zero means:
	// the first replay row's frame column when it has one, else the Unix
	// epoch (so 5 s frames start at :00, :05, …).
	Origin time.Time
	// SLO bounds per-request metrics for goodput and window compliance.
	SLO SLO
	// ExcludeFirst leaves out requests scheduled in the first span of the
	// run (replay: scheduled_ns; recording: since the first exchange).
	ExcludeFirst time.Duration
	// WindowQuantile is the quantile each frame must keep within the SLO
	// (default DefaultWindowQuantile; one of 0.5, 0.9, 0.95, 0.99, 0.999, 1).
	WindowQuantile float64
	// MinCompliance is the window compliance at which the run meets the SLO
	// (default 1: every frame with requests).
	MinCompliance float64
	// LengthBuckets are ascending prompt-token bounds (exclusive upper
	// bounds) of the prompt-length buckets (default DefaultLengthBuckets:
	// short, medium, long, very long).
	LengthBuckets []int32
	// LongPrompt is the prompt length (tokens) from which a prompt counts as
	// long in long-prompt shares (default: 2 × the median prompt length).
	LongPrompt int32
	// MaxGroups caps distinct routes and models; the rest are "(other)"
	// (default 256).
	MaxGroups int
	// MaxPrefixBlocks caps the distinct prefix-block hashes remembered for
	// the prefix-sharing ratio; beyond it the ratio is a lower bound
	// (default 1<<20, about 40 MB).
	MaxPrefixBlocks int
	// Filter keeps only the requests it matches (zero: all of them).
	Filter Filter
}

func (o Options) withDefaults() Options {
	if o.Frame <= 0 {
		o.Frame = DefaultFrame
	}
	if o.WindowQuantile <= 0 {
		o.WindowQuantile = DefaultWindowQuantile
	}
	if o.MinCompliance <= 0 {
		o.MinCompliance = 1
	}
	if len(o.LengthBuckets) == 0 {
		o.LengthBuckets = DefaultLengthBuckets()
	}
	if o.MaxGroups <= 0 {
		o.MaxGroups = 256
	}
	if o.MaxPrefixBlocks <= 0 {
		o.MaxPrefixBlocks = 1 << 20
	}
	return o
}

// Analyzer accumulates requests and computes a Summary. Add rows in time
// order (as formats.Reader yields them; shards of one run merge by adding
// all their rows): peak in flight and ExcludeFirst for recordings rely on
// it. An Analyzer is not safe for concurrent use.
type Analyzer struct {
	opt Options

	// Per-request columns (one entry per added, non-excluded request).
	frame  []int32 // index into frameStart
	route  []int32 // index into routes
	model  []int32 // index into models
	class  []uint8 // index into classes
	flags  []uint8 // flagOK | flagMeets
	prompt []int32 // prompt tokens, 0 unknown
	out    []int32 // output tokens
	batch  []int32 // batch size, -1 absent
	queue  []int32 // queue depth, -1 absent
	body   []int64 // request body bytes
	orig   []int64 // original start, ns since epoch
	lat    [numCols][]int64

	frameStart []int64         // frame index → start, ns since epoch
	frameIdx   map[int64]int32 // start → frame index
	origin     int64
	originSet  bool

	routes, models, classes dict

	itl, itlToken countDist

	excluded   int64
	filtered   int64
	firstOrig  int64
	seenFirst  bool
	minStart   int64 // earliest t_sched
	maxEnd     int64 // latest request end
	sumE2E     float64
	inflight   endHeap
	peakFlight int
	tokensSec  map[int64]float64 // second since epoch → output tokens
	recordings int64
	replays    int64

	prefix prefixCounter
}

const (
	flagOK    = 1 << iota // 2xx or 3xx
	flagMeets             // succeeded and met every SLO bound
)

// New returns an empty Analyzer.
func New(opt Options) *Analyzer {
	opt = opt.withDefaults()
	a := &Analyzer{
		opt:       opt,
		frameIdx:  map[int64]int32{},
		tokensSec: map[int64]float64{},
		routes:    newDict(opt.MaxGroups),
		models:    newDict(opt.MaxGroups),
		classes:   newDict(64),
		minStart:  math.MaxInt64,
		maxEnd:    math.MinInt64,
	}
	a.prefix.max = opt.MaxPrefixBlocks
	if !opt.Origin.IsZero() {
		a.origin, a.originSet = opt.Origin.UnixNano(), true
	}
	return a
}

// Options returns the options in effect, defaults filled in.
func (a *Analyzer) Options() Options { return a.opt }

// AddResult adds one replay result row. The row is not retained.
func (a *Analyzer) AddResult(r *formats.Result) {
	a.replays++
	a.add(fromResult(r))
}

// AddExchange adds one recorded exchange. The row is not retained.
func (a *Analyzer) AddExchange(x *formats.Exchange) {
	a.recordings++
	a.add(fromExchange(x))
}

func (a *Analyzer) add(o observation) {
	if !a.seenFirst {
		a.seenFirst, a.firstOrig = true, o.orig
	}
	if a.opt.ExcludeFirst > 0 {
		since := o.runStart
		if since == missing {
			since = o.orig - a.firstOrig
		}
		if since < int64(a.opt.ExcludeFirst) {
			a.excluded++
			return
		}
	}
	if !a.originSet {
		a.origin, a.originSet = 0, true
		if o.frame != 0 {
			a.origin = o.frame
		}
	}
	if !a.opt.Filter.keeps(&o) {
		a.filtered++
		return
	}
	a.frame = append(a.frame, a.frameOf(o.orig))
	a.route = append(a.route, a.routes.pair(o.method, o.path))
	a.model = append(a.model, a.models.id(o.model))
	a.class = append(a.class, uint8(a.classes.id(o.class)))
	var fl uint8
	if isOK(o.class) {
		fl |= flagOK
		if a.meets(&o) {
			fl |= flagMeets
		}
	}
	a.flags = append(a.flags, fl)
	a.prompt = append(a.prompt, max(o.promptTokens, 0))
	a.out = append(a.out, max(o.outTokens, 0))
	b := o.batch
	if b <= 0 {
		b = missing
	}
	a.batch = append(a.batch, b)
	q := o.queue
	if q < 0 {
		q = missing
	}
	a.queue = append(a.queue, q)
	a.body = append(a.body, o.bodyBytes)
	a.orig = append(a.orig, o.orig)
	for i := range o.lat {
		a.lat[i] = append(a.lat[i], o.lat[i])
	}

	a.addTiming(&o, fl&flagOK != 0)
	if len(o.prefix) > 0 {
		a.prefix.add(o.prefix)
	}
}

// addTiming updates duration, concurrency, ITL and token-rate state.
func (a *Analyzer) addTiming(o *observation, ok bool) {
	a.minStart = min(a.minStart, o.sched)
	end := o.send
	if e := o.lat[colE2E]; e > 0 {
		end = o.send + e
		a.sumE2E += float64(e)
	} else if t := o.lat[colTTFB]; t > 0 {
		end = o.send + t
	}
	a.maxEnd = max(a.maxEnd, end)

	for a.inflight.Len() > 0 && a.inflight[0] <= o.send {
		a.inflight.pop()
	}
	a.inflight.push(end)
	a.peakFlight = max(a.peakFlight, a.inflight.Len())

	if !ok {
		return
	}
	for _, g := range o.itlUs {
		if g >= 0 {
			a.itl.add(int64(g), 1)
		}
	}
	// Per-token ITL: when usage reports more tokens than there are token
	// events, each gap is shared evenly by the tokens of its event.
	if n := len(o.itlUs); n > 0 && o.outTokens > int32(n+1) {
		perEvent := float64(o.outTokens) / float64(n+1)
		k := int64(math.Round(perEvent))
		for _, g := range o.itlUs {
			if g >= 0 {
				a.itlToken.add(int64(math.Round(float64(g)/perEvent)), k)
			}
		}
	} else {
		for _, g := range o.itlUs {
			if g >= 0 {
				a.itlToken.add(int64(g), 1)
			}
		}
	}
	// Output tokens over time: spread evenly over the token events when
	// their times are known, else all at the end.
	if o.outTokens <= 0 {
		return
	}
	ttft := o.lat[colTTFT]
	if ttft <= 0 {
		a.tokensSec[floorDiv(end, int64(time.Second))] += float64(o.outTokens)
		return
	}
	per := float64(o.outTokens) / float64(len(o.itlUs)+1)
	t := o.send + ttft
	a.tokensSec[floorDiv(t, int64(time.Second))] += per
	for _, g := range o.itlUs {
		t += int64(g) * 1000
		a.tokensSec[floorDiv(t, int64(time.Second))] += per
	}
}

// meets reports whether an OK observation meets every SLO bound it has.
func (a *Analyzer) meets(o *observation) bool {
	for m, bound := range a.opt.SLO.Bounds {
		c, ok := colOf[m]
		if !ok {
			continue
		}
		if v := o.lat[c]; v != missing && v > int64(bound) {
			return false
		}
	}
	return true
}

func (a *Analyzer) frameOf(origNs int64) int32 {
	f := int64(a.opt.Frame)
	start := a.origin + floorDiv(origNs-a.origin, f)*f
	if i, ok := a.frameIdx[start]; ok {
		return i
	}
	i := int32(len(a.frameStart))
	a.frameStart = append(a.frameStart, start)
	a.frameIdx[start] = i
	return i
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// FrameOf returns the start of the frame holding t when frames of length
// frame start at origin (zero origin: the Unix epoch).
func FrameOf(t time.Time, origin time.Time, frame time.Duration) time.Time {
	var o int64
	if !origin.IsZero() {
		o = origin.UnixNano()
	}
	f := int64(frame)
	return time.Unix(0, o+floorDiv(t.UnixNano()-o, f)*f).UTC()
}

// dict interns strings (or method/path pairs) up to a cap; later ones
// share the "(other)" id.
type dict struct {
	ids   map[string]int32
	pairs map[[2]string]int32
	names []string
	max   int
}

// pair interns a route: "METHOD path" (just path without a method),
// without building the string for routes already seen.
func (d *dict) pair(method, path string) int32 {
	k := [2]string{method, path}
	if i, ok := d.pairs[k]; ok {
		return i
	}
	name := path
	if method != "" {
		name = method + " " + path
	}
	i := d.id(name)
	if d.pairs == nil {
		d.pairs = map[[2]string]int32{}
	}
	if len(d.pairs) < 4*d.max {
		d.pairs[k] = i
	}
	return i
}

const otherGroup = "(other)"

func newDict(max int) dict { return dict{ids: map[string]int32{}, max: max} }

func (d *dict) id(s string) int32 {
	if i, ok := d.ids[s]; ok {
		return i
	}
	if len(d.names) >= d.max {
		s = otherGroup
		if i, ok := d.ids[s]; ok {
			return i
		}
	}
	i := int32(len(d.names))
	d.ids[s] = i
	d.names = append(d.names, s)
	return i
}

// endHeap is a min-heap of request end times (ns) for peak in flight.
type endHeap []int64

func (h endHeap) Len() int { return len(h) }

func (h *endHeap) push(v int64) {
	*h = append(*h, v)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *endHeap) pop() {
	s := *h
	n := len(s) - 1
	s[0] = s[n]
	s = s[:n]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && s[l] < s[m] {
			m = l
		}
		if r < n && s[r] < s[m] {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
}

// prefixCounter measures prefix sharing: of all prefix blocks, the share
// whose hash an earlier request already had. It remembers at most max
// hashes; after that, unseen hashes are not remembered and the ratio is a
// lower bound (Capped).
type prefixCounter struct {
	seen          map[int64]struct{}
	blocks, reuse int64
	requests      int64 // requests with prefix hashes
	sharing       int64 // requests whose first block was seen before
	max           int
	capped        bool
}

func (p *prefixCounter) add(hashes []int64) {
	if p.seen == nil {
		p.seen = map[int64]struct{}{}
	}
	p.requests++
	// A request's own repeated blocks do not count as sharing: collect new
	// hashes first, insert them after the request.
	var fresh []int64
	for i, h := range hashes {
		p.blocks++
		if _, ok := p.seen[h]; ok {
			p.reuse++
			if i == 0 {
				p.sharing++
			}
			continue
		}
		fresh = append(fresh, h)
	}
	for _, h := range fresh {
		if len(p.seen) >= p.max {
			p.capped = true
			break
		}
		p.seen[h] = struct{}{}
	}
}
