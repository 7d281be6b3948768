package analysis

import (
	"sort"
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
	// ExactValues bounds the metric values kept exactly, over every
	// distribution of the run together (the run's, each frame's and each
	// group's; default DefaultExactValues, about 8 bytes each). Beyond it
	// the largest distributions are summarised by sketches, whose quantiles
	// are within SketchRelErr of the exact ones (Quantiles.RelErr says
	// which); small ones stay exact. Sketch bins count against it as
	// values do, so a long run's frame sketches replace exact values
	// rather than add to them. Negative: sketch every distribution.
	ExactValues int
	// MaxPrefixBlocks caps the distinct prefix-block hashes remembered for
	// the prefix-sharing ratio; beyond it the ratio is a lower bound
	// (default 1<<20, about 40 MB).
	MaxPrefixBlocks int
	// Filter keeps only the requests it matches (zero: all of them).
	Filter Filter
	// Sessions groups the recorded exchanges added into sessions, for
	// Stats.Sessions (default SessionsOff: none). Every exchange added
	// counts, ExcludeFirst and Filter notwithstanding: a session's turns
	// link whichever of them the metrics keep. Replay results carry no
	// turn links and are not grouped.
	Sessions SessionMode
	// SessionLimits bound the session grouping's memory (see
	// LinkerOptions; the zero value works).
	SessionLimits LinkerOptions
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
	switch {
	case o.ExactValues == 0:
		o.ExactValues = DefaultExactValues
	case o.ExactValues < 0:
		o.ExactValues = -1
	}
	if o.MaxPrefixBlocks <= 0 {
		o.MaxPrefixBlocks = 1 << 20
	}
	return o
}

// Analyzer accumulates requests and computes a Summary. Add rows in time
// order (as formats.Reader yields them; shards of one run merge by adding
// all their rows): peak in flight, inter-arrival gaps and ExcludeFirst for
// recordings rely on it. It keeps no row: counters and sums, and one
// distribution per metric for the run, each frame and each group, exact
// within Options.ExactValues and sketched beyond, so its memory grows with
// the number of frames and groups, not requests. An Analyzer is not safe
// for concurrent use.
type Analyzer struct {
	opt    Options
	budget exactBudget

	tot counts
	lat [numCols]dist // read through latOf
	// schedApart: some request's E2E from schedule differed from its E2E.
	// Until one does (a recording's never do) the E2E-from-schedule
	// distributions are not kept: they are the E2E ones (latOf).
	schedApart bool
	perFrame   [numCols]bool    // the columns frames keep: the frame table's and the SLO's
	hist       [numCols][]int64 // column → fixed-bin counts (histEdges) for the charted metrics, nil for the others
	prompt     dist             // known prompt lengths (tokens)
	body       dist             // request body bytes, where known
	starts     arrivals

	frames    []*frameAcc     // frame index → accumulator
	frameIdx  map[int64]int32 // start → frame index
	lastFrame int32           // the frame of the previous request, +1 (0: none yet): rows come in time order, so mostly the same
	origin    int64
	originSet bool

	routes, models, classes   dict
	byRoute, byModel, byClass groupSet // by dict id
	byBucket                  groupSet // by prompt bucket (LengthBuckets, then unknown)

	tl timeline // what depends on the requests' order in time alone

	batch columnBatch // addRequests' scratch

	excluded   int64
	filtered   int64
	firstOrig  int64
	seenFirst  bool
	recordings int64
	replays    int64

	sessions *SessionCounter // nil unless Options.Sessions
}

// counts are the per-request numbers a run, a frame or an episode sums.
type counts struct {
	n, ok, meets         int64
	outTokens, okWithOut int64 // output tokens of OK requests; OK requests with some
	batchSum, queueSum   float64
	batchN, queueN       int64
	promptSum            float64
	promptN              int64
	cache                cacheAcc
}

