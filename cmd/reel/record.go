package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/proxy"
	"github.com/reelkit/reel/redact"
)

const recordUsage = `usage: reel record --out DIR SOURCE [flags]

Records the traffic reaching an inference gateway into a Parquet dataset,
redacted on the way to disk.

Sources:
  --upstream URL   run as a reverse-proxy sidecar on --listen, forwarding to URL
  --iface IFACE    capture passively from a network interface (needs CAP_NET_RAW), with --port
  --pcap FILE      import a pcap/pcapng capture (gzip'd too), with --port; timings from the packets
  --access-log F   import an nginx escape=json access log that logs $request_body

Examples:
  # sidecar in front of a local vLLM, key from the environment
  REEL_REDACT_KEY=$(cat /etc/reel/key) reel record --listen 127.0.0.1:8081 \
      --upstream http://127.0.0.1:8000 --out /var/lib/reel/traffic

  # record 10 % of sessions of the chat endpoint, rotate every 5 minutes
  reel record --upstream http://gateway:8000 --out data --sample 0.1 \
      --path /v1/chat/ --rotate-age 5m --redact-key-file /etc/reel/key

  # batch context from the server's headers
  reel record --upstream http://127.0.0.1:8000 --out data \
      --context-header x-gpu-id   # added to x-batch-size, x-queue-depth

  # sidecar that also samples the server's vLLM metrics every second (into data.metrics)
  reel record --upstream http://127.0.0.1:8000 --out data --scrape http://127.0.0.1:8000/metrics

  # passive capture of the gateway's port, no proxy in the path (root or CAP_NET_RAW)
  reel record --iface eth0 --port 8000 --out /var/lib/reel/traffic

  # import the on-call engineer's tcpdump (tcpdump -i any -w incident.pcapng port 8000)
  reel record --pcap incident.pcapng --port 8000 --out incident-data

  # import an nginx access log whose field names differ from the defaults
  reel record --access-log /var/log/nginx/reel.jsonl --out data --log-field time=ts

Flags:
`

// recordFlags holds reel record's command line.
type recordFlags struct {
	out, recorderID                string
	spoolDir                       string
	listen, upstream               string
	upstreamTimeout, drainTimeout  time.Duration
	rotateSize, maxBody, queueSize int64
	rotateAge, syncEvery           time.Duration
	redactor                       redactorFlags // --policy, --redact-key-file (redactor.go)
	raw                            bool
	contextHeaders                 []string
	sessionHeader                  string
	sessionFields                  []string
	queue                          int
	sample                         float64
	paths, methods, hosts          []string
	metricsListen                  string
	capture                        captureFlags // --iface, --pcap, --access-log (record_capture.go)
	memoryLimit                    int64
	scrape                         scrapeFlags // --scrape (scrape.go)
}

// recordEnv is what every source shares: the recorder and the metrics
// registry.
type recordEnv struct {
	rec    *recorder.Recorder
	reg    *prometheus.Registry
	stderr io.Writer
	drain  time.Duration
	// drainCtx ends when a second signal cuts the shutdown short; each
	// drain step adds its --drain-timeout to it.
	drainCtx context.Context
}

