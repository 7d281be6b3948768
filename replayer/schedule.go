package replayer

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"

	"strconv"
	"strings"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
)

// Source yields exchanges in time order; *formats.Reader[formats.Exchange]
// is one. Next returns io.EOF after the last exchange.
type Source interface {
	Next() (*formats.Exchange, error)
	Close() error
}

// Columns are the exchange/1 columns a replay reads, for
// formats.ReaderOptions.Columns (OpenDataset's default): an Opener need not
// decode any other (the
// response side — body, headers, SSE timings — is most of a recorded row).
// Every Exchange field this package reads must be listed here;
// TestColumnsCoverReplay fails otherwise. The caller owns the slice.
func Columns() []string {
	return []string{
		"ts_unix_ns", "recorder", "seq", "conn_id", "session", // schedule, connections, sampling, shards, result rows
		"duration_ns", "client", "turn_key", "parent_turn_key", // --sessions: the linker (analysis.LinkColumns)
		"method", "host", "path", "query", // request line; host for the recorded-host check, path for --path
		"req_headers", "req_content_type", "req_body", "req_body_truncated", // request head and body; --header
		"model", "prompt_tokens", "output_tokens", // --model, --min/max-prompt-tokens, result rows, --pin-output
		"prompt_tokens_source", // --pin-output: is the output count the server's?
		"upstream",             // target safety: the production backends
	}
}

// Opener opens the dataset afresh for one pass over [from, to) (zero times
// are open ends). A run reads the window more than once — a first pass for
// target safety and warm-up, then once per speed and loop — and never holds
// it in memory.
type Opener func(ctx context.Context, from, to time.Time) (Source, error)

// OpenDataset is the Opener of a reel dataset (files, directory trees or
// globs): each pass reads [from, to) with opts, decoding only Columns unless
// opts.Columns says otherwise.
func OpenDataset(paths []string, opts formats.ReaderOptions) Opener {
	if opts.Columns == nil {
		opts.Columns = Columns()
	}
	return func(ctx context.Context, from, to time.Time) (Source, error) {
		o := opts
		o.From, o.To = from, to
		return formats.OpenReader[formats.Exchange](ctx, paths, o)
	}
}

// DefaultFrame is the frame length when Selection.Frame is zero: the
// analysis' frame, so a replay's frames and its report's are the same.
const DefaultFrame = analysis.DefaultFrame

// Selection chooses the exchanges of a replay. The zero value selects every
// exchange of the dataset.
type Selection struct {
	From, To time.Time     // window on the recording's clock, [From, To); zero = open
	Frame    time.Duration // frame length, frames aligned to it on the wall clock; default DefaultFrame
	Frames   FrameRange    // frames to replay; zero = all

	// Paths, Models and the prompt-token bounds select requests by the rules
	// of analysis.Filter (the same filter reel stats/report/compare apply):
	// a path pattern with * ? [ is a glob, else a prefix; models exact; with
	// a bound set, exchanges of unknown prompt length are left out.
	Paths           []string
	Models          []string
	Methods         []string      // method filters, case-insensitive; any may match
	Headers         []HeaderMatch // recorded request headers that must all match
	MinPromptTokens int32         // 0 = no lower bound
	MaxPromptTokens int32         // 0 = no upper bound

	// Sample keeps about this share of exchanges, deterministically: whole
	// sessions when sessions were recorded, else single exchanges by
	// recorder+seq. 0 or ≥ 1 keeps all.
	Sample float64
	Shard  Shard // zero = no sharding
}

func (s *Selection) frame() time.Duration {
	if s.Frame <= 0 {
		return DefaultFrame
	}
	return s.Frame
}

// HeaderMatch selects exchanges whose recorded request header Name equals
// Value (case-insensitive), or merely has it when Value is empty.
type HeaderMatch struct{ Name, Value string }