func (c *counts) add(o *request, ok, meets bool) {
	c.n++
	c.cache.add(o.cachedTokens, o.promptTokens)
	if ok {
		c.ok++
		c.outTokens += int64(max(o.outTokens, 0))
		if o.outTokens > 0 {
			c.okWithOut++
		}
	}
	if meets {
		c.meets++
	}
	if o.batch > 0 {
		c.batchSum += float64(o.batch)
		c.batchN++
	}
	if o.queue >= 0 {
		c.queueSum += float64(o.queue)
		c.queueN++
	}
	if o.promptTokens > 0 {
		c.promptSum += float64(o.promptTokens)
		c.promptN++
	}
}

func (c *counts) merge(o *counts) {
	c.n += o.n
	c.ok += o.ok
	c.meets += o.meets
	c.outTokens += o.outTokens
	c.okWithOut += o.okWithOut
	c.batchSum += o.batchSum
	c.batchN += o.batchN
	c.queueSum += o.queueSum
	c.queueN += o.queueN
	c.promptSum += o.promptSum
	c.promptN += o.promptN
	c.cache.merge(&o.cache)
}

// frameAcc accumulates one frame.
type frameAcc struct {
	start  int64 // ns since the epoch
	c      counts
	lat    [numCols]dist
	prompt dist // known prompt lengths, for the long-prompt share
}

// groupCols are the latency columns a group keeps a distribution of, by
// their index in groupAcc.lat.
var groupCols = [...]int{groupE2E: colE2E, groupTTFT: colTTFT, groupTPOT: colTPOT}

const (
	groupE2E = iota
	groupTTFT
	groupTPOT
)

// groupAcc accumulates one breakdown key.
type groupAcc struct {
	n, ok int64
	lat   [len(groupCols)]dist // read through dist: not kept while the run's is the same
	// whole[k]: every groupCols[k] value of the run so far was this
	// group's, and both distributions are sketches, so they are the same
	// sketch: the run's (whole[k]) stands for lat[k], which holds nothing
	// (see groupSet). Most traffic has one route and one status class.
	whole [len(groupCols)]*dist
	cache cacheAcc
}

// count counts a request of the group, ok or not, with its cache use.
func (g *groupAcc) count(o *request, ok bool) {
	g.n++
	g.cache.add(o.cachedTokens, o.promptTokens)
	if ok {
		g.ok++
	}
}

// dist returns the group's distribution of groupCols[k].
func (g *groupAcc) dist(k int) *dist {
	if g.whole[k] != nil {
		return g.whole[k]
	}
	return &g.lat[k]
}

// groupSet is one breakdown (routes, models, status classes or prompt
// buckets): its groups, and for each of groupCols the one whose
// distribution is the run's, if any.
type groupSet struct {
	groups []*groupAcc
	whole  [len(groupCols)]*groupAcc
	own    bool // every group keeps its own distributions (tests compare)
}

// at returns group id, adding groups up to it.
func (s *groupSet) at(id int32) *groupAcc {
	for int(id) >= len(s.groups) {
		s.groups = append(s.groups, &groupAcc{})
	}
	return s.groups[id]
}

// leave is called with a request's group before the run's distributions
// take its values: a group whose distribution was the run's and that does
// not hold the request gets its own, a copy of the run's so far.
func (s *groupSet) leave(g *groupAcc, lat *[numCols]int64) {
	if w := &s.whole; (w[0] == g || w[0] == nil) && (w[1] == g || w[1] == nil) && (w[2] == g || w[2] == nil) {
		return // no other group's distribution is the run's (compared one by one: an array comparison calls memequal)
	}
	for k, c := range groupCols {
		if w := s.whole[k]; w != nil && w != g && lat[c] != missing {
			w.lat[k].cloneSketched(w.whole[k])
			w.whole[k], s.whole[k] = nil, nil
		}
	}
}

