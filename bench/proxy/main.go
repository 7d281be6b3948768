// Command proxy benchmarks reel's recording sidecar against direct access to
// the same upstream, on loopback. It answers two different questions and
// labels them apart:
//
//   - In front of a realistic upstream — an inference server with a fixed
//     number of slots, each request holding one for its service time (JSON)
//     or while it streams tokens with gaps (SSE) — does the sidecar keep the
//     throughput the upstream can give (target ≥ 90 % of direct)?
//   - Against a trivial upstream that answers at once, how much CPU does the
//     proxy cost relative to that server? On a small machine where load
//     generator, upstream and proxy share the cores, the saturation ratio
//     measures this CPU split, not the effect on a real gateway.
//
// It also measures added latency (p50/p99, from each request's due time to
// its last byte) at a fixed rate, direct and proxied requests alternating on
// one open-loop schedule, over several repetitions with medians and ranges, the proxy's and upstream's CPU time per
// request, and the recorder's peak RSS at 2k req/s with 16 KiB bodies.
// The hop phase (-phases hop, Linux, CAP_NET_RAW) measures the latency a
// proxy adds where it happens, between kernel packet timestamps on lo of
// the same bytes entering and leaving it (hop.go).
//
// The upstream and the recording proxy (proxy + pipeline + redactor +
// Parquet writer, wired as `reel record` wires them) run as child processes
// of this one, so the proxy's RSS and CPU time are its own:
//
//	go build -o /tmp/benchproxy ./bench/proxy && /tmp/benchproxy -duration 3s -reps 3
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/proxy"
	"github.com/reelkit/reel/redact"
)

// upstreamOpts shape the realistic upstream endpoints.
type upstreamOpts struct {
	slots   int           // requests served at once; the rest queue
	service time.Duration // /infer: time a request holds its slot
	tokens  int           // /gen: token chunks per stream
	gap     time.Duration // /gen: time between token chunks
}

func main() {
	mode := flag.String("mode", "bench", "bench, or (internal) upstream / proxy")
	upstream := flag.String("upstream", "", "proxy mode: upstream URL")
	out := flag.String("out", "", "proxy mode: dataset directory")
	dur := flag.Duration("duration", 3*time.Second, "length of each measured phase")
	reps := flag.Int("reps", 3, "interleaved direct/proxy repetitions of each phase (medians are reported)")
	rate := flag.Int("rate", 1000, "fixed request rate for the latency phases")
	conc := flag.Int("concurrency", 32, "closed-loop workers for the trivial-upstream saturation phases")
	var uo upstreamOpts
	flag.IntVar(&uo.slots, "slots", 64, "realistic upstream: requests served at once")
	flag.DurationVar(&uo.service, "service", 50*time.Millisecond, "realistic upstream: /infer service time per request")
	flag.IntVar(&uo.tokens, "tokens", 16, "realistic upstream: token chunks per /gen stream")
	flag.DurationVar(&uo.gap, "gap", 10*time.Millisecond, "realistic upstream: gap between /gen token chunks")
	phases := flag.String("phases", "latency,capacity,cpu,memory", "phases to run, comma-separated")
	kinds := flag.String("kinds", "json,sse,sse-gen", "latency phase: request kinds, comma-separated")
	rowGroup := flag.Int64("row-group-bytes", recorder.DefaultRowGroupBytes, "proxy mode: writer row-group bound (default: reel record's)")
	memLimit := flag.Int64("memory-limit", 100<<20, "proxy: Go soft memory limit, as reel record sets it (0: none)")
	record := flag.Bool("record", true, "record (false: proxy only, to separate proxying from recording costs)")
	compare := flag.String("compare", "", "compare phase: another build of this benchmark whose proxy runs beside this one's")
	hopRate := flag.Int("hop-rate", 200, "hop phase: requests per second to each hop")
	hops := flag.String("hops", "bare,sidecar", "hop phase: hops to compare, bare first (bare, proxy = reel's proxy without recording, sidecar, sidecar+KEY=VALUE = another sidecar with that environment, e.g. sidecar+GOGC=off)")
	pinHops := flag.String("pin-hops", "", "CPU list (taskset -c) for the proxies, e.g. 2-3; empty: no pinning")
	pinLoad := flag.String("pin-load", "", "CPU list for the load generator, the packet capture and the upstream, e.g. 0-1")
	flag.Parse()
	switch *mode {
	case "upstream":
		serveUpstream(uo)
	case "bare":
		serveBareProxy(*upstream)
	case "proxy":
		if *memLimit > 0 {
			debug.SetMemoryLimit(*memLimit) // as reel record does
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(recorder.GCPercent)
			}
		}
		serveProxy(*upstream, *out, *record, *rowGroup)
	default:
		if *pinLoad != "" {
			if err := pinSelf(*pinLoad); err != nil {
				log.Fatal(err)
			}
		}
		bench(benchOpts{d: *dur, reps: *reps, rate: *rate, conc: *conc, up: uo, record: *record,
			phases: *phases, kinds: *kinds, rowGroup: *rowGroup, memLimit: *memLimit, compare: *compare,
			hopRate: *hopRate, hops: *hops, pinHops: *pinHops, pinLoad: *pinLoad})
	}
}

