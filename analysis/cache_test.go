package analysis

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// cacheRun is an analyzer over n requests of 1000–2000 prompt tokens whose
// server reported about reuse of them from its prefix cache (nil: did not
// report), on two routes and over several frames.
func cacheRun(t *testing.T, seed uint64, n int, reuse float64, replay bool) *Analyzer {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	a := New(Options{Frame: 10 * time.Second})
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range n {
		prompt := int32(1000 + rng.IntN(1000))
		cached := int32(float64(prompt) * reuse * 2 * rng.Float64()) // mean reuse·prompt
		path := []string{"/v1/chat/completions", "/v1/completions"}[i%2]
		ts := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		if replay {
			a.AddResult(&formats.Result{OrigTs: ts, SentUnixNs: ts.UnixNano(), Status: 200, E2ENs: int64(time.Second),
				Method: "POST", Path: path, PromptTokens: prompt, CachedTokens: &cached})
			continue
		}
		x := formats.Exchange{TsUnixNs: ts.UnixNano(), Status: 200, Complete: true, DurationNs: int64(time.Second),
			Method: "POST", Path: path, PromptTokens: prompt, CachedTokens: &cached}
		if i%10 == 9 {
			x.CachedTokens = nil // this server did not say: left out of the sums
		}
		a.AddExchange(&x)
	}
	return a
}

func TestCacheReuseSummary(t *testing.T) {
	s := cacheRun(t, 1, 1000, 0.3, false).Summary()
	c := s.Cache
	if c.Requests != 900 || c.Reuse < 0.27 || c.Reuse > 0.33 || c.StdErr <= 0 || c.StdErr > 0.02 {
		t.Fatalf("run reuse %+v: want 900 reporting requests, reuse ≈ 0.30 with a small error", c)
	}
	if want := float64(c.CachedTokens) / float64(c.PromptTokens); c.Reuse != want {
		t.Errorf("reuse %v is not Σcached ÷ Σprompt %v", c.Reuse, want)
	}
	var perRoute, perFrame int64
	for _, g := range s.Routes {
		perRoute += g.Cache.CachedTokens
	}
	for _, f := range s.Frames {
		perFrame += f.Cache.CachedTokens
	}
	if len(s.Routes) != 2 || perRoute != c.CachedTokens || perFrame != c.CachedTokens {
		t.Errorf("routes %d, Σ per route %d, Σ per frame %d, run %d", len(s.Routes), perRoute, perFrame, c.CachedTokens)
	}
	var out bytes.Buffer
	if err := s.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"prefix-cache reuse (server's cached_tokens): ", "900 of 1000 requests reporting",
		"tpot p50  cache", "SLO  cache"} { // the route and frame tables gain a cache column
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	// A recording without cached_tokens says nothing about the cache.
	none := New(Options{})
	none.AddExchange(&formats.Exchange{TsUnixNs: 1, Status: 200, Complete: true, PromptTokens: 10})
	if s := none.Summary(); s.Cache.Requests != 0 {
		t.Errorf("no reports gave %+v", s.Cache)
	}
}

func TestCompareCacheReuse(t *testing.T) {
	prod := cacheRun(t, 1, 2000, 0.3, false)
	tests := []struct {
		name    string
		shadow  *Analyzer
		verdict string
		trips   bool
	}{
		{"reproduced", cacheRun(t, 2, 2000, 0.3, true), "reproduced", false},
		{"lost reuse", cacheRun(t, 3, 2000, 0.2, true), "differs", true},
		{"too few to tell", cacheRun(t, 4, 20, 0.3, true), "inconclusive", false},
	}
	rules, err := ParseRules("cache_reuse<-5%")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Compare(prod, tt.shadow, CompareOptions{Seed: 1})
			if v := c.CacheVerdict(); v != tt.verdict {
				d, _ := c.Metric("cache_reuse")
				t.Fatalf("verdict %q, want %q (delta %+v)", v, tt.verdict, d)
			}
			if v := c.Judge(rules); v.Failed != tt.trips || (tt.trips && !v.Regression) {
				t.Errorf("cache_reuse<-5%%: %s", v.Line)
			}
			var out bytes.Buffer
			c.WriteText(&out, "recording", "results")
			if !strings.Contains(out.String(), "prefix-cache reuse: A ") || !strings.Contains(out.String(), ": "+tt.verdict+" — ") {
				t.Errorf("comparison text lacks the reuse line:\n%s", out.String())
			}
		})
	}
}