// add adds a request to its group g, after the run's distributions (run)
// took its values (lat), growing their sketches by grown cells.
func (s *groupSet) add(g *groupAcc, b *exactBudget, o *request, ok bool, lat *[numCols]sample, run *[numCols]dist, grown *[numCols]int) {
	g.count(o, ok)
	// Column by column, not a loop over groupCols: each column's branches
	// are then predicted on their own.
	s.addCol(g, groupE2E, b, &lat[colE2E], &run[colE2E], grown[colE2E])
	s.addCol(g, groupTTFT, b, &lat[colTTFT], &run[colTTFT], grown[colTTFT])
	s.addCol(g, groupTPOT, b, &lat[colTPOT], &run[colTPOT], grown[colTPOT])
}

// addCol adds x (column groupCols[k]) to g, after the run's distribution
// r took it, growing its sketch by grown cells.
func (s *groupSet) addCol(g *groupAcc, k int, b *exactBudget, x *sample, r *dist, grown int) {
	switch {
	case x.v == missing:
	case g.whole[k] != nil:
		// The run's sketch took the value: count the cells it grew by
		// against the budget as this group's own sketch would.
		b.grow(grown)
	default:
		s.addOwn(g, k, b, x, r)
	}
}

// addOwn adds x to g's own distribution k and makes the run's (r) stand
// for it when they have become the same.
func (s *groupSet) addOwn(g *groupAcc, k int, b *exactBudget, x *sample, r *dist) {
	d := &g.lat[k]
	d.addSample(b, x)
	if d.n == r.n && !s.own && d.sk != nil && r.sk != nil && d.sk.sameLayout(r.sk) {
		// The same values in the same order, bins laid out alike: the
		// same sketch, its cells counted already.
		*d = dist{}
		g.whole[k], s.whole[k] = r, g
	}
}

// charted are the columns whose histograms the Summary carries.
var charted = map[int]string{colE2E: "e2e", colTTFT: "ttft", colTPOT: "tpot"}

// New returns an empty Analyzer.
func New(opt Options) *Analyzer {
	opt = opt.withDefaults()
	a := &Analyzer{
		opt:      opt,
		frameIdx: map[int64]int32{},
		tl:       newTimeline(opt.MaxPrefixBlocks),
		routes:   newDict(opt.MaxGroups),
		models:   newDict(opt.MaxGroups),
		classes:  newDict(64),
	}
	a.budget.limit = int64(max(opt.ExactValues, 0))
	for _, c := range []int{colE2E, colE2ESched, colTTFT, colTPOT, colLag} {
		a.perFrame[c] = true
	}
	for m := range opt.SLO.Bounds {
		if c, ok := colOf[m]; ok {
			a.perFrame[c] = true
		}
	}
	a.byBucket.at(int32(len(opt.LengthBuckets) + 1))
	for c := range charted {
		a.hist[c] = make([]int64, len(histEdges)-1)
	}
	if opt.Sessions != SessionsOff {
		a.sessions = NewSessionCounter(opt.Sessions, opt.SessionLimits)
	}
	if !opt.Origin.IsZero() {
		a.origin, a.originSet = opt.Origin.UnixNano(), true
	}
	return a
}

// Options returns the options in effect, defaults filled in.
func (a *Analyzer) Options() Options { return a.opt }

// AddResult adds one replay result row. The row is not retained.
func (a *Analyzer) AddResult(r *formats.Result) {
	var o observation // on the stack, filled in place: copying it per row costs more than its work
	a.resultRow(&o, r)
	a.add(&o)
}

// resultRow counts a replay result row and maps it into o.
func (a *Analyzer) resultRow(o *observation, r *formats.Result) {
	a.replays++
	o.fromResult(r)
}

// AddExchange adds one recorded exchange. The row is not retained.
func (a *Analyzer) AddExchange(x *formats.Exchange) {
	var o observation
	a.exchangeRow(&o, x)
	a.add(&o)
}

// exchangeRow counts a recorded exchange, groups it into its session when
// the Analyzer does, and maps it into o.
func (a *Analyzer) exchangeRow(o *observation, x *formats.Exchange) {
	a.recordings++
	if a.sessions != nil {
		a.sessions.Add(x)
	}
	o.fromExchange(x)
}

