// Command proxy benchmarks reel's recording sidecar against direct access to
// the same upstream, on loopback: added latency (p50/p99) at a fixed rate,
// throughput at saturation, for small JSON and for SSE streams, and the
// recorder's peak RSS at 2k req/s with 16 KiB bodies.
//
// It runs the upstream and the recording proxy (proxy + pipeline + redactor
// + Parquet writer, wired as `reel record` wires them) as child processes of
// itself, so the proxy's RSS is its own:
//
//	go run ./bench/proxy -duration 5s
package main

import (
	"bufio"
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
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/proxy"
	"github.com/reelkit/reel/redact"
)

func main() {
	mode := flag.String("mode", "bench", "bench, or (internal) upstream / proxy")
	upstream := flag.String("upstream", "", "proxy mode: upstream URL")
	out := flag.String("out", "", "proxy mode: dataset directory")
	dur := flag.Duration("duration", 5*time.Second, "length of each measured phase")
	rate := flag.Int("rate", 1000, "fixed request rate for the latency phases")
	conc := flag.Int("concurrency", 32, "closed-loop workers for the saturation phases")
	memOnly := flag.Bool("memory-only", false, "run only the memory phase")
	rowGroup := flag.Int64("row-group-bytes", 8<<20, "proxy mode: writer row-group bound, as reel record sets it")
	memLimit := flag.Int64("memory-limit", 100<<20, "proxy mode: Go soft memory limit, as reel record sets it (0: none)")
	record := flag.Bool("record", true, "record (false: proxy only, to separate proxying from recording costs)")
	flag.Parse()
	switch *mode {
	case "upstream":
		serveUpstream()
	case "proxy":
		if *memLimit > 0 {
			debug.SetMemoryLimit(*memLimit)
		}
		serveProxy(*upstream, *out, *record, *rowGroup)
	default:
		bench(*dur, *rate, *conc, *record, *memOnly, *rowGroup, *memLimit)
	}
}

// serveUpstream is a trivial inference server: /json answers a small JSON
// (or ?size=N bytes), /sse streams 16 chat chunks flushed one by one.
func serveUpstream() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr())
	chunk := []byte(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"token "}}]}` + "\n\n")
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("X-Batch-Size", "8")
			f := w.(http.Flusher)
			for range 16 {
				w.Write(chunk)
				f.Flush()
			}
			w.Write([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":16}}\n\ndata: [DONE]\n\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if n, _ := strconv.Atoi(r.URL.Query().Get("size")); n > 0 {
			w.Write(jsonBody(n))
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
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: out, Recorder: "bench", RedactionFingerprint: red.Fingerprint(), RowGroupBytes: rowGroup})
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := recorder.NewMetrics(reg)
	pipe := recorder.NewPipeline(w, red, recorder.PipelineOptions{Metrics: m})
	opts := proxy.Options{Upstream: u, Metrics: m}
	if record {
		opts.Assembler, opts.Pipeline = recorder.NewAssembler(recorder.Config{Recorder: "bench"}), pipe
	}
	p, err := proxy.New(opts)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ln.Addr(), mln.Addr())
	go http.Serve(mln, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
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
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	pipe.Close(sctx)
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

func start(args ...string) *child {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
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

func bench(d time.Duration, rate, conc int, record, memOnly bool, rowGroup, memLimit int64) {
	dir, err := os.MkdirTemp("", "reel-bench-proxy-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	up := start("-mode", "upstream")
	defer up.stop()
	px := start("-mode", "proxy", "-upstream", "http://"+up.addrs[0], "-out", dir, "-record="+strconv.FormatBool(record),
		"-row-group-bytes", strconv.FormatInt(rowGroup, 10), "-memory-limit", strconv.FormatInt(memLimit, 10))
	defer px.stop()
	direct, viaProxy := "http://"+up.addrs[0], "http://"+px.addrs[0]
	small := []byte(`{"user":1234,"items":[1,2,3,4,5,6,7,8]}`)
	chat := jsonBody(600)

	if memOnly {
		goto memory
	}
	fmt.Printf("# fixed rate %d req/s, %v per phase (latency from due time to last byte)\n", rate, d)
	fmt.Printf("%-6s %-7s %9s %9s %9s %7s\n", "kind", "path", "p50", "p99", "max", "errors")
	for _, k := range []struct {
		name, path string
		body       []byte
	}{{"json", "/json", small}, {"sse", "/sse", chat}} {
		var p [2]*result
		for i, base := range []string{direct, viaProxy} {
			fixedRate(base+k.path, k.body, rate, d/5) // warm-up
			p[i] = fixedRate(base+k.path, k.body, rate, d)
			fmt.Printf("%-6s %-7s %9v %9v %9v %7d\n", k.name, []string{"direct", "proxy"}[i], p[i].q(0.5), p[i].q(0.99), p[i].q(1), p[i].errors)
		}
		fmt.Printf("%-6s added   %9v %9v\n", k.name, p[1].q(0.5)-p[0].q(0.5), p[1].q(0.99)-p[0].q(0.99))
	}
	fmt.Printf("\n# saturation, %d closed-loop workers, %v per phase\n", conc, d)
	for _, k := range []struct {
		name, path string
		body       []byte
	}{{"json", "/json", small}, {"sse", "/sse", chat}} {
		var r [2]float64
		for i, base := range []string{direct, viaProxy} {
			res := saturate(base+k.path, k.body, conc, d)
			r[i] = float64(res.n) / res.secs
			fmt.Printf("%-6s %-7s %9.0f req/s %7d errors\n", k.name, []string{"direct", "proxy"}[i], r[i], res.errors)
		}
		fmt.Printf("%-6s proxy/direct %.1f %%\n", k.name, 100*r[1]/r[0])
	}
memory:
	fmt.Printf("\n# memory: 2000 req/s, 16 KiB request and response bodies, %v\n", d)
	big := jsonBody(16 << 10)
	res := fixedRate(viaProxy+"/json?size=16384", big, 2000, d)
	fmt.Printf("proxy p50 %v p99 %v errors %d; recorder peak RSS %.1f MiB; recorded %.0f, dropped %.0f\n",
		res.q(0.5), res.q(0.99), res.errors, float64(vmHWM(px.cmd.Process.Pid))/1024,
		metricSum(px.addrs[1], "reel_recorder_exchanges_total"), metricSum(px.addrs[1], "reel_recorder_dropped_total"))
}
