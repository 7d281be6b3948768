package replayer

// Whether a run measured anything: the rule a pipeline's exit code rests
// on. A replay whose requests failed is data, not a crash (Run returns no
// error), but its latencies describe failures, not the shadow: CheckMeasured
// says so, naming the causes.

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
)

// DefaultMaxErrorRate is the failed share of requests above which a run is
// not a measurement (reel replay --max-error-rate). 5 %: replaying
// production traffic to a healthy shadow fails about as often as
// production did — well under 1 % of 5xx and a few percent of 4xx that a
// recording keeps — while a broken or overloaded shadow fails far more
// often; above 5 % the quantiles mostly time failures, and a nightly job
// must not compare them as if they were the shadow's latency.
const DefaultMaxErrorRate = 0.05

// NotMeasuredError says why a run is not a measurement.
type NotMeasuredError struct {
	Requests, OK, Failed int64            // requests in the summary, of which OK succeeded and Failed did not
	ErrorRate            float64          // Failed ÷ Requests
	MaxErrorRate         float64          // the threshold ErrorRate was held to
	Causes               []analysis.Cause // the top causes, most frequent first
}

func (e *NotMeasuredError) Error() string {
	var b strings.Builder
	switch {
	case e.Requests == 0:
		b.WriteString("not a measurement: no request was sent")
	case e.OK == 0:
		fmt.Fprintf(&b, "not a measurement: none of %d requests completed", e.Requests)
	default:
		fmt.Fprintf(&b, "not a measurement: %d of %d requests failed (%.1f%%, above --max-error-rate %g%%)",
			e.Failed, e.Requests, 100*e.ErrorRate, 100*e.MaxErrorRate)
	}
	for i, c := range e.Causes {
		if i == 0 {
			b.WriteString("; causes: ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s ×%d (e.g. %q)", c.Name, c.Count, c.Example)
	}
	return b.String()
}

// CheckMeasured returns a *NotMeasuredError when the run summarised by s
// is not a measurement: no request sent, none completed, or a failed share
// above maxErrorRate (≤ 0: DefaultMaxErrorRate; ≥ 1: never). causes, when
// not nil, names the top three causes.
func CheckMeasured(s *analysis.Summary, causes *analysis.Causes, maxErrorRate float64) error {
	if maxErrorRate <= 0 {
		maxErrorRate = DefaultMaxErrorRate
	}
	n, ok := s.Requests, s.OK
	failed := n - ok
	rate := 0.0
	if n > 0 {
		rate = float64(failed) / float64(n)
	}
	if n > 0 && ok > 0 && (maxErrorRate >= 1 || rate <= maxErrorRate) {
		return nil
	}
	e := &NotMeasuredError{Requests: n, OK: ok, Failed: failed, ErrorRate: rate, MaxErrorRate: maxErrorRate}
	if causes != nil {
		e.Causes = causes.Top(3)
	}
	return e
}

// TallySink passes results to Sink and tallies the causes of the failed
// ones. Close(ctx) closes Sink when it has such a method (the Close
// convention: cancel and wait).
type TallySink struct {
	Sink
	mu     sync.Mutex // guards causes: Write may be called from the run's goroutines
	causes analysis.Causes
}

// Write tallies r and writes it.
func (t *TallySink) Write(r *formats.Result) error {
	t.mu.Lock()
	t.causes.AddResult(r)
	t.mu.Unlock()
	return t.Sink.Write(r)
}

// Close closes the wrapped sink.
func (t *TallySink) Close(ctx context.Context) error {
	if c, ok := t.Sink.(interface{ Close(context.Context) error }); ok {
		return c.Close(ctx)
	}
	return nil
}

// Causes returns a copy of the tally so far.
func (t *TallySink) Causes() *analysis.Causes {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.causes.Clone()
	return &c
}