// add adds one row's observation: to the metrics and to the timeline,
// unless ExcludeFirst or the Filter leaves it out.
func (a *Analyzer) add(o *observation) {
	if a.admit(o) {
		a.identify(o)
		a.addMetrics(&o.request)
		a.addTimed(o)
	}
}

// identify sets an admitted o's request's breakdown ids and outcome.
func (a *Analyzer) identify(o *observation) {
	o.ok = isOK(o.class)
	o.routeID = a.routes.pair(o.method, o.path)
	o.modelID = a.models.id(o.model)
	o.classID = a.classes.id(o.class)
}

// addTimed adds an admitted o to the timeline.
func (a *Analyzer) addTimed(o *observation) {
	t := o.timed()
	a.tl.add(&t, o.itlUs, o.prefix)
}

// admit reports whether o counts, counting it as excluded or filtered when
// it does not. The first row admitted fixes the frames' origin.
func (a *Analyzer) admit(o *observation) bool {
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
			return false
		}
	}
	if !a.originSet {
		a.origin, a.originSet = 0, true
		if o.frame != 0 {
			a.origin = o.frame
		}
	}
	if !a.opt.Filter.keeps(o) {
		a.filtered++
		return false
	}
	return true
}

// addMetrics adds an admitted request to all but the timeline: the
// counts, the distributions of the run, its frame and its groups, and the
// arrivals. It reads nothing identify and addTimed write, so that it can
// run on a goroutine of its own (metricsPipe).
func (a *Analyzer) addMetrics(o *request) {
	b := &a.budget
	ok := o.ok
	meets := ok && a.meets(&o.lat)
	a.tot.add(o, ok, meets)
	if !a.schedApart && o.lat[colE2ESched] != o.lat[colE2E] {
		a.splitSched()
	}
	fr := a.frames[a.frameOf(o.orig)]
	fr.c.add(o, ok, meets)
	route := a.byRoute.at(o.routeID)
	model := a.byModel.at(o.modelID)
	class := a.byClass.at(o.classID)
	bucket := a.byBucket.at(int32(a.bucketOf(o.promptTokens)))
	a.byRoute.leave(route, &o.lat)
	a.byModel.leave(model, &o.lat)
	a.byClass.leave(class, &o.lat)
	a.byBucket.leave(bucket, &o.lat)
	var lat [numCols]sample // each value's sketch bin found once, for the run, the frame and the groups
	var grown [numCols]int  // cells the run's sketches grew by
	for c, v := range o.lat {
		lat[c].v = v
		if v == missing || (c == colE2ESched && !a.schedApart) {
			continue
		}
		x := &lat[c]
		if c == colE2ESched && v == o.lat[colE2E] { // a recording's: the same value, the same bin
			x = &lat[colE2E]
		} else {
			*x = sampleOf(v)
		}
		grown[c] = a.lat[c].addSample(b, x)
		if a.perFrame[c] {
			fr.lat[c].addSample(b, x)
		}
		if h := a.hist[c]; h != nil {
			h[histBin(v)]++
		}
	}
	if p := o.promptTokens; p > 0 {
		x := sampleOf(int64(p))
		a.prompt.addSample(b, &x)
		fr.prompt.addSample(b, &x)
	}
	if o.bodyBytes > 0 {
		a.body.add(b, o.bodyBytes)
	}
	a.starts.add(b, o.orig)
	a.byRoute.add(route, b, o, ok, &lat, &a.lat, &grown)
	a.byModel.add(model, b, o, ok, &lat, &a.lat, &grown)
	a.byClass.add(class, b, o, ok, &lat, &a.lat, &grown)
	a.byBucket.add(bucket, b, o, ok, &lat, &a.lat, &grown)
}

// latOf returns column c of lat (the run's or a frame's distributions).
func (a *Analyzer) latOf(lat *[numCols]dist, c int) *dist {
	if c == colE2ESched && !a.schedApart {
		return &lat[colE2E]
	}
	return &lat[c]
}

