package main

// Typed flag values shared by every subcommand (vegeta's flags.go): a flag
// means the same thing wherever it appears because one pflag.Value parses
// it, and its default comes from the library constant it stands for.
//
// Repeatable list flags (--context-header, --forward-header, --header,
// --path, --model, …) ADD to their defaults; an empty value clears the list
// so far, defaults included: `--forward-header '' --forward-header
// Content-Type` replays Content-Type alone.

import (
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/replayer"
)

// sizeValue is a byte count with human parsing: 1048576, 512KiB, 128MiB,
// 1.5GiB (powers of 1024), 500KB, 2MB (powers of 1000), 64k, 16M, 1.5G
// (a bare K/M/G/T is binary).
type sizeValue struct{ p *int64 }

func newSizeValue(def int64, p *int64) sizeValue {
	*p = def
	return sizeValue{p}
}

var sizeRE = regexp.MustCompile(`(?i)^(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?$`)

// parseSize parses a human byte count (see sizeValue).
func parseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("size %q: want bytes like 1048576, 512KiB or 128MiB", s)
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	unit := strings.ToUpper(m[2])
	mult := 1.0
	if unit != "" && unit != "B" {
		base := 1024.0
		if strings.HasSuffix(unit, "B") && !strings.Contains(unit, "I") {
			base = 1000 // KB, MB: SI
		}
		exp := strings.IndexByte("KMGT", unit[0]) + 1
		mult = math.Pow(base, float64(exp))
	}
	v := n * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int64(v), nil
}

// formatSize writes n the shortest exact way: 128MiB, 1000, 0.
func formatSize(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func (v sizeValue) String() string {
	if v.p == nil {
		return "0"
	}
	return formatSize(*v.p)
}

func (v sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

func (sizeValue) Type() string { return "size" }

// timeValue is an instant: an RFC 3339 time (2026-11-25T14:00:00Z; a time
// without a zone, "2026-11-25T14:00:00" or "2026-11-25 14:00:00", is UTC),
// or a signed duration (+10m, -30s) relative to an anchor the command names
// in the flag's help: --to relative to --from, --start-at relative to now.
type timeValue struct {
	abs time.Time
	rel time.Duration
	set bool
	// relative is true when the flag was given as a duration.
	relative bool
}

var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05"}

// parseTime parses an absolute time in one of the accepted layouts (UTC when
// the zone is missing).
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: want RFC 3339 such as 2026-11-25T14:00:00Z, or a duration such as +10m", s)
}

func (v *timeValue) Set(s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		*v = timeValue{}
		return nil
	}
	if s[0] == '+' || s[0] == '-' {
		if d, err := time.ParseDuration(s); err == nil {
			*v = timeValue{rel: d, set: true, relative: true}
			return nil
		}
	}
	t, err := parseTime(s)
	if err != nil {
		return err
	}
	*v = timeValue{abs: t, set: true}
	return nil
}

func (v *timeValue) String() string {
	switch {
	case !v.set:
		return ""
	case v.relative:
		if v.rel >= 0 {
			return "+" + v.rel.String()
		}
		return v.rel.String()
	}
	return v.abs.Format(time.RFC3339Nano)
}

func (*timeValue) Type() string { return "time" }

// resolve returns the instant, a relative value counted from anchor. A
// relative value without an anchor is an error naming the flag.
func (v *timeValue) resolve(flag string, anchor time.Time, anchorName string) (time.Time, error) {
	switch {
	case !v.set:
		return time.Time{}, nil
	case !v.relative:
		return v.abs, nil
	case anchor.IsZero():
		return time.Time{}, fmt.Errorf("%s %s is relative to %s: give %s too, or an absolute time", flag, v, anchorName, anchorName)
	}
	return anchor.Add(v.rel).UTC(), nil
}