func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f recordFlags
	fs := pflag.NewFlagSet("record", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageFunc(fs, recordUsage)
	fs.StringVar(&f.out, "out", "", "dataset directory or storage URL: s3://bucket/prefix, gs://…, azblob://container/prefix, file:///… (required; docs/storage.md)")
	fs.StringVar(&f.spoolDir, "spool-dir", "", "with a storage URL --out: local directory for the spool and closed files until uploaded; use a volume that outlives the process (default: under the system's temporary directory)")
	fs.StringVar(&f.recorderID, "recorder-id", defaultRecorderID(), "recorder id in file names and every row")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8081", "proxy listen address (HTTP/1.1 and h2c)")
	fs.StringVar(&f.upstream, "upstream", "", "upstream URL to proxy to")
	fs.DurationVar(&f.upstreamTimeout, "upstream-timeout", 0, "wait at most this long for the upstream's response headers (0: no limit); a timeout answers 504")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, wait this long for in-flight requests, then as long again to write what is queued")
	fs.Var(newSizeValue(formats.DefaultRotateSize, &f.rotateSize), "rotate-size", "close a file after this many bytes")
	fs.DurationVar(&f.rotateAge, "rotate-age", formats.DefaultRotateAge, "close a file after this long")
	fs.DurationVar(&f.syncEvery, "sync-every", formats.DefaultSyncEvery, "fsync the write-ahead spool this often (what kill -9 can lose)")
	f.redactor.register(fs)
	fs.BoolVar(&f.raw, "raw", false, "DANGER: write bodies, paths and headers unredacted")
	fs.Var(newListValue(recorder.DefaultContextHeaders, &f.contextHeaders, true), "context-header", "upstream header recorded as batch context, added to the defaults (repeatable; '' clears the list)")
	fs.StringVar(&f.sessionHeader, "session-header", "x-session-id", "request header naming the session (for --sample and replay --sessions recorded)")
	fs.Var(newListValue(nil, &f.sessionFields, false), "session-field", "request-body field naming the session when the header is absent, e.g. user, conversation_id, metadata.user_id (repeatable; first present wins)")
	fs.Var(newSizeValue(recorder.DefaultMaxBody, &f.maxBody), "max-body", "keep at most this much of each body (the proxied body is never cut)")
	fs.IntVar(&f.queue, "queue", 1024, "exchanges waiting to be written at most; beyond, they are dropped and counted")
	fs.Var(newSizeValue(16<<20, &f.queueSize), "queue-bytes", "body bytes waiting to be written at most")
	fs.Var(newFractionValue(1, &f.sample), "sample", "fraction of sessions to record, deterministic per session (1: all)")
	fs.Var(newListValue(nil, &f.paths, false), "path", "record only requests whose path matches: a prefix (/v1/chat/), or a glob with * ? [ (repeatable or comma-separated)")
	fs.Var(newListValue(nil, &f.methods, true), "method", "record only these methods (repeatable or comma-separated)")
	fs.Var(newListValue(nil, &f.hosts, true), "host", "record only these hosts (repeatable or comma-separated)")
	fs.StringVar(&f.metricsListen, "metrics-listen", "127.0.0.1:9464", "Prometheus /metrics address (empty: off); imports (--pcap, --access-log) open it only when given")
	addCaptureFlags(fs, &f.capture)
	f.scrape.register(fs, "the server's")
	fs.Var(newSizeValue(recorder.DefaultMemoryLimit, &f.memoryLimit), "memory-limit", "soft Go heap limit (ignored when $GOMEMLIMIT is set; 0: none)")
	if helped, err := parseFlags(fs, args, "reel record --help", stdout); helped || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0)), hint: "reel record --out DIR --upstream URL"}
	}
	if f.out == "" {
		return &usageError{msg: "--out is required", hint: "reel record --out DIR --upstream http://127.0.0.1:8000"}
	}
	if f.sample <= 0 || f.sample > 1 {
		return &usageError{msg: fmt.Sprintf("--sample %v: want a fraction in (0, 1]", f.sample), hint: "reel record --sample 0.1 ..."}
	}

	// Source selection: each source is one function sharing recordEnv.
	source, sourceName, err := captureSource(&f.capture)
	if err != nil {
		return err
	}
	switch {
	case f.upstream != "" && source != nil:
		return &usageError{msg: "give one source: --upstream, --iface, --pcap or --access-log", hint: "reel record --out DIR --upstream http://127.0.0.1:8000"}
	case f.upstream != "":
		source, sourceName = recordProxy, "proxy:"+redact.CleanURL(f.upstream)
	case source == nil:
		return &usageError{msg: "no source: give --upstream, --iface, --pcap or --access-log", hint: "reel record --out DIR --upstream http://127.0.0.1:8000"}
	}

	if f.capture.iface != "" || len(f.capture.pcaps) > 0 {
		// Check --port before anything is opened or written.
		if _, err := parsePorts(f.capture.ports); err != nil {
			return err
		}
	}
	if err := f.scrape.check("reel record --out DIR --upstream URL --scrape http://127.0.0.1:8000/metrics"); err != nil {
		return err
	}
	if f.scrape.enabled() && (len(f.capture.pcaps) > 0 || len(f.capture.accessLogs) > 0) {
		return &usageError{msg: "--scrape samples live servers: use it with --upstream or --iface, not with an import", hint: "reel record --out DIR --upstream URL --scrape http://127.0.0.1:8000/metrics"}
	}

	if defaultMemoryLimit(f.memoryLimit) {
		defaultGCPercent(recorder.GCPercent)
	}

	// Imports read files: they wait for room in the queue instead of
	// dropping (Options.Wait); live sources are fail-open.
	offline := len(f.capture.pcaps) > 0 || len(f.capture.accessLogs) > 0
	env, closeEnv, err := openRecordEnv(ctx, &f, sourceName, offline, stderr)
	if err != nil {
		return err
	}
	metricsAddr := f.metricsListen
	if offline && !fs.Changed("metrics-listen") {
		metricsAddr = "" // an import ends on its own: no listener (nor a taken port) unless asked
	}
	stopMetrics, err := serveRecordMetrics(metricsAddr, env.reg, stderr)
	if err != nil {
		closeEnv(context.Background())
		return err
	}
	defer stopMetrics()
	if f.scrape.enabled() {
		run, err := f.scrape.start(ctx, formats.MetricsDir(f.out), "scrape-"+f.recorderID, stderr)
		if err != nil {
			closeEnv(context.Background())
			return err
		}
		defer func() {
			if err := run.Close(context.WithoutCancel(ctx)); err != nil {
				fmt.Fprintf(stderr, "reel record: %v\n", err)
			}
		}()
	}

	// The drain ends at --drain-timeout, or at once on a second
	// SIGINT/SIGTERM: the spool keeps what was not written and the next
	// start recovers it.
	drainCtx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stopSecond := cancelOnSecondSignal(ctx, cancel)
	defer stopSecond()
	env.drainCtx = drainCtx

	srcErr := source(ctx, env, &f)
	closeCtx, cancelClose := context.WithTimeout(drainCtx, f.drainTimeout)
	defer cancelClose()
	if err := closeEnv(closeCtx); err != nil {
		if cause := context.Cause(drainCtx); cause != nil {
			err = cause
		}
		return errors.Join(srcErr, err)
	}
	return srcErr
}

