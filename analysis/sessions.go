package analysis

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"iter"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/reelkit/reel/formats"
)

// SessionMode chooses how exchanges are grouped into sessions (replay
// --sessions, stats).
type SessionMode int

const (
	// SessionsOff treats every exchange on its own (open loop).
	SessionsOff SessionMode = iota
	// SessionsRecorded groups exchanges by the recorded `session` column
	// (a header or body field chosen at record time). Within a session an
	// exchange waits for every earlier exchange of the session that had
	// ended in production before it started — production's own
	// happens-before order — and for nothing that was still in flight.
	SessionsRecorded
	// SessionsInferred links an exchange to the one it continues — its
	// parent_turn_key equals the other's turn_key: its conversation begins
	// with the other's whole conversation and answer — and it waits for
	// that one only. A session is a tree of such links from a first turn.
	SessionsInferred
)

// DefaultSessionMode is SessionsInferred: a link exists only where a turn
// literally carries an earlier answer, which cannot exist before that
// answer did, so waiting for it never adds a constraint production did not
// have; traffic without links (single-turn, recordings from before links)
// keeps the recorded clock exactly. Recorded ids are opt-in: they often
// name a user or an API key, whose parallel conversations they would
// serialise.
const DefaultSessionMode = SessionsInferred

// ParseSessionMode parses "off", "recorded" or "infer".
func ParseSessionMode(s string) (SessionMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "off", "none":
		return SessionsOff, nil
	case "recorded":
		return SessionsRecorded, nil
	case "infer", "inferred":
		return SessionsInferred, nil
	}
	return 0, fmt.Errorf("sessions %q: want off, recorded or infer", s)
}

func (m SessionMode) String() string {
	switch m {
	case SessionsRecorded:
		return "recorded"
	case SessionsInferred:
		return "infer"
	}
	return "off"
}

// Defaults of LinkerOptions.
const (
	DefaultSessionIdle = 30 * time.Minute
	DefaultMaxTurns    = 1 << 20
	DefaultMaxSessions = 1 << 18
)

// LinkerOptions bound a Linker's memory. The zero value works.
type LinkerOptions struct {
	// Idle is how long after a turn ended a continuation is still looked
	// for; a later one starts a new session. Default DefaultSessionIdle.
	Idle time.Duration
	// MaxTurns bounds the turns remembered as possible predecessors;
	// beyond it the oldest are forgotten first. Default DefaultMaxTurns
	// (about 100 MiB at most).
	MaxTurns int
	// MaxSessions bounds the sessions tracked at once: recorded sessions
	// in the linker, multi-turn sessions being counted by a
	// SessionCounter. Beyond it the longest idle are forgotten (counted in
	// Linker.Forgotten, SessionStats.Truncated). Default DefaultMaxSessions
	// (a few tens of MiB at most).
	MaxSessions int
}

// Link is what a Linker says about one exchange.
type Link struct {
	// Session identifies the exchange's session (0: none — sessions off, or
	// a recorded mode exchange without a session id). In inferred mode a
	// single turn that nothing continues has its own Session too.
	Session uint64
	// Turn is the exchange's depth in its session: 0 for a session's
	// first turn, parent's Turn + 1 otherwise.
	Turn int
	// Deps are the ordinals (as passed to Linker.Link) of the exchanges
	// this one waits for; empty for a session start.
	Deps []int64
	// ThinkNs is the recorded gap from the latest end among Deps to this
	// exchange's start (never negative); 0 without Deps.
	ThinkNs int64
	// Ambiguous: several earlier turns, from different sessions or
	// clients, ended with this one's history; the latest-ended was chosen.
	Ambiguous bool
	// Tag is the tag the session's first turn was linked with (see
	// Linker.Link): the caller's name for the whole session, such as the
	// key that keeps a session in one replay shard.
	Tag string
	// FirstStart and FirstEnd are the session's first turn's start and
	// end (ns), so a caller need not keep sessions of one turn to learn
	// them when a second arrives.
	FirstStart, FirstEnd int64
}

// LinkColumns are the exchange/1 columns a Linker reads.
func LinkColumns() []string {
	return []string{"ts_unix_ns", "duration_ns", "session", "client", "turn_key", "parent_turn_key"}
}