// ParseHeaderMatch parses "Name: value", "Name=value" or "Name".
func ParseHeaderMatch(s string) (HeaderMatch, error) {
	i := strings.IndexAny(s, ":=")
	if i < 0 {
		i = len(s)
	}
	name := strings.TrimSpace(s[:i])
	if name == "" {
		return HeaderMatch{}, fmt.Errorf("header filter %q: want 'Name: value'", s)
	}
	var v string
	if i < len(s) {
		v = strings.TrimSpace(s[i+1:])
	}
	return HeaderMatch{Name: name, Value: v}, nil
}

// Shard selects share Index (from 0) of Count, by connection: every exchange
// of a recorded session (or, without one, of a recorded connection) lands in
// the same shard, in its order.
type Shard struct{ Index, Count int }

// ParseShard parses "i/n" with 0 ≤ i < n.
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("shard %q: want i/n with 0 ≤ i < n, e.g. 2/8", s)
	}
	return Shard{Index: i, Count: n}, nil
}

// String formats the shard as i/n, as ParseShard reads it.
func (s Shard) String() string {
	if s.Count <= 1 {
		return "0/1"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// FrameRange is an inclusive range of frames, each end a frame index
// (0 = the frame holding the window's first exchange, or --from) or a time
// inside the frame. An unset end is open.
type FrameRange struct{ From, To FrameRef }

// FrameRef names a frame by index or by a time inside it.
type FrameRef struct {
	Set   bool      // the end is given; false leaves it open
	Index int       // frame index, from 0 (used when Time is zero)
	Time  time.Time // used when non-zero
}

// IsZero reports whether the range selects all frames.
func (r FrameRange) IsZero() bool { return !r.From.Set && !r.To.Set }

// ParseFrameRange parses "A..B", "A.." or "..B", each end a frame index
// (12) or a time (2023-11-16T18:20:00Z, or 18:20:00 on the day of dayOf);
// "A:B" is accepted where it is unambiguous (indexes: 12:20).
// A single "A" selects one frame.
func ParseFrameRange(s string, dayOf time.Time) (FrameRange, error) {
	s = strings.TrimSpace(s)
	if r, err := parseFrameRef(s, dayOf); err == nil && r.Set {
		return FrameRange{From: r, To: r}, nil
	}
	var found []FrameRange
	if a, b, ok := strings.Cut(s, ".."); ok {
		// A..B: the unambiguous form (times hold ':' themselves).
		ra, errA := parseFrameRef(a, dayOf)
		rb, errB := parseFrameRef(b, dayOf)
		if errA != nil || errB != nil || (!ra.Set && !rb.Set) {
			return FrameRange{}, fmt.Errorf("frames %q: want A..B with frame indexes (3..7) or times (14:00:05..14:01:00)", s)
		}
		found = append(found, FrameRange{From: ra, To: rb})
	}
	for i := 0; len(found) == 0 && i < len(s); i++ {
		if s[i] != ':' {
			continue
		}
		a, errA := parseFrameRef(s[:i], dayOf)
		b, errB := parseFrameRef(s[i+1:], dayOf)
		if errA == nil && errB == nil && (a.Set || b.Set) {
			found = append(found, FrameRange{From: a, To: b})
		}
	}
	if len(found) != 1 {
		return FrameRange{}, fmt.Errorf("frames %q: want A:B with frame indexes (3:7) or RFC 3339 times", s)
	}
	r := found[0]
	if r.From.Set && r.To.Set && r.From.Time.IsZero() == r.To.Time.IsZero() {
		if (r.From.Time.IsZero() && r.To.Index < r.From.Index) || r.To.Time.Before(r.From.Time) {
			return FrameRange{}, fmt.Errorf("frames %q: the end comes before the start", s)
		}
	}
	return r, nil
}

func parseFrameRef(s string, dayOf time.Time) (FrameRef, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return FrameRef{}, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return FrameRef{}, errors.New("negative frame index")
		}
		return FrameRef{Set: true, Index: n}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return FrameRef{Set: true, Time: t.UTC()}, nil
		}
	}
	if !dayOf.IsZero() {
		if t, err := time.Parse("15:04:05", s); err == nil {
			d := dayOf.UTC().Truncate(24 * time.Hour)
			return FrameRef{Set: true, Time: d.Add(time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second)}, nil
		}
	}
	return FrameRef{}, fmt.Errorf("not a frame index or time: %q", s)
}

