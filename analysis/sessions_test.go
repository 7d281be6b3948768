package analysis

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis/analysistest"
	"github.com/reelkit/reel/formats"
)

// turnX is an exchange starting at ms with a duration of dur ms.
func turnX(ms, dur int64, session string, key, parent int64) formats.Exchange {
	return formats.Exchange{TsUnixNs: t0ns + ms*1e6, DurationNs: dur * 1e6, Session: session, TurnKey: key, ParentTurnKey: parent, Recorder: "r", Seq: ms}
}

const t0ns = int64(1_700_000_000) * 1e9

func TestLinkerRecorded(t *testing.T) {
	// Session a: turn 0 (0–100 ms), a fan-out of three (200–300, 210–400,
	// 220–350), a turn at 350 after two of them, a join at 500.
	xs := []formats.Exchange{
		turnX(0, 100, "a", 0, 0),   // 0: start
		turnX(50, 10, "", 0, 0),    // 1: no session
		turnX(200, 100, "a", 0, 0), // 2: after 0
		turnX(210, 190, "a", 0, 0), // 3: after 0, concurrent with 2
		turnX(220, 130, "a", 0, 0), // 4: after 0, concurrent with 2, 3
		turnX(350, 10, "a", 0, 0),  // 5: 2 and 4 had ended (4 at 350), 3 had not
		turnX(500, 10, "a", 0, 0),  // 6: joins 3 and 5 (2, 4 covered by 5)
	}
	want := [][]int64{nil, nil, {0}, {0}, {0}, {2, 4}, {3, 5}}
	wantThink := []int64{0, 0, 100, 110, 120, 0, 100}
	l := NewLinker(SessionsRecorded, LinkerOptions{})
	for i := range xs {
		lk := l.Link(int64(i), "", &xs[i])
		if !reflect.DeepEqual(lk.Deps, want[i]) && !(len(lk.Deps) == 0 && want[i] == nil) {
			t.Errorf("exchange %d: deps %v, want %v", i, lk.Deps, want[i])
		}
		if lk.ThinkNs != wantThink[i]*1e6 {
			t.Errorf("exchange %d: think %v, want %v", i, time.Duration(lk.ThinkNs), time.Duration(wantThink[i]*1e6))
		}
		if (i == 1) != (lk.Session == 0) {
			t.Errorf("exchange %d: session %d", i, lk.Session)
		}
	}
}

func TestLinkerInferred(t *testing.T) {
	xs := []formats.Exchange{
		turnX(0, 100, "", 11, 0),    // 0: conversation A, turn 0
		turnX(10, 100, "", 21, 0),   // 1: conversation B, turn 0
		turnX(300, 100, "", 12, 11), // 2: A turn 1
		turnX(310, 50, "", 31, 11),  // 3: A turn 1' (fan-out sibling of 2)
		turnX(320, 10, "", 0, 99),   // 4: continues nothing recorded: a start
		turnX(600, 10, "", 13, 12),  // 5: A turn 2
		turnX(650, 10, "", 22, 21),  // 6: B turn 1
	}
	wantDeps := [][]int64{nil, nil, {0}, {0}, nil, {2}, {1}}
	wantTurn := []int{0, 0, 1, 1, 0, 2, 1}
	l := NewLinker(SessionsInferred, LinkerOptions{})
	var sess []uint64
	for i := range xs {
		lk := l.Link(int64(i), "", &xs[i])
		if len(lk.Deps) != len(wantDeps[i]) || (len(lk.Deps) > 0 && lk.Deps[0] != wantDeps[i][0]) {
			t.Errorf("exchange %d: deps %v, want %v", i, lk.Deps, wantDeps[i])
		}
		if lk.Turn != wantTurn[i] || lk.Ambiguous {
			t.Errorf("exchange %d: turn %d ambiguous %v", i, lk.Turn, lk.Ambiguous)
		}
		sess = append(sess, lk.Session)
	}
	if sess[0] != sess[2] || sess[0] != sess[5] || sess[1] != sess[6] || sess[0] == sess[1] || sess[4] == sess[0] {
		t.Errorf("sessions %v", sess)
	}
}

func TestLinkerInferredAmbiguous(t *testing.T) {
	// Two users open with the same words and get the same answer: both
	// first turns have turn key 5. The client tells the follow-ups apart;
	// without a client, the latest-ended is chosen and flagged.
	a, b := turnX(0, 100, "", 5, 0), turnX(10, 200, "", 5, 0)
	a.Client, b.Client = "10.0.0.1", "10.0.0.2"
	fa, fb := turnX(400, 10, "", 6, 5), turnX(410, 10, "", 7, 5)
	fa.Client, fb.Client = "10.0.0.1", "10.0.0.2"
	anon := turnX(420, 10, "", 8, 5)
	l := NewLinker(SessionsInferred, LinkerOptions{})
	for i, x := range []*formats.Exchange{&a, &b} {
		l.Link(int64(i), "", x)
	}
	if lk := l.Link(2, "", &fa); len(lk.Deps) != 1 || lk.Deps[0] != 0 || lk.Ambiguous {
		t.Errorf("client a's follow-up: %+v", lk)
	}
	if lk := l.Link(3, "", &fb); len(lk.Deps) != 1 || lk.Deps[0] != 1 || lk.Ambiguous {
		t.Errorf("client b's follow-up: %+v", lk)
	}
	if lk := l.Link(4, "", &anon); len(lk.Deps) != 1 || lk.Deps[0] != 1 || !lk.Ambiguous {
		t.Errorf("follow-up without a client: %+v", lk)
	}
}