// Linker assigns sessions, turns and dependencies to exchanges fed in time
// order, in memory bounded by LinkerOptions (not by the recording). The
// same Linker is behind `reel stats` and `replay --sessions`, so what stats
// counts is what replay waits for. Not safe for concurrent use.
type Linker struct {
	mode SessionMode
	opts LinkerOptions
	now  int64

	// SessionsInferred: turns by turn_key, a FIFO of them for eviction.
	byKey map[int64][]*turnNode
	fifo  []*turnNode
	head  int

	// SessionsRecorded: per-session state.
	sessions map[string]*recordedSession
	sinceGC  int

	forgotten int64
}

// turnNode is a turn that later ones may continue.
type turnNode struct {
	ord        int64
	key        int64
	start, end int64
	session    uint64
	turn       int
	recSession string
	client     string
	tag        string   // the session's first turn's tag
	first      [2]int64 // the session's first turn's start and end
	gone       bool     // evicted
}

// recordedSession is a recorded session's bounded state: the turns not yet
// covered by a later-settled one.
type recordedSession struct {
	id       uint64
	turns    int
	frontier int64      // latest start among turns settled by a later one
	open     []turnSpan // turns whose end is after frontier
	lastEnd  int64
	tag      string
	first    [2]int64 // first turn's start and end
}

type turnSpan struct{ ord, start, end int64 }

// maxOpen bounds the turns of one recorded session tracked at once (its
// production concurrency); beyond it the earliest-ending is dropped.
const maxOpen = 256