// listenLoopback listens on a free loopback port; a child process prints
// the address for its parent.
func listenLoopback() net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	return ln
}

// serveUpstream serves trivial endpoints — /json answers a small JSON (or
// ?size=N bytes), /sse streams 16 chat chunks flushed back to back (or
// ?gap= apart, with no slot limit) — and
// realistic ones with bounded capacity: /infer holds one of uo.slots for
// uo.service then answers JSON; /gen holds a slot while it streams uo.tokens
// chunks uo.gap (or ?gap=) apart, as an inference server's decode steps would.
func serveUpstream(uo upstreamOpts) {
	ln := listenLoopback()
	fmt.Println(ln.Addr())
	chunk := []byte(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"token "}}]}` + "\n\n")
	tail := []byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":16}}\n\ndata: [DONE]\n\n")
	slots := make(chan struct{}, max(uo.slots, 1))
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mark := upstreamMarker(r) // hop phase: repeat the request's marker in every event and answer
		switch r.URL.Path {
		case "/sse", "/gen":
			gen := r.URL.Path == "/gen"
			n, gap, paced := 16, uo.gap, gen
			if g, err := time.ParseDuration(r.URL.Query().Get("gap")); err == nil {
				gap, paced = g, true
			}
			if gen {
				slots <- struct{}{}
				defer func() { <-slots }()
				n = uo.tokens
			}
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("X-Batch-Size", "8")
			f := w.(http.Flusher)
			for i := range min(n, maxEvents) {
				if paced && i > 0 {
					time.Sleep(gap)
				}
				if mark != "" {
					fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"%s.%03d"}}]}`+"\n\n", mark, i)
				} else {
					w.Write(chunk)
				}
				f.Flush()
			}
			if mark != "" {
				fmt.Fprintf(w, "data: {\"id\":\"%s.%03d\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":16}}\n\ndata: [DONE]\n\n", mark, min(n, maxEvents))
			} else {
				w.Write(tail)
			}
			return
		case "/infer":
			slots <- struct{}{}
			time.Sleep(uo.service)
			<-slots
		}
		w.Header().Set("Content-Type", "application/json")
		if n, _ := strconv.Atoi(r.URL.Query().Get("size")); n > 0 {
			w.Write(jsonBody(n))
			return
		}
		if mark != "" {
			fmt.Fprintf(w, `{"id":"%s.000","scores":[0.12,0.56,0.91],"model":"ranker-v3"}`, mark)
			return
		}
		w.Write([]byte(`{"scores":[0.12,0.56,0.91],"model":"ranker-v3"}`))
	}))
}

