package capture

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Stats counts what an Engine saw. Every counter only grows; they may be
// read from any goroutine while the engine runs.
type Stats struct {
	packets     atomic.Uint64
	bytes       atomic.Uint64
	kernelRecv  atomic.Uint64
	kernelDrops atomic.Uint64
	gaps        atomic.Uint64
	gapBytes    atomic.Uint64
	connections atomic.Uint64
	exchanges   atomic.Uint64
	notHTTP     atomic.Uint64
	orphans     atomic.Uint64

	mu         sync.Mutex // guards the two maps
	skipped    map[string]uint64
	incomplete map[string]uint64
}

func newStats() *Stats {
	return &Stats{skipped: make(map[string]uint64), incomplete: make(map[string]uint64)}
}

func (s *Stats) skip(reason string) {
	s.mu.Lock()
	s.skipped[reason]++
	s.mu.Unlock()
}

func (s *Stats) addIncomplete(reason string) {
	s.mu.Lock()
	s.incomplete[reason]++
	s.mu.Unlock()
}

// addKernel accumulates a socket's PACKET_STATISTICS, which count since
// the previous read.
func (s *Stats) addKernel(recv, drops uint64) {
	s.kernelRecv.Add(recv)
	s.kernelDrops.Add(drops)
}

// Snapshot is a copy of the counters at one moment.
type Snapshot struct {
	Packets     uint64            // frames handed to the engine
	Bytes       uint64            // their captured bytes
	KernelRecv  uint64            // frames the kernel passed the filter (live capture)
	KernelDrops uint64            // frames the kernel dropped because the socket buffer was full (live capture)
	Gaps        uint64            // places where reassembly gave up on missing bytes
	GapBytes    uint64            // bytes given up
	Connections uint64            // TCP connections tracked
	Exchanges   uint64            // exchanges emitted, complete or not
	NotHTTP     uint64            // connection directions given up as not HTTP/1.1
	Orphans     uint64            // responses to requests already recorded incomplete (not recorded again)
	Skipped     map[string]uint64 // packets not reassembled, by reason
	Incomplete  map[string]uint64 // incomplete exchanges by reason (Reason constants)
}

// Snapshot copies the counters.
func (s *Stats) Snapshot() Snapshot {
	out := Snapshot{
		Packets: s.packets.Load(), Bytes: s.bytes.Load(),
		KernelRecv: s.kernelRecv.Load(), KernelDrops: s.kernelDrops.Load(),
		Gaps: s.gaps.Load(), GapBytes: s.gapBytes.Load(),
		Connections: s.connections.Load(), Exchanges: s.exchanges.Load(), NotHTTP: s.notHTTP.Load(), Orphans: s.orphans.Load(),
		Skipped: make(map[string]uint64), Incomplete: make(map[string]uint64),
	}
	s.mu.Lock()
	for k, v := range s.skipped {
		out.Skipped[k] = v
	}
	for k, v := range s.incomplete {
		out.Incomplete[k] = v
	}
	s.mu.Unlock()
	return out
}

// Collector exposes the counters as Prometheus metrics (reel_capture_*), to
// be registered on the recorder's registry next to recorder.Metrics.
func (s *Stats) Collector() prometheus.Collector { return collector{s} }

var (
	descPackets     = prometheus.NewDesc("reel_capture_packets_total", "Frames captured and handed to the engine.", nil, nil)
	descBytes       = prometheus.NewDesc("reel_capture_bytes_total", "Captured bytes of those frames.", nil, nil)
	descKernelRecv  = prometheus.NewDesc("reel_capture_kernel_packets_total", "Frames the kernel passed the capture filter (live capture).", nil, nil)
	descKernelDrops = prometheus.NewDesc("reel_capture_kernel_drops_total", "Frames the kernel dropped because the capture socket was full (live capture).", nil, nil)
	descGaps        = prometheus.NewDesc("reel_capture_reassembly_gaps_total", "Places where TCP reassembly gave up on missing bytes.", nil, nil)
	descGapBytes    = prometheus.NewDesc("reel_capture_reassembly_gap_bytes_total", "Bytes TCP reassembly gave up on.", nil, nil)
	descConns       = prometheus.NewDesc("reel_capture_connections_total", "TCP connections tracked.", nil, nil)
	descExchanges   = prometheus.NewDesc("reel_capture_exchanges_total", "Exchanges paired from captured traffic, complete or not.", nil, nil)
	descNotHTTP     = prometheus.NewDesc("reel_capture_not_http_total", "Connection directions given up as not HTTP/1.1.", nil, nil)
	descOrphans     = prometheus.NewDesc("reel_capture_orphan_responses_total", "Responses to requests already recorded incomplete (lost responses realigned).", nil, nil)
	descSkipped     = prometheus.NewDesc("reel_capture_skipped_packets_total", "Frames not reassembled, by reason.", []string{"reason"}, nil)
	descIncomplete  = prometheus.NewDesc("reel_capture_incomplete_exchanges_total", "Exchanges recorded with complete=false, by reason.", []string{"reason"}, nil)
)

type collector struct{ s *Stats }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPackets, descBytes, descKernelRecv, descKernelDrops, descGaps,
		descGapBytes, descConns, descExchanges, descNotHTTP, descOrphans, descSkipped, descIncomplete} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.Snapshot()
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{{descPackets, snap.Packets}, {descBytes, snap.Bytes}, {descKernelRecv, snap.KernelRecv},
		{descKernelDrops, snap.KernelDrops}, {descGaps, snap.Gaps}, {descGapBytes, snap.GapBytes},
		{descConns, snap.Connections}, {descExchanges, snap.Exchanges}, {descNotHTTP, snap.NotHTTP},
		{descOrphans, snap.Orphans}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
	labelled := func(d *prometheus.Desc, m map[string]uint64) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(m[k]), k)
		}
	}
	labelled(descSkipped, snap.Skipped)
	labelled(descIncomplete, snap.Incomplete)
}
