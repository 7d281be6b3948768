// Package scrape samples Prometheus endpoints (vLLM's and SGLang's /metrics,
// NVIDIA's DCGM exporter, the simulated cluster) on the run's wall clock and
// hands every sample to a sink as a metrics/1 row (formats.Metric), so
// server-side state lands on the same timeline as the traffic beside it.
//
// A scraper never slows the traffic it runs beside: each endpoint has its own
// goroutine, each scrape its own timeout, and samples reach the sink through
// a bounded queue that drops (and counts) rather than blocks. Failures are
// counted per endpoint and reason.
package scrape

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/redact"
)

// Sink receives samples from one goroutine; *formats.Writer[formats.Metric]
// is one.
type Sink interface {
	Write(*formats.Metric) error
}

// Defaults of Options, used where a field is zero.
const (
	DefaultEvery      = time.Second
	DefaultMaxTimeout = 10 * time.Second
	DefaultMaxBytes   = 16 << 20
	DefaultMaxSamples = 100_000
	DefaultQueue      = 1 << 18
)

// Failure reasons counted in TargetStats.Failures.
const (
	ReasonTimeout  = "timeout"          // no complete answer within Options.Timeout
	ReasonConnect  = "connect"          // refused, reset, DNS: the request failed
	ReasonStatus   = "http_status"      // answered with a non-2xx status
	ReasonParse    = "parse"            // the body is not Prometheus text or OpenMetrics
	ReasonTooLarge = "too_large"        // the body passed Options.MaxBytes
	ReasonTooMany  = "too_many_samples" // more than Options.MaxSamples samples
	ReasonMissed   = "missed"           // a due scrape skipped: the previous one still ran
)

// Options configure a Scraper. Every field but Targets has a working zero
// value.
type Options struct {
	// Targets are the endpoints' URLs (http or https), e.g.
	// http://shadow:8000/metrics. Required.
	Targets []string
	// Every is the scrape interval. Scrapes are due at whole multiples of
	// Every on the wall clock (:00, :01, … for 1 s), so frames of a whole
	// number of intervals hold the same number of scrapes. Default 1 s.
	Every time.Duration
	// Timeout bounds one scrape, connection to last byte. Default Every,
	// at most 10 s.
	Timeout time.Duration
	// Series keeps only these metric families (a histogram or summary by
	// its base name or any of its NAME_bucket/_sum/_count series; a counter
	// with or without _total). Default: every family.
	Series []string
	// MaxBytes bounds one scrape's body. Default 16 MiB.
	MaxBytes int64
	// MaxSamples bounds the samples taken from one scrape. Default 100000.
	MaxSamples int
	// Queue bounds the samples waiting for the sink; a scrape that does not
	// fit is dropped and counted. Default 262144.
	Queue int
	// Client does the requests. Default: a dedicated client without
	// environment proxies.
	Client *http.Client
	// Now is the clock of sample timestamps. Default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Timeout <= 0 {
		o.Timeout = min(o.Every, DefaultMaxTimeout)
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = DefaultMaxSamples
	}
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: o.Timeout}).DialContext,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     time.Minute,
		}}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Stats counts what a Scraper did.
type Stats struct {
	Targets     []TargetStats `json:"targets"`                    // one per distinct endpoint, in Options.Targets order
	Written     int64         `json:"written"`                    // samples the sink accepted
	Dropped     int64         `json:"dropped"`                    // samples dropped: the sink fell behind (queue full)
	WriteErrors int64         `json:"write_errors"`               // samples the sink refused
	LastWrite   string        `json:"last_write_error,omitempty"` // the sink's last error; empty when none
}

// TargetStats counts one endpoint's scrapes.
type TargetStats struct {
	URL       string           `json:"url"`                  // the endpoint's URL, user info removed
	Scrapes   int64            `json:"scrapes"`              // attempted
	OK        int64            `json:"ok"`                   // successful scrapes
	Samples   int64            `json:"samples"`              // samples taken from successful scrapes
	Failures  map[string]int64 `json:"failures"`             // by reason (Reason* constants)
	LastError string           `json:"last_error,omitempty"` // the last failure's message; empty when none
}

// Failed is the number of failed or missed scrapes over all endpoints.
func (s Stats) Failed() int64 {
	var n int64
	for _, t := range s.Targets {
		for _, c := range t.Failures {
			n += c
		}
	}
	return n
}