// serveProxy runs the recorder as `reel record` does, with a random key.
func serveProxy(upstream, out string, record bool, rowGroup int64) {
	u, err := url.Parse(upstream)
	if err != nil {
		log.Fatal(err)
	}
	key, _ := redact.NewRandomKey()
	red, err := redact.New(redact.DefaultPolicy(), key)
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector()) // allocations and GC cycles per phase
	m := recorder.NewMetrics(reg)
	rec, _, err := recorder.OpenDataset(context.Background(), formats.WriterOptions{Dir: out, Recorder: "bench", RowGroupBytes: rowGroup},
		red, recorder.Options{Pipeline: recorder.PipelineOptions{Metrics: m}})
	if err != nil {
		log.Fatal(err)
	}
	opts := proxy.Options{Upstream: u, Metrics: m}
	if record {
		opts.Recorder = rec
	}
	p, err := proxy.New(opts)
	if err != nil {
		log.Fatal(err)
	}
	ln := listenLoopback()
	mln := listenLoopback()
	fmt.Println(ln.Addr(), mln.Addr())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/runtime", serveRuntimeHists)
	go http.Serve(mln, mux)
	srv := proxy.NewServer("", p)
	go srv.Serve(ln)
	if path := os.Getenv("REEL_BENCH_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	<-ctx.Done()
	stop()
	if path := os.Getenv("REEL_BENCH_MEMPROFILE"); path != "" { // allocations of the proxy's whole life
		if f, err := os.Create(path); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	rec.Close(sctx)
}

// runtimeHists are the proxy's runtime histograms the latency phase reads:
// how long goroutines wait to run once runnable (a forwarding goroutine
// waiting for a P busy with recording work shows here), and the GC's
// stop-the-world pauses.
var runtimeHists = []string{"/sched/latencies:seconds", "/sched/pauses/total/gc:seconds"}

type hist struct {
	Buckets []float64 `json:"buckets"`
	Counts  []uint64  `json:"counts"`
}

func serveRuntimeHists(w http.ResponseWriter, _ *http.Request) {
	samples := make([]metrics.Sample, len(runtimeHists))
	for i, n := range runtimeHists {
		samples[i].Name = n
	}
	metrics.Read(samples)
	out := map[string]hist{}
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindFloat64Histogram {
			h := s.Value.Float64Histogram()
			b := slices.Clone(h.Buckets)
			for i, v := range b { // JSON has no infinities
				b[i] = max(-math.MaxFloat64, min(v, math.MaxFloat64))
			}
			out[s.Name] = hist{Buckets: b, Counts: h.Counts}
		}
	}
	json.NewEncoder(w).Encode(out)
}

func readRuntimeHists(addr string) map[string]hist {
	out := map[string]hist{}
	resp, err := http.Get("http://" + addr + "/runtime")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&out)
	return out
}

// histQuantile returns the upper bound of the bucket holding quantile q of
// the counts added between a and b, and the number of samples.
func histQuantile(a, b hist, q float64) (time.Duration, uint64) {
	if len(b.Counts) == 0 || len(a.Counts) != len(b.Counts) {
		return -1, 0
	}
	var n uint64
	for i := range b.Counts {
		n += b.Counts[i] - a.Counts[i]
	}
	if n == 0 {
		return 0, 0
	}
	need := uint64(math.Ceil(q * float64(n)))
	var c uint64
	for i := range b.Counts {
		c += b.Counts[i] - a.Counts[i]
		if c >= need {
			up := b.Buckets[i+1]
			if up == math.MaxFloat64 {
				up = b.Buckets[i]
			}
			return time.Duration(up * 1e9), n
		}
	}
	return -1, n
}

func jsonBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[{"role":"user","content":"`)
	for b.Len() < n-4 {
		b.WriteString("lorem ipsum dolor sit amet ")
	}
	s := b.String()[:n-4]
	return []byte(s + `"}]}`)
}

type child struct {
	cmd   *exec.Cmd
	addrs []string
}

// start runs this binary with args as a child, pinned to the CPU list pin
// (taskset -c) unless it is empty.
func start(pin string, args ...string) *child {
	if pin != "" {
		return startCmd(exec.Command("taskset", append([]string{"-c", pin, os.Args[0]}, args...)...))
	}
	return startCmd(exec.Command(os.Args[0], args...))
}

func startCmd(cmd *exec.Cmd) *child {
	args := cmd.Args[1:]
	cmd.Stderr = os.Stderr
	if g := os.Getenv("REEL_BENCH_PROXY_GODEBUG"); g != "" && slices.Contains(args, "proxy") {
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		cmd.Env = append(cmd.Env, "GODEBUG="+g) // e.g. gctrace=1 for the proxy alone
	}
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		log.Fatalf("child %v: %v", args, err)
	}
	return &child{cmd: cmd, addrs: strings.Fields(line)}
}

func (c *child) stop() {
	c.cmd.Process.Signal(syscall.SIGTERM)
	c.cmd.Wait()
}

// vmHWM reads a process's peak resident set size in KiB.
func vmHWM(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			n, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return n
		}
	}
	return -1
}

type result struct {
	lat    []time.Duration
	errors int64
	n      int64
	secs   float64
}

func (r *result) q(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)-1, int(p*float64(len(r.lat))))]
}

func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, DisableCompression: true}}
}

func do(c *http.Client, target string, body []byte) error {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, _ := http.NewRequest("POST", target, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return err
}

// fixedRate sends rate req/s for d, open loop, and measures each request
// from its due time to its last response byte.
func fixedRate(target string, body []byte, rate int, d time.Duration) *result {
	c := newClient()
	n := int(d.Seconds() * float64(rate))
	lat := make([]time.Duration, n)
	var errs atomic.Int64
	var first sync.Once
	var wg sync.WaitGroup
	sem := make(chan struct{}, 512)
	t0 := time.Now()
	for i := range n {
		due := t0.Add(time.Duration(i) * time.Second / time.Duration(rate))
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := do(c, target, body); err != nil {
				errs.Add(1)
				first.Do(func() { log.Printf("%s: first error: %v", target, err) })
			}
			lat[i] = time.Since(due)
		})
	}
	wg.Wait()
	slices.Sort(lat)
	return &result{lat: lat, errors: errs.Load(), n: int64(n), secs: time.Since(t0).Seconds()}
}

// interleaved sends rate req/s to each of bases[0]+path (direct) and
// bases[1:]+path (proxies) for d on one open-loop schedule of
// len(bases)×rate req/s: each round of len(bases) slots takes every target
// once, in an order drawn at random (seeded by seed), so that no target
// always follows another (a request finds the upstream and the load
// generator warmer right after another one: a fixed order showed a
// 0.06–0.09 ms p50 bias between two copies of the same proxy). Each
// request is timed from its due time to its last response byte. All
// streams see the same load generator, upstream and machine load at the
// same moments, so the difference of their quantiles is the proxy's, not
// the machine's.
//
// tag, if not nil, returns a suffix for the path of request i to target
// side (the hop phase's markers).
func interleaved(bases []string, k kind, rate int, d time.Duration, seed uint64, tag func(side, i int) string) []*result {
	rnd := rand.New(rand.NewPCG(seed, 1))
	order := make([]int, len(bases))
	for i := range order {
		order[i] = i
	}
	c := newClient()
	m := len(bases)
	n := int(d.Seconds() * float64(rate))
	lat := make([][]time.Duration, m)
	errs := make([]atomic.Int64, m)
	for i := range lat {
		lat[i] = make([]time.Duration, n)
	}
	var once sync.Once
	var wg sync.WaitGroup
	sem := make(chan struct{}, 1024)
	t0 := time.Now()
	for j := range m * n {
		due := t0.Add(time.Duration(j) * time.Second / time.Duration(m*rate))
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		if j%m == 0 {
			rnd.Shuffle(m, func(a, b int) { order[a], order[b] = order[b], order[a] })
		}
		side, i := order[j%m], j/m
		path := k.path
		if tag != nil {
			path += tag(side, i)
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := do(c, bases[side]+path, k.body); err != nil {
				errs[side].Add(1)
				once.Do(func() { log.Printf("%s: first error: %v", bases[side]+k.path, err) })
			}
			lat[side][i] = time.Since(due)
		})
	}
	wg.Wait()
	secs := time.Since(t0).Seconds()
	res := make([]*result, m)
	for i := range res {
		slices.Sort(lat[i])
		res[i] = &result{lat: lat[i], errors: errs[i].Load(), n: int64(n), secs: secs}
	}
	return res
}

