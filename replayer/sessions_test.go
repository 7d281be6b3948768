package replayer

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
)

// sessionTrace is a recording of the turns specs, in start order, each
// answered in dur (recorded duration_ns). Every turn's query carries its id
// and recorded duration (ms), so a shadow can take a multiple of it. Each
// carries its session id and a turn key; linkTurns adds the parent keys.
type turnSpec struct {
	session int
	turn    int
	start   time.Duration // recorded start, from t0
	dur     time.Duration
}

func sessionTrace(specs []turnSpec) []*formats.Exchange {
	t0 := time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC)
	slices.SortStableFunc(specs, func(a, b turnSpec) int { return int(a.start - b.start) })
	xs := make([]*formats.Exchange, len(specs))
	for i, s := range specs {
		x := exchangeAt(t0.Add(s.start), int64(i+1), int64(i+1))
		x.Query = fmt.Sprintf("i=%d&d=%d", i+1, s.dur.Milliseconds())
		x.DurationNs = int64(s.dur)
		x.Session = "conv-" + strconv.Itoa(s.session)
		x.TurnKey = int64(1000 + i + 1)
		xs[i] = x
	}
	return xs
}

// conversations builds n sessions of turns turns each, starting every
// stagger, each turn taking dur and the next following after think(k).
func conversations(n, turns int, stagger, dur time.Duration, think func(s, k int) time.Duration) ([]*formats.Exchange, map[int64]int64) {
	var specs []turnSpec
	for s := range n {
		at := time.Duration(s) * stagger
		for k := range turns {
			specs = append(specs, turnSpec{session: s, turn: k, start: at, dur: dur})
			at += dur + think(s, k)
		}
	}
	xs := sessionTrace(specs)
	parents := linkTurns(xs)
	return xs, parents
}

// linkTurns sets parent_turn_key of each turn after the first of its
// session to its predecessor's turn_key and returns child seq → parent seq.
func linkTurns(xs []*formats.Exchange) map[int64]int64 {
	last := map[string]*formats.Exchange{}
	parents := map[int64]int64{}
	for _, x := range xs {
		if p := last[x.Session]; p != nil {
			x.ParentTurnKey = p.TurnKey
			parents[x.Seq] = p.Seq
		}
		last[x.Session] = x
	}
	return parents
}

