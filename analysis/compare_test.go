package analysis

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis/analysistest"
	"github.com/reelkit/reel/formats"
)

// run builds an analyzer of n requests whose E2E is lognormal around
// median, scaled by factor, with TTFT a tenth of it.
func run(seed uint64, n int, factor float64, slo string) *Analyzer {
	s, err := ParseSLO(slo)
	if err != nil {
		panic(err)
	}
	a := New(Options{SLO: s})
	rng := rand.New(rand.NewPCG(seed, 2))
	for i := range n {
		e2e := time.Duration(factor * float64(200*time.Millisecond) * math.Exp(0.5*rng.NormFloat64()))
		a.AddResult(res(time.Duration(i)*20*time.Millisecond, e2e, e2e/10, 20))
	}
	return a
}

func TestCompare(t *testing.T) {
	rules, err := ParseRules("p99>+10%,ttft.p99>+15%,goodput<-5%")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		a, b       *Analyzer
		regression bool
		check      func(t *testing.T, c *Comparison, v Verdict)
	}{
		{
			name: "identical runs",
			a:    run(1, 3000, 1, "e2e=600ms"), b: run(1, 3000, 1, "e2e=600ms"),
			check: func(t *testing.T, c *Comparison, v Verdict) {
				d, _ := c.Metric("e2e.p99")
				if d.Abs != 0 || d.Significant || d.CILow > 0 || d.CIHigh < 0 {
					t.Errorf("identical e2e.p99 delta %+v", d)
				}
				if len(v.Held) != 0 {
					t.Errorf("held %v", v.Held)
				}
			},
		},
		{
			name: "small noise is not a regression",
			a:    run(1, 3000, 1, "e2e=600ms"), b: run(2, 3000, 1.02, "e2e=600ms"),
			check: func(t *testing.T, c *Comparison, v Verdict) {
				d, _ := c.Metric("e2e.p99")
				if d.CILow > 0 || d.CIHigh < 0 {
					t.Errorf("noise: e2e.p99 CI [%v, %v] excludes zero", d.CILow, d.CIHigh)
				}
			},
		},
		{
			name: "shifted distribution regresses",
			a:    run(1, 3000, 1, "e2e=600ms"), b: run(2, 3000, 1.4, "e2e=600ms"),
			regression: true,
			check: func(t *testing.T, c *Comparison, v Verdict) {
				d, _ := c.Metric("e2e.p99")
				if d.Rel < 0.2 || !d.Significant || d.CILow <= 0 || d.CIHigh < d.Abs {
					t.Errorf("shift: e2e.p99 %+v, want ≈ +40%% with CI above zero containing Δ", d)
				}
				names := map[string]bool{}
				for _, tr := range v.Tripped {
					names[tr.Delta.Name] = true
				}
				if !names["e2e.p99"] || !names["ttft.p99"] || !names["goodput"] {
					t.Errorf("tripped %v, want e2e.p99, ttft.p99 and goodput", names)
				}
				if !strings.HasPrefix(v.Line, "REGRESSION: e2e.p99 +") || !strings.Contains(v.Line, ", worse, trips rule p99>+10%") || strings.Contains(v.Line, "\n") {
					t.Errorf("verdict line %q", v.Line)
				}
			},
		},
		{
			name: "improvement is not a regression",
			a:    run(1, 3000, 1.4, "e2e=600ms"), b: run(2, 3000, 1, "e2e=600ms"),
			check: func(t *testing.T, c *Comparison, v Verdict) {
				d, _ := c.Metric("e2e.p99")
				if d.Abs >= 0 || d.CIHigh >= 0 {
					t.Errorf("improvement: e2e.p99 %+v, want negative with CI below zero", d)
				}
				if fix, _ := ParseRules("p99>-10%"); c.Judge(fix).Failed {
					t.Error("p99>-10% must hold when p99 fell by far more than 10 %")
				}
				// A rule pointed at a drop trips on the improvement: exit 1,
				// but the verdict must not call it a regression.
				drop, _ := ParseRules("ttft.p99<-20%")
				if v := c.Judge(drop); !v.Failed || v.Regression || !strings.HasPrefix(v.Line, "FAIL: ttft.p99 -") ||
					!strings.Contains(v.Line, ", better, trips rule ttft.p99<-20%") || strings.Contains(v.Line, "REGRESSION") {
					t.Errorf("improvement rule: failed %v, regression %v, line %q", v.Failed, v.Regression, v.Line)
				}
				// Mixed: one improvement, one neutral metric tripping: still FAIL.
				mixed, _ := ParseRules("ttft.p99<-20%,requests>-1%")
				if v := c.Judge(mixed); !strings.HasPrefix(v.Line, "FAIL: ") {
					t.Errorf("mixed rules: line %q", v.Line)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Compare(tt.a, tt.b, CompareOptions{})
			v := c.Judge(rules)
			if v.Failed != tt.regression || v.Regression != tt.regression {
				t.Fatalf("failed = %v, regression = %v, want %v: %s", v.Failed, v.Regression, tt.regression, v.Line)
			}
			tt.check(t, c, v)
		})
	}
}