// saturate runs conc closed-loop workers for d and counts completions.
func saturate(target string, body []byte, conc int, d time.Duration) *result {
	c := newClient()
	var n, errs atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	end := t0.Add(d)
	for range conc {
		wg.Go(func() {
			for time.Now().Before(end) {
				if err := do(c, target, body); err != nil {
					errs.Add(1)
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return &result{n: n.Load(), errors: errs.Load(), secs: time.Since(t0).Seconds()}
}

func metricSum(addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name) {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// cpuTicks reads a process's user+system CPU time in clock ticks (1/100 s).
func cpuTicks(pid int) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

type benchOpts struct {
	d                  time.Duration
	reps, rate, conc   int
	up                 upstreamOpts
	record             bool
	phases, kinds      string
	rowGroup, memLimit int64
	compare            string
	hopRate            int
	hops               string
	pinHops, pinLoad   string
}

type kind struct {
	name, path string
	body       []byte
}

func median[T int64 | float64 | time.Duration](v []T) T {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()*1e3) }

func bench(o benchOpts) {
	dir, err := os.MkdirTemp("", "reel-bench-proxy-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	up := start(o.pinLoad, "-mode", "upstream", "-slots", strconv.Itoa(o.up.slots), "-service", o.up.service.String(),
		"-tokens", strconv.Itoa(o.up.tokens), "-gap", o.up.gap.String())
	defer up.stop()
	px := start(o.pinHops, "-mode", "proxy", "-upstream", "http://"+up.addrs[0], "-out", dir, "-record="+strconv.FormatBool(o.record),
		"-row-group-bytes", strconv.FormatInt(o.rowGroup, 10), "-memory-limit", strconv.FormatInt(o.memLimit, 10))
	defer func() { px.stop() }()
	bases := [2]string{"http://" + up.addrs[0], "http://" + px.addrs[0]}
	small := []byte(`{"user":1234,"items":[1,2,3,4,5,6,7,8]}`)
	chat := jsonBody(600)
	has := func(p string) bool { return slices.Contains(strings.Split(o.phases, ","), p) }
	fmt.Printf("# record=%v, GOMAXPROCS per process = %d cores; load average at start: %s\n", o.record, numCPU(), loadavg())

	if has("latency") {
		fmt.Printf("\n# added latency at %d req/s through the proxy: one open-loop schedule at %d req/s alternates\n", o.rate, 2*o.rate)
		fmt.Printf("# direct and proxied requests (same load generator, same upstream, same moments), each timed\n")
		fmt.Printf("# from its due time to its last byte; %v per repetition, %d repetitions; times in ms.\n", o.d, o.reps)
		fmt.Printf("# json: 40 B answered with 50 B; sse: 600 B chat answered with 16 chunks back to back + usage + [DONE];\n")
		fmt.Printf("# sse-gen: the same stream with chunks 2 ms apart (token-paced; no slot limit, as both streams share the upstream).\n")
		fmt.Printf("# gc: the proxy's GC cycles during the repetition; alloc/req: its heap allocations per proxied request;\n")
		fmt.Printf("# sch p99/p999: how long the proxy's runnable goroutines waited for a P (runtime bucket bound);\n")
		fmt.Printf("# stw max: its longest GC stop-the-world pause\n")
		fmt.Printf("%-8s %4s %9s %9s %9s %9s %9s %9s %6s %4s %9s %9s %9s %9s\n", "kind", "rep", "dir p50", "prx p50", "add p50", "dir p99", "prx p99", "add p99", "errors", "gc", "alloc/req", "sch p99", "sch p999", "stw max")
		for _, k := range []kind{{"json", "/json", small}, {"sse", "/sse", chat}, {"sse-gen", "/sse?gap=2ms", chat}} {
			if !slices.Contains(strings.Split(o.kinds, ","), k.name) {
				continue
			}
			var add50, add99, d50, p50, d99, p99, sched99, sched999, stwMax []time.Duration
			interleaved(bases[:], k, o.rate, o.d/5, 0, nil) // warm-up
			for rep := range o.reps {
				gc0, mal0 := metricSum(px.addrs[1], "go_gc_duration_seconds_count"), metricSum(px.addrs[1], "go_memstats_mallocs_total")
				rh0 := readRuntimeHists(px.addrs[1])
				res := interleaved(bases[:], k, o.rate, o.d, uint64(rep+1), nil)
				rh1 := readRuntimeHists(px.addrs[1])
				gc1, mal1 := metricSum(px.addrs[1], "go_gc_duration_seconds_count"), metricSum(px.addrs[1], "go_memstats_mallocs_total")
				s99, _ := histQuantile(rh0[runtimeHists[0]], rh1[runtimeHists[0]], 0.99)
				s999, _ := histQuantile(rh0[runtimeHists[0]], rh1[runtimeHists[0]], 0.999)
				stw, _ := histQuantile(rh0[runtimeHists[1]], rh1[runtimeHists[1]], 1)
				sched99, sched999, stwMax = append(sched99, s99), append(sched999, s999), append(stwMax, stw)
				a50, a99 := res[1].q(0.5)-res[0].q(0.5), res[1].q(0.99)-res[0].q(0.99)
				add50, add99 = append(add50, a50), append(add99, a99)
				d50, p50 = append(d50, res[0].q(0.5)), append(p50, res[1].q(0.5))
				d99, p99 = append(d99, res[0].q(0.99)), append(p99, res[1].q(0.99))
				fmt.Printf("%-8s %4d %9s %9s %9s %9s %9s %9s %6d %4.0f %9.0f %9s %9s %9s\n", k.name, rep+1, ms(res[0].q(0.5)), ms(res[1].q(0.5)), ms(a50),
					ms(res[0].q(0.99)), ms(res[1].q(0.99)), ms(a99), res[0].errors+res[1].errors, gc1-gc0, (mal1-mal0)/float64(res[1].n),
					ms(s99), ms(s999), ms(stw))
			}
			fmt.Printf("%-8s %4s %9s %9s %9s %9s %9s %9s %6s %4s %9s %9s %9s %9s\n", k.name, "med", ms(median(d50)), ms(median(p50)), ms(median(add50)),
				ms(median(d99)), ms(median(p99)), ms(median(add99)), "", "", "", ms(median(sched99)), ms(median(sched999)), ms(median(stwMax)))
			fmt.Printf("%-8s %4s %9s %9s %9s %9s %9s %9s\n", k.name, "min", ms(slices.Min(d50)), ms(slices.Min(p50)), ms(slices.Min(add50)),
				ms(slices.Min(d99)), ms(slices.Min(p99)), ms(slices.Min(add99)))
			fmt.Printf("%-8s %4s %9s %9s %9s %9s %9s %9s\n", k.name, "max", ms(slices.Max(d50)), ms(slices.Max(p50)), ms(slices.Max(add50)),
				ms(slices.Max(d99)), ms(slices.Max(p99)), ms(slices.Max(add99)))
		}
		fmt.Printf("# load average after the latency phase: %s\n", loadavg())
		if os.Getenv("REEL_BENCH_WRITE_HIST") != "" {
			resp, err := http.Get("http://" + px.addrs[1] + "/metrics")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				for _, l := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(l, "reel_recorder_write_seconds") || strings.HasPrefix(l, "reel_recorder_exchanges_total") {
						fmt.Println(l)
					}
				}
			}
		}
	}
	if has("hop") {
		hopPhase(o, up, px, dir, small, chat)
	}
	if has("compare") && o.compare != "" {
		comparePhase(o, up, px, dir, small, chat)
	}
	if has("capacity") {
		workers := 2 * o.up.slots
		fmt.Printf("\n# (a) realistic upstream: %d slots; /infer holds a slot %v; /gen streams %d tokens %v apart.\n", o.up.slots, o.up.service, o.up.tokens, o.up.gap)
		fmt.Printf("# %d closed-loop workers (more than the slots: requests queue at the upstream), %v per phase, %d interleaved reps\n", workers, o.d, o.reps)
		for _, k := range []kind{{"infer", "/infer", small}, {"gen", "/gen", chat}} {
			saturationRatio(k, bases, workers, o.d, o.reps, up, px)
		}
	}
	if has("cpu") {
		fmt.Printf("\n# (b) trivial upstream, CPU-bound: %d closed-loop workers, %v per phase, %d interleaved reps.\n", o.conc, o.d, o.reps)
		fmt.Printf("# Load generator, upstream and proxy share the cores: the ratio is the proxy's CPU cost\n# relative to a server that does nothing, not its effect on an inference gateway.\n")
		for _, k := range []kind{{"json", "/json", small}, {"sse", "/sse", chat}} {
			saturationRatio(k, bases, o.conc, o.d, o.reps, up, px)
		}
	}
	if has("memory") {
		fmt.Printf("\n# memory: 2000 req/s, 16 KiB request and response bodies, %v, Go soft memory limit %d MiB\n", o.d, o.memLimit>>20)
		big := jsonBody(16 << 10)
		// A fresh proxy, so that its peak RSS is this phase's alone.
		px.stop()
		px = start(o.pinHops, "-mode", "proxy", "-upstream", "http://"+up.addrs[0], "-out", dir, "-record="+strconv.FormatBool(o.record),
			"-row-group-bytes", strconv.FormatInt(o.rowGroup, 10), "-memory-limit", strconv.FormatInt(o.memLimit, 10))
		dres := fixedRate(bases[0]+"/json?size=16384", big, 2000, o.d)
		fmt.Printf("direct: achieved %.0f req/s, p50 %v p99 %v\n", float64(dres.n)/dres.secs,
			dres.q(0.5).Round(time.Microsecond), dres.q(0.99).Round(time.Microsecond))
		t0 := cpuTicks(px.cmd.Process.Pid)
		res := fixedRate("http://"+px.addrs[0]+"/json?size=16384", big, 2000, o.d)
		fmt.Printf("proxy CPU/request %.0f µs; ", float64(cpuTicks(px.cmd.Process.Pid)-t0)*1e4/float64(res.n))
		fmt.Printf("achieved %.0f req/s, p50 %v p99 %v, errors %d; recorder peak RSS %.1f MiB; recorded %.0f, dropped %.0f \n",
			float64(res.n)/res.secs, res.q(0.5).Round(time.Microsecond), res.q(0.99).Round(time.Microsecond), res.errors,
			float64(vmHWM(px.cmd.Process.Pid))/1024,
			metricSum(px.addrs[1], "reel_recorder_exchanges_total"), metricSum(px.addrs[1], "reel_recorder_dropped_total"))
	}
}

// comparePhase runs this build's proxy (A) and another build's (B, from
// -compare) side by side on one interleaved schedule with direct requests,
// so that two versions of the proxy are compared under the same machine
// load, request by request. Both record to their own dataset.
func comparePhase(o benchOpts, up, px *child, dir string, small, chat []byte) {
	dirB, err := os.MkdirTemp(dir, "b-")
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command(o.compare, "-mode", "proxy", "-upstream", "http://"+up.addrs[0], "-out", dirB, "-record="+strconv.FormatBool(o.record),
		"-row-group-bytes", strconv.FormatInt(o.rowGroup, 10), "-memory-limit", strconv.FormatInt(o.memLimit, 10))
	pb := startCmd(cmd)
	defer pb.stop()
	bases := []string{"http://" + up.addrs[0], "http://" + px.addrs[0], "http://" + pb.addrs[0]}
	fmt.Printf("\n# compare: direct, A (this build) and B (%s) interleaved, %d req/s each, %v per repetition; ms\n", o.compare, o.rate, o.d)
	fmt.Printf("%-8s %4s %9s %9s %9s %9s %9s %9s %9s\n", "kind", "rep", "dir p99", "A add50", "B add50", "B−A p50", "A add99", "B add99", "B−A p99")
	for _, k := range []kind{{"json", "/json", small}, {"sse", "/sse", chat}} {
		if !slices.Contains(strings.Split(o.kinds, ","), k.name) {
			continue
		}
		interleaved(bases, k, o.rate, o.d/5, 0, nil) // warm-up
		var d50, d99 []time.Duration
		for rep := range o.reps {
			r := interleaved(bases, k, o.rate, o.d, uint64(rep+1), nil)
			a50, b50 := r[1].q(0.5)-r[0].q(0.5), r[2].q(0.5)-r[0].q(0.5)
			a99, b99 := r[1].q(0.99)-r[0].q(0.99), r[2].q(0.99)-r[0].q(0.99)
			d50, d99 = append(d50, b50-a50), append(d99, b99-a99)
			fmt.Printf("%-8s %4d %9s %9s %9s %9s %9s %9s %9s\n", k.name, rep+1, ms(r[0].q(0.99)), ms(a50), ms(b50), ms(b50-a50), ms(a99), ms(b99), ms(b99-a99))
		}
		fmt.Printf("%-8s %4s %9s %9s %9s %9s %9s %9s %9s\n", k.name, "med", "", "", "", ms(median(d50)), "", "", ms(median(d99)))
	}
}

// saturationRatio runs closed-loop phases against direct and proxy,
// interleaved, and prints throughput, the ratio, and CPU time per request
// of the upstream (direct phase) and the proxy (proxy phase).
func saturationRatio(k kind, bases [2]string, workers int, d time.Duration, reps int, up, px *child) {
	var ratios []float64
	for rep := range reps {
		var r [2]float64
		var cpu [2]float64 // µs of CPU per request: upstream in direct phases, proxy in proxy phases
		var errs int64
		for j := range 2 {
			i := j
			if rep%2 == 1 {
				i = 1 - j
			}
			pid := up.cmd.Process.Pid
			if i == 1 {
				pid = px.cmd.Process.Pid
			}
			t0 := cpuTicks(pid)
			res := saturate(bases[i]+k.path, k.body, workers, d)
			r[i] = float64(res.n) / res.secs
			cpu[i] = float64(cpuTicks(pid)-t0) * 1e4 / float64(max(res.n, 1))
			errs += res.errors
		}
		ratios = append(ratios, r[1]/r[0])
		fmt.Printf("%-6s rep %d: direct %7.0f req/s, proxy %7.0f req/s = %5.1f %%; CPU/request: upstream %5.0f µs, proxy %5.0f µs; errors %d\n",
			k.name, rep+1, r[0], r[1], 100*r[1]/r[0], cpu[0], cpu[1], errs)
	}
	fmt.Printf("%-6s median proxy/direct %.1f %%\n", k.name, 100*median(ratios))
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return max(strings.Count(string(b), "processor\t:"), 1)
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
