package analysis

// addRequests adds admitted requests in order, as addMetrics one at a
// time would, byte for byte, but column by column where it can: a run of
// requests in one frame has each column's values added to the run's, the
// frame's and each group's distribution in a loop of its own, so that
// each distribution's bins stay in cache and its moments in registers.
// The distributions are independent but for the exact budget, so the
// order does not change the result as long as no shed falls inside the
// run, no distribution is new (the budget sheds in the order
// distributions came) and no group's distribution becomes or stops being
// the run's; columnBatch.fill checks that first, and a run that does not
// pass is added a request at a time.
func (a *Analyzer) addRequests(rs []request) {
	for len(rs) > 0 {
		n := a.frameRun(rs)
		if sc := &a.batch; !sc.fill(a, rs[:n]) {
			for i := range rs[:n] {
				a.addMetrics(&rs[i])
			}
		} else {
			sc.add(a, rs[:n])
			sc.runs++
		}
		rs = rs[n:]
	}
}

// frameRun returns how many of rs, from the first, fall in one frame,
// with that frame in a.batch.frame.
func (a *Analyzer) frameRun(rs []request) int {
	f := a.frameOf(rs[0].orig)
	n := 1
	for n < len(rs) && a.frameOf(rs[n].orig) == f {
		n++
	}
	a.batch.frame = a.frames[f]
	return n
}

// columnBatch is one frame's run of requests laid out by column, with
// the distributions each column goes to: the scratch of addRequests,
// kept between runs.
type columnBatch struct {
	runs  int64 // runs added column by column (tests check that some are)
	frame *frameAcc
	cols  [numCols]column
	// prompt and body are the known prompt lengths and body sizes.
	prompt, body []sample
	starts       []int64
	// groups[s][k][id] are the values of groupCols[k] of group id in
	// breakdown s, for the breakdowns and columns whose groups keep
	// their own distributions (own[s][k]).
	groups [numGroupSets][len(groupCols)][][]sample
	own    [numGroupSets][len(groupCols)]bool
	ids    [numGroupSets][]int32 // each request's group in each breakdown
}

// column is one latency column's values and the requests they came from.
type column struct {
	xs   []sample
	rows []int32
}

const numGroupSets = 4

// minColumnRun is the fewest requests addRequests adds column by column.
const minColumnRun = 16

// maxHeldPerRequest bounds the values one request adds to exact
// distributions: each column for the run and its frame, a prompt length
// for both, a body size, an arrival gap and the groups' columns.
const maxHeldPerRequest = 2*numCols + 2 + 1 + 1 + numGroupSets*len(groupCols)

func (a *Analyzer) groupSets() [numGroupSets]*groupSet {
	return [numGroupSets]*groupSet{&a.byRoute, &a.byModel, &a.byClass, &a.byBucket}
}

