// Command capture measures what recording costs in CPU, on the same
// streaming traffic for every recorder in one run: `tcpdump -w` (libpcap's
// mmap ring and the kernel's BPF filter, no parsing: the floor of getting
// packets into user space), `reel record --iface lo` (passive capture with
// redaction and Parquet), a bare httputil.ReverseProxy in the path, and
// the `reel record` sidecar in the path. Each recorder is a child process;
// its user and system CPU come from the kernel's accounting when it exits,
// so the load generator and the upstream (separate processes too) are
// never counted. An idle phase of the same length measures what a recorder
// costs with no traffic (start-up, timers); it is reported beside the
// totals. The read and write system calls of each process come from
// /proc/PID/io, counted by the kernel without a tracer in the way; the
// garbage collections of the Go ones from GODEBUG=gctrace=1.
//
//	bench/capture/run.sh                  # builds reel and this tool, 3 repetitions
//	go run ./bench/capture -reel /tmp/reel -n 4000 -rate 500 -reps 3
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/internal/barehop"
)

func main() {
	mode := flag.String("mode", "bench", "bench; upstream, bareproxy or load (-addr) run one part alone")
	addr := flag.String("addr", "127.0.0.1:18400", "upstream address (its port is the captured port)")
	listen := flag.String("listen", "127.0.0.1:18401", "proxy address")
	control := flag.String("control", "127.0.0.1:18402", "the upstream's control address (GET /answered: streams it answered to the end), off the captured port")
	reel := flag.String("reel", "reel", "the reel binary to measure")
	n := flag.Int("n", 4000, "streaming exchanges per phase")
	rate := flag.Int("rate", 500, "requests per second, open loop")
	reps := flag.Int("reps", 3, "repetitions of every phase (medians are reported)")
	events := flag.Int("events", 32, "token events per stream")
	gap := flag.Duration("gap", 2*time.Millisecond, "time between token events")
	previous := flag.String("reel-previous", "", "earlier reel binaries to measure beside -reel, comma-separated (passive capture and sidecar; rows named by file name)")
	only := flag.String("only", "", "comma-separated parts of the recorders' names to run, e.g. tcpdump,iface (default: all)")
	flag.Parse()
	switch *mode {
	case "upstream":
		log.Fatal(serveUpstream(*addr, *control, *events, *gap))
	case "bareproxy":
		log.Fatal(serveBareProxy(*listen, *addr))
	case "load":
		b := &bench{n: *n, rate: *rate}
		fmt.Printf("%d of %d requests failed\n", b.load(context.Background(), *addr), *n)
		return
	case "bench":
	default:
		log.Fatalf("unknown -mode %q", *mode)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b := &bench{reel: *reel, addr: *addr, listen: *listen, control: *control, n: *n, rate: *rate, self: os.Args[0]}
	if *previous != "" {
		for i, bin := range strings.Split(*previous, ",") {
			name := filepath.Base(bin)
			recorders = slices.Insert(recorders, 2+i, recorder{name: "--iface " + name, stop: syscall.SIGTERM, rows: datasetRows, ready: captureReady,
				command: func(b *bench, out string) *exec.Cmd {
					return exec.Command(bin, "record", "--iface", "lo", "--port", port(b.addr), "--out", out, "--metrics-listen", "")
				}})
			recorders = append(recorders, recorder{name: "sidecar " + name, inPath: true, stop: syscall.SIGTERM, rows: datasetRows,
				command: func(b *bench, out string) *exec.Cmd {
					return exec.Command(bin, "record", "--listen", b.listen, "--upstream", "http://"+b.addr, "--out", out, "--metrics-listen", "")
				}})
		}
	}
	if err := b.run(ctx, *reps, *only); err != nil {
		log.Fatal(err)
	}
}

// serveUpstream answers every POST with an OpenAI-style event stream of
// events token chunks, gap apart, each flushed, then usage and [DONE]. On
// control it says how many streams it answered to the end, so a phase's
// rows can be checked against what the server actually served (a load
// generator's count says what it sent, not what the wire carried).
func serveUpstream(addr, control string, events int, gap time.Duration) error {
	var answered atomic.Int64
	cl, err := net.Listen("tcp", control)
	if err != nil {
		return fmt.Errorf("control listener: %w", err)
	}
	go http.Serve(cl, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, answered.Load())
	}))
	chunk := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":" token"}}]}` + "\n\n"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Batch-Size", "8")
		f := w.(http.Flusher)
		for range events {
			_, _ = io.WriteString(w, chunk)
			f.Flush()
			time.Sleep(gap)
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", events)
		answered.Add(1)
	})
	return http.ListenAndServe(addr, h)
}

