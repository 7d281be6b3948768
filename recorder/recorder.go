package recorder

import (
	"context"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/sse"
)

// Sink stores exchanges; *formats.Writer[formats.Exchange] is one. Write is
// called from a single goroutine; Close is called once, after the last
// Write, with the ctx given to Recorder.Close.
type Sink interface {
	Write(x *formats.Exchange) error
	Close(ctx context.Context) error
}

// Redactor redacts an exchange in place before it is written;
// *redact.Redactor is one. It must fail closed, reporting in x.RedactErr.
type Redactor interface {
	RedactExchange(x *formats.Exchange)
}

// requestRedactor is a Redactor that reads the request the pipeline
// decoded for its enrichment instead of decoding the body again
// (*redact.Redactor is one); req is nil when the body is not a JSON
// request.
type requestRedactor interface {
	RedactExchangeRequest(x *formats.Exchange, req *sse.Request)
}

// Filter selects the exchanges to record. Empty lists match everything.
type Filter struct {
	// Paths are path prefixes ("/v1/chat/") or, when they contain glob
	// characters, path.Match patterns ("/v1/*/completions"), matched against
	// the escaped path as recorded in the path column: the --path rule of
	// analysis.MatchPath, the same in replay, stats, report and compare.
	Paths   []string
	Methods []string // methods, case-insensitive
	Hosts   []string // hosts, case-insensitive, with or without the port
}

