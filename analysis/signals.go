package analysis

// Server-side signals: Prometheus samples scraped beside a recording or a
// replay (metrics/1, in DIR.metrics beside the dataset), aligned with the frames of the
// client-side analysis, and correlated with the per-frame tail.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/reelkit/reel/formats"
)

// DefaultSeries are the server-side series analysed when none are chosen:
// vLLM's queue, batch and KV-cache gauges (both KV names vLLM has used),
// SGLang's equivalents, and DCGM's GPU and SM utilisation.
var DefaultSeries = []string{
	"vllm:num_requests_waiting",
	"vllm:num_requests_running",
	"vllm:gpu_cache_usage_perc",
	"vllm:kv_cache_usage_perc",
	"sglang:num_queue_reqs",
	"sglang:num_running_reqs",
	"sglang:token_usage",
	"DCGM_FI_DEV_GPU_UTIL",
	"DCGM_FI_PROF_SM_ACTIVE",
}

// SignalOptions configure LoadSignals. The zero value works.
type SignalOptions struct {
	// Series are the metric names to analyse (default DefaultSeries). A
	// counter (a name ending in _total, _count or _sum) is analysed as its
	// per-second rate.
	Series []string
	// Reader's SkipBad and Warn apply to the metrics files; its From and To
	// bound the result rows the replay clock is built from.
	Reader formats.ReaderOptions
}

// Signals are the server-side series of a run, per frame of its Summary.
type Signals struct {
	Sources []string `json:"sources"` // scraped endpoints
	Samples int64    `json:"samples"` // rows of the analysed series read
	// Outside counts points whose time falls in no listed frame (before the
	// first request, after the last, or in an excluded span).
	Outside int64 `json:"outside_frames"`
	// Clock says how sample times were put on the frames' timeline:
	// "recording" (scrape time is the recording's time) or "replay" (scrape
	// time mapped to the original time being replayed then, through the
	// results' schedule: sent − lag ↔ orig_ts).
	Clock  string         `json:"clock"`
	Series []SignalSeries `json:"series"` // one per analysed series with points in the frames
	// Mover is the series whose per-frame mean correlates best with the
	// per-frame E2E p99 (r ≥ 0.5), empty when none does; MoverR is its r.
	Mover       string  `json:"mover"`
	MoverR      float64 `json:"mover_r"`
	Explanation string  `json:"explanation"` // the one-line server-side verdict
	// EngineCache is the engine's prefix-cache reuse over the run, from
	// its counters (vLLM); nil when none was scraped.
	EngineCache *EngineCacheReuse `json:"engine_cache,omitempty"`
}

// SignalSeries is one series per frame, with its correlation with the tail.
type SignalSeries struct {
	Name  string  `json:"name"`  // metric name (a counter's, when Rate)
	Label string  `json:"label"` // what it measures, e.g. "waiting queue"
	Rate  bool    `json:"rate"`  // per-second rate of a counter
	Mean  float64 `json:"mean"`  // over every point in a frame
	Max   float64 `json:"max"`   // over every point in the run's frames
	// Frames has one entry per Summary.Frames entry, in the same order.
	Frames []SignalFrame `json:"frames"`
	// P99 and TTFTP99 correlate the per-frame mean with the per-frame E2E
	// p99 and TTFT p99 (Pearson, over frames with enough requests and at
	// least one point).
	P99     Correlation `json:"corr_p99"`
	TTFTP99 Correlation `json:"corr_ttft_p99"`
}

// SignalFrame is one series in one frame.
type SignalFrame struct {
	Start time.Time `json:"start"` // the frame's start, as in Summary.Frames
	N     int       `json:"n"`     // points (scrapes, or rate intervals) in the frame
	Mean  float64   `json:"mean"`  // 0 when N is 0
	Max   float64   `json:"max"`   // 0 when N is 0
}

