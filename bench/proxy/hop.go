package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/reelkit/reel/internal/barehop"
)

// The hop phase measures what a proxy adds where it happens: on lo, from
// the kernel's timestamp of the upstream's packet reaching the proxy to the
// kernel's timestamp of the proxy's packet carrying the same bytes to the
// client (and the same for the request on its way up). The load
// generator's and the upstream's scheduling, which set most of the noise
// of end-to-end timings on a shared machine, are outside that interval;
// what is left is the hop's own wake-up, work and write. The bare
// httputil.ReverseProxy and the recording sidecar get requests on one
// open-loop schedule, interleaved in random order, so both see the same
// moments of the machine, and the difference of their quantiles, with a
// block-bootstrap confidence interval, is what recording adds to the hop.
//
// Every request carries a marker (markerLen bytes, "@R" + 8-digit request
// id + "." + 3-digit index; index reqIndex on the request line), and the
// upstream repeats it with each SSE event's index in the event, or in the
// JSON answer, so a packet's marker says which request, which event and —
// by the id — which hop it belongs to.

const (
	markerLen = 14  // "@R" + 8 digits + "." + 3 digits
	reqIndex  = 999 // the marker index of the request itself
	maxEvents = reqIndex
)

func marker(id, index int) string { return fmt.Sprintf("@R%08d.%03d", id, index) }

// parseMarker reads a marker at the start of b.
func parseMarker(b []byte) (id, index int, ok bool) {
	if len(b) < markerLen || b[0] != '@' || b[1] != 'R' || b[10] != '.' {
		return 0, 0, false
	}
	for i := 2; i < markerLen; i++ {
		if i == 10 {
			continue
		}
		c := b[i]
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		if i < 10 {
			id = id*10 + int(c-'0')
		} else {
			index = index*10 + int(c-'0')
		}
	}
	return id, index, true
}

// upstreamMarker returns the marker of a hop-phase request ("m" query
// parameter) without its index, or "" for other requests.
func upstreamMarker(r *http.Request) string {
	m := r.URL.Query().Get("m")
	if len(m) != markerLen {
		return ""
	}
	return m[:10] // "@R" + id
}

// Where a packet goes, seen from the hop.
const (
	reqIn   = iota // client → hop
	reqOut         // hop → upstream
	respIn         // upstream → hop
	respOut        // hop → client
	nLegs
)

// hopPacket classifies one captured Ethernet/IPv4/TCP frame by its ports
// and calls fn for every marker in its payload.
func hopPacket(frame []byte, upstream uint16, hops []uint16, fn func(leg, id, index int)) {
	if len(frame) < 14+20 || binary.BigEndian.Uint16(frame[12:]) != 0x0800 {
		return
	}
	ip := frame[14:]
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:]))
	if ip[9] != 6 || ihl < 20 || total > len(ip) || total < ihl+20 {
		return
	}
	tcp := ip[ihl:total]
	off := int(tcp[12]>>4) * 4
	if off < 20 || off > len(tcp) {
		return
	}
	payload := tcp[off:]
	if len(payload) < markerLen {
		return
	}
	src, dst := binary.BigEndian.Uint16(tcp[0:]), binary.BigEndian.Uint16(tcp[2:])
	leg := -1
	switch {
	case src == upstream:
		leg = respIn
	case dst == upstream:
		leg = reqOut
	case slices.Contains(hops, dst):
		leg = reqIn
	case slices.Contains(hops, src):
		leg = respOut
	default:
		return
	}
	for len(payload) >= markerLen {
		i := bytes.Index(payload, []byte("@R"))
		if i < 0 {
			return
		}
		if id, index, ok := parseMarker(payload[i:]); ok {
			fn(leg, id, index)
			payload = payload[i+markerLen:]
		} else {
			payload = payload[i+2:]
		}
	}
}

