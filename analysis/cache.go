package analysis

import (
	"fmt"
	"math"
)

// CacheReuse is prefix-cache reuse as the server reported it per request
// (the cached_tokens column): Reuse = Σ cached ÷ Σ prompt tokens over the
// requests whose server reported a cached count. Requests that did not say
// are left out of both sums (Requests counts those that did), so a server
// that never reports gives Requests 0, not a reuse of 0.
type CacheReuse struct {
	Requests     int64   `json:"requests"`      // requests with cached_tokens reported and a prompt length
	PromptTokens int64   `json:"prompt_tokens"` // Σ prompt tokens of those requests
	CachedTokens int64   `json:"cached_tokens"` // Σ cached tokens of those requests
	Reuse        float64 `json:"reuse"`         // CachedTokens ÷ PromptTokens; 0 when PromptTokens is 0
	// StdErr is Reuse's standard error as a ratio estimator (delta method
	// over requests). It treats requests as independent, which reuse is
	// not quite (a request's hits depend on what came before); read its
	// intervals as a guide to the noise, not an exact coverage.
	StdErr float64 `json:"std_err"`
}

// cacheAcc accumulates CacheReuse in constant memory: the sums and the
// second moments the standard error needs.
type cacheAcc struct {
	n                       int64
	cached, prompt          float64
	cachedSq, promptSq, dot float64
}

// add counts one request: cached is -1 when the server did not say.
func (c *cacheAcc) add(cached, prompt int32) {
	if cached < 0 || prompt <= 0 {
		return
	}
	x, y := float64(cached), float64(prompt)
	c.n++
	c.cached += x
	c.prompt += y
	c.cachedSq += x * x
	c.promptSq += y * y
	c.dot += x * y
}

func (c *cacheAcc) merge(o *cacheAcc) {
	c.n += o.n
	c.cached += o.cached
	c.prompt += o.prompt
	c.cachedSq += o.cachedSq
	c.promptSq += o.promptSq
	c.dot += o.dot
}

func (c *cacheAcc) reuse() CacheReuse {
	r := CacheReuse{Requests: c.n, PromptTokens: int64(c.prompt), CachedTokens: int64(c.cached)}
	if c.prompt <= 0 {
		return r
	}
	r.Reuse = c.cached / c.prompt
	if c.n > 1 {
		// Var(R) ≈ Σ(cᵢ − R·pᵢ)² / (n(n−1)·p̄²), p̄ = Σp/n.
		resid := c.cachedSq - 2*r.Reuse*c.dot + r.Reuse*r.Reuse*c.promptSq
		n := float64(c.n)
		mean := c.prompt / n
		r.StdErr = math.Sqrt(max(resid, 0)/(n*(n-1))) / mean
	}
	return r
}

// cacheReuseDelta compares two runs' reuse: B − A with a normal interval
// from both standard errors. ok is false when either run has no report.
func cacheReuseDelta(a, b CacheReuse, confidence float64) (Delta, bool) {
	if a.Requests == 0 || b.Requests == 0 {
		return Delta{}, false
	}
	d := newDelta("cache_reuse", "ratio", a.Reuse, b.Reuse)
	d.NA, d.NB = a.Requests, b.Requests
	if a.Requests > 1 && b.Requests > 1 {
		z := normalQuantile(0.5 + confidence/2)
		se := math.Hypot(a.StdErr, b.StdErr)
		d.CILow, d.CIHigh, d.HasCI = d.Abs-z*se, d.Abs+z*se, true
		d.Significant = d.CILow > 0 || d.CIHigh < 0
	}
	return d, true
}

// ReproducedWithin is how close, relative to A's reuse, B's must be at the
// comparison's confidence for CacheVerdict to call it reproduced.
const ReproducedWithin = 0.05

// CacheLine is the comparison's one-line account of prefix-cache reuse,
// "" when either side reported no cached tokens.
func (c *Comparison) CacheLine() string {
	v := c.CacheVerdict()
	if v == "" {
		return ""
	}
	d, _ := c.Metric("cache_reuse")
	why := map[string]string{
		"reproduced":   fmt.Sprintf("the interval lies within ±%.0f%% of A's reuse", 100*ReproducedWithin),
		"differs":      "the interval excludes 0",
		"inconclusive": fmt.Sprintf("the interval includes 0 but is wider than ±%.0f%% of A's reuse", 100*ReproducedWithin),
	}[v]
	pt := func(x float64) string { return fmt.Sprintf("%+.2f pt", 100*x) }
	return fmt.Sprintf("prefix-cache reuse: A %s, B %s (Δ %s, %s; %.0f%% CI of Δ [%s, %s]): %s — %s",
		pct2(d.A), pct2(d.B), pt(d.Abs), fmtChange(d), 100*c.Confidence, pt(d.CILow), pt(d.CIHigh), v, why)
}

// CacheVerdict says whether B (a replay) reproduced A's (production's)
// prefix-cache reuse: "reproduced" when the whole interval of the change
// lies within ±ReproducedWithin of A's reuse, "differs" when it excludes 0,
// "inconclusive" otherwise; "" when either side reported no cached tokens.
func (c *Comparison) CacheVerdict() string {
	d, ok := c.Metric("cache_reuse")
	if !ok || !d.HasCI {
		return ""
	}
	tol := ReproducedWithin * d.A
	switch {
	case d.A > 0 && d.CILow >= -tol && d.CIHigh <= tol:
		return "reproduced"
	case d.Significant:
		return "differs"
	}
	return "inconclusive"
}