func TestLinkerForgetsIdleTurns(t *testing.T) {
	l := NewLinker(SessionsInferred, LinkerOptions{Idle: time.Second, MaxTurns: 2})
	x0 := turnX(0, 10, "", 1, 0)
	l.Link(0, "", &x0)
	late := turnX(5000, 10, "", 2, 1) // 5 s later: beyond Idle
	if lk := l.Link(1, "", &late); len(lk.Deps) != 0 {
		t.Fatalf("continuation after the idle bound linked: %+v", lk)
	}
	for i := range 10 {
		x := turnX(5100+int64(i), 1, "", int64(100+i), 0)
		l.Link(int64(2+i), "", &x)
	}
	if n := len(l.byKey); n > 2 {
		t.Fatalf("linker remembers %d turns, MaxTurns 2", n)
	}
}

func TestSessionCounter(t *testing.T) {
	c := NewSessionCounter(SessionsInferred, LinkerOptions{})
	xs := []formats.Exchange{
		turnX(0, 100, "", 11, 0), turnX(50, 10, "", 0, 0), turnX(300, 100, "", 12, 11), turnX(310, 100, "", 14, 11), turnX(700, 10, "", 13, 12),
	}
	for i := range xs {
		c.Add(&xs[i])
	}
	st := c.Stats()
	if st.Requests != 5 || st.Sessions != 1 || st.InSessions != 4 || st.TurnsPerSess.Max != 4 || st.Fanout != 1 {
		t.Fatalf("stats %+v", st)
	}
	if st.Think.N != 3 || st.Think.Max != 300*time.Millisecond || st.Think.P50 != 210*time.Millisecond {
		t.Fatalf("think %+v", st.Think)
	}
	if len(st.Longest) != 1 || st.Longest[0].Turns != 4 || st.Longest[0].Depth != 3 {
		t.Fatalf("longest %+v", st.Longest)
	}
}

// TestSessionDelayReported: report and compare show how long session turns
// waited for their predecessors, apart from lag.
func TestSessionDelayReported(t *testing.T) {
	start := time.Unix(0, t0ns).UTC()
	results := func(delay time.Duration) *Analyzer {
		a := New(Options{})
		for i := range 40 {
			r := &formats.Result{RunID: "r", Seq: int64(i + 1), OrigTs: start.Add(time.Duration(i) * 100 * time.Millisecond), Frame: start,
				SentUnixNs: t0ns + int64(i)*1e8, LagNs: 50_000, Status: 200, E2ENs: 2e8, E2ESchedNs: 2e8, BatchSize: -1, QueueDepth: -1}
			if i%2 == 1 { // every other request is a later turn
				r.SessionDelayNs = int64(delay)
				r.E2ESchedNs += int64(delay)
			}
			a.AddResult(r)
		}
		return a
	}
	a, b := results(100*time.Millisecond), results(400*time.Millisecond)
	s := a.Summary()
	if s.SessionDelay.N != 20 || s.SessionDelay.P50 != 100*time.Millisecond || s.Lag.P99 != 50*time.Microsecond {
		t.Fatalf("session delay %+v, lag %+v", s.SessionDelay, s.Lag)
	}
	var text strings.Builder
	if err := s.WriteText(&text); err != nil || !strings.Contains(text.String(), "session_delay") {
		t.Fatalf("report text lacks session_delay (%v):\n%s", err, text.String())
	}
	c := Compare(a, b, CompareOptions{Resamples: 50})
	found := false
	for _, d := range c.Metrics {
		if d.Name == "session_delay.p50" {
			found = true
			if time.Duration(d.Abs) != 300*time.Millisecond {
				t.Errorf("session_delay.p50 delta %v", time.Duration(d.Abs))
			}
		}
	}
	if !found {
		t.Fatalf("compare has no session_delay.p50")
	}
	rules, err := ParseRules("session_delay>+50%")
	if err != nil || len(rules) != 1 {
		t.Fatalf("ParseRules(session_delay>+50%%): %v", err)
	}
}

