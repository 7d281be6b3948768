package analysis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/reelkit/reel/formats"
)

// vLLM's prefix-cache counters (V1 engine): tokens looked up in and found
// in the prefix cache, cumulative since the server started.
const (
	VLLMPrefixCacheQueries = "vllm:prefix_cache_queries_total"
	VLLMPrefixCacheHits    = "vllm:prefix_cache_hits_total"
)

// EngineCacheReuse is the engine's own prefix-cache reuse over a run, from
// the increase of its cumulative counters between the run's first and
// last scrape (a drop is a restart: the increase is the new value), summed
// over the scraped endpoints. vLLM counts tokens recomputed after a
// preemption as hits, so under KV pressure this reads higher than the
// reuse clients see in cached_tokens.
type EngineCacheReuse struct {
	Hits    float64 `json:"hits"`    // increase of vllm:prefix_cache_hits_total
	Queries float64 `json:"queries"` // increase of vllm:prefix_cache_queries_total
	Reuse   float64 `json:"reuse"`   // Hits ÷ Queries
	Sources int     `json:"sources"` // endpoints that exposed both counters
}

// loadEngineCache reads the prefix-cache counters from the metrics
// datasets; nil when no endpoint exposed both or nothing was queried.
func loadEngineCache(ctx context.Context, dirs []string, ro formats.ReaderOptions) (*EngineCacheReuse, error) {
	r, err := formats.OpenReader[formats.Metric](ctx, dirs, formats.ReaderOptions{SkipBad: ro.SkipBad, Warn: ro.Warn})
	if err != nil {
		return nil, fmt.Errorf("open metrics: %w", err)
	}
	defer r.Close()
	// Per endpoint and counter: the value of each scrape, label sets summed.
	scrapes := map[seriesKey]map[int64]float64{}
	for i := 0; ; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read metrics: %w", err)
		}
		if (m.Name != VLLMPrefixCacheHits && m.Name != VLLMPrefixCacheQueries) || math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
			continue
		}
		k := seriesKey{m.Name, m.Source}
		if scrapes[k] == nil {
			scrapes[k] = map[int64]float64{}
		}
		scrapes[k][m.TsUnixNs] += m.Value
	}
	increase := map[seriesKey]float64{}
	for k, byTs := range scrapes {
		pts := make([]point, 0, len(byTs))
		for ns, v := range byTs {
			pts = append(pts, point{ns, v})
		}
		slices.SortFunc(pts, func(a, b point) int { return cmpInt(a.ns, b.ns) })
		increase[k] = counterIncrease(pts)
	}
	e := &EngineCacheReuse{}
	for k, q := range increase {
		if k.name != VLLMPrefixCacheQueries {
			continue
		}
		h, ok := increase[seriesKey{VLLMPrefixCacheHits, k.source}]
		if !ok {
			continue
		}
		e.Hits += h
		e.Queries += q
		e.Sources++
	}
	if e.Sources == 0 || e.Queries <= 0 {
		return nil, nil
	}
	e.Reuse = e.Hits / e.Queries
	return e, nil
}

// line is the report's account of the engine's reuse.
func (e *EngineCacheReuse) line() string {
	return fmt.Sprintf("engine prefix-cache reuse (%s ÷ %s, increase over the run, %d endpoint(s)): %s (%.0f of %.0f tokens; vLLM counts tokens recomputed after preemption as hits)",
		VLLMPrefixCacheHits, VLLMPrefixCacheQueries, e.Sources, pct2(e.Reuse), e.Hits, e.Queries)
}

// counterIncrease is how much a cumulative counter grew over its points (in
// time order); a drop is a counter reset, after which the new value is the
// increase.
func counterIncrease(pts []point) float64 {
	var inc float64
	for i := 1; i < len(pts); i++ {
		if d := pts[i].v - pts[i-1].v; d >= 0 {
			inc += d
		} else {
			inc += pts[i].v
		}
	}
	return inc
}