// serveBareProxy serves the peer of the sidecar, barehop's stock reverse
// proxy that flushes every write and records nothing.
func serveBareProxy(listen, upstream string) error {
	return http.ListenAndServe(listen, barehop.New(&url.URL{Scheme: "http", Host: upstream}))
}

type bench struct {
	reel, addr, listen, control, self string
	n, rate                           int
}

// recorder is one way of recording the traffic.
type recorder struct {
	name    string
	inPath  bool // requests go through it (proxies) rather than past it (captures)
	command func(b *bench, out string) *exec.Cmd
	stop    os.Signal
	rows    func(out string) (rows, incomplete int, err error) // exchanges it wrote (and how many are flagged incomplete), if it writes a dataset
	// ready is what a capture writes to stderr once its socket is open:
	// traffic starts only then, so no exchange is sent before it records.
	ready string
}

var recorders = []recorder{
	{name: "tcpdump -w", stop: os.Interrupt, ready: "listening on", command: func(b *bench, out string) *exec.Cmd {
		return exec.Command("tcpdump", "-i", "lo", "-s", "0", "-w", filepath.Join(out, "cap.pcap"), "tcp", "port", port(b.addr))
	}},
	{name: "reel record --iface", stop: syscall.SIGTERM, rows: datasetRows, ready: captureReady, command: func(b *bench, out string) *exec.Cmd {
		return exec.Command(b.reel, "record", "--iface", "lo", "--port", port(b.addr), "--out", out, "--metrics-listen", "")
	}},
	{name: "bare ReverseProxy", inPath: true, stop: syscall.SIGTERM, command: func(b *bench, out string) *exec.Cmd {
		return exec.Command(b.self, "-mode", "bareproxy", "-listen", b.listen, "-addr", b.addr)
	}},
	{name: "reel record sidecar", inPath: true, stop: syscall.SIGTERM, rows: datasetRows, command: func(b *bench, out string) *exec.Cmd {
		return exec.Command(b.reel, "record", "--listen", b.listen, "--upstream", "http://"+b.addr, "--out", out, "--metrics-listen", "")
	}},
}

// sample is one phase's measurement.
type sample struct {
	user, sys  time.Duration
	rows       int // exchanges the recorder wrote
	incomplete int // of which flagged incomplete
	answered   int // streams the upstream answered to the end during the phase
	errors     int // requests that failed or whose answer was cut, at the load generator
	// reads and writes are the read and write system calls the process
	// made (/proc/PID/io syscr and syscw, counted by the kernel: no tracer
	// slowing the process down and changing how events coalesce); -1 where
	// /proc cannot tell.
	reads, writes int64
	// gcs is the garbage collections the process ran (its
	// GODEBUG=gctrace=1 lines); -1 for a recorder that is not a Go program.
	gcs int
}