// TestSessionCounterBounded: single turns cost the counter nothing, however
// many arrive within the idle horizon; past MaxSessions open multi-turn
// sessions, the longest idle are folded early and counted as truncated;
// the longest session still names its first turn.
func TestSessionCounterBounded(t *testing.T) {
	t.Run("single turns", func(t *testing.T) {
		c := NewSessionCounter(SessionsInferred, LinkerOptions{})
		for i := range 100_000 {
			x := turnX(int64(i), 5, "", 0, 0)
			c.Add(&x)
		}
		if n := len(c.active); n != 0 {
			t.Fatalf("%d sessions tallied for single turns", n)
		}
		if st := c.Stats(); st.Requests != 100_000 || st.Sessions != 0 || st.Truncated != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("recorded, over MaxSessions", func(t *testing.T) {
		const maxSessions = 64
		c := NewSessionCounter(SessionsRecorded, LinkerOptions{MaxSessions: maxSessions})
		// 1,000 sessions of 3 turns each, all open at once (interleaved
		// within a second), then one more turn of the first session.
		var most int
		for turn := range 3 {
			for s := range 1000 {
				x := turnX(int64(turn*1000+s), 1, fmt.Sprint("s", s), 0, 0)
				c.Add(&x)
				most = max(most, len(c.active), len(c.l.sessions))
			}
		}
		if most > maxSessions+1 {
			t.Fatalf("%d sessions tracked at once, MaxSessions %d", most, maxSessions)
		}
		st := c.Stats()
		if st.Truncated == 0 || st.Requests != 3000 {
			t.Fatalf("stats %+v: nothing truncated", st)
		}
		if st.InSessions > 3000 {
			t.Fatalf("in sessions %d of 3000", st.InSessions)
		}
	})
	t.Run("first turn named", func(t *testing.T) {
		c := NewSessionCounter(SessionsInferred, LinkerOptions{})
		xs := []formats.Exchange{turnX(7, 10, "", 1, 0), turnX(20, 10, "", 2, 1), turnX(40, 10, "", 3, 2)}
		for i := range xs {
			c.Add(&xs[i])
		}
		st := c.Stats()
		want := Chain{Start: time.Unix(0, t0ns+7e6).UTC(), Turns: 3, Depth: 3, Span: 43 * time.Millisecond, Recorder: "r", Seq: 7}
		if len(st.Longest) != 1 || st.Longest[0] != want {
			t.Fatalf("longest %+v, want %+v", st.Longest, want)
		}
	})
}

// reel stats counts sessions in the pass that reads the metrics
// (Options.Sessions): the same SessionStats as the separate pass of
// SessionStatsOf, over multi-turn traffic in two shards whose times
// interleave, whatever the metrics' Filter and ExcludeFirst leave out.
func TestSessionsInTheMetricsPass(t *testing.T) {
	xs := analysistest.WeeklyIncident(11)
	dir := t.TempDir()
	var shards [2][]*formats.Exchange
	for i, x := range xs {
		if i%4 != 0 { // chains of turns continuing the turn three before, under recorded ids
			x.TurnKey, x.ParentTurnKey = int64(i+1), int64(i-2)
			x.Session = fmt.Sprint("s", i%40)
		}
		if i%9 == 0 { // a turn whose answer went to two continuations
			x.ParentTurnKey = int64(i - 5)
		}
		x.Recorder = fmt.Sprint("rec", i%2)
		shards[i%2] = append(shards[i%2], x)
	}
	analysistest.WriteDataset(t, filepath.Join(dir, "a"), shards[0])
	analysistest.WriteDataset(t, filepath.Join(dir, "b"), shards[1])
	for _, mode := range []SessionMode{SessionsInferred, SessionsRecorded} {
		separate, err := SessionStatsOf(context.Background(), []string{dir}, formats.ReaderOptions{}, mode, LinkerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(separate)
		if separate.Sessions < 10 || separate.Requests != int64(len(xs)) {
			t.Fatalf("%v: %d sessions over %d requests: the test traffic should have many", mode, separate.Sessions, separate.Requests)
		}
		for name, opt := range map[string]Options{
			"all":                      {Sessions: mode},
			"filtered, first excluded": {Sessions: mode, ExcludeFirst: time.Minute, Filter: Filter{MaxPromptTokens: 1999}},
		} {
			t.Run(fmt.Sprint(mode, "/", name), func(t *testing.T) {
				a := New(opt)
				if _, err := a.AddDataset(context.Background(), []string{dir}, formats.ReaderOptions{}); err != nil {
					t.Fatal(err)
				}
				st := a.Stats()
				if got, _ := json.Marshal(st.Sessions); string(got) != string(want) {
					t.Fatalf("sessions counted with the metrics:\n got  %s\n want %s", got, want)
				}
			})
		}
	}
	a := New(Options{}) // sessions off: none reported
	if _, err := a.AddDataset(context.Background(), []string{dir}, formats.ReaderOptions{}); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Sessions != nil {
		t.Fatalf("Options.Sessions off reported %+v", st.Sessions)
	}
}
