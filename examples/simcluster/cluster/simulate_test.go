package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func simulate(t *testing.T, o Options, reqs []SimRequest) []SimResult {
	t.Helper()
	res, err := Simulate(context.Background(), o, reqs)
	if err != nil {
		t.Fatalf("Simulate: %v", err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("request %d: %v", i, r.Err)
		}
	}
	return res
}

// quantile is the nearest-rank q-quantile of ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func TestTTFTGrowsWithPromptLength(t *testing.T) {
	var prev time.Duration
	for _, n := range []int{16, 512, 2048, 8192, 16384} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := simulate(t, Options{}, []SimRequest{{PromptTokens: n, OutputTokens: 4}})[0]
			// A lone request's TTFT is its prefill: ceil(n/2048) steps of
			// 10 ms + 0.3 ms plus n/12k tokens/s.
			steps := (n + 2047) / 2048
			want := time.Duration(steps)*(10300*time.Microsecond) + time.Duration(float64(n)/12000*float64(time.Second))
			if d := r.TTFT - want; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("TTFT = %v, want ≈ %v", r.TTFT, want)
			}
			if r.TTFT <= prev {
				t.Errorf("TTFT %v for %d tokens is not above %v for a shorter prompt", r.TTFT, n, prev)
			}
			prev = r.TTFT
		})
	}
}

func TestTTFTGrowsWithQueue(t *testing.T) {
	reqs := make([]SimRequest, 12)
	for i := range reqs {
		reqs[i] = SimRequest{PromptTokens: 4000, OutputTokens: 8}
	}
	res := simulate(t, Options{}, reqs)
	for i := 1; i < len(res); i++ {
		if res[i].TTFT <= res[i-1].TTFT {
			t.Errorf("request %d TTFT %v not above request %d's %v", i, res[i].TTFT, i-1, res[i-1].TTFT)
		}
		if res[i].QueueDepth != i {
			t.Errorf("request %d saw queue depth %d, want %d", i, res[i].QueueDepth, i)
		}
	}
	if last, first := res[len(res)-1].TTFT, res[0].TTFT; last < 8*first {
		t.Errorf("12th request's TTFT %v is not ≫ the first's %v", last, first)
	}
}

func TestITLGrowsWithBatchSize(t *testing.T) {
	var prev time.Duration
	for _, batch := range []int{1, 8, 64, 200} {
		t.Run(fmt.Sprint(batch), func(t *testing.T) {
			reqs := make([]SimRequest, batch)
			for i := range reqs {
				reqs[i] = SimRequest{PromptTokens: 8, OutputTokens: 100}
			}
			res := simulate(t, Options{}, reqs)
			itl := res[0].MeanITL
			// Pure decode steps: 10 ms + 0.3 ms per sequence.
			want := 10*time.Millisecond + time.Duration(batch)*300*time.Microsecond
			if d := itl - want; d < -time.Millisecond || d > time.Millisecond {
				t.Errorf("mean ITL = %v, want ≈ %v", itl, want)
			}
			if itl <= prev {
				t.Errorf("ITL %v at batch %d not above %v at a smaller batch", itl, batch, prev)
			}
			prev = itl
			if res[0].BatchAtAdmit != batch {
				t.Errorf("x-batch-size = %d, want %d", res[0].BatchAtAdmit, batch)
			}
		})
	}
}

func TestKVCapacityLimitsConcurrency(t *testing.T) {
	reqs := make([]SimRequest, 20)
	for i := range reqs {
		reqs[i] = SimRequest{PromptTokens: 1000, OutputTokens: 50}
	}
	tests := []struct {
		name       string
		kv         int
		lo, hi     int // bounds on the largest batch a request joined
		slowestMin time.Duration
	}{
		{"128k tokens", 131072, 20, 20, 0},
		{"4k tokens", 4096, 2, 4, 3 * time.Second}, // 63 blocks each, 256 blocks in all
		{"2k tokens", 2048, 1, 2, 6 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := simulate(t, Options{KVCapacityTokens: tt.kv, MaxModelLen: 2048}, reqs)
			most, slowest := 0, time.Duration(0)
			for _, r := range res {
				most = max(most, r.BatchAtAdmit)
				slowest = max(slowest, r.Queue)
			}
			if most < tt.lo || most > tt.hi {
				t.Errorf("largest batch %d with KV %d tokens, want in [%d, %d]", most, tt.kv, tt.lo, tt.hi)
			}
			if slowest < tt.slowestMin {
				t.Errorf("longest queue wait %v, want ≥ %v", slowest, tt.slowestMin)
			}
		})
	}
}

func TestKVPreemptsWhenOutputsOutgrowCache(t *testing.T) {
	// Eight prompts of 200 tokens fit 2,048 tokens at admission; their
	// outputs of 400 tokens do not, so the newest are preempted and
	// recomputed, and every request still completes in full.
	reqs := make([]SimRequest, 8)
	for i := range reqs {
		reqs[i] = SimRequest{PromptTokens: 200, OutputTokens: 400}
	}
	res := simulate(t, Options{KVCapacityTokens: 2048, MaxModelLen: 2048}, reqs)
	pre := 0
	for i, r := range res {
		pre += r.Preemptions
		if r.OutputTokens != 400 {
			t.Errorf("request %d produced %d tokens, want 400", i, r.OutputTokens)
		}
	}
	if pre == 0 {
		t.Error("no preemptions although the KV cache overflowed")
	}
}

