package analysis

// timelinePipe adds requests to a timeline on a goroutine of its own, in
// the order they are given: the caller adds the same observations to the
// rest of the Analyzer meanwhile, which shares no state with the timeline,
// so on two cores the two halves of the analysis overlap and the result is
// the one a single goroutine gets. Requests travel in batches, each with
// copies of the slices they borrow from the reader's rows (event gaps,
// prefix hashes), since those are decoded over once the caller moves on.
type timelinePipe struct {
	tl   *timeline
	cur  *obsBatch
	free chan *obsBatch // batches the timeline has finished with
	full chan *obsBatch // batches for the timeline, in order
	done chan struct{}  // closed when the timeline's goroutine has added the last batch
}

// obsBatch is a run of requests on their way to the timeline.
type obsBatch struct {
	reqs   []timed
	gaps   []int32 // the requests' event gaps, one after the other
	hashes []int64 // their prefix hashes, likewise
	ends   []obsEnds
}

// obsEnds are where a request's gaps and hashes end in its batch's.
type obsEnds struct{ gaps, hashes int32 }

const (
	pipeBatchRows   = 1024    // rows per hand-over: a wake-up each, small beside their work
	pipeBatchValues = 1 << 18 // gaps and hashes per hand-over at most (about 1 MiB): rows of long streams fill a batch sooner
	pipeBatches     = 4       // in flight at once, so that neither side waits on the other's stalls
)

func startTimelinePipe(tl *timeline) *timelinePipe {
	p := &timelinePipe{
		tl:   tl,
		free: make(chan *obsBatch, pipeBatches),
		full: make(chan *obsBatch, pipeBatches),
		done: make(chan struct{}),
	}
	for range pipeBatches {
		p.free <- &obsBatch{reqs: make([]timed, 0, pipeBatchRows), ends: make([]obsEnds, 0, pipeBatchRows)}
	}
	p.cur = <-p.free
	go p.run()
	return p
}

// add queues o for the timeline. o and what it points to may change once
// add returns.
func (p *timelinePipe) add(o *observation) {
	b := p.cur
	b.gaps = append(b.gaps, o.itlUs...)
	b.hashes = append(b.hashes, o.prefix...)
	b.ends = append(b.ends, obsEnds{int32(len(b.gaps)), int32(len(b.hashes))})
	b.reqs = append(b.reqs, o.timed())
	if len(b.reqs) == pipeBatchRows || len(b.gaps)+len(b.hashes) >= pipeBatchValues {
		p.full <- b
		p.cur = <-p.free
	}
}

// close hands over the last batch and waits until the timeline has added
// every observation.
func (p *timelinePipe) close() {
	if len(p.cur.reqs) > 0 {
		p.full <- p.cur
	}
	p.cur = nil
	close(p.full)
	<-p.done
}

func (p *timelinePipe) run() {
	defer close(p.done)
	for b := range p.full {
		var from obsEnds
		for i := range b.reqs {
			to := b.ends[i]
			p.tl.add(&b.reqs[i], b.gaps[from.gaps:to.gaps], b.hashes[from.hashes:to.hashes])
			from = to
		}
		b.reqs, b.gaps, b.hashes, b.ends = b.reqs[:0], b.gaps[:0], b.hashes[:0], b.ends[:0]
		p.free <- b
	}
}