// NewLinker returns a linker for mode.
func NewLinker(mode SessionMode, opts LinkerOptions) *Linker {
	if opts.Idle <= 0 {
		opts.Idle = DefaultSessionIdle
	}
	if opts.MaxTurns <= 0 {
		opts.MaxTurns = DefaultMaxTurns
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	return &Linker{mode: mode, opts: opts, byKey: map[int64][]*turnNode{}, sessions: map[string]*recordedSession{}}
}

// Mode reports the linker's mode.
func (l *Linker) Mode() SessionMode { return l.mode }

// Forgotten counts the turns (SessionsInferred) or sessions
// (SessionsRecorded) forgotten before they were idle for LinkerOptions.Idle,
// because LinkerOptions.MaxTurns or MaxSessions was reached: a later turn
// continuing one of them starts a new session.
func (l *Linker) Forgotten() int64 { return l.forgotten }

// Link places x (the ord-th exchange fed, in time order; ords increase) in
// its session. tag is returned as Link.Tag for x when it starts a session,
// and for every later turn of that session. The returned Deps slice is x's
// own.
func (l *Linker) Link(ord int64, tag string, x *formats.Exchange) Link {
	l.now = max(l.now, x.TsUnixNs)
	switch l.mode {
	case SessionsInferred:
		return l.linkInferred(ord, tag, x)
	case SessionsRecorded:
		return l.linkRecorded(ord, tag, x)
	}
	return Link{Tag: tag}
}

func endOf(x *formats.Exchange) int64 { return x.TsUnixNs + max(x.DurationNs, 0) }

func (l *Linker) linkInferred(ord int64, tag string, x *formats.Exchange) Link {
	if x.TurnKey == 0 && x.ParentTurnKey == 0 {
		// Continues nothing and nothing can continue it: a session of its
		// own, and nothing to remember. Eviction waits for the next turn
		// with a key, which looks up and remembers against the same now.
		return Link{Session: uint64(ord) + 1, Tag: tag, FirstStart: x.TsUnixNs, FirstEnd: endOf(x)}
	}
	l.evict()
	var lk Link
	var parent *turnNode
	if x.ParentTurnKey != 0 {
		parent, lk.Ambiguous = l.choose(x, l.byKey[x.ParentTurnKey])
	}
	if parent != nil {
		lk.Session, lk.Turn, lk.Tag = parent.session, parent.turn+1, parent.tag
		lk.FirstStart, lk.FirstEnd = parent.first[0], parent.first[1]
		lk.Deps = []int64{parent.ord}
		lk.ThinkNs = max(x.TsUnixNs-parent.end, 0)
	} else {
		lk.Session, lk.Tag = uint64(ord)+1, tag
		lk.FirstStart, lk.FirstEnd = x.TsUnixNs, endOf(x)
	}
	if x.TurnKey != 0 {
		n := &turnNode{ord: ord, key: x.TurnKey, start: x.TsUnixNs, end: endOf(x), session: lk.Session, turn: lk.Turn, recSession: x.Session, client: x.Client, tag: lk.Tag,
			first: [2]int64{lk.FirstStart, lk.FirstEnd}}
		l.byKey[n.key] = append(l.byKey[n.key], n)
		l.fifo = append(l.fifo, n)
		l.evict()
	}
	return lk
}

// choose picks x's parent among the turns whose conversation and answer x
// begins with: those that started before x, preferring ones whose answer
// had ended by x's start, then the same recorded session, then the same
// client, then the latest end. Ambiguous reports a choice between
// candidates that nothing but time told apart.
func (l *Linker) choose(x *formats.Exchange, cands []*turnNode) (*turnNode, bool) {
	var best *turnNode
	rank := func(n *turnNode) int {
		r := 0
		if n.end <= x.TsUnixNs {
			r += 4
		}
		if x.Session != "" && n.recSession == x.Session {
			r += 2
		}
		if x.Client != "" && n.client == x.Client {
			r++
		}
		return r
	}
	ties := 0
	bestRank := -1
	for _, n := range cands {
		if n.gone || n.start >= x.TsUnixNs {
			continue
		}
		r := rank(n)
		switch {
		case r > bestRank:
			best, bestRank, ties = n, r, 1
		case r == bestRank:
			ties++
			if n.end > best.end {
				best = n
			}
		}
	}
	return best, ties > 1
}

// evict forgets turns beyond MaxTurns and turns that ended more than Idle
// before the latest start seen.
func (l *Linker) evict() {
	for l.head < len(l.fifo) {
		n := l.fifo[l.head]
		idle := n.end < l.now-int64(l.opts.Idle)
		if len(l.fifo)-l.head <= l.opts.MaxTurns && !idle {
			break
		}
		if !idle {
			l.forgotten++
		}
		n.gone = true
		l.fifo[l.head] = nil
		l.head++
		list := l.byKey[n.key]
		list = slices.DeleteFunc(list, func(m *turnNode) bool { return m.gone })
		if len(list) == 0 {
			delete(l.byKey, n.key)
		} else {
			l.byKey[n.key] = list
		}
	}
	if l.head > 1024 && l.head*2 > len(l.fifo) {
		l.fifo = append(l.fifo[:0], l.fifo[l.head:]...)
		l.head = 0
	}
}

func (l *Linker) linkRecorded(ord int64, tag string, x *formats.Exchange) Link {
	if x.Session == "" {
		return Link{Tag: tag}
	}
	l.sinceGC++
	if l.sinceGC >= 4096 || len(l.sessions) >= l.opts.MaxSessions {
		l.sinceGC = 0
		l.forgetSessions()
	}
	s := l.sessions[x.Session]
	if s == nil || s.lastEnd < x.TsUnixNs-int64(l.opts.Idle) {
		s = &recordedSession{id: sessionID(x.Session), frontier: -1 << 62, tag: tag, first: [2]int64{x.TsUnixNs, endOf(x)}}
		l.sessions[x.Session] = s
	}
	start := x.TsUnixNs
	// Turns that had ended by this start are settled: this turn and every
	// later one depend on them. The latest start among them is the new
	// frontier; a settled turn that ended before it is covered (the turn
	// at the frontier waited for it).
	for _, t := range s.open {
		if t.end <= start {
			s.frontier = max(s.frontier, t.start)
		}
	}
	lk := Link{Session: s.id, Turn: s.turns, Tag: s.tag, FirstStart: s.first[0], FirstEnd: s.first[1]}
	var lastEnd int64 = -1
	keep := s.open[:0]
	for _, t := range s.open {
		if t.end <= s.frontier {
			continue // covered
		}
		keep = append(keep, t)
		if t.end <= start {
			lk.Deps = append(lk.Deps, t.ord)
			lastEnd = max(lastEnd, t.end)
		}
	}
	s.open = keep
	if lastEnd >= 0 {
		lk.ThinkNs = start - lastEnd
	}
	if len(s.open) >= maxOpen {
		i := 0
		for j, t := range s.open {
			if t.end < s.open[i].end {
				i = j
			}
		}
		s.open = slices.Delete(s.open, i, i+1)
	}
	end := endOf(x)
	s.open = append(s.open, turnSpan{ord: ord, start: start, end: end})
	s.lastEnd = max(s.lastEnd, end)
	s.turns++
	return lk
}

// forgetSessions drops the recorded sessions idle for longer than Idle and,
// past MaxSessions, the longest idle down to three quarters of it (so the
// next such pass is a quarter of MaxSessions sessions away).
func (l *Linker) forgetSessions() {
	idle := l.now - int64(l.opts.Idle)
	for k, s := range l.sessions {
		if s.lastEnd < idle {
			delete(l.sessions, k)
		}
	}
	if len(l.sessions) < l.opts.MaxSessions {
		return
	}
	forget := oldest(len(l.sessions)-l.opts.MaxSessions*3/4, func(yield func(int64) bool) {
		for _, s := range l.sessions {
			if !yield(s.lastEnd) {
				return
			}
		}
	})
	for k, s := range l.sessions {
		if forget(s.lastEnd) {
			l.forgotten++
			delete(l.sessions, k)
		}
	}
}

// oldest returns a test that is true for n of ends, the smallest (of equal
// ends, the first ones it is asked about).
func oldest(n int, ends iter.Seq[int64]) func(end int64) bool {
	all := slices.Collect(ends)
	if n <= 0 {
		return func(int64) bool { return false }
	}
	if n >= len(all) {
		return func(int64) bool { return true }
	}
	slices.Sort(all)
	cutoff := all[n-1]
	ties := n - sort.Search(n, func(i int) bool { return all[i] >= cutoff }) // ends equal to cutoff among the n
	return func(end int64) bool {
		if end < cutoff {
			return true
		}
		if end == cutoff && ties > 0 {
			ties--
			return true
		}
		return false
	}
}

// sessionID is a recorded session id's stable 64-bit name.
func sessionID(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	if v := h.Sum64(); v != 0 {
		return v
	}
	return 1
}

// SessionStats describes a recording's sessions (`reel stats`).
type SessionStats struct {
	Mode         string    `json:"mode"`              // the SessionMode that grouped them
	Requests     int64     `json:"requests"`          // exchanges read
	Sessions     int64     `json:"sessions"`          // sessions with at least two turns
	InSessions   int64     `json:"in_sessions"`       // requests that belong to one of them
	ShareInMulti float64   `json:"share_in_multi"`    // InSessions ÷ Requests
	TurnsPerSess Sizes     `json:"turns_per_session"` // turns per session, over sessions with at least two turns
	Think        Quantiles `json:"think_time"`        // recorded answer end → next turn start
	Fanout       int64     `json:"fanout"`            // turns started while a sibling (same predecessor) was in flight
	Ambiguous    int64     `json:"ambiguous"`         // links chosen among identical histories by time alone
	Truncated    int64     `json:"truncated"`         // sessions (or turns) forgotten before they were idle, over LinkerOptions' bounds: their later turns count as new sessions
	Longest      []Chain   `json:"longest"`           // the longest sessions, most turns first
}

// Chain is one session in SessionStats.Longest.
type Chain struct {
	Start    time.Time     `json:"start"`    // first turn's start
	Turns    int           `json:"turns"`    // exchanges in the session
	Depth    int           `json:"depth"`    // longest chain of turns waiting on each other
	Span     time.Duration `json:"span"`     // first start → last end
	Recorder string        `json:"recorder"` // first turn's recorder and seq, to find it in SQL
	Seq      int64         `json:"seq"`
}

// maxLongest is how many sessions SessionStats.Longest lists.
const maxLongest = 5

// SessionCounter accumulates SessionStats from exchanges in time order, in
// memory bounded by the multi-turn sessions active at once. A session's
// first turn costs the counter nothing (the linker remembers what a later
// turn needs of it, in its own bounded memory): most traffic is single
// turns. A session with a second turn is tallied until it has been idle
// for LinkerOptions.Idle, then folded into the distributions; more than
// LinkerOptions.MaxSessions open at once, the longest idle are folded early
// and counted in SessionStats.Truncated.
type SessionCounter struct {
	l         *Linker
	opts      LinkerOptions
	n         int64
	active    map[uint64]*sessionTally
	budget    exactBudget // bounds the exact values of turns and think
	turns     dist        // turns per multi-turn session
	think     dist        // think times, ns
	inMulti   int64
	multi     int64
	fanout    int64
	ambig     int64
	truncated int64
	longest   []Chain
	sinceGC   int
	tag       []byte // scratch for firstTurnTag
}

type sessionTally struct {
	start, end int64
	turns      int
	depth      int
	first      string          // the first turn's tag: recorder and seq
	kids       map[int64]int64 // predecessor ord → latest end of a turn waiting on it
}

// NewSessionCounter counts sessions grouped by mode.
func NewSessionCounter(mode SessionMode, opts LinkerOptions) *SessionCounter {
	if opts.Idle <= 0 {
		opts.Idle = DefaultSessionIdle
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	return &SessionCounter{l: NewLinker(mode, opts), opts: opts, active: map[uint64]*sessionTally{}, budget: exactBudget{limit: DefaultExactValues}}
}

// firstTurnTag names x's session by x, should x be its first turn: the
// recorder and seq the report's longest sessions point at. It is built
// only for an exchange the linker can remember (a later turn could
// continue it); "" otherwise.
func (c *SessionCounter) firstTurnTag(x *formats.Exchange) string {
	if (c.l.mode == SessionsInferred && x.TurnKey == 0) || (c.l.mode == SessionsRecorded && x.Session == "") {
		return ""
	}
	c.tag = append(append(c.tag[:0], x.Recorder...), '\n')
	c.tag = strconv.AppendInt(c.tag, x.Seq, 10)
	return string(c.tag)
}

// Add counts one exchange; exchanges must come in time order.
func (c *SessionCounter) Add(x *formats.Exchange) {
	ord := c.n
	c.n++
	lk := c.l.Link(ord, c.firstTurnTag(x), x)
	if lk.Ambiguous {
		c.ambig++
	}
	c.sinceGC++
	if c.sinceGC >= 4096 || len(c.active) > c.opts.MaxSessions {
		c.sinceGC = 0
		c.fold(x.TsUnixNs - int64(c.opts.Idle))
	}
	if lk.Session == 0 || lk.Turn == 0 {
		return // no session, or its first turn: nothing to tally yet
	}
	end := endOf(x)
	s := c.active[lk.Session]
	if s != nil && s.start != lk.FirstStart { // a recorded id reused after it went idle: a new session
		c.close(s)
		s = nil
	}
	if s == nil {
		s = &sessionTally{start: lk.FirstStart, end: lk.FirstEnd, turns: 1, depth: 1, first: lk.Tag}
		c.active[lk.Session] = s
	}
	s.turns++
	s.depth = max(s.depth, lk.Turn+1)
	s.end = max(s.end, end)
	if len(lk.Deps) > 0 {
		c.think.add(&c.budget, lk.ThinkNs)
		if s.kids == nil {
			s.kids = map[int64]int64{}
		}
		for _, d := range lk.Deps {
			if prev, ok := s.kids[d]; ok && prev > x.TsUnixNs {
				c.fanout++
			}
			s.kids[d] = max(s.kids[d], end)
		}
		if len(s.kids) > 64 {
			for k, e := range s.kids {
				if e < x.TsUnixNs {
					delete(s.kids, k)
				}
			}
		}
	}
}

// fold moves the sessions idle since before cutoff into the distributions,
// and past MaxSessions the longest idle down to three quarters of it.
func (c *SessionCounter) fold(cutoff int64) {
	for id, s := range c.active {
		if s.end < cutoff {
			c.close(s)
			delete(c.active, id)
		}
	}
	if len(c.active) <= c.opts.MaxSessions {
		return
	}
	forget := oldest(len(c.active)-c.opts.MaxSessions*3/4, func(yield func(int64) bool) {
		for _, s := range c.active {
			if !yield(s.end) {
				return
			}
		}
	})
	for id, s := range c.active {
		if forget(s.end) {
			c.truncated++
			c.close(s)
			delete(c.active, id)
		}
	}
}

// close counts a finished session.
func (c *SessionCounter) close(s *sessionTally) {
	c.turns.add(&c.budget, int64(s.turns))
	c.multi++
	c.inMulti += int64(s.turns)
	recorder, seq, _ := strings.Cut(s.first, "\n")
	ch := Chain{Start: time.Unix(0, s.start).UTC(), Turns: s.turns, Depth: s.depth, Span: time.Duration(s.end - s.start), Recorder: recorder}
	ch.Seq, _ = strconv.ParseInt(seq, 10, 64)
	i, _ := slices.BinarySearchFunc(c.longest, ch, func(a, b Chain) int {
		if a.Turns != b.Turns {
			return b.Turns - a.Turns
		}
		return a.Start.Compare(b.Start)
	})
	if i < maxLongest {
		c.longest = slices.Insert(c.longest, i, ch)
		if len(c.longest) > maxLongest {
			c.longest = c.longest[:maxLongest]
		}
	}
}

// Stats folds every session still open and reports; Add may not be called
// afterwards.
func (c *SessionCounter) Stats() *SessionStats {
	c.fold(1<<63 - 1)
	st := &SessionStats{Mode: c.l.Mode().String(), Requests: c.n, Sessions: c.multi, InSessions: c.inMulti,
		Fanout: c.fanout, Ambiguous: c.ambig, Truncated: c.truncated + c.l.Forgotten(), Longest: c.longest}
	if st.Longest == nil {
		st.Longest = []Chain{}
	}
	if c.n > 0 {
		st.ShareInMulti = float64(c.inMulti) / float64(c.n)
	}
	st.TurnsPerSess = c.turns.sizes()
	st.Think = c.think.quantiles()
	return st
}

// WriteText writes the sessions section of `reel stats`.
func (st *SessionStats) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	if st.Sessions == 0 {
		ew.printf("sessions (%s): none with two turns or more", st.Mode)
		if st.Mode == SessionsInferred.String() {
			ew.printf(" (no request carries an earlier answer; recordings from before turn links have none — try --sessions recorded)")
		}
		ew.printf("\n")
		return ew.err
	}
	ew.printf("sessions (%s): %d with two turns or more, holding %d of %d requests (%.1f%%)\n", st.Mode, st.Sessions, st.InSessions, st.Requests, 100*st.ShareInMulti)
	ew.printf("  turns per session: p50 %d p90 %d p99 %d max %d mean %.1f\n", st.TurnsPerSess.P50, st.TurnsPerSess.P90, st.TurnsPerSess.P99, st.TurnsPerSess.Max, st.TurnsPerSess.Mean)
	ew.printf("  think time (answer end → next turn): p50 %s p90 %s p99 %s max %s\n", fmtDur(st.Think.P50), fmtDur(st.Think.P90), fmtDur(st.Think.P99), fmtDur(st.Think.Max))
	if st.Fanout > 0 || st.Ambiguous > 0 {
		ew.printf("  fan-out: %d turns sent while a sibling was in flight; ambiguous links: %d\n", st.Fanout, st.Ambiguous)
	}
	if st.Truncated > 0 {
		ew.printf("  truncated: %d sessions or turns forgotten while still open (more open at once than the linker keeps); their later turns count as new sessions\n", st.Truncated)
	}
	for _, ch := range st.Longest {
		ew.printf("  longest: %d turns (chain %d) over %s from %s (recorder %s seq %d)\n", ch.Turns, ch.Depth, fmtDur(ch.Span), ch.Start.Format(time.RFC3339), ch.Recorder, ch.Seq)
	}
	return ew.err
}

// SessionColumns are the exchange/1 columns a SessionCounter reads: the
// linker's and the first turn's recorder and seq.
func SessionColumns() []string { return append(LinkColumns(), "recorder", "seq") }

// SessionStatsOf reads paths (a recording) in time order, only the columns
// the linker needs, and counts its sessions.
// (Analyzer.AddDataset with Options.Sessions does this in the pass that
// reads the metrics.)
func SessionStatsOf(ctx context.Context, paths []string, opt formats.ReaderOptions, mode SessionMode, lopts LinkerOptions) (*SessionStats, error) {
	opt.Columns = SessionColumns()
	c := NewSessionCounter(mode, lopts)
	if _, err := addAll(ctx, paths, opt, c.Add); err != nil {
		return nil, err
	}
	return c.Stats(), nil
}