// errSecondSignal ends a drain cut short by a second signal.
var errSecondSignal = errors.New("second signal: stopped draining; the spool keeps unwritten records for the next start")

// cancelOnSecondSignal calls cancel with errSecondSignal when a SIGINT or
// SIGTERM arrives after ctx (cancelled by the first) has ended. The returned
// function stops listening.
func cancelOnSecondSignal(ctx context.Context, cancel context.CancelCauseFunc) func() {
	sig := make(chan os.Signal, 1)
	stop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
			return
		}
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sig)
		select {
		case <-sig:
			cancel(errSecondSignal)
		case <-stop:
		}
	}()
	return func() { close(stop) }
}

// openRecordEnv opens the redactor, the recorder and its dataset, and the
// metrics registry; closeEnv drains and closes them.
func openRecordEnv(ctx context.Context, f *recordFlags, sourceName string, offline bool, stderr io.Writer) (*recordEnv, func(context.Context) error, error) {
	rotateSize, maxBody, queueBytes := f.rotateSize, f.maxBody, f.queueSize
	var red recorder.Redactor // stays nil with --raw: a nil *redact.Redactor must not become a non-nil Redactor
	if f.raw {
		fmt.Fprintln(stderr, "reel record: WARNING: --raw: bodies, paths, queries and headers are written UNREDACTED; the dataset may hold personal data and secrets")
	} else {
		r, err := f.redactor.openRedactor("record", stderr)
		if err != nil {
			return nil, nil, err
		}
		red = r
	}
	// A file import costs production nothing: its prompt estimates (for
	// exchanges without usage) are BPE counts; live sources keep the cheap
	// estimate (docs/performance.md, "Prompt-token estimate").
	var promptTokens recorder.TokenCounter
	if offline {
		tok, err := recorder.NewTokenizer(recorder.DefaultTokenizer)
		if err != nil {
			return nil, nil, err
		}
		promptTokens = tok
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	rec, w, err := recorder.OpenDataset(ctx, formats.WriterOptions{
		Dir: f.out, Recorder: f.recorderID, Source: sourceName,
		RotateSize: rotateSize, RotateAge: f.rotateAge, SyncEvery: f.syncEvery,
		SpoolDir: f.spoolDir,
		Warn:     func(err error) { fmt.Fprintf(stderr, "reel record: %v\n", err) },
	}, red, recorder.Options{
		Config: recorder.Config{
			Upstream: upstreamHost(f.upstream), MaxBody: maxBody,
			ContextHeaders: f.contextHeaders, SessionHeader: f.sessionHeader, SessionFields: f.sessionFields,
		},
		Pipeline: recorder.PipelineOptions{
			Queue: f.queue, QueueBytes: queueBytes, Metrics: recorder.NewMetrics(reg), PromptTokens: promptTokens,
			Warn: func(err error) { fmt.Fprintf(stderr, "reel record: %v\n", err) },
		},
		Filter: recorder.Filter{Paths: f.paths, Methods: f.methods, Hosts: f.hosts},
		Sample: f.sample,
		Wait:   offline,
	})
	if err != nil {
		return nil, nil, err
	}
	if st := w.Stats(); st.Recovered > 0 || st.Lost > 0 {
		fmt.Fprintf(stderr, "reel record: recovered %d records from a previous run's spool (%d damaged frames skipped)\n", st.Recovered, st.Lost)
	}
	registerUploadMetrics(reg, w.Stats)
	env := &recordEnv{rec: rec, reg: reg, stderr: stderr, drain: f.drainTimeout}
	closeEnv := func(ctx context.Context) error {
		err := rec.Close(ctx)
		st := w.Stats()
		fmt.Fprintf(stderr, "reel record: %d exchanges written, %d file(s) closed\n", st.Records, st.FilesClosed)
		if err != nil {
			return fmt.Errorf("close dataset: %w", err)
		}
		return nil
	}
	return env, closeEnv, nil
}

// recordProxy runs the reverse-proxy sidecar until ctx ends, then stops
// accepting and waits (bounded) for in-flight requests.
func recordProxy(ctx context.Context, env *recordEnv, f *recordFlags) error {
	u, err := url.Parse(f.upstream)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return &usageError{msg: fmt.Sprintf("--upstream %q: want http://host:port", f.upstream), hint: "reel record --upstream http://127.0.0.1:8000 --out DIR"}
	}
	p, err := proxy.New(proxy.Options{
		Upstream: u, Recorder: env.rec, ResponseHeaderTimeout: f.upstreamTimeout,
		ErrorLog: log.New(env.stderr, "reel record: ", 0), // upstream failures, at most one line a second
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := proxy.NewServer(f.listen, p)
	fmt.Fprintf(env.stderr, "reel record: proxying %s -> %s, recording to %s\n", ln.Addr(), redact.CleanURL(f.upstream), f.out)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintf(env.stderr, "reel record: shutting down: finishing in-flight requests (up to %v)\n", env.drain)
	sctx, cancel := context.WithTimeout(env.drainCtx, env.drain)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close() // in-flight exchanges end now and are recorded as aborted
		fmt.Fprintf(env.stderr, "reel record: drain: %v; closed remaining connections\n", err)
	}
	return nil
}

// serveRecordMetrics serves /metrics on addr ("" disables it).
func serveRecordMetrics(addr string, reg *prometheus.Registry, stderr io.Writer) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	fmt.Fprintf(stderr, "reel record: metrics on http://%s/metrics\n", ln.Addr())
	return func() { srv.Close() }, nil
}

// defaultRecorderID is the host name, made safe for file names.
func defaultRecorderID() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "reel"
	}
	h = regexp.MustCompile(`[^A-Za-z0-9._-]`).ReplaceAllString(h, "-")
	return strings.TrimLeft(h, "._")
}

func upstreamHost(upstream string) string {
	if u, err := url.Parse(upstream); err == nil && u.Host != "" {
		return u.Host
	}
	return upstream
}