// hash64 is FNV-1a, stable across runs, machines and shards.
func hash64(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		io.WriteString(h, p)
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// mix64 is the splitmix64 finaliser. FNV's residues modulo a small shard
// count follow the key's last bytes (FNV's prime is 1 modulo 3: keys that
// differ only in a digit all landed in one of three shards).
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// connKey names the recorded connection an exchange belongs to; "" when the
// recording has none (conn_id 0 means unknown).
func connKey(x *formats.Exchange) string {
	if x.ConnID == 0 {
		return ""
	}
	return x.Recorder + "/" + strconv.FormatInt(x.ConnID, 10)
}

// shardKey is what sharding keeps together: the session when recorded, else
// the connection, else the exchange alone.
func shardKey(x *formats.Exchange) string {
	if x.Session != "" {
		return "s:" + x.Session
	}
	if k := connKey(x); k != "" {
		return "c:" + k
	}
	return "x:" + x.Recorder + "/" + strconv.FormatInt(x.Seq, 10)
}

// sampleKey is what sampling keeps together: the session when recorded,
// else the exchange alone.
func sampleKey(x *formats.Exchange) string {
	if x.Session != "" {
		return "s:" + x.Session
	}
	return "x:" + x.Recorder + "/" + strconv.FormatInt(x.Seq, 10)
}

// sessionTag names a session by its first turn's sample and shard keys, so
// that with --sessions every turn is sampled and sharded with its first:
// see linked.
func sessionTag(x *formats.Exchange) string { return sampleKey(x) + "\n" + shardKey(x) }

// linked is an exchange with its place in its session (zero when sessions
// are off).
type linked struct {
	x    *formats.Exchange
	ord  int64 // position in the window's pass, what Link.Deps refer to
	link analysis.Link
}

// keys returns the sample and shard keys: the session's first turn's when
// the exchange continues a session, else its own.
func (l *linked) keys() (sample, shard string) {
	if l.link.Tag != "" {
		a, b, _ := strings.Cut(l.link.Tag, "\n")
		return a, b
	}
	return sampleKey(l.x), shardKey(l.x)
}

// match applies the filters, the sample and the shard to x, placed by l.
func (s *Selection) match(l *linked) bool {
	x := l.x
	req := analysis.Filter{Paths: s.Paths, Models: s.Models, MinPromptTokens: s.MinPromptTokens, MaxPromptTokens: s.MaxPromptTokens}
	if !req.MatchRequest(x.Path, x.Model, x.PromptTokens) {
		return false
	}
	if len(s.Methods) > 0 && !contains(s.Methods, x.Method, true) {
		return false
	}
	for _, hm := range s.Headers {
		v, ok := headerValue(x.ReqHeaders, hm.Name)
		if !ok || (hm.Value != "" && !strings.EqualFold(v, hm.Value)) {
			return false
		}
	}
	if (s.Sample > 0 && s.Sample < 1) || s.Shard.Count > 1 {
		sample, shard := l.keys()
		if s.Sample > 0 && s.Sample < 1 && float64(hash64("sample", sample)>>11)/(1<<53) >= s.Sample {
			return false
		}
		if s.Shard.Count > 1 && int(mix64(hash64("shard", shard))%uint64(s.Shard.Count)) != s.Shard.Index {
			return false
		}
	}
	return true
}

func contains(list []string, v string, fold bool) bool {
	for _, s := range list {
		if s == v || (fold && strings.EqualFold(s, v)) {
			return true
		}
	}
	return false
}

func headerValue(h map[string]string, name string) (string, bool) {
	if v, ok := h[name]; ok {
		return v, true
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// window is what the first pass learns about the selected window.
type window struct {
	frame0    time.Time         // start of frame index 0
	lo, hi    int64             // selected span, ns since the Unix epoch, [lo, hi)
	ts0       int64             // first exchange in [lo, hi), before filters: the schedule's origin
	last      int64             // last selected exchange
	total     int64             // exchanges in [lo, hi)
	selected  int64             // exchanges that pass the selection
	continued int64             // of those, turns that wait for an earlier one (--sessions)
	hosts     map[string]string // recorded hosts and upstreams (lower case, no port) → column, at most maxHosts
	gaps      gapStats          // the longest quiet spell (clock.go)
	warmup    []*formats.Exchange
}

const maxHosts = 10000

// newLinker returns the pass's session linker; nil with sessions off.
func newLinker(so *SessionOptions) *analysis.Linker {
	if so.Mode == analysis.SessionsOff {
		return nil
	}
	return analysis.NewLinker(so.Mode, analysis.LinkerOptions{Idle: so.Idle})
}

// place links x, the ord-th exchange of the window's pass, into its session
// (lk nil: sessions off).
func place(lk *analysis.Linker, ord int64, x *formats.Exchange) linked {
	l := linked{x: x, ord: ord}
	if lk != nil {
		l.link = lk.Link(ord, sessionTag(x), x)
	}
	return l
}

// scan makes the first pass over the window: it fixes the frames and the
// schedule's origin, counts, collects the recorded hosts for the target
// check and draws the warm-up sample (reservoir, deterministic). With
// sessions it links the window as every later pass will, so that sampling
// and shards keep sessions whole.
func scan(ctx context.Context, open Opener, sel *Selection, warmup int, so *SessionOptions) (*window, error) {
	src, err := open(ctx, sel.From, sel.To)
	if err != nil {
		return nil, fmt.Errorf("open dataset: %w", err)
	}
	defer src.Close()
	w := &window{lo: math.MinInt64, hi: math.MaxInt64, ts0: -1, hosts: map[string]string{}}
	if !sel.From.IsZero() {
		w.lo = sel.From.UnixNano()
	}
	if !sel.To.IsZero() {
		w.hi = sel.To.UnixNano()
	}
	frame := sel.frame()
	resolved := false
	rng := rand.New(rand.NewPCG(1, 2))
	lk := newLinker(so)
	for n := 0; ; n++ {
		if n&1023 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		x, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read dataset: %w", err)
		}
		if x.TsUnixNs < w.lo || x.TsUnixNs >= w.hi {
			continue
		}
		if !resolved {
			// Frame 0 holds --from, or else the window's first exchange.
			f0 := sel.From
			if f0.IsZero() {
				f0 = x.Time()
			}
			w.frame0 = analysis.FrameOf(f0, time.Time{}, frame)
			w.resolveFrames(sel.Frames, frame)
			resolved = true
			if x.TsUnixNs < w.lo || x.TsUnixNs >= w.hi {
				continue
			}
		}
		l := place(lk, w.total, x)
		w.total++
		if w.ts0 < 0 {
			w.ts0 = x.TsUnixNs
		}
		if len(w.hosts) < maxHosts {
			w.noteHosts(x)
		}
		if !sel.match(&l) {
			continue
		}
		w.selected++
		w.gaps.note(w.ts0, x.TsUnixNs)
		if len(l.link.Deps) > 0 {
			w.continued++
		}
		w.last = x.TsUnixNs
		if warmup > 0 {
			if len(w.warmup) < warmup {
				w.warmup = append(w.warmup, x)
			} else if j := rng.Int64N(w.selected); j < int64(warmup) {
				w.warmup[j] = x
			}
		}
	}
	return w, nil
}

// resolveFrames narrows [lo, hi) to the frame range.
func (w *window) resolveFrames(r FrameRange, frame time.Duration) {
	start := func(ref FrameRef) int64 {
		if !ref.Time.IsZero() {
			return analysis.FrameOf(ref.Time, time.Time{}, frame).UnixNano()
		}
		return w.frame0.Add(time.Duration(ref.Index) * frame).UnixNano()
	}
	if r.From.Set {
		w.lo = max(w.lo, start(r.From))
	}
	if r.To.Set {
		w.hi = min(w.hi, start(r.To)+int64(frame))
	}
}

// frameOf returns the start and index of the frame holding ts.
func (w *window) frameOf(ts int64, frame time.Duration) (time.Time, int) {
	t := analysis.FrameOf(time.Unix(0, ts), time.Time{}, frame)
	return t, int(t.Sub(w.frame0) / frame)
}

// hostOnly lower-cases a host and drops its port.
func hostOnly(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	if strings.HasPrefix(h, "[") {
		if i := strings.Index(h, "]"); i > 0 {
			return h[1:i]
		}
	}
	if i := strings.LastIndex(h, ":"); i >= 0 && strings.Count(h, ":") == 1 {
		return h[:i]
	}
	return h
}

// item is one exchange on the replay timeline.
type item struct {
	x        *formats.Exchange
	at       int64 // ns on the original timeline, shifted by whole loop periods
	frame    time.Time
	frameIdx int
	loop     int

	// With --sessions: the turn's id (unique in the run), the ids of the
	// turns it waits for, the recorded think time after them, and whether
	// a later turn may wait for it.
	turn    int64
	deps    []int64
	thinkNs int64
	awaited bool
}

// cursor streams one pass of the selected window, repeated loops times.
type cursor struct {
	ctx    context.Context
	open   Opener
	sel    *Selection
	w      *window
	loops  int
	loop   int
	shift  int64 // added to ts in this loop
	period int64 // loop period: the window's span plus one mean gap
	src    Source
	so     *SessionOptions
	lk     *analysis.Linker // this loop's linker; nil with sessions off
	ord    int64            // position of the next exchange in this loop's pass
}

func newCursor(ctx context.Context, open Opener, sel *Selection, w *window, loops int, so *SessionOptions) *cursor {
	if loops < 1 {
		loops = 1
	}
	span := w.last - w.ts0
	gap := int64(0)
	if w.selected > 1 {
		gap = span / (w.selected - 1)
	}
	return &cursor{ctx: ctx, open: open, sel: sel, w: w, loops: loops, period: span + max(gap, 1), so: so}
}

// next returns the next item, or io.EOF after the last loop.
func (c *cursor) next() (item, error) {
	for {
		if c.src == nil {
			if c.loop >= c.loops {
				return item{}, io.EOF
			}
			from, to := c.sel.From, c.sel.To
			if c.w.lo != math.MinInt64 {
				from = time.Unix(0, c.w.lo).UTC()
			}
			if c.w.hi != math.MaxInt64 {
				to = time.Unix(0, c.w.hi).UTC()
			}
			src, err := c.open(c.ctx, from, to)
			if err != nil {
				return item{}, fmt.Errorf("open dataset: %w", err)
			}
			c.src = src
			c.shift = int64(c.loop) * c.period
			c.lk, c.ord = newLinker(c.so), 0 // sessions never span loops
		}
		x, err := c.src.Next()
		if err == io.EOF {
			c.src.Close()
			c.src = nil
			c.loop++
			continue
		}
		if err != nil {
			return item{}, fmt.Errorf("read dataset: %w", err)
		}
		if x.TsUnixNs < c.w.lo || x.TsUnixNs >= c.w.hi {
			continue
		}
		l := place(c.lk, c.ord, x)
		c.ord++
		if !c.sel.match(&l) {
			continue
		}
		f, idx := c.w.frameOf(x.TsUnixNs, c.sel.frame())
		it := item{x: x, at: x.TsUnixNs + c.shift, frame: f, frameIdx: idx, loop: c.loop}
		if c.lk != nil {
			// Turn ids are unique across loops: each loop's pass holds
			// w.total exchanges.
			base := int64(c.loop) * c.w.total
			it.turn = base + l.ord
			for _, d := range l.link.Deps {
				it.deps = append(it.deps, base+d)
			}
			it.thinkNs = l.link.ThinkNs
			it.awaited = mayBeAwaited(c.so.Mode, x)
		}
		return it, nil
	}
}

func (c *cursor) close() {
	if c.src != nil {
		c.src.Close()
		c.src = nil
	}
}