// MetricsPaths returns the metrics datasets kept beside datasets (see
// formats.MetricsDir) for paths that are directories or globs of
// directories. A speed partition of a sweep (RUN/speed=2) keeps its metrics
// in the run's metrics directory (RUN.metrics/speed=2).
func MetricsPaths(paths []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range paths {
		matches := []string{p}
		if strings.ContainsAny(p, "*?[") {
			matches, _ = filepath.Glob(p)
		}
		for _, m := range matches {
			m = filepath.Clean(m)
			for _, dir := range []string{formats.MetricsDir(m), filepath.Join(formats.MetricsDir(filepath.Dir(m)), filepath.Base(m))} {
				if st, err := os.Stat(dir); err == nil && st.IsDir() && !seen[dir] {
					seen[dir] = true
					out = append(out, dir)
					break
				}
			}
		}
	}
	return out
}

// point is one value of a series at a wall-clock time.
type point struct {
	ns int64
	v  float64
}

// LoadSignals reads the metrics kept beside paths (see MetricsPaths) and
// aligns them with s's frames; s must come from the same paths. It returns
// nil and no error when there are no metrics.
func LoadSignals(ctx context.Context, paths []string, s *Summary, opt SignalOptions) (*Signals, error) {
	dirs := MetricsPaths(paths)
	if len(dirs) == 0 || s == nil {
		return nil, nil
	}
	if files, err := formats.ListFiles(dirs); err != nil || len(files) == 0 {
		return nil, err
	}
	series := opt.Series
	if len(series) == 0 {
		series = DefaultSeries
	}
	kind, err := DatasetKind(paths)
	if err != nil {
		return nil, err
	}
	clock := identityClock
	sig := &Signals{Clock: "recording", Sources: []string{}, Series: []SignalSeries{}}
	if kind == KindResult {
		c, err := replayClock(ctx, paths, opt.Reader)
		if err != nil {
			return nil, err
		}
		clock, sig.Clock = c, "replay"
	}
	raw, sources, n, err := readSeries(ctx, dirs, series, opt.Reader)
	if err != nil {
		return nil, err
	}
	sig.Samples, sig.Sources = n, sources
	if sig.EngineCache, err = loadEngineCache(ctx, dirs, opt.Reader); err != nil {
		return nil, err
	}
	sig.align(s, series, raw, clock)
	sig.explain(s)
	return sig, nil
}

// seriesKey is one series from one endpoint.
type seriesKey struct{ name, source string }

// readSeries reads the wanted series, combining the label sets of one scrape
// into one point (summed, or averaged for ratios and utilisations).
func readSeries(ctx context.Context, dirs, names []string, ro formats.ReaderOptions) (map[seriesKey][]point, []string, int64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	r, err := formats.OpenReader[formats.Metric](ctx, dirs, formats.ReaderOptions{SkipBad: ro.SkipBad, Warn: ro.Warn})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open metrics: %w", err)
	}
	defer r.Close()
	type acc struct {
		sum float64
		n   int
	}
	scrapes := map[seriesKey]map[int64]*acc{}
	sources := map[string]bool{}
	var rows int64
	for i := 0; ; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, nil, 0, ctx.Err()
		}
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, 0, fmt.Errorf("read metrics: %w", err)
		}
		sources[m.Source] = true
		if !want[m.Name] || math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
			continue
		}
		rows++
		k := seriesKey{m.Name, m.Source}
		byTs := scrapes[k]
		if byTs == nil {
			byTs = map[int64]*acc{}
			scrapes[k] = byTs
		}
		a := byTs[m.TsUnixNs]
		if a == nil {
			a = &acc{}
			byTs[m.TsUnixNs] = a
		}
		a.sum += m.Value
		a.n++
	}
	out := map[seriesKey][]point{}
	for k, byTs := range scrapes {
		pts := make([]point, 0, len(byTs))
		avg := averaged(k.name)
		for ns, a := range byTs {
			v := a.sum
			if avg {
				v /= float64(a.n)
			}
			pts = append(pts, point{ns, v})
		}
		slices.SortFunc(pts, func(a, b point) int { return cmpInt(a.ns, b.ns) })
		if isCounter(k.name) {
			pts = rates(pts)
		}
		out[k] = pts
	}
	list := make([]string, 0, len(sources))
	for s := range sources {
		list = append(list, s)
	}
	sort.Strings(list)
	return out, list, rows, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// isCounter tells counters (analysed as rates) by the Prometheus naming
