package analysis

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/replayer/analysis/analysistest"
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
	for _, want := range []string{"frames 14:01:00–14:02:00", "× median frame", "long-prompt share", "likely cause: long prompts (r="} {
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
	for _, want := range []string{"frames that stand out", "likely cause: long prompts", "batch_size r=", "(n=60)"} {
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