// fill lays rs (one frame's) out by column and reports whether adding
// them column by column gives what adding them one by one does.
func (sc *columnBatch) fill(a *Analyzer, rs []request) bool {
	b, fr := &a.budget, sc.frame
	if len(rs) < minColumnRun || (b.limit > 0 && b.held+int64(maxHeldPerRequest*len(rs)) > max(b.limit, b.next)) {
		return false // too few to gain, or a shed may fall inside
	}
	for c := range sc.cols {
		col := &sc.cols[c]
		col.xs, col.rows = col.xs[:0], col.rows[:0]
		if c == colE2ESched && !a.schedApart {
			continue
		}
		for i := range rs {
			if v := rs[i].lat[c]; v != missing {
				col.xs = append(col.xs, sampleOf(v))
				col.rows = append(col.rows, int32(i))
			}
		}
		first := len(col.rows) > 0 && col.rows[0] == 0
		if len(col.xs) > 0 && (!a.lat[c].holds(b, col.xs, first) || (a.perFrame[c] && !fr.lat[c].holds(b, col.xs, first))) {
			return false
		}
	}
	if !a.schedApart {
		for i := range rs {
			if rs[i].lat[colE2ESched] != rs[i].lat[colE2E] {
				return false // splitSched comes first
			}
		}
	}
	sc.prompt, sc.body, sc.starts = sc.prompt[:0], sc.body[:0], sc.starts[:0]
	for i := range rs {
		r := &rs[i]
		if p := r.promptTokens; p > 0 {
			sc.prompt = append(sc.prompt, sampleOf(int64(p)))
		}
		if v := r.bodyBytes; v > 0 {
			sc.body = append(sc.body, sampleOf(v))
		}
		sc.starts = append(sc.starts, r.orig)
	}
	firstPrompt, firstBody := rs[0].promptTokens > 0, rs[0].bodyBytes > 0
	if (len(sc.prompt) > 0 && (!a.prompt.holds(b, sc.prompt, firstPrompt) || !fr.prompt.holds(b, sc.prompt, firstPrompt))) ||
		(len(sc.body) > 0 && !a.body.holds(b, sc.body, firstBody)) || (b.limit > 0 && !a.starts.holds(sc.starts)) {
		return false
	}
	for s, gs := range a.groupSets() {
		ids := sc.ids[s][:0]
		for i := range rs {
			id := a.groupID(s, &rs[i])
			gs.at(id)
			ids = append(ids, id)
		}
		sc.ids[s] = ids
		for k, c := range groupCols {
			if !sc.fillGroups(b, gs, &a.lat[c], s, k, c) {
				return false
			}
		}
	}
	return true
}

// groupID returns r's group in breakdown s (of groupSets).
func (a *Analyzer) groupID(s int, r *request) int32 {
	switch s {
	case 0:
		return r.routeID
	case 1:
		return r.modelID
	case 2:
		return r.classID
	}
	return int32(a.bucketOf(r.promptTokens))
}

// fillGroups splits column c's values by their groups in breakdown s
// (gs), for groupCols[k], and reports whether they can be added so.
func (sc *columnBatch) fillGroups(b *exactBudget, gs *groupSet, run *dist, s, k, c int) bool {
	col, ids := &sc.cols[c], sc.ids[s]
	sc.own[s][k] = false
	if len(col.xs) == 0 {
		return true
	}
	if w := gs.whole[k]; w != nil {
		// The run's distribution stands for w's: every value must be
		// w's (then leave changes nothing), and the run's takes them
		// without growing (holds), so that w's budget share does not
		// change either.
		for _, i := range col.rows {
			if gs.groups[ids[i]] != w {
				return false
			}
		}
		return true
	}
	if !gs.own && run.sk != nil {
		// No group's distribution may become the run's (both sketches,
		// the group's holding every value): none can once two groups
		// hold values, or while the group's is exact.
		holding, sketched := 0, false
		for _, g := range gs.groups {
			if g.lat[k].n > 0 {
				holding++
				sketched = sketched || g.lat[k].sk != nil
			}
		}
		if holding < 2 && (sketched || b.limit <= 0) {
			return false
		}
	}
	// The values by group, in order.
	split := sc.groups[s][k]
	for len(split) < len(gs.groups) {
		split = append(split, nil)
	}
	for id := range split {
		split[id] = split[id][:0]
	}
	for j, i := range col.rows {
		id := ids[i]
		split[id] = append(split[id], col.xs[j])
	}
	sc.groups[s][k] = split
	firstID := int32(-1) // the group of the run's first request, when it has a value
	if col.rows[0] == 0 {
		firstID = ids[0]
	}
	for id, xs := range split[:len(gs.groups)] {
		if len(xs) > 0 && !gs.groups[id].lat[k].holds(b, xs, int32(id) == firstID) {
			return false
		}
	}
	sc.own[s][k] = true
	return true
}

