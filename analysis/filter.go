package analysis

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultFrame is the frame (window) length when Options.Frame is zero: the
// "every 5 s window" of SLO checks. The replayer and every subcommand's
// --frame read it.
const DefaultFrame = 5 * time.Second

// DefaultWindowQuantile is the quantile each frame must keep within the SLO
// when Options.WindowQuantile is zero.
const DefaultWindowQuantile = 0.95

// DefaultLengthBuckets returns the prompt-length bucket bounds used when
// Options.LengthBuckets is empty: short < 512 ≤ medium < 2048 ≤ long < 8192
// ≤ very long. The caller owns the slice.
func DefaultLengthBuckets() []int32 { return []int32{512, 2048, 8192} }

// Filter selects requests by workload: path, model and prompt length. It is
// the one request filter of reel: record, replay, stats, report and compare
// read --path, --model and --prompt-tokens into it (the replayer's
// Selection matches through MatchRequest), so a flag selects the same
// requests everywhere. Requests it leaves out count in Summary.Filtered and
// nowhere else; frames keep their alignment (they are named by original
// time either way).
type Filter struct {
	// MinPromptTokens and MaxPromptTokens bound prompt tokens, both ends
	// inclusive; 0 leaves that end open. With either set, requests whose
	// prompt length is unknown (0) are left out: a range asks for requests
	// known to be in it.
	MinPromptTokens, MaxPromptTokens int32
	// Paths keep requests whose path (without query) matches one of them,
	// by the rule of MatchPath; empty keeps all.
	Paths []string
	// Models keep requests whose model is one of these, exactly; empty keeps
	// all.
	Models []string
}

// IsZero reports whether the filter keeps every request.
func (f Filter) IsZero() bool {
	return f.MinPromptTokens <= 0 && f.MaxPromptTokens <= 0 && len(f.Paths) == 0 && len(f.Models) == 0
}

// String describes the filter, e.g. "prompt tokens 0–2999, model llama-3-8b";
// empty for the zero filter.
func (f Filter) String() string {
	var parts []string
	switch lo, hi := f.MinPromptTokens, f.MaxPromptTokens; {
	case lo > 0 && hi > 0:
		parts = append(parts, fmt.Sprintf("prompt tokens %d–%d", lo, hi))
	case lo > 0:
		parts = append(parts, fmt.Sprintf("prompt tokens ≥ %d", lo))
	case hi > 0:
		parts = append(parts, fmt.Sprintf("prompt tokens ≤ %d", hi))
	}
	if len(f.Paths) > 0 {
		parts = append(parts, "path "+strings.Join(f.Paths, " or "))
	}
	if len(f.Models) > 0 {
		parts = append(parts, "model "+strings.Join(f.Models, " or "))
	}
	return strings.Join(parts, ", ")
}

// MatchRequest reports whether a request to urlPath (without query) for
// model with promptTokens (0: unknown) passes the filter.
func (f *Filter) MatchRequest(urlPath, model string, promptTokens int32) bool {
	if !PromptInRange(promptTokens, f.MinPromptTokens, f.MaxPromptTokens) {
		return false
	}
	if len(f.Paths) > 0 && !MatchPath(f.Paths, urlPath) {
		return false
	}
	return len(f.Models) == 0 || slices.Contains(f.Models, model)
}

// PromptInRange is the prompt-length rule: with no bound (both 0) every
// request passes; with a bound, a request of unknown length (≤ 0) never
// does.
func PromptInRange(promptTokens, lo, hi int32) bool {
	if lo <= 0 && hi <= 0 {
		return true
	}
	return promptTokens > 0 && (lo <= 0 || promptTokens >= lo) && (hi <= 0 || promptTokens <= hi)
}

// MatchPath is the --path rule: a pattern with glob characters (* ? [) is a
// path.Match pattern ("/v1/*/completions"), anything else a prefix
// ("/v1/chat/"; a whole path is its own prefix). A path passes when any
// pattern matches; an empty list matches nothing.
func MatchPath(patterns []string, urlPath string) bool {
	for _, p := range patterns {
		if strings.ContainsAny(p, "*?[") {
			if ok, _ := path.Match(p, urlPath); ok {
				return true
			}
		} else if strings.HasPrefix(urlPath, p) {
			return true
		}
	}
	return false
}

// keeps reports whether the filter keeps an observation.
func (f *Filter) keeps(o *observation) bool {
	return f.MatchRequest(o.path, o.model, o.promptTokens)
}

// ParsePromptRange parses a prompt-token range "MIN:MAX" (inclusive; either
// end may be empty, e.g. ":2999" or "3000:") into f's bounds.
func (f *Filter) ParsePromptRange(s string) error {
	lo, hi, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return fmt.Errorf("parse prompt-token range %q: want MIN:MAX, either end optional (e.g. :2999 or 3000:)", s)
	}
	var bounds [2]int32
	for i, v := range []string{lo, hi} {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n <= 0 {
			return fmt.Errorf("parse prompt-token range %q: %q is not a positive token count", s, v)
		}
		bounds[i] = int32(n)
	}
	if bounds[0] == 0 && bounds[1] == 0 {
		return fmt.Errorf("parse prompt-token range %q: give MIN, MAX or both", s)
	}
	if bounds[0] > 0 && bounds[1] > 0 && bounds[0] > bounds[1] {
		return fmt.Errorf("parse prompt-token range %q: MIN above MAX", s)
	}
	f.MinPromptTokens, f.MaxPromptTokens = bounds[0], bounds[1]
	return nil
}