// conventions: metrics/1 keeps no type column.
func isCounter(name string) bool {
	return strings.HasSuffix(name, "_total") || strings.HasSuffix(name, "_count") || strings.HasSuffix(name, "_sum")
}

// averaged tells ratio-like gauges, whose label sets (GPUs, models) are
// averaged rather than summed.
func averaged(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"perc", "usage", "util", "ratio", "active", "fraction", "temp"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// rates turns counter points into per-second rates, each at the end of its
// interval; a drop is a counter reset (the increase is the new value).
func rates(pts []point) []point {
	out := make([]point, 0, len(pts))
	for i := 1; i < len(pts); i++ {
		dt := float64(pts[i].ns-pts[i-1].ns) / 1e9
		if dt <= 0 {
			continue
		}
		inc := pts[i].v - pts[i-1].v
		if inc < 0 {
			inc = pts[i].v
		}
		out = append(out, point{pts[i].ns, inc / dt})
	}
	return out
}

// A clock maps a sample's wall-clock time to the frames' timeline.
type clockFunc func(ns int64) int64

func identityClock(ns int64) int64 { return ns }

// replayClock maps wall-clock time during a replay to the original time
// being replayed then, from the results' schedule: each result was due at
// sent − lag (wall clock) for its orig_ts. Between anchors the map is linear;
// before the first and after the last it continues at the run's speed.
func replayClock(ctx context.Context, paths []string, ro formats.ReaderOptions) (clockFunc, error) {
	r, err := formats.OpenReader[formats.Result](ctx, paths, ro)
	if err != nil {
		return nil, fmt.Errorf("open results: %w", err)
	}
	defer r.Close()
	var anchors []point // ns: scheduled wall time, v unused; orig kept in origs
	var origs []int64
	var lastOrig int64
	for i := 0; ; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		res, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read results: %w", err)
		}
		orig := res.OrigTs.UnixNano()
		if res.SentUnixNs == 0 || (len(origs) > 0 && orig >= lastOrig && orig-lastOrig < int64(time.Millisecond)) {
			continue // thinned to about one anchor per ms of original time
		}
		lastOrig = orig
		anchors = append(anchors, point{ns: res.SentUnixNs - res.LagNs, v: float64(len(origs))})
		origs = append(origs, orig)
	}
	if len(anchors) == 0 {
		return identityClock, nil
	}
	slices.SortStableFunc(anchors, func(a, b point) int { return cmpInt(a.ns, b.ns) })
	wall := make([]int64, len(anchors))
	orig := make([]int64, len(anchors))
	for i, a := range anchors {
		wall[i], orig[i] = a.ns, origs[int(a.v)]
	}
	speed := 1.0
	if n := len(wall) - 1; n > 0 && wall[n] > wall[0] && orig[n] > orig[0] {
		speed = float64(orig[n]-orig[0]) / float64(wall[n]-wall[0])
	}
	return func(ns int64) int64 {
		i := sort.Search(len(wall), func(i int) bool { return wall[i] > ns }) - 1
		switch {
		case i < 0:
			return orig[0] - int64(float64(wall[0]-ns)*speed)
		case i == len(wall)-1 || wall[i+1] == wall[i]:
			return orig[i] + int64(float64(ns-wall[i])*speed)
		}
		f := float64(ns-wall[i]) / float64(wall[i+1]-wall[i])
		return orig[i] + int64(f*float64(orig[i+1]-orig[i]))
	}, nil
}