// hopTimes holds the first kernel timestamp (ns) of each marker on each
// leg. Keys are id*1000+index.
type hopTimes map[int64]*[nLegs]int64

func (t hopTimes) see(leg, id, index int, ns int64) {
	k := int64(id)*1000 + int64(index)
	e := t[k]
	if e == nil {
		e = new([nLegs]int64)
		t[k] = e
	}
	if e[leg] == 0 {
		e[leg] = ns
	}
}

// hopCapture reads packets until stop is closed and returns the times.
type hopCapture struct {
	sock     *packetSocket
	upstream uint16
	hops     []uint16
	times    hopTimes
	packets  int
	err      error
	done     chan struct{}
	stop     chan struct{}
}

func startHopCapture(upstream uint16, hops []uint16) (*hopCapture, error) {
	s, err := openPacketSocket(append([]uint16{upstream}, hops...), 256<<20)
	if err != nil {
		return nil, err
	}
	c := &hopCapture{sock: s, upstream: upstream, hops: hops, times: hopTimes{}, done: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			frame, ts, err := s.read()
			if err == errNoPacket {
				select {
				case <-c.stop:
					return
				default:
					continue
				}
			}
			if err != nil {
				c.err = err
				return
			}
			c.packets++
			ns := ts.UnixNano()
			hopPacket(frame, upstream, hops, func(leg, id, index int) { c.times.see(leg, id, index, ns) })
		}
	}()
	return c, nil
}

// finish waits for the packets still in the socket (the read timeout
// ends the loop once they are read) and returns the times and the kernel's
// drop count.
func (c *hopCapture) finish() (hopTimes, uint64, error) {
	time.Sleep(50 * time.Millisecond)
	close(c.stop)
	<-c.done
	drops, err := c.sock.drops()
	c.sock.close()
	if c.err != nil {
		err = c.err
	}
	return c.times, drops, err
}

// hopSample is one measured forwarding delay and when it began.
type hopSample struct {
	at int64 // ns, kernel time the bytes reached the hop
	d  int64 // ns spent in the hop
}

// hopSeries are the samples of one quantity (e.g. JSON response) per hop.
type hopSeries [][]hopSample

// The quantities measured, per hop.
const (
	qRequest  = "request"   // the request on its way up: client's packet in → hop's packet to the upstream
	qResponse = "response"  // every answer's bytes on their way down: each SSE event, each JSON answer
	qFirst    = "req+first" // request + the first answer bytes: a JSON exchange's whole added time, an SSE stream's added time to first event
)

var hopQuantities = []string{qRequest, qResponse, qFirst}

// collect turns the times into samples per quantity and hop, for the
// requests with ids from first on (earlier ones are the warm-up or an
// earlier repetition). A marker seen on one leg and not the other is
// counted as missing.
func (t hopTimes) collect(nHops int, first int) (map[string]hopSeries, map[string]int) {
	out := map[string]hopSeries{}
	missing := map[string]int{}
	for _, q := range hopQuantities {
		out[q] = make(hopSeries, nHops)
	}
	keys := make([]int64, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys) // by id, then index: the request (index 999) of an id comes after its events
	leg := func(q string, e *[nLegs]int64, in, out int) (int64, bool) {
		if e[in] == 0 || e[out] == 0 || e[out] < e[in] {
			missing[q]++
			return 0, false
		}
		return e[out] - e[in], true
	}
	for _, k := range keys {
		id, index := int(k/1000), int(k%1000)
		if id < first {
			continue
		}
		hop := (id - first) % nHops
		e := t[k]
		if index != reqIndex {
			if d, ok := leg(qResponse, e, respIn, respOut); ok {
				out[qResponse][hop] = append(out[qResponse][hop], hopSample{at: e[respIn], d: d})
			}
			continue
		}
		d, ok := leg(qRequest, e, reqIn, reqOut)
		if !ok {
			continue
		}
		out[qRequest][hop] = append(out[qRequest][hop], hopSample{at: e[reqIn], d: d})
		if f := t[int64(id)*1000]; f != nil && f[respIn] != 0 && f[respOut] >= f[respIn] {
			out[qFirst][hop] = append(out[qFirst][hop], hopSample{at: e[reqIn], d: d + f[respOut] - f[respIn]})
		}
	}
	return out, missing
}