func (b *bench) run(ctx context.Context, reps int, only string) error {
	up := exec.Command(b.self, "-mode", "upstream", "-addr", b.addr, "-control", b.control, "-events", flag.Lookup("events").Value.String(), "-gap", flag.Lookup("gap").Value.String())
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		return fmt.Errorf("start upstream: %w", err)
	}
	defer func() { _ = up.Process.Kill(); _ = up.Wait() }()
	if err := waitListening(b.addr, 5*time.Second); err != nil {
		return err
	}
	if err := waitListening(b.control, 5*time.Second); err != nil {
		return err
	}
	var chosen []recorder
	for _, r := range recorders {
		if only == "" || slices.ContainsFunc(strings.Split(only, ","), func(part string) bool { return strings.Contains(r.name, part) }) {
			chosen = append(chosen, r)
		}
	}
	fmt.Printf("# %d streaming exchanges at %d req/s per phase, %d repetitions, %d cores, load %s\n",
		b.n, b.rate, reps, nprocs(), loadavg())
	busy := map[string][]sample{}
	idle := map[string][]sample{}
	for rep := range reps {
		for _, r := range chosen {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s, err := b.phase(ctx, r, true)
			if err != nil {
				return fmt.Errorf("%s, repetition %d: %w", r.name, rep+1, err)
			}
			busy[r.name] = append(busy[r.name], s)
			s, err = b.phase(ctx, r, false)
			if err != nil {
				return fmt.Errorf("%s idle, repetition %d: %w", r.name, rep+1, err)
			}
			idle[r.name] = append(idle[r.name], s)
		}
	}
	floor := medianCPU(busy["tcpdump -w"], b.n, func(s sample) time.Duration { return s.user + s.sys })
	bare := medianCPU(busy["bare ReverseProxy"], b.n, func(s sample) time.Duration { return s.user + s.sys })
	fmt.Printf("%-28s %12s %12s %12s %12s %10s %10s %8s %8s %6s  %s\n", "recorder", "cpu µs/exch", "user µs", "sys µs", "idle µs", "×tcpdump", "×bare", "reads", "writes", "GCs", "rows (answered, incomplete, failed) per repetition")
	for _, r := range chosen {
		ss := busy[r.name]
		total := medianCPU(ss, b.n, func(s sample) time.Duration { return s.user + s.sys })
		user := medianCPU(ss, b.n, func(s sample) time.Duration { return s.user })
		sys := medianCPU(ss, b.n, func(s sample) time.Duration { return s.sys })
		idleCPU := medianCPU(idle[r.name], b.n, func(s sample) time.Duration { return s.user + s.sys })
		var rs []string
		for _, s := range ss {
			rs = append(rs, s.rowCheck(r.rows != nil))
		}
		fmt.Printf("%-28s %12.1f %12.1f %12.1f %12.1f %10s %10s %8s %8s %6s  %s\n", r.name, total, user, sys, idleCPU,
			ratio(total, floor), ratio(total, bare),
			perExchange(ss, b.n, func(s sample) int64 { return s.reads }), perExchange(ss, b.n, func(s sample) int64 { return s.writes }),
			perExchange(ss, 1, func(s sample) int64 { return int64(s.gcs) }),
			strings.Join(rs, " / "))
	}
	fmt.Println("(cpu: median over repetitions of the recorder process's user+sys CPU ÷ exchanges; idle: the same process for the same time with no traffic, also ÷ exchanges)")
	fmt.Println("(reads, writes: median read and write system calls of the process ÷ exchanges, start-up included)")
	fmt.Println("(GCs: median garbage collections the process ran in the phase, from GODEBUG=gctrace=1)")
	fmt.Println("(rows: exchanges written; answered: streams the upstream finished; a row count that differs from answered is marked ≠)")
	verdict(busy, "reel record --iface", "tcpdump -w", "passive capture", 12)
	verdict(busy, "reel record sidecar", "bare ReverseProxy", "sidecar", 1.10)
	return nil
}

// verdict prints name's CPU ratio to its peer against the target:
// the ratio of the medians, and each repetition's own ratio (the two ran
// back to back, under the same load).
func verdict(busy map[string][]sample, name, peer, what string, target float64) {
	ss, ps := busy[name], busy[peer]
	if len(ss) == 0 || len(ps) == 0 {
		return
	}
	cpu := func(s sample) time.Duration { return s.user + s.sys }
	r := medianCPU(ss, 1, cpu) / medianCPU(ps, 1, cpu)
	var reps []string
	for i := range min(len(ss), len(ps)) {
		reps = append(reps, fmt.Sprintf("%.2f", float64(cpu(ss[i]))/float64(cpu(ps[i]))))
	}
	met := "met"
	if r > target {
		met = "NOT met"
	}
	fmt.Printf("%s: %.2f× %s CPU per exchange (repetitions %s); target ≤ %g×: %s\n", what, r, peer, strings.Join(reps, ", "), target, met)
}

