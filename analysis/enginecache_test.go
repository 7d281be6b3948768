package analysis

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// TestEngineCacheReuse: the engine's reuse is the increase of its
// cumulative counters over the run (not their values, which include what
// the server did before), summed over endpoints, across a restart.
func TestEngineCacheReuse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTailRecording(t, dir)
	var ms []formats.Metric
	other := func(m formats.Metric) formats.Metric { m.Source = "http://sim-2/metrics"; return m }
	for k := range 11 { // every second over the 10-s recording
		at := sigT0.Add(time.Duration(k) * time.Second)
		// Endpoint 1 had served 1e6 tokens before the run; 1000 queried and
		// 250 hit per second, restarted at k=6 (counters back to one
		// second's worth).
		q, h := 1e6+1000*float64(k), 5e5+250*float64(k)
		if k >= 6 {
			q, h = 1000*float64(k-5), 250*float64(k-5)
		}
		ms = append(ms, metric(at, VLLMPrefixCacheQueries, q, map[string]string{"model_name": "m"}),
			metric(at, VLLMPrefixCacheHits, h, map[string]string{"model_name": "m"}),
			// Endpoint 2: 500 queried, 400 hit per second.
			other(metric(at, VLLMPrefixCacheQueries, 500*float64(k), nil)),
			other(metric(at, VLLMPrefixCacheHits, 400*float64(k), nil)))
	}
	writeRows(t, formats.MetricsDir(dir), ms)
	s, sig := loadFor(t, dir, nil)
	e := sig.EngineCache
	if e == nil {
		t.Fatal("no engine cache reuse")
	}
	// Endpoint 1: 10 intervals of 1000/250; endpoint 2: 10 of 500/400.
	if e.Sources != 2 || e.Queries != 15000 || e.Hits != 6500 || e.Reuse != 6500.0/15000 {
		t.Errorf("engine cache %+v, want 6500 hits of 15000 queries from 2 endpoints", *e)
	}
	s.Signals = sig
	var out bytes.Buffer
	if err := s.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "engine prefix-cache reuse (vllm:prefix_cache_hits_total ÷ vllm:prefix_cache_queries_total, increase over the run, 2 endpoint(s)): 43.33%") {
		t.Errorf("report lacks the engine's reuse:\n%s", out.String())
	}
}