func TestCompareDeterministicAndFramesAligned(t *testing.T) {
	c1 := Compare(run(1, 500, 1, ""), run(2, 500, 1.1, ""), CompareOptions{Seed: 9})
	c2 := Compare(run(1, 500, 1, ""), run(2, 500, 1.1, ""), CompareOptions{Seed: 9})
	d1, _ := c1.Metric("e2e.p95")
	d2, _ := c2.Metric("e2e.p95")
	if d1 != d2 {
		t.Fatalf("same seed, different intervals: %+v vs %+v", d1, d2)
	}
	// 500 requests 20ms apart = 10 s = 2 frames, same starts in both.
	if len(c1.Frames) != 2 || c1.Frames[0].ARequests != 250 || c1.Frames[0].BRequests != 250 {
		t.Fatalf("frames %+v", c1.Frames)
	}
	var text bytes.Buffer
	if err := c1.WriteText(&text, "base", "cand"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"e2e.p99", "95% CI of Δ", "frames (e2e p99"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("compare text lacks %q:\n%s", want, text.String())
		}
	}
}

func TestTailFrames(t *testing.T) {
	rec := New(Options{})
	for _, x := range analysistest.WeeklyIncident(7) {
		rec.AddExchange(x)
	}
	replay := func(fixed bool) *Analyzer {
		a := New(Options{})
		for _, r := range analysistest.Replayed(analysistest.WeeklyIncident(7), 0, func(x *formats.Exchange) float64 {
			if fixed && !x.Time().Before(analysistest.BurstFrom) && x.Time().Before(analysistest.BurstTo) {
				return 0.3
			}
			return 1
		}) {
			a.AddResult(r)
		}
		return a
	}
	shadow := Compare(rec, replay(false), CompareOptions{Resamples: 50}).Tail
	if shadow.A != 12 || shadow.InB != 12 || shadow.BOnly != 0 || !shadow.First.Equal(analysistest.BurstFrom) {
		t.Errorf("recording vs faithful replay: %+v", shadow)
	}
	if !strings.Contains(shadow.String(), "B has the tail in 12 of them (reproduced)") {
		t.Errorf("line %q", shadow.String())
	}
	fix := Compare(rec, replay(true), CompareOptions{Resamples: 50}).Tail
	if fix.A != 12 || fix.InB != 0 || !strings.Contains(fix.String(), "gone in B") {
		t.Errorf("recording vs fix: %+v %q", fix, fix.String())
	}
}

func TestLargeSampleBootstrap(t *testing.T) {
	// Above MaxResampleN the order-statistic shortcut must agree with the
	// verdicts of whole resamples.
	opt := CompareOptions{MaxResampleN: 100}
	same := Compare(run(1, 3000, 1, ""), run(2, 3000, 1, ""), opt)
	if d, _ := same.Metric("e2e.p99"); d.CILow > 0 || d.CIHigh < 0 {
		t.Errorf("same distribution: CI [%v, %v] excludes zero", d.CILow, d.CIHigh)
	}
	shifted := Compare(run(1, 3000, 1, ""), run(2, 3000, 1.4, ""), opt)
	if d, _ := shifted.Metric("e2e.p99"); d.CILow <= 0 {
		t.Errorf("shifted: CI [%v, %v] includes zero", d.CILow, d.CIHigh)
	}
}

func TestParseRules(t *testing.T) {
	tests := []struct {
		in      string
		want    []Rule
		wantErr string
	}{
		{"p99>+10%", []Rule{{Metric: "e2e.p99", Above: true, Threshold: 0.1, Relative: true, Text: "p99>+10%"}}, ""},
		{"ttft>50ms", []Rule{{Metric: "ttft.p99", Above: true, Threshold: float64(50 * time.Millisecond), Text: "ttft>50ms"}}, ""},
		{"goodput<-5%", []Rule{{Metric: "goodput", Threshold: -0.05, Relative: true, Text: "goodput<-5%"}}, ""},
		{"p99.9>+1%", []Rule{{Metric: "e2e.p999", Above: true, Threshold: 0.01, Relative: true, Text: "p99.9>+1%"}}, ""},
		{"error_rate>0.01", []Rule{{Metric: "error_rate", Above: true, Threshold: 0.01, Text: "error_rate>0.01"}}, ""},
		{"ttft.p99<0", []Rule{{Metric: "ttft.p99", Threshold: 0, Text: "ttft.p99<0"}}, ""},
		{"p99>10", nil, "needs % or a unit"},
		{"ttft<-5", nil, "needs % or a unit"},
		{"p99", nil, "want METRIC"},
		{"p98>+1%", nil, "unknown metric"},
		{"p99>+ten%", nil, "invalid syntax"},
		{"", nil, "no rule"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRules(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) || math.Abs(got[0].Threshold-tt.want[0].Threshold) > 1e-12 {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			g, w := got[0], tt.want[0]
			g.Threshold, w.Threshold = 0, 0
			if g != w {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseRules(f *testing.F) {
	for _, s := range []string{"p99>+10%,ttft.p99>+15%,goodput<-5%", "x<", ">1", "p99>1e309%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rules, err := ParseRules(s)
		if err == nil && len(rules) == 0 {
			t.Fatal("no error and no rules")
		}
	})
}