// align puts every point in the frame its (mapped) time falls in and
// computes the per-frame means and the correlations.
func (sig *Signals) align(s *Summary, names []string, raw map[seriesKey][]point, clock clockFunc) {
	if len(s.Frames) == 0 {
		for _, pts := range raw {
			sig.Outside += int64(len(pts))
		}
		return
	}
	frame := int64(s.Frame)
	origin := s.Frames[0].Start
	index := make(map[int64]int, len(s.Frames))
	for i, f := range s.Frames {
		index[f.Start.UnixNano()] = i
	}
	eligible := eligibleFrames(s.Frames)
	for _, name := range names {
		sum := make([]float64, len(s.Frames))
		ss := SignalSeries{Name: name, Label: signalLabel(name), Rate: isCounter(name), Max: math.Inf(-1),
			Frames: make([]SignalFrame, len(s.Frames))}
		for i, f := range s.Frames {
			ss.Frames[i] = SignalFrame{Start: f.Start, Max: math.Inf(-1)}
		}
		var total float64
		var n int
		for k, pts := range raw {
			if k.name != name {
				continue
			}
			for _, p := range pts {
				start := FrameOf(time.Unix(0, clock(p.ns)), origin, time.Duration(frame)).UnixNano()
				i, ok := index[start]
				if !ok {
					sig.Outside++
					continue
				}
				fr := &ss.Frames[i]
				fr.N++
				sum[i] += p.v
				fr.Max = math.Max(fr.Max, p.v)
				total += p.v
				n++
				ss.Max = math.Max(ss.Max, p.v)
			}
		}
		if n == 0 {
			continue // not exposed by any endpoint: not listed
		}
		ss.Mean = total / float64(n)
		for i := range ss.Frames {
			if fr := &ss.Frames[i]; fr.N > 0 {
				fr.Mean = sum[i] / float64(fr.N)
			} else {
				fr.Max = 0
			}
		}
		ss.P99, ss.TTFTP99 = correlate(name, s, eligible, index, ss.Frames)
		sig.Series = append(sig.Series, ss)
	}
}

// correlate computes Pearson's r of the series' per-frame mean with the
// per-frame E2E p99 and TTFT p99.
func correlate(name string, s *Summary, eligible []*Frame, index map[int64]int, frames []SignalFrame) (p99, ttft Correlation) {
	var xs, ys, tx, ty []float64
	for _, f := range eligible {
		sf := frames[index[f.Start.UnixNano()]]
		if sf.N == 0 {
			continue
		}
		if f.E2E.N > 0 {
			xs, ys = append(xs, sf.Mean), append(ys, float64(f.E2E.P99))
		}
		if f.TTFT.N > 0 {
			tx, ty = append(tx, sf.Mean), append(ty, float64(f.TTFT.P99))
		}
	}
	p99 = Correlation{Signal: name, N: len(xs)}
	p99.R, p99.Valid = pearson(xs, ys)
	ttft = Correlation{Signal: name, N: len(tx)}
	ttft.R, ttft.Valid = pearson(tx, ty)
	return p99, ttft
}

// signalLabel names what a series measures, for the verdict sentence.
func signalLabel(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.Contains(n, "waiting") || strings.Contains(n, "queue"):
		return "waiting-queue depth"
	case strings.Contains(n, "running"):
		return "running batch size"
	case strings.Contains(n, "cache_usage") || strings.Contains(n, "token_usage"):
		return "KV-cache usage"
	case strings.Contains(n, "sm_active"):
		return "SM activity"
	case strings.Contains(n, "gpu_util"):
		return "GPU utilisation"
	case isCounter(n):
		return "rate of " + name
	}
	return name
}

