package analysis

// metricsPipe adds requests to an Analyzer's metrics (addMetrics) on a
// goroutine of its own, in the order they are given: the caller reads the
// rows and adds them to the timeline meanwhile, which shares no state with
// the metrics, so on two cores the two halves of the analysis overlap and
// the result is the one a single goroutine gets. The metrics are the
// larger half, so they get the goroutine that does nothing else; the
// timeline stays with the rows, whose event gaps and prefix hashes it
// reads where the reader decoded them. Requests travel in batches of
// plain bytes (request holds no pointer).
type metricsPipe struct {
	a    *Analyzer
	cur  []request
	free chan []request // batches the metrics have finished with
	full chan []request // batches for the metrics, in order
	done chan struct{}  // closed when the metrics' goroutine has added the last batch
}

const (
	pipeBatchRows = 1024 // rows per hand-over: a wake-up each, small beside their work
	pipeBatches   = 4    // in flight at once, so that neither side waits on the other's stalls
)

func startMetricsPipe(a *Analyzer) *metricsPipe {
	p := &metricsPipe{
		a:    a,
		free: make(chan []request, pipeBatches),
		full: make(chan []request, pipeBatches),
		done: make(chan struct{}),
	}
	for range pipeBatches {
		p.free <- make([]request, 0, pipeBatchRows)
	}
	p.cur = <-p.free
	go p.run()
	return p
}

// add queues a copy of r for the metrics.
func (p *metricsPipe) add(r *request) {
	p.cur = append(p.cur, *r)
	if len(p.cur) == pipeBatchRows {
		p.full <- p.cur
		p.cur = <-p.free
	}
}

// close hands over the last batch and waits until the metrics have added
// every request.
func (p *metricsPipe) close() {
	if len(p.cur) > 0 {
		p.full <- p.cur
	}
	p.cur = nil
	close(p.full)
	<-p.done
}

func (p *metricsPipe) run() {
	defer close(p.done)
	for b := range p.full {
		p.a.addRequests(b)
		p.free <- b[:0]
	}
}