func quantileNs(v []int64, q float64) int64 {
	if len(v) == 0 {
		return 0
	}
	return v[min(len(v)-1, int(q*float64(len(v))))]
}

func sortedDelays(s []hopSample) []int64 {
	v := make([]int64, len(s))
	for i, x := range s {
		v[i] = x.d
	}
	slices.Sort(v)
	return v
}

// diffCI is a 95 % block-bootstrap interval of quantile q of b minus that
// of a. Samples are grouped into blocks of block length by their start
// time, the same blocks for both hops; resampling whole blocks keeps the
// time correlation (a slow moment slows many samples at once) and the
// pairing of the two hops inside a moment.
func diffCI(a, b []hopSample, q float64, block time.Duration, resamples int, seed uint64) (lo, hi int64) {
	if len(a) == 0 || len(b) == 0 {
		return 0, 0
	}
	t0 := min(a[0].at, b[0].at)
	for _, s := range append(slices.Clone(a), b...) {
		t0 = min(t0, s.at)
	}
	blocks := map[int64]*[2][]int64{}
	add := func(side int, s []hopSample) {
		for _, x := range s {
			k := (x.at - t0) / int64(block)
			bl := blocks[k]
			if bl == nil {
				bl = new([2][]int64)
				blocks[k] = bl
			}
			bl[side] = append(bl[side], x.d)
		}
	}
	add(0, a)
	add(1, b)
	list := make([]*[2][]int64, 0, len(blocks))
	for _, bl := range blocks {
		list = append(list, bl)
	}
	rnd := rand.New(rand.NewPCG(seed, 7))
	diffs := make([]int64, resamples)
	var va, vb []int64
	for r := range resamples {
		va, vb = va[:0], vb[:0]
		for range list {
			bl := list[rnd.IntN(len(list))]
			va, vb = append(va, bl[0]...), append(vb, bl[1]...)
		}
		slices.Sort(va)
		slices.Sort(vb)
		diffs[r] = quantileNs(vb, q) - quantileNs(va, q)
	}
	slices.Sort(diffs)
	return diffs[resamples*25/1000], diffs[resamples*975/1000]
}

func us(ns int64) string { return fmt.Sprintf("%.1f", float64(ns)/1e3) }

// serveBareProxy serves the sidecar's peer, barehop's stock reverse proxy.
func serveBareProxy(upstream string) {
	u, err := url.Parse(upstream)
	if err != nil {
		log.Fatal(err)
	}
	ln := listenLoopback()
	fmt.Println(ln.Addr())
	log.Fatal(http.Serve(ln, barehop.New(u)))
}

func portOf(addr string) uint16 {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return uint16(n)
}

