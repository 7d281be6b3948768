package analysis

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis/analysistest"
)

func TestStatsNamesLongPromptBurst(t *testing.T) {
	a := New(Options{})
	for _, x := range analysistest.WeeklyIncident(7) {
		a.AddExchange(x)
	}
	st := a.Stats()
	if len(st.Outliers) != 1 {
		for _, e := range st.Outliers {
			t.Log(e.Explanation)
		}
		t.Fatalf("outliers = %d, want exactly the burst", len(st.Outliers))
	}
	e := st.Outliers[0]
	if !e.Start.Equal(analysistest.BurstFrom) || !e.End.Equal(analysistest.BurstTo) {
		t.Errorf("episode %s–%s, want 14:01:00–14:02:00", e.Start, e.End)
	}
	if e.Cause != "long_prompt_share" || e.CauseR < 0.8 {
		t.Errorf("cause %q r=%.2f, want long_prompt_share with a strong r", e.Cause, e.CauseR)
	}
	if e.TailRatio < 2 || e.LongShare < 0.4 || e.RestLongShare > 0.1 {
		t.Errorf("tail ratio %.1f, long share %.2f vs %.2f", e.TailRatio, e.LongShare, e.RestLongShare)
	}
	if e.CauseKind != KindWorkload || e.CauseTail == "" {
		t.Errorf("cause kind %q tail %q, want a workload cause with the tail it tracks", e.CauseKind, e.CauseTail)
	}
	for _, want := range []string{"frames 14:01:00–14:02:00", "× median frame", "long-prompt share", "likely cause: long prompts (share ", " r=0.9"} {
		if !strings.Contains(e.Explanation, want) {
			t.Errorf("explanation %q lacks %q", e.Explanation, want)
		}
	}
	var batch Correlation
	for _, c := range st.Correlations {
		if c.Signal == "batch_size" {
			batch = c
		}
	}
	if !batch.Valid || batch.N != 60 || batch.R <= 0 {
		t.Errorf("batch-size correlation %+v, want valid over 60 frames and positive", batch)
	}
	if st.InterArrivalCV <= 0 || st.ArrivalRate < 3.5 || st.ArrivalRate > 4.5 {
		t.Errorf("arrival rate %.2f CV %.2f", st.ArrivalRate, st.InterArrivalCV)
	}
	// Two of four blocks of every request but the first were seen before.
	if p := st.Summary.Prefix; p.Blocks != 4800 || p.Reused != 2*1199 || p.RequestShare < 0.99 {
		t.Errorf("prefix %+v", p)
	}
	var text bytes.Buffer
	if err := st.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"frames that stand out", "likely cause: long prompts", "batch_size r=", "(n=60)",
		"per-frame e2e p99 moves with — workload: long_prompt_share r=", "per-frame TTFT p99 moves with", "— server state: batch_size"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("stats text lacks %q:\n%s", want, text.String())
		}
	}
}

func TestStatsFlagsErrorBurst(t *testing.T) {
	a := New(Options{})
	for i := range 600 {
		x := exch(time.Duration(i)*500*time.Millisecond, 200*time.Millisecond, 500)
		if i >= 100 && i < 120 { // 14:00:50–14:01:00: upstream down
			x.Status, x.Error = 0, "read: connection reset by peer"
		}
		a.AddExchange(x)
	}
	st := a.Stats()
	if len(st.Outliers) != 1 {
		t.Fatalf("outliers %+v, want the error burst", st.Outliers)
	}
	e := st.Outliers[0]
	if !e.Start.Equal(t0.Add(50*time.Second)) || !e.End.Equal(t0.Add(time.Minute)) || !strings.Contains(e.Explanation, "errors 100 % vs 0 %") {
		t.Errorf("episode %s–%s: %s", e.Start, e.End, e.Explanation)
	}
}

func TestStatsQuietRecording(t *testing.T) {
	a := New(Options{})
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 600 {
		x := exch(time.Duration(i)*500*time.Millisecond, time.Duration(200+rng.IntN(50))*time.Millisecond, int32(400+rng.IntN(200)))
		a.AddExchange(x)
	}
	st := a.Stats()
	if len(st.Outliers) != 0 {
		t.Errorf("steady traffic flagged: %+v", st.Outliers)
	}
	if st.InterArrivalCV > 0.01 {
		t.Errorf("evenly paced arrivals: CV %.3f, want ≈ 0", st.InterArrivalCV)
	}
	if empty := New(Options{}).Stats(); len(empty.Outliers) != 0 || empty.ArrivalRate != 0 {
		t.Errorf("empty stats %+v", empty)
	}
}