// splitSched starts keeping E2E from schedule apart from E2E: the run's
// and every frame's begin as copies of their E2E distributions.
func (a *Analyzer) splitSched() {
	a.schedApart = true
	b := &a.budget
	a.lat[colE2ESched].copyFrom(b, &a.lat[colE2E])
	for _, f := range a.frames {
		f.lat[colE2ESched].copyFrom(b, &f.lat[colE2E])
	}
	if b.limit > 0 && b.held > max(b.limit, b.next) {
		b.shed()
	}
}

// bucketOf returns the prompt-length bucket of a prompt: an index into
// bucketNames(LengthBuckets), then one for unknown lengths.
func (a *Analyzer) bucketOf(p int32) int {
	bounds := a.opt.LengthBuckets
	if p <= 0 {
		return len(bounds) + 1
	}
	if len(bounds) <= 8 { // the default's 3: a scan, without a search's hard-to-predict branches
		for j, b := range bounds {
			if p < b {
				return j
			}
		}
		return len(bounds)
	}
	return sort.Search(len(bounds), func(j int) bool { return p < bounds[j] })
}

// meets reports whether an OK request's latencies meet every SLO bound it
// has.
func (a *Analyzer) meets(lat *[numCols]int64) bool {
	for m, bound := range a.opt.SLO.Bounds {
		c, ok := colOf[m]
		if !ok {
			continue
		}
		if v := lat[c]; v != missing && v > int64(bound) {
			return false
		}
	}
	return true
}

func (a *Analyzer) frameOf(origNs int64) int32 {
	f := int64(a.opt.Frame)
	if a.lastFrame > 0 {
		if i := a.lastFrame - 1; origNs >= a.frames[i].start && origNs-a.frames[i].start < f {
			return i
		}
	}
	start := a.origin + floorDiv(origNs-a.origin, f)*f
	i, ok := a.frameIdx[start]
	if !ok {
		i = int32(len(a.frames))
		a.frames = append(a.frames, &frameAcc{start: start})
		a.frameIdx[start] = i
	}
	a.lastFrame = i + 1
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
	ids        map[string]int32
	pairs      map[[2]string]int32
	firstPairs []routePair // the first dictScan routes, found by comparison
	names      []string
	max        int
}

// pair interns a route: "METHOD path" (just path without a method),
// without building the string for routes already seen.
func (d *dict) pair(method, path string) int32 {
	for _, p := range d.firstPairs {
		if p.method == method && p.path == path {
			return p.id
		}
	}
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
	if len(d.firstPairs) < dictScan {
		d.firstPairs = append(d.firstPairs, routePair{method, path, i})
	}
	return i
}

// dictScan is how many names (and routes) a dict finds by comparing
// strings before hashing: most traffic has a few routes and models, and
// the reader hands out the same string for a column chunk's repeated
// values, so the comparison is mostly a pointer's.
const dictScan = 8

type routePair struct {
	method, path string
	id           int32
}

const otherGroup = "(other)"

func newDict(max int) dict { return dict{ids: map[string]int32{}, max: max} }

func (d *dict) id(s string) int32 {
	for i, name := range d.names[:min(len(d.names), dictScan)] {
		if name == s {
			return int32(i)
		}
	}
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

// endHeap is a min-heap of times (ns): request starts waiting to be put in
// order (arrivals), ends of requests in flight outside inFlight's ring. It
// is 4-ary: half the levels of a binary heap, and a node's children share
// a cache line, which matters at thousands of entries.
type endHeap []int64

const heapArity = 4

func (h endHeap) Len() int { return len(h) }

func (h *endHeap) push(v int64) {
	*h = append(*h, v)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / heapArity
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
		m := i
		first := heapArity*i + 1
		for c := first; c < min(first+heapArity, n); c++ {
			if s[c] < s[m] {
				m = c
			}
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