// explain picks the series that moves with the tail and words the verdict.
func (sig *Signals) explain(s *Summary) {
	if len(sig.Series) == 0 {
		sig.Explanation = "server side: none of the analysed series was scraped (see --series)"
		return
	}
	best := -1
	for i, ss := range sig.Series {
		if ss.P99.Valid && ss.P99.R >= causeMinR && (best < 0 || ss.P99.R > sig.Series[best].P99.R) {
			best = i
		}
	}
	if best < 0 {
		strongest := ""
		for _, ss := range sig.Series {
			if ss.P99.Valid && (strongest == "" || math.Abs(ss.P99.R) > math.Abs(sig.MoverR)) {
				strongest, sig.MoverR = ss.Name, ss.P99.R
			}
		}
		sig.Explanation = "server side: no scraped signal moves with the tail"
		if strongest != "" {
			sig.Explanation += fmt.Sprintf(" (strongest: %s, r=%.2f with per-frame p99)", strongest, sig.MoverR)
		}
		sig.MoverR = 0
		return
	}
	ss := sig.Series[best]
	sig.Mover, sig.MoverR = ss.Name, ss.P99.R
	// The frame with the worst tail, and the series there against its median.
	worst, wi := time.Duration(-1), -1
	var means []float64
	for i, f := range s.Frames {
		if ss.Frames[i].N == 0 {
			continue
		}
		means = append(means, ss.Frames[i].Mean)
		if f.E2E.N > 0 && f.E2E.P99 > worst {
			worst, wi = f.E2E.P99, i
		}
	}
	ttft := ""
	if ss.TTFTP99.Valid {
		ttft = fmt.Sprintf(", r=%.2f with TTFT p99", ss.TTFTP99.R)
	}
	sig.Explanation = fmt.Sprintf("server side: %s (%s) moves with the tail: r=%.2f with per-frame p99%s", ss.Label, ss.Name, ss.P99.R, ttft)
	if wi >= 0 {
		sig.Explanation += fmt.Sprintf("; in the worst frame %s (p99 %s) it averages %s vs a median frame's %s",
			s.Frames[wi].Start.UTC().Format("15:04:05"), fmtDur(worst), fmtNum(ss.Frames[wi].Mean), fmtNum(medianOf(means)))
	}
}

func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// WriteText writes the signals: one line per series (mean, max,
// correlations) and the verdict.
func (sig *Signals) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("\nserver-side signals (%d samples from %s; clock: %s", sig.Samples, strings.Join(sig.Sources, ", "), sig.Clock)
	if sig.Outside > 0 {
		ew.printf("; %d points outside the frames", sig.Outside)
	}
	ew.printf("):\n")
	if len(sig.Series) > 0 {
		tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "series\tmean\tmax\tr p99\tr ttft p99\tframes\t")
		for _, ss := range sig.Series {
			name := ss.Name
			if ss.Rate {
				name += " (rate/s)"
			}
			frames := 0
			for _, f := range ss.Frames {
				if f.N > 0 {
					frames++
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t\n", name, fmtNum(ss.Mean), fmtNum(ss.Max), corrText(ss.P99), corrText(ss.TTFTP99), frames)
		}
		tw.Flush()
	}
	if e := sig.EngineCache; e != nil {
		ew.printf("%s\n", e.line())
	}
	ew.printf("%s\n", sig.Explanation)
	return ew.err
}

func corrText(c Correlation) string {
	if !c.Valid {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", c.R)
}

// writeCompareSignals writes each side's server-side verdict.
func writeCompareSignals(w io.Writer, c *Comparison) {
	for _, side := range []struct {
		name string
		s    *Summary
	}{{"A", c.A}, {"B", c.B}} {
		if side.s != nil && side.s.Signals != nil {
			fmt.Fprintf(w, "\n%s %s", side.name, side.s.Signals.Explanation)
			if e := side.s.Signals.EngineCache; e != nil {
				fmt.Fprintf(w, "\n%s %s", side.name, e.line())
			}
		}
	}
	if (c.A != nil && c.A.Signals != nil) || (c.B != nil && c.B.Signals != nil) {
		fmt.Fprintln(w)
	}
}