// TestStatsNamesCauseNotSymptom: when the server reports a queue that the
// long prompts back up, queue depth tracks the per-frame tail even better
// than the long-prompt share does; the burst of long prompts is still the
// likely cause and the queue is reported as server state moving with it.
func TestStatsNamesCauseNotSymptom(t *testing.T) {
	a := New(Options{})
	for _, x := range analysistest.WeeklyIncidentQueued(7) {
		a.AddExchange(x)
	}
	st := a.Stats()
	byName := func(cs []Correlation) map[string]Correlation {
		m := map[string]Correlation{}
		for _, c := range cs {
			m[c.Signal] = c
		}
		return m
	}
	e2e, ttft := byName(st.Correlations), byName(st.TTFTCorrelations)
	// The trap this test is about: the symptom correlates better.
	if q, l := e2e["queue_depth"], e2e["long_prompt_share"]; !q.Valid || !l.Valid || q.R <= l.R {
		t.Fatalf("fixture: queue depth r=%.2f should beat long-prompt share r=%.2f", q.R, l.R)
	}
	for name, kind := range map[string]string{"long_prompt_share": KindWorkload, "prompt_tokens": KindWorkload, "rate": KindWorkload,
		"output_tokens": KindWorkload, "batch_size": KindServer, "queue_depth": KindServer} {
		if e2e[name].Kind != kind || ttft[name].Kind != kind || (name != "rate" && !ttft[name].Valid) { // the rate is constant
			t.Errorf("%s: kinds %q/%q valid %v, want %s and a valid TTFT correlation", name, e2e[name].Kind, ttft[name].Kind, ttft[name].Valid, kind)
		}
	}
	if len(st.Outliers) == 0 {
		t.Fatal("no episode flagged")
	}
	e := st.Outliers[0]
	if !e.Start.Equal(analysistest.BurstFrom) || e.End.Before(analysistest.BurstTo) || e.End.After(analysistest.BurstTo.Add(10*time.Second)) {
		t.Errorf("episode %s–%s, want the burst 14:01:00–14:02:00 (its backlog may drain a frame or two later)", e.Start, e.End)
	}
	if (e.Cause != "long_prompt_share" && e.Cause != "prompt_tokens") || e.CauseKind != KindWorkload || e.CauseR < 0.5 {
		t.Errorf("cause %q (%s) r=%.2f, want the long prompts", e.Cause, e.CauseKind, e.CauseR)
	}
	if len(e.ServerState) == 0 || !strings.HasPrefix(e.ServerState[0], "queue depth ") {
		t.Errorf("server state %q, want queue depth first", e.ServerState)
	}
	for _, want := range []string{"likely cause: long prompts (share ", "; server state moving with it: queue depth ", "(r=0.9"} {
		if !strings.Contains(e.Explanation, want) {
			t.Errorf("explanation %q lacks %q", e.Explanation, want)
		}
	}
	if strings.Contains(e.Explanation, "likely cause: queueing") || strings.Contains(e.Explanation, "server-side") {
		t.Errorf("explanation names the symptom: %q", e.Explanation)
	}
}

// TestStatsServerSideCause: the tail rises with queue depth. When the
// workload does not change, no workload cause is invented and the server
// state is named for what it is; when the rate doubles, the rate is the
// cause and the queue moves with it.
func TestStatsServerSideCause(t *testing.T) {
	tests := []struct {
		name, cause, kind, want string
	}{
		{"server stalls", "queue_depth", KindServer, "no workload change explains it; likely cause: server-side queueing"},
		{"rate doubles", "rate", KindWorkload, "likely cause: arrival rate (rate 4.0/s vs 2.0/s; rate r="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(Options{})
			rng := rand.New(rand.NewPCG(5, 5))
			for i := range 600 { // 2 req/s for 5 minutes
				at := time.Duration(i) * 500 * time.Millisecond
				slow := at >= time.Minute && at < 90*time.Second
				n := 1
				if slow && tt.cause == "rate" {
					n = 2 // a second request in every slot
				}
				for k := range n {
					queue := int32(rng.IntN(2))
					dur := time.Duration(200+rng.IntN(50)) * time.Millisecond
					if slow { // the queue grows, every request waits
						queue = int32(10 + rng.IntN(10))
						dur += time.Duration(queue) * 60 * time.Millisecond
					}
					x := exch(at+time.Duration(k)*250*time.Millisecond, dur, int32(400+rng.IntN(200)))
					x.QueueDepth, x.BatchSize = queue, int32(8+rng.IntN(2))
					a.AddExchange(x)
				}
			}
			st := a.Stats()
			if len(st.Outliers) != 1 {
				t.Fatalf("outliers %+v, want the slow half-minute", st.Outliers)
			}
			e := st.Outliers[0]
			if e.Cause != tt.cause || e.CauseKind != tt.kind {
				t.Errorf("cause %q (%s), want %s (%s): %s", e.Cause, e.CauseKind, tt.cause, tt.kind, e.Explanation)
			}
			if !strings.Contains(e.Explanation, tt.want) || !strings.Contains(e.Explanation, "server state moving with it: queue depth ") {
				t.Errorf("explanation %q lacks %q and the queue", e.Explanation, tt.want)
			}
		})
	}
}

func TestCorrelationLineNamesWhatCannotBeComputed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cs        []Correlation
		want, not []string
	}{
		{"none computable", []Correlation{{Signal: "rate", Kind: KindWorkload, N: 1}, {Signal: "batch_size", Kind: KindServer}},
			[]string{"too few frames with data to correlate"}, []string{"n/a", "moves with"}},
		{"some computable", []Correlation{{Signal: "rate", Kind: KindWorkload, N: 12, R: 0.81, Valid: true}, {Signal: "batch_size", Kind: KindServer}},
			[]string{"moves with — workload: rate r=0.81 (n=12)", "(too few frames with data for batch_size)"}, []string{"n/a", "server state"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			writeCorrelations(&errWriter{w: &b}, "per-frame e2e p99", tc.cs)
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("line %q lacks %q", b.String(), w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(b.String(), n) {
					t.Errorf("line %q has %q", b.String(), n)
				}
			}
		})
	}
}