// hopPhase runs the hop measurement: the bare proxy, the sidecar px and
// (with "proxy" in o.hops) reel's proxy without recording, all in front of
// up, interleaved, per kind and repetition, then pooled over the
// repetitions. Every hop is compared with the bare one.
func hopPhase(o benchOpts, up, px *child, dir string, small, chat []byte) {
	var names, addrs []string
	for _, h := range strings.Split(o.hops, ",") {
		var c *child
		switch h {
		case "bare":
			c = start(o.pinHops, "-mode", "bare", "-upstream", "http://"+up.addrs[0])
			defer c.stop()
		case "proxy":
			c = start(o.pinHops, "-mode", "proxy", "-upstream", "http://"+up.addrs[0], "-out", dir+"/hop-proxy", "-record=false")
			defer c.stop()
		case "sidecar":
			c = px
		default:
			// sidecar+KEY=VALUE[+KEY=VALUE]: another sidecar with these
			// environment variables (GOGC=off, GOMAXPROCS=4, ...), so a
			// runtime setting is compared in the same run.
			base, env, _ := strings.Cut(h, "+")
			if base != "sidecar" || !strings.Contains(env, "=") {
				log.Fatalf("hop phase: unknown hop %q (bare, proxy, sidecar, sidecar+KEY=VALUE)", h)
			}
			args := []string{"-mode", "proxy", "-upstream", "http://" + up.addrs[0], "-out", fmt.Sprintf("%s/hop-%d", dir, len(names)),
				"-row-group-bytes", strconv.FormatInt(o.rowGroup, 10), "-memory-limit", strconv.FormatInt(o.memLimit, 10)}
			cmd := exec.Command(os.Args[0], args...)
			if o.pinHops != "" {
				cmd = exec.Command("taskset", append([]string{"-c", o.pinHops, os.Args[0]}, args...)...)
			}
			cmd.Env = append(os.Environ(), strings.Split(env, "+")...)
			c = startCmd(cmd)
			defer c.stop()
		}
		names, addrs = append(names, h), append(addrs, c.addrs[0])
	}
	if len(names) < 2 || names[0] != "bare" {
		log.Fatalf("hop phase: -hops %q: bare first, then at least one other", o.hops)
	}
	var bases []string
	var ports []uint16
	for _, a := range addrs {
		bases, ports = append(bases, "http://"+a), append(ports, portOf(a))
	}
	fmt.Printf("\n# hop: what each proxy adds between the kernel timestamps of the same bytes entering and leaving it on lo.\n")
	fmt.Printf("# request: client's packet in → hop's packet to the upstream; response: upstream's packet in → hop's packet to\n")
	fmt.Printf("# the client, for every SSE event and JSON answer; req+first: request + first answer bytes (a JSON exchange's whole\n")
	fmt.Printf("# added time). Hops %s interleaved at %d req/s each, %v per repetition, %d repetitions;\n", o.hops, o.hopRate, o.d, o.reps)
	fmt.Printf("# pinning: hops %q, load and upstream %q; load average %s. Times in µs; add = hop − bare (sidecar-proxy:\n", o.pinHops, o.pinLoad, loadavg())
	fmt.Printf("# sidecar − reel's proxy without recording, what recording alone adds); CI: 95 %% block\n")
	fmt.Printf("# bootstrap (%v blocks, %d resamples) of hop p99 − bare p99; gc, sch p999: the sidecar's GC cycles and P wait.\n", hopBlock, hopResamples)
	fmt.Printf("%-8s %-9s %-13s %4s %7s %8s %8s %8s %8s %8s %8s %9s %19s %5s %6s %6s %4s %8s\n", "kind", "quantity", "hop", "rep", "n", "base p50", "hop p50", "add p50",
		"base p99", "hop p99", "add p99", "add p999", "add p99 95% CI", "miss", "drops", "errors", "gc", "sch p999")
	nextID := 1
	for _, k := range []kind{{"json", "/json", small}, {"sse", "/sse", chat}, {"sse-gen", "/sse?gap=2ms", chat}} {
		if !slices.Contains(strings.Split(o.kinds, ","), k.name) {
			continue
		}
		interleaved(bases, k, o.hopRate, o.d/5, 0, nil) // warm-up, unmarked
		pooled := map[string]hopSeries{}
		for rep := range o.reps {
			capt, err := startHopCapture(portOf(up.addrs[0]), ports)
			if err != nil {
				log.Fatalf("hop phase: %v", err)
			}
			first := nextID
			nextID += len(bases) * int(o.d.Seconds()*float64(o.hopRate))
			gc0 := metricSum(px.addrs[1], "go_gc_duration_seconds_count")
			rh0 := readRuntimeHists(px.addrs[1])
			res := interleaved(bases, k, o.hopRate, o.d, uint64(rep+1), func(side, i int) string {
				sep := "?"
				if strings.Contains(k.path, "?") {
					sep = "&"
				}
				return sep + "m=" + marker(first+i*len(bases)+side, reqIndex)
			})
			rh1 := readRuntimeHists(px.addrs[1])
			gc1 := metricSum(px.addrs[1], "go_gc_duration_seconds_count")
			s999, _ := histQuantile(rh0[runtimeHists[0]], rh1[runtimeHists[0]], 0.999)
			times, drops, err := capt.finish()
			if err != nil {
				log.Fatalf("hop phase: capture: %v", err)
			}
			var errs int64
			for _, r := range res {
				errs += r.errors
			}
			series, missing := times.collect(len(bases), first)
			for _, q := range hopQuantities {
				s := series[q]
				if pooled[q] == nil {
					pooled[q] = make(hopSeries, len(bases))
				}
				for h := range s {
					pooled[q][h] = append(pooled[q][h], s[h]...)
				}
				extra := fmt.Sprintf("%5d %6d %6d %4.0f %8s", missing[q], drops, errs, gc1-gc0, ms(s999))
				printHopRows(k.name, q, strconv.Itoa(rep+1), names, s, extra, uint64(rep+1))
			}
		}
		for _, q := range hopQuantities {
			printHopRows(k.name, q, "all", names, pooled[q], "", 99)
		}
	}
}