// Match reports whether an exchange with this method, host and path passes.
func (f *Filter) Match(method, host, p string) bool {
	if len(f.Methods) > 0 && !containsFold(f.Methods, method) {
		return false
	}
	if len(f.Hosts) > 0 {
		bare := host
		if i := strings.LastIndexByte(host, ':'); i > 0 && !strings.HasSuffix(host, "]") {
			bare = host[:i]
		}
		if !containsFold(f.Hosts, host) && !containsFold(f.Hosts, bare) {
			return false
		}
	}
	return len(f.Paths) == 0 || analysis.MatchPath(f.Paths, p)
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// Options configure a Recorder. The zero value records everything, raw
// timing and bodies capped at DefaultMaxBody, fail-open.
type Options struct {
	// Config says how exchanges are built: recorder id, body cap, context
	// and session headers, epoch.
	Config Config
	// Pipeline bounds the queue between the sources and the sink.
	Pipeline PipelineOptions
	// Filter selects what is recorded (default: everything).
	Filter Filter
	// Sample is the fraction recorded, in (0, 1); 0 or ≥ 1 records
	// everything. See Recorder.Want for the rule.
	Sample float64
	// Wait makes Record wait for room in the queue instead of dropping: for
	// imports of files (pcap, access logs), which have no client to keep
	// waiting and must not lose rows to a full queue. Only Close ends a
	// wait; what it cuts off is counted (reason closed). Default false:
	// fail-open, as a live source must be.
	Wait bool
}

// Recorder is the one recording path every source feeds: the reverse proxy,
// live capture, pcap import and access-log import each take one. It owns
//
//   - what is recorded: the Filter and the sampling rule (Want);
//   - how an exchange is built: sequence numbers, connection ids, capped
//     bodies and timing (Begin, NewConn; see Assembler);
//   - the fail-open pipeline to the sink: a bounded queue, enrichment,
//     redaction, one writer, and every drop counted by reason (Submit,
//     SubmitLater, Record).
//
// Build it once with New, hand it to the source, and Close it when the
// source has stopped. Its methods are safe for concurrent use.
type Recorder struct {
	asm     *Assembler
	pipe    *pipeline
	filter  Filter
	sampleT uint64 // hash threshold for sampling; MaxUint64 keeps all
	wait    bool
}

// epocher is a sink that names its own epoch: *formats.Writer's session
// start, unique among the sessions on its dataset directory.
type epocher interface{ Epoch() time.Time }

// New starts a Recorder writing to sink through red (nil: record raw,
// unredacted exchanges). When opts.Config.Epoch is zero and sink has an
// Epoch method (a formats.Writer does), the sink's epoch is used, so that
// sequence numbers and connection ids stay unique across restarts on one
// dataset.
func New(sink Sink, red Redactor, opts Options) *Recorder {
	if opts.Config.Epoch.IsZero() {
		if e, ok := sink.(epocher); ok {
			opts.Config.Epoch = e.Epoch()
		}
	}
	asm := NewAssembler(opts.Config)
	opts.Pipeline.maxBody = asm.cfg.MaxBody
	r := &Recorder{
		asm:     asm,
		pipe:    newPipeline(sink, red, opts.Pipeline, opts.Config.SessionFields),
		filter:  opts.Filter,
		sampleT: math.MaxUint64,
		wait:    opts.Wait,
	}
	if opts.Sample > 0 && opts.Sample < 1 {
		r.sampleT = uint64(opts.Sample * math.MaxUint64)
	}
	return r
}

// Config reports the assembly configuration in effect, defaults filled in.
func (r *Recorder) Config() Config { return r.asm.Config() }

// Metrics returns the recorder's metrics (PipelineOptions.Metrics).
func (r *Recorder) Metrics() *Metrics { return r.pipe.m }

// Want reports whether the exchange this request starts should be recorded
// at all, and counts a no as skipped (reason filtered or sampled). Sources
// call it when the request head is known, before capturing bodies (the
// proxy), or on the finished exchange (Record).
//
// The sampling rule: an exchange is kept when a hash of its sample key falls
// under Options.Sample. The key is the session (the request's
// Config.SessionHeader) when there is one, so a session is recorded entirely
// or not at all; otherwise it is the connection (its id and client
// address), so a connection's exchanges stay together. An access log has no
// connection ids: its exchanges without a session are sampled per client
// address. The decision is deterministic: the same key gives the same
// answer in every run.
func (r *Recorder) Want(req Request, conn ConnInfo) bool {
	return r.want(req.Method, req.Host, req.Path, req.Header.Get(r.asm.cfg.SessionHeader), conn.ID, conn.Client)
}

func (r *Recorder) want(method, host, p, session string, connID int64, client string) bool {
	if !r.filter.Match(method, host, p) {
		r.pipe.m.Skipped.WithLabelValues(SkipFiltered).Inc()
		return false
	}
	if r.sampleT == math.MaxUint64 {
		return true
	}
	h := fnv.New64a()
	if session != "" {
		h.Write([]byte("s:"))
		h.Write([]byte(session))
	} else {
		var b [24]byte
		h.Write(strconv.AppendInt(append(b[:0], "c:"...), connID, 10))
		h.Write([]byte{'/'})
		h.Write([]byte(client))
	}
	if mix64(h.Sum64()) > r.sampleT {
		r.pipe.m.Skipped.WithLabelValues(SkipSampled).Inc()
		return false
	}
	return true
}

// mix64 is the splitmix64 finaliser: FNV's high bits are poorly spread for
// short, similar keys ("session-1", "session-2").
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// NewConn hands out the id of a new client connection, unique across
// restarts like sequence numbers (Config.Epoch).
func (r *Recorder) NewConn() int64 { return r.asm.NewConn() }

// Begin starts an exchange whose first request byte was seen at start and
// assigns its sequence number (Assembler.Begin).
func (r *Recorder) Begin(start time.Time, conn ConnInfo) *Recording { return r.asm.Begin(start, conn) }

// Record takes a finished exchange from a passive source (capture, pcap or
// access-log import): it applies Want to it, then submits it, fail-open, or
// waiting for room with Options.Wait. The recorder owns x afterwards.
func (r *Recorder) Record(x *formats.Exchange) {
	if !r.want(x.Method, x.Host, x.Path, x.Session, x.ConnID, x.Client) {
		return
	}
	if r.wait {
		r.pipe.SubmitWait(context.Background(), x)
		return
	}
	r.pipe.Submit(x)
}

// RecordBatch is Record for exchanges a passive source hands over at once
// (live capture: those completed by one ring block): it applies Want to
// each and queues the kept ones as one batch, so the recording goroutines
// wake once for all of them. The recorder owns the exchanges afterwards;
// xs itself is the caller's again when RecordBatch returns (its elements
// are overwritten).
func (r *Recorder) RecordBatch(xs []*formats.Exchange) {
	kept := xs[:0]
	for _, x := range xs {
		if r.want(x.Method, x.Host, x.Path, x.Session, x.ConnID, x.Client) {
			kept = append(kept, x)
		}
	}
	if r.wait {
		for _, x := range kept {
			r.pipe.SubmitWait(context.Background(), x)
		}
		return
	}
	r.pipe.SubmitBatch(kept)
}

// Submit queues x for recording without blocking and without asking Want.
// It reports false when x was dropped (queue full, byte bound reached,
// recorder closed); the drop is counted. The recorder owns x afterwards.
func (r *Recorder) Submit(x *formats.Exchange) bool { return r.pipe.Submit(x) }

// SubmitLater queues build, without blocking, for a recording worker to
// run, and records what it returns (nil: nothing) as Submit does; size is
// the body bytes the exchange will hold, charged against the queue's byte
// bound while it waits. The proxy hands an exchange over this way as its
// handler returns: a chunked response (an event stream) ends only when
// the server writes its last chunk after the handler, and assembling the
// exchange would otherwise come first. It reports false when the exchange
// was dropped (counted); after Close it is refused and build never runs.
func (r *Recorder) SubmitLater(size int64, build func() *formats.Exchange) bool {
	return r.pipe.SubmitLater(size, build)
}

// Close stops accepting exchanges, writes what is queued and closes the
// sink. If ctx ends first, Close returns its error and leaves the rest to
// the sink's spool; the writer goroutine finishes in the background. Stop
// the sources first: what they submit after Close is dropped and counted.
func (r *Recorder) Close(ctx context.Context) error { return r.pipe.Close(ctx) }
