package traffic

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/reelkit/reel/examples/simcluster/cluster"
)

// p99 is the nearest-rank 99th percentile (0 for no samples).
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(0.99*float64(len(s))))]
}

// TestWeeklyIncidentShape runs the story's traffic (trace arrivals at 0.8×,
// a 20-s window of 4× prompts for half the requests) through the simulator
// (o200k_base tokens) in simulated time: the window's frames show the
// tail, and the long-prompt queue (threshold 3000, the story's LongPrompt)
// brings the p99 TTFT of short requests (prompts under the threshold, the
// line the story judges by) back to under a third while leaving other
// frames no worse. The wait moves to the long prompts, so the p99 of all
// requests in the window's first frame rises (logged, not asserted); the
// share of requests meeting a 2-s TTFT SLO rises.
func TestWeeklyIncidentShape(t *testing.T) {
	in := Incident{At: 60 * time.Second, For: 20 * time.Second}
	plan, err := Plan(Options{Trace: loadTrace(t), Speed: 0.8, Duration: 160 * time.Second, Incident: in})
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := SimRequests(plan)
	if err != nil {
		t.Fatal(err)
	}
	const frame = 20 * time.Second
	const threshold = 3000
	fixed := cluster.Options{LongPromptThreshold: threshold}
	frames := func(o cluster.Options) (short, all []time.Duration) {
		res, err := cluster.Simulate(context.Background(), o, reqs)
		if err != nil {
			t.Fatal(err)
		}
		var shortTTFT, allTTFT [8][]time.Duration
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("request %d: %v", i, r.Err)
			}
			f := int(plan[i].Offset / frame)
			allTTFT[f] = append(allTTFT[f], r.TTFT)
			if r.PromptTokens < threshold {
				shortTTFT[f] = append(shortTTFT[f], r.TTFT)
			}
		}
		for f := range shortTTFT {
			short = append(short, p99(shortTTFT[f]).Round(time.Millisecond))
			all = append(all, p99(allTTFT[f]).Round(time.Millisecond))
		}
		return short, all
	}
	base, baseAll := frames(cluster.Options{})
	fix, fixAll := frames(fixed)
	t.Logf("p99 TTFT per 20-s frame, short requests / all requests\n  baseline: %v / %v\n  fix:      %v / %v", base, baseAll, fix, fixAll)
	good := func(o cluster.Options) (n int) {
		res, _ := cluster.Simulate(context.Background(), o, reqs)
		for i, r := range res {
			if plan[i].Offset >= in.At && plan[i].Offset < in.At+in.For+frame && r.TTFT <= 2*time.Second {
				n++
			}
		}
		return n
	}
	if b, f := good(cluster.Options{}), good(fixed); f*4 < b*5 {
		t.Errorf("requests meeting TTFT ≤ 2 s in the window: %d with the fix, %d without; want ≥ 25 %% more", f, b)
	} else {
		t.Logf("requests meeting TTFT ≤ 2 s in the window and the frame after: %d → %d", b, f)
	}
	first, last := int(in.At/frame), int((in.At+in.For)/frame)
	for f := range base {
		switch {
		case f < first:
			if fix[f] > base[f]*11/10 {
				t.Errorf("frame %d before the incident: fix %v, baseline %v", f, fix[f], base[f])
			}
		case f <= last:
			if base[f] < 3*base[0] {
				t.Errorf("frame %d: baseline p99 %v does not stand out from %v", f, base[f], base[0])
			}
			if fix[f]*3 > base[f] {
				t.Errorf("frame %d: fix p99 %v, want < ⅓ of baseline %v", f, fix[f], base[f])
			}
		default:
			if fix[f] > base[f]*3/2 {
				t.Errorf("frame %d after the incident: fix p99 %v, baseline %v", f, fix[f], base[f])
			}
		}
	}
}
