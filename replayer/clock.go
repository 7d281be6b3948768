package replayer

// Absurd clocks: a dataset spanning 1970 → 2100 (an access log with a
// broken time field), a --start-at years ahead or behind. A replay on the
// original clock would sleep for decades or send everything at once with a
// lag of years; it refuses instead, with the numbers, and says when it is
// about to sit idle.

import (
	"errors"
	"fmt"
	"time"
)

// DefaultMaxWait bounds how long a replay waits without sending — for
// --start-at, or for a gap in the recording at the run's speed — when
// Options.MaxWait is zero. An hour: longer than any quiet spell a busy
// gateway's traffic has, shorter than a broken timestamp's decades.
const DefaultMaxWait = time.Hour

// announceAfter is the idle stretch from which the replay says when the
// next request is due (a variable for tests).
var announceAfter = 10 * time.Second

// ErrLongWait marks a replay refused because it would wait longer than
// Options.MaxWait, or start a clock that ran out long ago.
var ErrLongWait = errors.New("replay would wait too long")

// gapStats is the longest gap between consecutive selected exchanges
// (from the schedule's origin to the first).
type gapStats struct {
	prev, max, from, to int64
}

// note records the exchange at ts; origin is the schedule's origin.
func (g *gapStats) note(origin, ts int64) {
	if g.prev == 0 {
		g.prev = origin
	}
	if gap := ts - g.prev; gap > g.max {
		g.max, g.from, g.to = gap, g.prev, ts
	}
	g.prev = ts
}

func (o *Options) maxWait() time.Duration {
	if o.MaxWait == 0 {
		return DefaultMaxWait
	}
	return o.MaxWait
}

// CheckClock refuses a run at speed that would wait longer than
// Options.MaxWait before a request: a --start-at further ahead, a clock
// that started longer ago (every request late by at least that), or a gap
// in the selected window that long at that speed. A negative MaxWait turns
// the check off. Run checks too; call it first to fail before opening
// results.
func (p *Plan) CheckClock(now time.Time, speed float64) error {
	o := &p.opts
	limit := o.maxWait()
	if limit < 0 {
		return nil
	}
	if speed <= 0 {
		speed = 1
	}
	if !o.StartAt.IsZero() {
		switch d := o.StartAt.Sub(now); {
		case d > limit:
			return fmt.Errorf("%w: --start-at %s is %s from now (more than --max-wait %s); check the date, or raise --max-wait",
				ErrLongWait, o.StartAt.UTC().Format(time.RFC3339), fmtLong(d), limit)
		case -d > limit:
			return fmt.Errorf("%w: --start-at %s was %s ago (more than --max-wait %s): every request would go out at once, late by at least that; check the date",
				ErrLongWait, o.StartAt.UTC().Format(time.RFC3339), fmtLong(-d), limit)
		}
	}
	g := p.w.gaps
	if o.Step {
		return nil // step mode restarts the clock at every frame: gaps never wait
	}
	if idle := time.Duration(float64(g.max) / speed); idle > limit {
		return fmt.Errorf("%w: the selected window has a gap of %s with no request (%s → %s): at speed %g the replay would sit idle for %s (more than --max-wait %s); narrow --from/--to, raise --speed, or raise --max-wait",
			ErrLongWait, fmtLong(time.Duration(g.max)), time.Unix(0, g.from).UTC().Format(time.RFC3339), time.Unix(0, g.to).UTC().Format(time.RFC3339),
			speed, fmtLong(idle), limit)
	}
	return nil
}

// fmtLong writes long spans readably: 130y2d, 36h0m0s.
func fmtLong(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= 365*day {
		y := d / (365 * day)
		return fmt.Sprintf("%dy%dd", y, (d-y*365*day)/day)
	}
	return d.Round(time.Second).String()
}

// announce says when the next request is due, once, when the dispatcher
// is about to wait announceAfter or longer for it; at is its time on the
// recording's clock.
func (r *replayRun) announce(due int64, at int64) {
	wait := time.Duration(due - mono())
	if wait < announceAfter {
		return
	}
	r.col.printf("replay: next request due at %s wall clock, in %s (recorded at %s)\n",
		time.Now().Add(wait).UTC().Format(time.RFC3339), wait.Round(time.Second), time.Unix(0, at).UTC().Format(time.RFC3339))
}