// slowShadow answers each request after factor × its recorded duration
// (the d query parameter), or with status fail when the id is in fails.
func slowShadow(t *testing.T, factor float64, fails map[int64]int) *arrivals {
	return newArrivals(t, func(w http.ResponseWriter, r *http.Request, id int64) {
		if code := fails[id]; code != 0 {
			w.WriteHeader(code)
			return
		}
		ms, _ := strconv.Atoi(r.URL.Query().Get("d"))
		time.Sleep(time.Duration(float64(ms) * factor * float64(time.Millisecond)))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"usage":{"completion_tokens":16}}`)
	})
}

func endOf(r *formats.Result) int64 { return r.SentUnixNs + r.E2ENs }
func dueOf(r *formats.Result) int64 { return r.SentUnixNs - r.LagNs }

// TestSessionsSlowShadow replays conversations against a shadow twice as
// slow as production. With sessions (inferred and recorded), no turn is
// sent before its predecessor's answer ended on the shadow, and every turn
// is due exactly its recorded think time after that end; without, turns go
// out on the recorded clock into answers that do not exist yet.
func TestSessionsSlowShadow(t *testing.T) {
	think := func(s, k int) time.Duration { return time.Duration(10+7*((s+k)%5)) * time.Millisecond }
	xs, parents := conversations(12, 4, 25*time.Millisecond, 40*time.Millisecond, think)
	recorded := map[int64]time.Duration{} // child seq → recorded think
	bySeq := map[int64]*formats.Exchange{}
	for _, x := range xs {
		bySeq[x.Seq] = x
	}
	for c, p := range parents {
		recorded[c] = time.Duration(bySeq[c].TsUnixNs - (bySeq[p].TsUnixNs + bySeq[p].DurationNs))
	}
	for _, mode := range []analysis.SessionMode{analysis.SessionsInferred, analysis.SessionsRecorded} {
		t.Run(mode.String(), func(t *testing.T) {
			srv := slowShadow(t, 2, nil)
			rep, sink := run(t, xs, Options{Target: srv.url(t), Sessions: SessionOptions{Mode: mode}}, 1)
			rows := sink.byID()
			if len(rows) != len(xs) || rep.Sent != int64(len(xs)) {
				t.Fatalf("%d rows, %d sent, want %d", len(rows), rep.Sent, len(xs))
			}
			var worst, worstSent time.Duration
			delayed := 0
			for c, p := range parents {
				cr, pr := rows[c], rows[p]
				if cr.Error != "" || pr.Error != "" {
					t.Fatalf("turn %d: %q, predecessor %d: %q", c, cr.Error, p, pr.Error)
				}
				if cr.SentUnixNs < endOf(pr) {
					t.Errorf("turn %d sent %v before its predecessor's answer ended", c, time.Duration(endOf(pr)-cr.SentUnixNs))
				}
				if cr.SessionDelayNs > 0 {
					delayed++
					// Due exactly the recorded think time after the
					// predecessor's end on the shadow.
					off := time.Duration(dueOf(cr) - endOf(pr) - int64(recorded[c])).Abs()
					worst = max(worst, off)
					if off > time.Millisecond {
						t.Errorf("turn %d: due %v after its predecessor's end, recorded think %v", c, time.Duration(dueOf(cr)-endOf(pr)), recorded[c])
					}
				} else if dueOf(cr) < endOf(pr)+int64(recorded[c]) {
					t.Errorf("turn %d: on its recorded schedule %v before predecessor end + think", c, time.Duration(endOf(pr)+int64(recorded[c])-dueOf(cr)))
				}
				worstSent = max(worstSent, time.Duration(cr.SentUnixNs-endOf(pr)-int64(recorded[c])).Abs())
				if cr.E2ESchedNs < cr.E2ENs+cr.SessionDelayNs {
					t.Errorf("turn %d: e2e from schedule %v leaves out its session delay %v", c, time.Duration(cr.E2ESchedNs), time.Duration(cr.SessionDelayNs))
				}
			}
			// A shadow twice as slow delays every later turn.
			if delayed < len(parents)*9/10 {
				t.Errorf("only %d of %d later turns were delayed by their predecessors", delayed, len(parents))
			}
			for _, x := range xs {
				if _, ok := parents[x.Seq]; !ok && rows[x.Seq].SessionDelayNs != 0 {
					t.Errorf("first turn %d has a session delay", x.Seq)
				}
			}
			t.Logf("%d turns delayed; due vs predecessor end + think off by ≤ %v; sent off by ≤ %v (lag included)", delayed, worst, worstSent)
		})
	}
	t.Run("off", func(t *testing.T) {
		srv := slowShadow(t, 2, nil)
		_, sink := run(t, xs, Options{Target: srv.url(t)}, 1)
		rows := sink.byID()
		early := 0
		for c, p := range parents {
			if rows[c].SessionDelayNs != 0 {
				t.Errorf("turn %d: session delay %v with sessions off", c, time.Duration(rows[c].SessionDelayNs))
			}
			if rows[c].SentUnixNs < endOf(rows[p]) {
				early++
			}
		}
		// Today's open loop: later turns go out on the recorded clock
		// while their predecessors are still answering on the slow shadow.
		if early < len(parents)/2 {
			t.Errorf("only %d of %d later turns went out before their predecessor's end: not the recorded clock?", early, len(parents))
		}
	})
}

// TestSessionsFanOut: turns production ran concurrently on one predecessor
// (an agent's parallel calls) stay concurrent on the shadow; the turn that
// joins them waits for all of them (recorded mode: production's
// happens-before).
func TestSessionsFanOut(t *testing.T) {
	ms := time.Millisecond
	specs := []turnSpec{
		{session: 1, start: 0, dur: 40 * ms},
		{session: 1, start: 60 * ms, dur: 80 * ms},  // three calls, each after the first
		{session: 1, start: 62 * ms, dur: 80 * ms},  //
		{session: 1, start: 64 * ms, dur: 120 * ms}, // the slowest
		{session: 1, start: 204 * ms, dur: 20 * ms}, // joins them: 20 ms after the slowest ended
	}
	xs := sessionTrace(specs)
	srv := slowShadow(t, 2, nil)
	_, sink := run(t, xs, Options{Target: srv.url(t), Sessions: SessionOptions{Mode: analysis.SessionsRecorded}}, 1)
	rows := sink.byID()
	a, b1, b2, b3, join := rows[1], rows[2], rows[3], rows[4], rows[5]
	for i, b := range []*formats.Result{b1, b2, b3} {
		if b.SentUnixNs < endOf(a) {
			t.Errorf("call %d sent before the first turn ended", i+1)
		}
	}
	latestStart := max(b1.SentUnixNs, b2.SentUnixNs, b3.SentUnixNs)
	if earliestEnd := min(endOf(b1), endOf(b2), endOf(b3)); latestStart >= earliestEnd {
		t.Errorf("the three calls did not overlap on the shadow: last sent %v after the first ended", time.Duration(latestStart-earliestEnd))
	}
	lastEnd := max(endOf(b1), endOf(b2), endOf(b3))
	if join.SentUnixNs < lastEnd {
		t.Errorf("the join went out %v before the last call ended", time.Duration(lastEnd-join.SentUnixNs))
	}
	if off := time.Duration(dueOf(join) - lastEnd - int64(20*ms)).Abs(); off > ms {
		t.Errorf("the join is due %v after the last call's end, want 20ms", time.Duration(dueOf(join)-lastEnd))
	}
}

// TestSessionsFailedPredecessor: a predecessor that fails (an error status
// at once, or a timeout) counts as answered when it failed; the session
// goes on after the recorded think time.
func TestSessionsFailedPredecessor(t *testing.T) {
	ms := time.Millisecond
	specs := []turnSpec{
		{session: 1, start: 0, dur: 30 * ms},        // seq 1: fails with 503
		{session: 2, start: 5 * ms, dur: 400 * ms},  // seq 2: times out (timeout 150 ms, the shadow takes 800)
		{session: 1, start: 80 * ms, dur: 30 * ms},  // seq 3: 50 ms after 1's recorded end
		{session: 2, start: 455 * ms, dur: 10 * ms}, // seq 4: 50 ms after 2's recorded end
	}
	xs := sessionTrace(specs)
	linkTurns(xs)
	srv := slowShadow(t, 2, map[int64]int{1: 503})
	_, sink := run(t, xs, Options{Target: srv.url(t), Timeout: 150 * ms, Sessions: SessionOptions{Mode: analysis.SessionsInferred}}, 1)
	rows := sink.byID()
	if rows[1].Status != 503 || rows[2].Error == "" {
		t.Fatalf("predecessors: status %d, error %q", rows[1].Status, rows[2].Error)
	}
	for _, c := range []struct{ child, parent int64 }{{3, 1}, {4, 2}} {
		cr, pr := rows[c.child], rows[c.parent]
		if cr.Error != "" || cr.Status != 200 {
			t.Errorf("turn %d after a failed predecessor: status %d error %q", c.child, cr.Status, cr.Error)
		}
		if cr.SentUnixNs < endOf(pr) {
			t.Errorf("turn %d sent before its predecessor failed", c.child)
		}
	}
	// Turn 3 is due 50 ms after turn 1 failed (at once), later than its
	// recorded 80 ms only if the failure came late. The timed-out turn 2
	// ended (failed) at about 155 ms; turn 4, due at max(455 ms, that + 50
	// ms), keeps the recorded clock.
	if off := time.Duration(dueOf(rows[3]) - max(endOf(rows[1])+int64(50*ms), rows[3].SentUnixNs-rows[3].LagNs-rows[3].SessionDelayNs)).Abs(); off > ms {
		t.Errorf("turn 3 due %v off max(its schedule, predecessor's failure + think)", off)
	}
	if rows[4].SessionDelayNs != 0 {
		t.Errorf("turn 4 delayed %v although its predecessor failed long before its time", time.Duration(rows[4].SessionDelayNs))
	}
}

// TestSessionsThinkTime: --think-time scales or replaces the recorded think
// time, and --speed compresses it with the rest of the clock.
func TestSessionsThinkTime(t *testing.T) {
	cases := []struct {
		in    string
		think ThinkTime
		rec   time.Duration
		speed float64
		want  time.Duration
	}{
		{"recorded", ThinkTime{}, time.Second, 1, time.Second},
		{"recorded", ThinkTime{}, time.Second, 2, 500 * time.Millisecond},
		{"scale:0.5", ThinkTime{Scale: 0.5}, time.Second, 1, 500 * time.Millisecond},
		{"fixed:2s", ThinkTime{Fixed: true, Duration: 2 * time.Second}, time.Second, 4, 2 * time.Second},
		{"scale:0", ThinkTime{Fixed: true}, time.Second, 1, 0},
	}
	for _, tc := range cases {
		got, err := ParseThinkTime(tc.in)
		if err != nil || got != tc.think {
			t.Fatalf("ParseThinkTime(%q) = %+v, %v", tc.in, got, err)
		}
		if d := time.Duration(got.at(int64(tc.rec), tc.speed)); d != tc.want {
			t.Errorf("%s at speed %g: %v, want %v", tc.in, tc.speed, d, tc.want)
		}
	}
	for _, bad := range []string{"scale:-1", "fixed:soon", "later", "scale:"} {
		if _, err := ParseThinkTime(bad); err == nil {
			t.Errorf("ParseThinkTime(%q) accepted", bad)
		}
	}
}

// TestSessionsKeepSingleTurnClock: with sessions on, traffic without links
// is scheduled exactly as with sessions off, and shards keep whole
// inferred sessions together.
func TestSessionsKeepSingleTurnClock(t *testing.T) {
	xs := evenTrace(time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC), 200, 2*time.Millisecond, 64)
	schedules := map[analysis.SessionMode]string{}
	for _, mode := range []analysis.SessionMode{analysis.SessionsOff, analysis.SessionsInferred} {
		p, err := NewPlan(context.Background(), sliceOpener(xs), Options{Target: mustURL(t, "http://127.0.0.1:9"), Sessions: SessionOptions{Mode: mode}, Selection: Selection{Sample: 0.5, Shard: Shard{Index: 0, Count: 2}}})
		if err != nil {
			t.Fatal(err)
		}
		cur := newCursor(context.Background(), p.open, &p.opts.Selection, p.w, 1, &p.opts.Sessions)
		var got []int64
		for {
			it, err := cur.next()
			if err != nil {
				break
			}
			if len(it.deps) != 0 {
				t.Fatalf("%s: a single-turn exchange has predecessors", mode)
			}
			got = append(got, it.x.Seq, it.at)
		}
		schedules[mode] = fmt.Sprint(got)
	}
	if schedules[analysis.SessionsOff] != schedules[analysis.SessionsInferred] || len(schedules[analysis.SessionsOff]) < 10 {
		t.Fatalf("schedule with sessions differs from sessions off")
	}
	// Inferred conversations stay whole in shards.
	cs, parents := conversations(40, 3, 10*time.Millisecond, 20*time.Millisecond, func(int, int) time.Duration { return 10 * time.Millisecond })
	for _, x := range cs {
		x.Session = "" // inferred only
	}
	in := map[int64]int{}
	for i := range 3 {
		p, err := NewPlan(context.Background(), sliceOpener(cs), Options{Target: mustURL(t, "http://127.0.0.1:9"), Sessions: SessionOptions{Mode: analysis.SessionsInferred}, Selection: Selection{Shard: Shard{Index: i, Count: 3}}})
		if err != nil {
			t.Fatal(err)
		}
		cur := newCursor(context.Background(), p.open, &p.opts.Selection, p.w, 1, &p.opts.Sessions)
		for {
			it, err := cur.next()
			if err != nil {
				break
			}
			in[it.x.Seq] = i
		}
	}
	for c, p := range parents {
		if in[c] != in[p] {
			t.Fatalf("turn %d in shard %d, its predecessor %d in shard %d", c, in[c], p, in[p])
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