// WriteText writes one line per endpoint and one for the sink.
func (s Stats) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, t := range s.Targets {
		fmt.Fprintf(&b, "scrape %s: %d/%d scrapes ok, %d samples", t.URL, t.OK, t.Scrapes, t.Samples)
		if len(t.Failures) > 0 {
			reasons := make([]string, 0, len(t.Failures))
			for r, n := range t.Failures {
				reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
			}
			sort.Strings(reasons)
			fmt.Fprintf(&b, "; failed: %s (last: %s)", strings.Join(reasons, ", "), t.LastError)
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "scrape: %d samples written", s.Written)
	if s.Dropped > 0 || s.WriteErrors > 0 {
		fmt.Fprintf(&b, ", %d dropped (writer behind), %d refused by the writer", s.Dropped, s.WriteErrors)
		if s.LastWrite != "" {
			fmt.Fprintf(&b, " (last: %s)", s.LastWrite)
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// Scraper scrapes its endpoints until Close.
type Scraper struct {
	opts    Options
	sink    Sink
	keep    map[string]bool // metric families to keep; nil = all
	targets []*target
	queue   chan []formats.Metric
	queued  atomic.Int64 // samples in queue
	cancel  context.CancelFunc
	loops   sync.WaitGroup // endpoint goroutines
	drained chan struct{}  // closed when the writer goroutine ends
	closing sync.Once      // Close stops everything once
	stopped chan struct{}  // closed when Close's stopping is complete

	written, dropped, writeErrs atomic.Int64

	mu        sync.Mutex // guards lastWrite
	lastWrite string
}

// target is one endpoint's state; its counters are updated by its goroutine
// and read by Stats.
type target struct {
	url    string     // as requested
	source string     // as stored: no credentials
	mu     sync.Mutex // guards stats
	stats  TargetStats
}

// Start validates opts and starts one goroutine per endpoint plus one
// writing to sink. Scraping stops when ctx is cancelled or Close is called;
// Close must be called either way.
func Start(ctx context.Context, sink Sink, opts Options) (*Scraper, error) {
	if sink == nil {
		return nil, errors.New("start scraper: no sink")
	}
	if len(opts.Targets) == 0 {
		return nil, errors.New("start scraper: no endpoint to scrape")
	}
	opts = opts.withDefaults()
	s := &Scraper{opts: opts, sink: sink, queue: make(chan []formats.Metric, 1024),
		drained: make(chan struct{}), stopped: make(chan struct{})}
	if len(opts.Series) > 0 {
		s.keep = map[string]bool{}
		for _, n := range opts.Series {
			s.keep[n] = true
		}
	}
	seen := map[string]bool{}
	for _, raw := range opts.Targets {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("start scraper: endpoint %q: want http://host:port/metrics", raw)
		}
		if seen[raw] {
			continue
		}
		seen[raw] = true
		clean := redact.CleanURL(raw)
		s.targets = append(s.targets, &target{url: raw, source: clean,
			stats: TargetStats{URL: clean, Failures: map[string]int64{}}})
	}
	ctx, s.cancel = context.WithCancel(ctx)
	go s.write()
	for _, t := range s.targets {
		s.loops.Add(1)
		go s.loop(ctx, t)
	}
	return s, nil
}

// Close stops scraping, waits for scrapes in progress (at most Timeout) and
// hands the queued samples to the sink, or returns ctx's error when ctx ends
// first (the stopping finishes in the background). It does not close the
// sink. Stats has the final counts.
func (s *Scraper) Close(ctx context.Context) error {
	s.closing.Do(func() {
		s.cancel()
		go func() {
			s.loops.Wait()
			close(s.queue)
			<-s.drained
			close(s.stopped)
		}()
	})
	select {
	case <-s.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close scraper: %w", ctx.Err())
	}
}

// Stats reports the counts so far; after Close, the final ones.
func (s *Scraper) Stats() Stats {
	st := Stats{Written: s.written.Load(), Dropped: s.dropped.Load(), WriteErrors: s.writeErrs.Load()}
	s.mu.Lock()
	st.LastWrite = s.lastWrite
	s.mu.Unlock()
	for _, t := range s.targets {
		t.mu.Lock()
		ts := t.stats
		ts.Failures = make(map[string]int64, len(t.stats.Failures))
		for k, v := range t.stats.Failures {
			ts.Failures[k] = v
		}
		t.mu.Unlock()
		st.Targets = append(st.Targets, ts)
	}
	return st
}

// loop scrapes one endpoint at every due time until ctx ends.
func (s *Scraper) loop(ctx context.Context, t *target) {
	defer s.loops.Done()
	every := s.opts.Every
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var buf bytes.Buffer
	due := s.opts.Now().Truncate(every).Add(every)
	for {
		timer.Reset(due.Sub(s.opts.Now()))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		s.scrapeOnce(ctx, t, &buf)
		// The next due time after now; the ones a slow scrape overran are
		// missed (the timeout bounds how many).
		now := s.opts.Now()
		next := due.Add(every)
		if now.After(next) {
			skipped := now.Sub(next)/every + 1
			next = next.Add(skipped * every)
			t.fail(ReasonMissed, fmt.Sprintf("%d scrapes skipped: the previous scrape took until %s", skipped, now.UTC().Format(time.RFC3339Nano)), int64(skipped))
		}
		due = next
	}
}

// scrapeOnce does one scrape and queues its samples.
func (s *Scraper) scrapeOnce(ctx context.Context, t *target, buf *bytes.Buffer) {
	at := s.opts.Now()
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	t.mu.Lock()
	t.stats.Scrapes++
	t.mu.Unlock()
	rows, reason, err := s.fetch(ctx, t, at, buf)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// Cancelled by Close: not the endpoint's failure.
			t.mu.Lock()
			t.stats.Scrapes--
			t.mu.Unlock()
			return
		}
		t.fail(reason, err.Error(), 1)
		return
	}
	t.mu.Lock()
	t.stats.OK++
	t.stats.Samples += int64(len(rows))
	t.mu.Unlock()
	if len(rows) == 0 {
		return
	}
	if s.queued.Add(int64(len(rows))) > int64(s.opts.Queue) {
		s.queued.Add(-int64(len(rows)))
		s.dropped.Add(int64(len(rows)))
		return
	}
	select {
	case s.queue <- rows:
	default:
		s.queued.Add(-int64(len(rows)))
		s.dropped.Add(int64(len(rows)))
	}
}