// listValue is a repeatable, comma-separated list that adds to its
// defaults; an empty value clears it (defaults included). fold drops
// entries equal to an earlier one ignoring case (header names).
type listValue struct {
	p    *[]string
	fold bool
}

func newListValue(def []string, p *[]string, fold bool) *listValue {
	*p = append([]string(nil), def...)
	return &listValue{p: p, fold: fold}
}

func (v *listValue) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		*v.p = nil
		return nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		dup := false
		for _, have := range *v.p {
			if have == item || (v.fold && strings.EqualFold(have, item)) {
				dup = true
				break
			}
		}
		if !dup {
			*v.p = append(*v.p, item)
		}
	}
	return nil
}

func (v *listValue) String() string { return strings.Join(*v.p, ",") }
func (*listValue) Type() string     { return "list" }

// headerValue is a repeatable 'Name: value' header for the target, added to
// what is there; an empty value clears the list. A value may contain
// commas, so each use is one header.
type headerValue struct{ h http.Header }

func newHeaderValue(h http.Header) *headerValue { return &headerValue{h: h} }

// parseHeader parses 'Name: value'.
func parseHeader(s string) (name, value string, err error) {
	k, val, ok := strings.Cut(s, ":")
	if !ok || strings.TrimSpace(k) == "" || strings.ContainsAny(strings.TrimSpace(k), " \t") {
		return "", "", fmt.Errorf("header %q: want 'Name: value'", s)
	}
	return http.CanonicalHeaderKey(strings.TrimSpace(k)), strings.TrimSpace(val), nil
}

func (v *headerValue) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		clear(v.h)
		return nil
	}
	k, val, err := parseHeader(s)
	if err != nil {
		return err
	}
	v.h.Add(k, val)
	return nil
}

func (v *headerValue) String() string {
	var parts []string
	for k, vs := range v.h {
		for _, s := range vs {
			parts = append(parts, k+": "+s)
		}
	}
	return strings.Join(parts, ", ")
}

func (*headerValue) Type() string { return "header" }

// promptRangeValue is --prompt-tokens MIN:MAX, parsed by the analysis
// filter that applies it (one parser, one rule for unknown lengths).
type promptRangeValue struct{ f *analysis.Filter }

func (v promptRangeValue) Set(s string) error {
	if err := v.f.ParsePromptRange(s); err != nil {
		return err
	}
	return nil
}

func (v promptRangeValue) String() string {
	if v.f == nil || (v.f.MinPromptTokens <= 0 && v.f.MaxPromptTokens <= 0) {
		return ""
	}
	var lo, hi string
	if v.f.MinPromptTokens > 0 {
		lo = strconv.Itoa(int(v.f.MinPromptTokens))
	}
	if v.f.MaxPromptTokens > 0 {
		hi = strconv.Itoa(int(v.f.MaxPromptTokens))
	}
	return lo + ":" + hi
}

func (promptRangeValue) Type() string { return "MIN:MAX" }

// registerRequestFilter adds --path, --model and --prompt-tokens, the
// request filter record, replay, stats, report and compare share, to fs;
// verb starts each help text ("replay only", "only").
func registerRequestFilter(fs *pflag.FlagSet, f *analysis.Filter, verb string) {
	fs.Var(newListValue(nil, &f.Paths, false), "path", verb+" requests whose path matches: a prefix (/v1/chat/), or a glob with * ? [ (/v1/*/completions) (repeatable or comma-separated)")
	fs.Var(newListValue(nil, &f.Models, false), "model", verb+" requests for these models, exactly (repeatable or comma-separated)")
	fs.Var(promptRangeValue{f}, "prompt-tokens", verb+" requests of MIN:MAX prompt tokens, inclusive, either end optional (:2999 short, 3000: long); requests of unknown prompt length are left out")
}

// floatListValue is a comma-separated list of positive numbers (--speed).
type floatListValue struct{ p *[]float64 }

func newFloatListValue(def []float64, p *[]float64) floatListValue {
	*p = append([]float64(nil), def...)
	return floatListValue{p}
}