const (
	hopBlock     = 100 * time.Millisecond
	hopResamples = 400
)

// printHopRows prints one row per hop after the first (bare), compared
// with it, and, when both ran, the sidecar compared with reel's proxy
// without recording (what recording alone adds).
func printHopRows(kind, quantity, rep string, names []string, s hopSeries, extra string, seed uint64) {
	type pair struct{ base, hop int }
	var pairs []pair
	for h := 1; h < len(s); h++ {
		pairs = append(pairs, pair{0, h})
	}
	if p, sc := slices.Index(names, "proxy"), slices.Index(names, "sidecar"); p > 0 && sc > 0 {
		pairs = append(pairs, pair{p, sc})
	}
	for _, pr := range pairs {
		a, b := sortedDelays(s[pr.base]), sortedDelays(s[pr.hop])
		lo, hi := diffCI(s[pr.base], s[pr.hop], 0.99, hopBlock, hopResamples, seed)
		name := names[pr.hop]
		if pr.base != 0 {
			name += "-" + names[pr.base]
		}
		fmt.Printf("%-8s %-9s %-13s %4s %7d %8s %8s %8s %8s %8s %8s %9s %19s %s\n", kind, quantity, name, rep, min(len(a), len(b)),
			us(quantileNs(a, 0.5)), us(quantileNs(b, 0.5)), us(quantileNs(b, 0.5)-quantileNs(a, 0.5)),
			us(quantileNs(a, 0.99)), us(quantileNs(b, 0.99)), us(quantileNs(b, 0.99)-quantileNs(a, 0.99)),
			us(quantileNs(b, 0.999)-quantileNs(a, 0.999)), ci(lo, hi), extra)
	}
	if dir := os.Getenv("REEL_BENCH_HOP_DUMP"); dir != "" && rep != "all" {
		dumpHop(dir, kind+"-"+quantity+"-"+rep, names, s)
	}
}

func ci(lo, hi int64) string { return fmt.Sprintf("[%s, %s]", us(lo), us(hi)) }

// dumpHop writes the samples (start ns, delay ns, hop) for a closer look
// at the tail: DIR/NAME.tsv.
func dumpHop(dir, name string, names []string, s hopSeries) {
	f, err := os.Create(dir + "/" + name + ".tsv")
	if err != nil {
		log.Print(err)
		return
	}
	defer f.Close()
	for h, v := range s {
		for _, x := range v {
			fmt.Fprintf(f, "%d\t%d\t%s\n", x.at, x.d, names[h])
		}
	}
}