// burst is short chat traffic at 8 req/s for 20 s with, from 5 s to 10 s,
// three 12k-token prompts per second, the weekly incident in miniature.
func burst() (reqs []SimRequest, short []bool) {
	for i := range 160 {
		reqs = append(reqs, SimRequest{Arrival: time.Duration(i) * 125 * time.Millisecond, PromptTokens: 600 + 37*(i%11), OutputTokens: 60})
		short = append(short, true)
	}
	for i := range 15 {
		reqs = append(reqs, SimRequest{Arrival: 5*time.Second + time.Duration(i)*333*time.Millisecond, PromptTokens: 12000, OutputTokens: 60})
		short = append(short, false)
	}
	return reqs, short
}

func TestLongPromptQueueProtectsShortRequests(t *testing.T) {
	reqs, short := burst()
	p99 := func(o Options) (ttft, e2e time.Duration) {
		res := simulate(t, o, reqs)
		var ts, es []time.Duration
		for i, r := range res {
			if short[i] {
				ts, es = append(ts, r.TTFT), append(es, r.E2E)
			}
		}
		return quantile(ts, 0.99), quantile(es, 0.99)
	}
	baseTTFT, baseE2E := p99(Options{})
	fixTTFT, fixE2E := p99(Options{LongPromptThreshold: 4096})
	t.Logf("short requests' p99 TTFT %v → %v, p99 E2E %v → %v", baseTTFT, fixTTFT, baseE2E, fixE2E)
	if fixTTFT*3 > baseTTFT {
		t.Errorf("p99 TTFT of short requests %v with the long queue, want < ⅓ of %v without", fixTTFT, baseTTFT)
	}
	if fixE2E*3 > baseE2E*2 {
		t.Errorf("p99 E2E of short requests %v with the long queue, want < ⅔ of %v without", fixE2E, baseE2E)
	}
	// Long prompts are still served.
	res := simulate(t, Options{LongPromptThreshold: 4096}, reqs)
	for i, r := range res {
		if !short[i] && (!r.Long || r.OutputTokens != 60) {
			t.Errorf("long request %d: long=%v output=%d", i, r.Long, r.OutputTokens)
		}
	}
}

func TestPrefixCacheLowersTTFT(t *testing.T) {
	system := strings.Repeat("You are a careful assistant for ACME support. ", 200) // ~2,300 tokens
	reqs := []SimRequest{
		{Arrival: 0, Prompt: "system: " + system + "\nuser: first question\n", OutputTokens: 4},
		{Arrival: time.Second, Prompt: "system: " + system + "\nuser: a different question\n", OutputTokens: 4},
	}
	on := simulate(t, Options{}, reqs)
	off := simulate(t, Options{DisablePrefixCache: true}, reqs)
	if on[0].CachedTokens != 0 {
		t.Errorf("first request hit the cache: %d tokens", on[0].CachedTokens)
	}
	if on[1].CachedTokens < 2000 {
		t.Errorf("second request cached %d tokens, want the shared system prompt (> 2000)", on[1].CachedTokens)
	}
	if on[1].TTFT*3 > off[1].TTFT {
		t.Errorf("TTFT with a cached prefix %v, want < ⅓ of %v without the cache", on[1].TTFT, off[1].TTFT)
	}
	if off[1].CachedTokens != 0 {
		t.Errorf("disabled cache served %d tokens", off[1].CachedTokens)
	}
}

func TestSimulateRejectsAndIsDeterministic(t *testing.T) {
	reqs, _ := burst()
	reqs = append(reqs, SimRequest{PromptTokens: 40000, OutputTokens: 1}, SimRequest{PromptTokens: 0, OutputTokens: 1})
	a, err := Simulate(context.Background(), Options{}, reqs)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Simulate(context.Background(), Options{}, reqs)
	for _, i := range []int{len(reqs) - 2, len(reqs) - 1} {
		if !errors.Is(a[i].Err, ErrRejected) {
			t.Errorf("request %d (prompt %d): err %v, want ErrRejected", i, reqs[i].PromptTokens, a[i].Err)
		}
		a[i].Err, b[i].Err = nil, nil
	}
	if !slices.Equal(a, b) {
		t.Error("two runs on the same input differ")
	}
	if _, err := Simulate(context.Background(), Options{MaxModelLen: 1 << 20}, reqs); err == nil {
		t.Error("max model len above KV capacity accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Simulate(ctx, Options{}, reqs); err == nil {
		t.Error("cancelled context not reported")
	}
}

func TestNaturalLengthMatchesTraceMedian(t *testing.T) {
	var ls []int
	for i := range 20000 {
		ls = append(ls, naturalLength(uint64(i)*0x9e3779b97f4a7c15, 186))
	}
	slices.Sort(ls)
	if med := ls[len(ls)/2]; med < 116 || med > 142 {
		t.Errorf("median natural length %d, want ≈ 129 (the Azure conversation trace)", med)
	}
}