// add adds rs, laid out by fill, column by column.
func (sc *columnBatch) add(a *Analyzer, rs []request) {
	b, fr := &a.budget, sc.frame
	for c := range sc.cols {
		xs := sc.cols[c].xs
		if len(xs) == 0 {
			continue
		}
		a.lat[c].addSamples(b, xs)
		if a.perFrame[c] {
			fr.lat[c].addSamples(b, xs)
		}
		if h := a.hist[c]; h != nil {
			for i := range xs {
				h[histBin(xs[i].v)]++
			}
		}
	}
	if len(sc.prompt) > 0 {
		a.prompt.addSamples(b, sc.prompt)
		fr.prompt.addSamples(b, sc.prompt)
	}
	if len(sc.body) > 0 {
		a.body.addSamples(b, sc.body)
	}
	sets := a.groupSets()
	for s, gs := range sets {
		for k := range groupCols {
			if !sc.own[s][k] {
				continue
			}
			for id, xs := range sc.groups[s][k][:len(gs.groups)] {
				if len(xs) > 0 {
					gs.groups[id].lat[k].addSamples(b, xs)
				}
			}
		}
	}
	for i := range rs {
		o := &rs[i]
		meets := o.ok && a.meets(&o.lat)
		a.tot.add(o, o.ok, meets)
		fr.c.add(o, o.ok, meets)
		for s, gs := range sets {
			gs.groups[sc.ids[s][i]].count(o, o.ok)
		}
		a.starts.add(b, o.orig)
	}
}

// holds reports whether d can take xs, a run's values,
// without the budget's order mattering: the budget counts nothing
// (sketches only), or d holds values already (it is in the budget's
// list) or gets its first from the run's first request (first: then it
// joins the list where one request at a time would put it), and as a
// sketch its bins hold every one of xs (it grows none).
func (d *dist) holds(b *exactBudget, xs []sample, first bool) bool {
	if b.limit <= 0 {
		return true
	}
	if d.n == 0 {
		return first
	}
	sk := d.sk
	if sk == nil {
		return true
	}
	pos, neg := &sk.pos, &sk.neg
	for i := range xs {
		x := &xs[i]
		switch {
		case x.v > 0:
			if uint(x.bin-pos.offset) >= uint(len(pos.counts)) {
				return false
			}
		case x.v < 0:
			if uint(x.bin-neg.offset) >= uint(len(neg.counts)) {
				return false
			}
		}
	}
	return true
}

// addSamples adds xs in order, as addSample one at a time would, counting
// them against b without shedding: the caller has checked that no shed
// falls inside and that d holds xs.
func (d *dist) addSamples(b *exactBudget, xs []sample) {
	if d.n == 0 {
		d.min, d.max, d.shift = xs[0].v, xs[0].v, float64(xs[0].v)
		if b.limit <= 0 {
			d.sk = &sketch{}
		} else if !d.tracked {
			d.tracked = true
			b.dists = append(b.dists, d)
		}
	}
	n, lo, hi, shift, sum, sumSq := d.n, d.min, d.max, d.shift, d.sum, d.sumSq
	for i := range xs {
		v := xs[i].v
		lo, hi = min(lo, v), max(hi, v)
		x := float64(v) - shift
		sum += x
		sumSq += x * x
	}
	d.n, d.min, d.max, d.sum, d.sumSq = n+int64(len(xs)), lo, hi, sum, sumSq
	if sk := d.sk; sk != nil {
		counts, offset := sk.pos.counts, sk.pos.offset
		for i := range xs {
			x := &xs[i]
			if j := uint(x.bin - offset); x.v > 0 && j < uint(len(counts)) {
				counts[j]++
				continue
			}
			sk.addSample(x, 1) // grows only where the budget counts nothing (holds)
			counts, offset = sk.pos.counts, sk.pos.offset
		}
		return
	}
	vals := d.vals
	for i := range xs {
		if len(vals) == cap(vals) && cap(vals) >= exactChunk {
			d.full = append(d.full, vals)
			vals = make([]int64, 0, exactChunk)
		}
		vals = append(vals, xs[i].v)
	}
	d.vals, d.sorted = vals, false
	b.held += int64(len(xs))
}
