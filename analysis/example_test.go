package analysis_test

import (
	"fmt"
	"os"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/analysis/analysistest"
	"github.com/reelkit/reel/formats"
)

func ExampleAnalyzer() {
	slo, err := analysis.ParseSLO("ttft=300ms,e2e=2s")
	if err != nil {
		panic(err)
	}
	a := analysis.New(analysis.Options{Frame: 5 * time.Second, SLO: slo})
	t0 := time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC)
	for i, e2e := range []time.Duration{800 * time.Millisecond, 1200 * time.Millisecond, 3 * time.Second} {
		at := t0.Add(time.Duration(i) * time.Second)
		a.AddResult(&formats.Result{OrigTs: at, SentUnixNs: at.UnixNano(), Status: 200,
			E2ENs: int64(e2e), TTFTNs: int64(100 * time.Millisecond), OutputTokens: 51})
	}
	s := a.Summary()
	fmt.Println("e2e p50:", s.E2E.P50, "max:", s.E2E.Max)
	fmt.Println("tpot p50:", s.TPOT.P50) // (1.2s − 100ms) / 50
	fmt.Printf("meeting SLO: %d of %d, compliance %.0f%%\n", s.MeetingSLO, s.Requests, 100*s.WindowCompliance)
	analysis.WriteFrameLine(os.Stdout, &s.Frames[0])
	// Output:
	// e2e p50: 1.2s max: 3s
	// tpot p50: 22ms
	// meeting SLO: 2 of 3, compliance 0%
	// 2026-03-04 14:00:00  req 3 ok 3 err 0  e2e p50 1.20s p99 3.00s  ttft p99 100ms  lag p99 0  SLO MISS (e2e.p95 3.00s > 2.00s)
}

func ExampleCompare() {
	base, cand := analysis.New(analysis.Options{}), analysis.New(analysis.Options{})
	for _, r := range analysistest.Run(1, 2000, 1) {
		base.AddResult(r)
	}
	for _, r := range analysistest.Run(2, 2000, 1.5) { // 50 % slower
		cand.AddResult(r)
	}
	c := analysis.Compare(base, cand, analysis.CompareOptions{Seed: 1})
	rules, err := analysis.ParseRules("p99>+10%")
	if err != nil {
		panic(err)
	}
	v := c.Judge(rules)
	d, _ := c.Metric("e2e.p99")
	fmt.Println("regression:", v.Regression, "— interval above zero:", d.CILow > 0)
	// Output:
	// regression: true — interval above zero: true
}