// perExchange is the median of count over ss divided by n, or "—" where a
// count is unknown.
func perExchange(ss []sample, n int, count func(sample) int64) string {
	var v []int64
	for _, s := range ss {
		if count(s) < 0 {
			return "—"
		}
		v = append(v, count(s))
	}
	if len(v) == 0 || n == 0 {
		return "—"
	}
	slices.Sort(v)
	return fmt.Sprintf("%.1f", float64(v[len(v)/2])/float64(n))
}

// syscalls reads the read and write system calls pid has made so far
// from /proc/PID/io; -1, -1 where it cannot (not Linux, no permission).
func syscalls(pid int) (reads, writes int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return -1, -1
	}
	reads, writes = -1, -1
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// phase starts r, sends the traffic (if busy) or waits as long (if not),
// stops r and returns its CPU.
func (b *bench) phase(ctx context.Context, r recorder, busy bool) (sample, error) {
	out, err := os.MkdirTemp("", "reel-capture-bench-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(out)
	cmd := r.command(b, out)
	stderr := &readyBuffer{want: r.ready, seen: make(chan struct{})}
	cmd.Stderr = stderr
	// gctrace: one line on stderr per collection, to count them (the
	// sidecar's collector is paced by its memory limit: docs/performance.md,
	// "Proxy sidecar"); tcpdump ignores it.
	cmd.Env = append(os.Environ(), "REEL_REDACT_KEY=capture-bench-key-0123456789abcdef", "GODEBUG=gctrace=1")
	if err := cmd.Start(); err != nil {
		return sample{}, fmt.Errorf("start: %w", err)
	}
	target := b.addr
	if r.inPath {
		target = b.listen
		if err := waitListening(b.listen, 5*time.Second); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return sample{}, fmt.Errorf("%w: %s", err, stderr.String())
		}
	} else if err := stderr.wait(10 * time.Second); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return sample{}, fmt.Errorf("%w: %s", err, stderr.String())
	}
	var s sample
	if busy {
		before, err := b.answered()
		if err != nil {
			return sample{}, err
		}
		s.errors = b.load(ctx, target)
		after, err := b.answered()
		if err != nil {
			return sample{}, err
		}
		s.answered = after - before
	} else {
		time.Sleep(time.Duration(b.n) * time.Second / time.Duration(b.rate))
	}
	time.Sleep(300 * time.Millisecond)            // the last packets reach a capture
	s.reads, s.writes = syscalls(cmd.Process.Pid) // before the drain's file writes
	_ = cmd.Process.Signal(r.stop)
	err = cmd.Wait()
	if cmd.ProcessState == nil {
		return sample{}, fmt.Errorf("wait: %w", err)
	}
	s.user, s.sys = cmd.ProcessState.UserTime(), cmd.ProcessState.SystemTime()
	recLog, gcs := splitGCTrace(stderr.Bytes())
	s.gcs = gcs
	if r.name == "tcpdump -w" {
		s.gcs = -1
	}
	if busy && r.rows != nil {
		if s.rows, s.incomplete, err = r.rows(out); err != nil {
			return sample{}, fmt.Errorf("count rows: %w (%s)", err, recLog)
		}
	}
	if busy && s.errors > 0 {
		log.Printf("%s: %d of %d requests failed or were cut", r.name, s.errors, b.n)
	}
	if busy && r.rows != nil && s.rows != s.answered {
		log.Printf("%s: %d rows for %d answered streams (%d flagged incomplete); recorder's log:\n%s", r.name, s.rows, s.answered, s.incomplete, recLog)
	}
	return s, nil
}