func (v floatListValue) Set(s string) error {
	var out []float64
	for _, item := range strings.Split(s, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(item), 64)
		if err != nil || f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("%q: want positive numbers, e.g. 2 or 1,1.5,2", s)
		}
		out = append(out, f)
	}
	*v.p = out
	return nil
}

func (v floatListValue) String() string {
	parts := make([]string, len(*v.p))
	for i, f := range *v.p {
		parts[i] = strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (floatListValue) Type() string { return "numbers" }

// boundsValue is a comma-separated ascending list of positive token counts
// (--buckets).
type boundsValue struct{ p *[]int32 }

func newBoundsValue(def []int32, p *[]int32) boundsValue {
	*p = def
	return boundsValue{p}
}

func (v boundsValue) Set(s string) error {
	var out []int32
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		n, err := strconv.ParseInt(item, 10, 32)
		if err != nil || n <= 0 || (len(out) > 0 && int32(n) <= out[len(out)-1]) {
			return fmt.Errorf("%q: want ascending positive token counts, e.g. 512,2048,8192", s)
		}
		out = append(out, int32(n))
	}
	if len(out) == 0 {
		return fmt.Errorf("%q: give at least one bound", s)
	}
	*v.p = out
	return nil
}

func (v boundsValue) String() string {
	parts := make([]string, len(*v.p))
	for i, n := range *v.p {
		parts[i] = strconv.Itoa(int(n))
	}
	return strings.Join(parts, ",")
}

func (boundsValue) Type() string { return "tokens" }

// sloValue is --slo ttft=300ms,tpot=50ms,e2e=5s.
type sloValue struct {
	p    *analysis.SLO
	text *string
}

func (v sloValue) Set(s string) error {
	slo, err := analysis.ParseSLO(s)
	if err != nil {
		return err
	}
	*v.p, *v.text = slo, s
	return nil
}

func (v sloValue) String() string {
	if v.text == nil {
		return ""
	}
	return *v.text
}
func (sloValue) Type() string { return "slo" }

// shardValue is --shard i/n.
type shardValue struct{ p *replayer.Shard }

func (v shardValue) Set(s string) error {
	sh, err := replayer.ParseShard(s)
	if err != nil {
		return err
	}
	*v.p = sh
	return nil
}

func (v shardValue) String() string {
	if v.p == nil || v.p.Count <= 1 {
		return ""
	}
	return v.p.String()
}
func (shardValue) Type() string { return "i/n" }

// fractionValue is a share in (0, 1] (--sample).
type fractionValue struct{ p *float64 }

func newFractionValue(def float64, p *float64) fractionValue {
	*p = def
	return fractionValue{p}
}

func (v fractionValue) Set(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || !(f > 0 && f <= 1) {
		return fmt.Errorf("%q: want a fraction in (0, 1], e.g. 0.1", s)
	}
	*v.p = f
	return nil
}

func (v fractionValue) String() string { return strconv.FormatFloat(*v.p, 'g', -1, 64) }
func (fractionValue) Type() string     { return "fraction" }

// pinValue is --pin-output (replay): server (the default, pin where the
// recorded output count is the server's), true (every recorded count) or
// false; a bare --pin-output means true.
type pinValue struct{ mode replayer.PinMode }

func (v *pinValue) String() string { return v.mode.String() }
func (v *pinValue) Type() string   { return "server|true|false" }
func (v *pinValue) Set(s string) error {
	m, err := replayer.ParsePinMode(s)
	if err != nil {
		return err
	}
	v.mode = m
	return nil
}

// registerPinOutput adds --pin-output with the library default.
func registerPinOutput(fs *pflag.FlagSet, v *pinValue, usage string) {
	v.mode = replayer.DefaultPinOutput
	fs.Var(v, "pin-output", usage)
	fs.Lookup("pin-output").NoOptDefVal = "true"
}