func (t *target) fail(reason, msg string, n int64) {
	t.mu.Lock()
	t.stats.Failures[reason] += n
	t.stats.LastError = msg
	t.mu.Unlock()
}

// fetch requests and parses one scrape; on failure it returns the reason.
func (s *Scraper) fetch(ctx context.Context, t *target, at time.Time, buf *bytes.Buffer) ([]formats.Metric, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return nil, ReasonConnect, fmt.Errorf("build request: %w", err)
	}
	// Prefer the classic text format: its parser is the cheaper one.
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1")
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return nil, errReason(ctx, err, ReasonConnect), fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, ReasonStatus, fmt.Errorf("scrape: status %s", resp.Status)
	}
	buf.Reset()
	n, err := buf.ReadFrom(io.LimitReader(resp.Body, s.opts.MaxBytes+1))
	if err != nil {
		return nil, errReason(ctx, err, ReasonConnect), fmt.Errorf("read body: %w", err)
	}
	if n > s.opts.MaxBytes {
		return nil, ReasonTooLarge, fmt.Errorf("body over %d bytes", s.opts.MaxBytes)
	}
	format := expfmt.ResponseFormat(resp.Header)
	if format.FormatType() == expfmt.TypeUnknown {
		format = expfmt.NewFormat(expfmt.TypeTextPlain)
	}
	return s.parse(bytes.NewReader(buf.Bytes()), format, t.source, at)
}

// parse decodes one scrape body into rows stamped with the scrape time.
func (s *Scraper) parse(r io.Reader, format expfmt.Format, source string, at time.Time) (rows []formats.Metric, reason string, err error) {
	defer func() {
		if p := recover(); p != nil { // a parser bug must not take the run down
			rows, reason, err = nil, ReasonParse, fmt.Errorf("parse: %v", p)
		}
	}()
	dec := expfmt.NewDecoder(r, format)
	opts := &expfmt.DecodeOptions{Timestamp: model.TimeFromUnixNano(at.UnixNano())}
	ts, tsNs := at.UTC().Truncate(time.Microsecond), at.UnixNano()
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if errors.Is(err, io.EOF) {
			return rows, "", nil
		}
		if err != nil {
			return nil, ReasonParse, fmt.Errorf("parse: %w", err)
		}
		if !s.keepFamily(mf.GetName()) {
			continue
		}
		vec, err := expfmt.ExtractSamples(opts, &mf)
		if err != nil {
			return nil, ReasonParse, fmt.Errorf("parse %s: %w", mf.GetName(), err)
		}
		if len(rows)+len(vec) > s.opts.MaxSamples {
			return nil, ReasonTooMany, fmt.Errorf("more than %d samples in one scrape", s.opts.MaxSamples)
		}
		for _, smp := range vec {
			m := formats.Metric{Ts: ts, TsUnixNs: tsNs, Source: source,
				Name: string(smp.Metric[model.MetricNameLabel]), Value: float64(smp.Value)}
			if len(smp.Metric) > 1 {
				m.Labels = make(map[string]string, len(smp.Metric)-1)
				for k, v := range smp.Metric {
					if k != model.MetricNameLabel {
						m.Labels[string(k)] = string(v)
					}
				}
			}
			rows = append(rows, m)
		}
	}
}

// keepFamily applies Options.Series to a family name.
func (s *Scraper) keepFamily(name string) bool {
	if s.keep == nil {
		return true
	}
	if s.keep[name] || s.keep[strings.TrimSuffix(name, "_total")] {
		return true
	}
	for _, suffix := range []string{"_total", "_bucket", "_sum", "_count"} {
		if s.keep[name+suffix] {
			return true
		}
	}
	return false
}

// errReason tells a timeout from other transport failures.
func errReason(ctx context.Context, err error, otherwise string) string {
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return ReasonTimeout
	}
	return otherwise
}

// write hands queued samples to the sink until the queue is closed.
func (s *Scraper) write() {
	defer close(s.drained)
	for rows := range s.queue {
		for i := range rows {
			if err := s.sink.Write(&rows[i]); err != nil {
				s.writeErrs.Add(1)
				s.mu.Lock()
				s.lastWrite = err.Error()
				s.mu.Unlock()
				continue
			}
			s.written.Add(1)
		}
		s.queued.Add(-int64(len(rows)))
	}
}