// captureReady is reel record --iface's line once its socket is open.
// Builds before session 9 printed it before opening the socket: one that
// starts slowly can then miss the first exchanges, and the row check
// says so.
const captureReady = "reel record: capturing"

// readyBuffer is a recorder's stderr: it keeps every byte and closes seen
// once want has been written (at once when want is empty).
type readyBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	done bool
}

func (b *readyBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if !b.done && bytes.Contains(b.buf.Bytes(), []byte(b.want)) {
		b.done = true
		close(b.seen)
	}
	return len(p), nil
}

// wait returns once want has been written, or an error after limit.
func (b *readyBuffer) wait(limit time.Duration) error {
	if b.want == "" {
		return nil
	}
	select {
	case <-b.seen:
		return nil
	case <-time.After(limit):
		return fmt.Errorf("no %q on stderr after %v", b.want, limit)
	}
}

func (b *readyBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

func (b *readyBuffer) String() string { return string(b.Bytes()) }

// splitGCTrace separates a Go recorder's stderr into its own log and the
// number of GODEBUG=gctrace=1 lines ("gc N @…") in it.
func splitGCTrace(stderr []byte) (string, int) {
	var own []string
	gcs := 0
	for _, line := range strings.SplitAfter(string(stderr), "\n") {
		if strings.HasPrefix(line, "gc ") && strings.Contains(line, " @") {
			gcs++
			continue
		}
		own = append(own, line)
	}
	return strings.Join(own, ""), gcs
}

// rowCheck is a phase's row check for the table: rows against what the
// upstream answered, or just the answered and failed counts for a
// recorder that writes no dataset.
func (s sample) rowCheck(hasRows bool) string {
	if !hasRows {
		return fmt.Sprintf("— (%d, -, %d)", s.answered, s.errors)
	}
	mark := ""
	if s.rows != s.answered {
		mark = "≠"
	}
	return fmt.Sprintf("%d%s (%d, %d, %d)", s.rows, mark, s.answered, s.incomplete, s.errors)
}

// answered asks the upstream how many streams it has answered to the end.
func (b *bench) answered() (int, error) {
	resp, err := http.Get("http://" + b.control + "/answered")
	if err != nil {
		return 0, fmt.Errorf("ask the upstream: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("ask the upstream: %w", err)
	}
	return strconv.Atoi(string(body))
}

// load sends b.n streaming requests at b.rate on an absolute schedule and
// reads every response to its end; it returns how many failed or were cut
// (an error reading the body counts: a proxy that aborts a stream must not
// look cheaper for it).
func (b *bench) load(ctx context.Context, target string) int {
	body := []byte(`{"model":"m","stream":true,"max_tokens":32,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"` +
		strings.Repeat("Tell me about the weather in the mountains in winter. ", 12) + `"}]}`)
	tr := &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	u := "http://" + target + "/v1/chat/completions"
	var failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range b.n {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(b.rate))
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return int(failed.Load()) + b.n - i
			case <-time.After(d):
			}
		}
		wg.Go(func() {
			resp, err := client.Post(u, "application/json", bytes.NewReader(body))
			if err != nil {
				failed.Add(1)
				return
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	return int(failed.Load())
}

// datasetRows counts the exchanges in a dataset and those flagged
// incomplete, reading only the complete column.
func datasetRows(out string) (rows, incomplete int, err error) {
	r, err := formats.OpenReader[formats.Exchange](context.Background(), []string{out}, formats.ReaderOptions{Columns: []string{"complete"}})
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	for {
		x, err := r.Next()
		if err == io.EOF {
			return rows, incomplete, nil
		}
		if err != nil {
			return rows, incomplete, err
		}
		rows++
		if !x.Complete {
			incomplete++
		}
	}
}

func medianCPU(ss []sample, n int, f func(sample) time.Duration) float64 {
	if len(ss) == 0 {
		return 0
	}
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = float64(f(s).Microseconds()) / float64(n)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func waitListening(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("nothing listening on %s after %v", addr, limit)
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func nprocs() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return max(bytes.Count(b, []byte("processor\t:")), 1)
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
