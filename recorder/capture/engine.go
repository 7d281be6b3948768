package capture

import (
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/reassembly"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
)

// Defaults used when Options leaves a field zero.
const (
	DefaultPagesPerConnection = 512     // 1900-byte pages: about 1 MiB of out-of-order data per connection
	DefaultPagesTotal         = 1 << 15 // about 60 MiB of out-of-order data in all
	DefaultMaxConnections     = 1 << 16
	DefaultMaxPipelined       = 256
	DefaultGapTimeout         = 2 * time.Second
	DefaultIdleTimeout        = 10 * time.Minute
)

// ErrNoPorts is returned when Options.Ports is empty: without the server
// ports, client and server cannot be told apart.
var ErrNoPorts = errors.New("no server ports configured")

// builder is what the engine needs of a recorder.Recorder (or, with only
// Emit, of a recorder.Assembler): exchanges and connection ids.
type builder interface {
	Begin(start time.Time, conn recorder.ConnInfo) *recorder.Recording
	NewConn() int64
}

// Options configure an Engine. Ports and a Recorder (or Emit) are
// required; the zero value of every other field works.
type Options struct {
	// Ports are the server's TCP ports: segments to them are requests,
	// segments from them responses. Other TCP traffic is skipped.
	Ports []uint16
	// Recorder builds the exchanges (sequence numbers, connection ids, the
	// Config.MaxBody cap) and takes them as they end, in batches
	// (Recorder.RecordBatch: filter, sampling, queue): after every
	// maxPending exchanges, at every Flush and Finish, and in live capture
	// after every ring block. Required unless Emit is set.
	Recorder *recorder.Recorder
	// Emit, when set, receives every exchange instead of Recorder.Record,
	// raw (not yet enriched or redacted), in the order responses end: for
	// tests and programs that store exchanges themselves. Without a
	// Recorder the exchanges are built with a zero recorder.Config. It is
	// called from the goroutine that feeds packets; the exchange is Emit's
	// to keep.
	Emit func(*formats.Exchange)
	// MaxHeader bounds a start line plus headers (default 64 KiB); longer
	// heads are recorded as bad_http.
	MaxHeader int
	// PagesPerConnection and PagesTotal bound the out-of-order data the TCP
	// reassembly buffers, in 1900-byte pages (defaults DefaultPagesPerConnection
	// and DefaultPagesTotal). When a bound is hit the missing bytes are given
	// up as a gap.
	PagesPerConnection int
	PagesTotal         int
	// MaxConnections bounds the connections tracked at once (default
	// DefaultMaxConnections); packets of further connections are skipped
	// and counted.
	MaxConnections int
	// MaxPipelined bounds the requests waiting for their responses on one
	// connection (default DefaultMaxPipelined).
	MaxPipelined int
	// GapTimeout is how long, in packet time, reassembly waits for a missing
	// segment before recording a gap (default 2s).
	GapTimeout time.Duration
	// IdleTimeout closes connections without packets for this long, in
	// packet time (default 10m).
	IdleTimeout time.Duration
}

// Engine turns captured packets into exchanges: it decodes link, IP and TCP
// headers, reassembles TCP streams with gopacket/reassembly, parses
// HTTP/1.1 in both directions and pairs requests with responses. Time is
// packet time throughout, so an import is deterministic. An Engine is not
// safe for concurrent use: feed it from one goroutine. Its Stats and
// Collector may be read from any goroutine.
type Engine struct {
	opts  Options
	asm   builder
	ports map[uint16]bool
	dec   decoder
	pool  *reassembly.StreamPool
	tcp   *reassembly.Assembler
	stats *Stats

	record  func([]*formats.Exchange) // Recorder.RecordBatch; nil: every exchange goes to opts.Emit
	pending []*formats.Exchange       // ended exchanges not yet handed to record

	conns     int                 // connections being tracked
	live      map[connKey]*stream // both orientations of every tracked connection
	lastFlush time.Time
	now       time.Time // latest packet time
	ackedGap  time.Time // when a receiver acknowledged bytes the capture lacks; zero if none pending
}

// ackedGapWait is how long (packet time) the engine waits before giving up
// on bytes that their receiver has already acknowledged: they were lost by
// the capture (kernel drops, snap length), so no retransmission will come.
const ackedGapWait = 5 * time.Millisecond

// NewEngine returns an Engine for opts.
func NewEngine(opts Options) (*Engine, error) {
	if len(opts.Ports) == 0 {
		return nil, ErrNoPorts
	}
	var asm builder
	var record func([]*formats.Exchange)
	switch {
	case opts.Recorder != nil:
		asm = opts.Recorder
		if opts.Emit == nil {
			record = opts.Recorder.RecordBatch
		}
	case opts.Emit != nil:
		asm = recorder.NewAssembler(recorder.Config{})
	default:
		return nil, errors.New("capture: Options.Recorder is nil")
	}
	if opts.PagesPerConnection <= 0 {
		opts.PagesPerConnection = DefaultPagesPerConnection
	}
	if opts.PagesTotal <= 0 {
		opts.PagesTotal = DefaultPagesTotal
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.MaxPipelined <= 0 {
		opts.MaxPipelined = DefaultMaxPipelined
	}
	if opts.GapTimeout <= 0 {
		opts.GapTimeout = DefaultGapTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	e := &Engine{opts: opts, asm: asm, record: record, ports: make(map[uint16]bool), stats: newStats(),
		live: make(map[connKey]*stream)}
	for _, p := range opts.Ports {
		e.ports[p] = true
	}
	e.pool = reassembly.NewStreamPool(&factory{e: e})
	e.tcp = reassembly.NewAssembler(e.pool)
	e.tcp.MaxBufferedPagesPerConnection = opts.PagesPerConnection
	e.tcp.MaxBufferedPagesTotal = opts.PagesTotal
	return e, nil
}

// Stats returns the engine's counters.
func (e *Engine) Stats() *Stats { return e.stats }

func (e *Engine) emit(x *formats.Exchange) {
	e.stats.exchanges.Add(1)
	if e.record == nil {
		e.opts.Emit(x)
		return
	}
	e.pending = append(e.pending, x)
	if len(e.pending) >= maxPending {
		e.submitPending()
	}
}

// maxPending bounds the exchanges the engine holds back to hand over as one
// batch; their bodies are already within Config.MaxBody each.
const maxPending = 64

// submitPending hands the exchanges ended since the last call to the
// recorder, as one batch.
func (e *Engine) submitPending() {
	if len(e.pending) == 0 {
		return
	}
	e.record(e.pending)
	clear(e.pending) // the recorder owns them now
	e.pending = e.pending[:0]
}

// assemblerContext carries a packet's capture time into reassembly. Each
// packet needs its own: reassembly keeps the context of every segment it
// queues out of order, and reports its time when the segment is delivered.
type assemblerContext struct{ ts time.Time }

func (a *assemblerContext) GetCaptureInfo() gopacket.CaptureInfo {
	return gopacket.CaptureInfo{Timestamp: a.ts}
}

// Packet processes one captured frame of the given link type. data is not
// retained after Packet returns.
func (e *Engine) Packet(link LinkType, data []byte, ci gopacket.CaptureInfo) {
	e.stats.packets.Add(1)
	e.stats.bytes.Add(uint64(len(data)))
	if ci.Length > ci.CaptureLength && ci.CaptureLength > 0 {
		// Snap length shorter than the packet (GRO/TSO on a live capture,
		// tcpdump -s on a file): reassembly sees a gap where bytes are missing.
		e.stats.skip(skipTruncated)
	}
	flow, tcp, why := e.dec.decode(link, data)
	if why != "" {
		e.stats.skip(why)
		return
	}
	if !e.ports[uint16(tcp.SrcPort)] && !e.ports[uint16(tcp.DstPort)] {
		e.stats.skip(skipPort)
		return
	}
	var bare *stream // the connection of a segment without data
	if len(tcp.Payload) == 0 && !tcp.SYN {
		key := connKey{flow, tcp.TransportFlow()}
		if bare = e.live[key]; bare == nil {
			// A bare ACK, FIN or RST of a connection not tracked (the last
			// ACK after both FINs, usually): reassembly would open a
			// connection for it that only the idle timeout would close.
			e.stats.skip(skipNoConn)
			return
		}
		if tcp.FIN || tcp.RST || !bare.bareAck(key, tcp) {
			bare = nil
		}
	}
	ts := ci.Timestamp
	if ts.After(e.now) {
		e.now = ts
	}
	if bare == nil {
		e.tcp.AssembleWithContext(flow, tcp, &assemblerContext{ts: ts})
	}
	if !e.ackedGap.IsZero() && e.now.Sub(e.ackedGap) >= ackedGapWait {
		// Deliver what waits behind bytes the capture lost, instead of
		// stalling those connections for GapTimeout.
		e.ackedGap = time.Time{}
		e.tcp.FlushWithOptions(reassembly.FlushOptions{T: e.now.Add(-ackedGapWait)})
	}
	e.maybeFlush()
}

// maybeFlush gives up on missing segments older than GapTimeout and closes
// idle connections, at most every quarter GapTimeout of packet time.
func (e *Engine) maybeFlush() {
	if e.now.Sub(e.lastFlush) < e.opts.GapTimeout/4 {
		return
	}
	e.lastFlush = e.now
	e.Flush(e.now)
}

// Flush gives up on segments missing for longer than GapTimeout before now
// and closes connections idle for longer than IdleTimeout. Live capture
// calls it periodically with the wall clock; imports are flushed by packet
// time as they go.
func (e *Engine) Flush(now time.Time) {
	e.tcp.FlushWithOptions(reassembly.FlushOptions{T: now.Add(-e.opts.GapTimeout), TC: now.Add(-e.opts.IdleTimeout)})
	e.submitPending()
}

// Finish flushes everything still buffered and ends every connection; their
// unfinished exchanges are recorded incomplete. Feed no packets after it.
// (An Engine holds no goroutines or files, so it has no Close; see the
// Close convention in package formats.)
func (e *Engine) Finish() {
	e.tcp.FlushAll()
	e.submitPending()
}

// connKey is one orientation of a connection: its IP and TCP flows.
type connKey struct{ net, tcp gopacket.Flow }

// factory creates a stream per TCP connection.
type factory struct{ e *Engine }

func (f *factory) New(netFlow, tcpFlow gopacket.Flow, tcp *layers.TCP, _ reassembly.AssemblerContext) reassembly.Stream {
	e := f.e
	if e.conns >= e.opts.MaxConnections {
		e.stats.skip(skipConnLimit)
		return nullStream{}
	}
	e.conns++
	e.stats.connections.Add(1)
	// The first packet's sender is reassembly's "client"; decide by port.
	toServer := e.ports[uint16(tcp.DstPort)]
	if toServer && e.ports[uint16(tcp.SrcPort)] {
		toServer = !(tcp.SYN && tcp.ACK) // both ends on server ports: trust the handshake
	}
	client := net.JoinHostPort(netFlow.Src().String(), strconv.Itoa(int(tcp.SrcPort)))
	c2s := reassembly.TCPDirClientToServer
	if !toServer {
		client = net.JoinHostPort(netFlow.Dst().String(), strconv.Itoa(int(tcp.DstPort)))
		c2s = reassembly.TCPDirServerToClient
	}
	s := &stream{e: e, c2s: c2s, http: newHTTPConn(e, e.asm.NewConn(), client), key: connKey{netFlow, tcpFlow}}
	s.http.seqs = s
	e.live[s.key] = s
	e.live[connKey{netFlow.Reverse(), tcpFlow.Reverse()}] = s
	return s
}

// stream is the reassembly.Stream of one connection.
type stream struct {
	e       *Engine
	key     connKey                     // the orientation of the packet that opened the connection
	c2s     reassembly.TCPFlowDirection // reassembly's direction of client-to-server bytes
	http    *httpConn
	rst     bool
	last    [2]time.Time // latest data time per direction (0 request, 1 response)
	done    [2]bool      // the direction's parser has seen its end
	base    [2]uint32    // sequence number of each direction's stream offset 0
	hasBase [2]bool
	// delivered counts the stream bytes handed to each parser, gaps included.
	delivered [2]int64
	// acked is, per direction, how far the other side has acknowledged
	// its stream (offset, one more for a FIN).
	acked [2]int64
	// segs are the client's data segments from the request being read on,
	// for clientAck: at most maxSegs, pruned as requests are parsed.
	segs []segInfo
}

const maxSegs = 4096

// segInfo is what seqSource needs of one data segment.
type segInfo struct{ seq, end, ack uint32 }

func (s *stream) clientAck(pos int64) (uint32, bool) {
	if !s.hasBase[0] {
		return 0, false
	}
	seq := s.base[0] + uint32(pos)
	for i := len(s.segs) - 1; i >= 0; i-- {
		if g := &s.segs[i]; !seqBefore(seq, g.seq) && seqBefore(seq, g.end) {
			return g.ack, true
		}
	}
	return 0, false
}

// keepSeg records a client data segment, first dropping those wholly
// before the request being read (their requests are parsed already).
func (s *stream) keepSeg(tcp *layers.TCP) {
	keep := s.delivered[0]
	if s.http.req.inMsg {
		keep = s.http.reqPos
	}
	from := s.base[0] + uint32(keep)
	i := 0
	for i < len(s.segs) && !seqBefore(from, s.segs[i].end) {
		i++
	}
	if len(s.segs)-i >= maxSegs {
		i++
	}
	if i > 0 {
		s.segs = append(s.segs[:0], s.segs[i:]...)
	}
	s.segs = append(s.segs, segInfo{seq: tcp.Seq, end: tcp.Seq + uint32(len(tcp.Payload)), ack: tcp.Ack})
}

func (s *stream) serverSeq(pos int64) (uint32, bool) {
	return s.base[1] + uint32(pos), s.hasBase[1]
}

// noteAck notes an acknowledgement sent in direction d of bytes the other
// direction has not delivered yet (one more for its FIN): the capture lost
// them, and the engine gives them up after ackedGapWait.
func (s *stream) noteAck(d int, tcp *layers.TCP) {
	if o := 1 - d; tcp.ACK && s.hasBase[o] && !s.done[o] {
		rel := tcp.Ack - s.base[o]
		if rel >= 1<<31 {
			return
		}
		s.acked[o] = max(s.acked[o], int64(rel))
		if int64(rel) > s.delivered[o]+1 && s.e.ackedGap.IsZero() {
			s.e.ackedGap = s.e.now
		}
	}
}

func (s *stream) requestHeld() bool {
	return s.hasBase[0] && !s.done[0] && s.acked[0] > s.delivered[0]+1
}

// bareAck handles a segment with no data, SYN, FIN or RST, seen with
// orientation key, without reassembly, when reassembly would do nothing
// with it: both directions have begun and it sits exactly at the next
// byte expected in its direction. Of what reassembly does for such a
// segment only the acknowledgement check matters (its other effect, the
// connection's last-seen time for IdleTimeout, is kept by the data). It
// reports false, leaving the segment to reassembly, otherwise. About half
// the packets of a streamed response are such acknowledgements.
func (s *stream) bareAck(key connKey, tcp *layers.TCP) bool {
	dir := reassembly.TCPDirClientToServer // key is the orientation of the connection's first packet
	if key != s.key {
		dir = reassembly.TCPDirServerToClient
	}
	d := 0
	if dir != s.c2s {
		d = 1
	}
	if !s.hasBase[0] || !s.hasBase[1] || s.done[d] || tcp.Seq != s.base[d]+uint32(s.delivered[d]) {
		return false
	}
	s.noteAck(d, tcp)
	return true
}

func (s *stream) Accept(tcp *layers.TCP, _ gopacket.CaptureInfo, dir reassembly.TCPFlowDirection, nextSeq reassembly.Sequence, start *bool, _ reassembly.AssemblerContext) bool {
	if tcp.RST {
		s.rst = true
	}
	d := 0
	if dir != s.c2s {
		d = 1
	}
	if nextSeq == -1 && !s.hasBase[d] {
		s.hasBase[d] = true
		s.base[d] = tcp.Seq
		if tcp.SYN {
			s.base[d]++
		} else if !*start {
			// No handshake seen (the capture began mid-connection): start
			// here; the HTTP parser skips to the next start line.
			*start = true
		}
	}
	s.noteAck(d, tcp)
	if d == 0 && len(tcp.Payload) > 0 && tcp.ACK && s.hasBase[0] {
		s.keepSeg(tcp)
	}
	return true
}

func (s *stream) ReassembledSG(sg reassembly.ScatterGather, _ reassembly.AssemblerContext) {
	dir, _, end, skip := sg.Info()
	d := 0
	p := s.http.req
	if dir != s.c2s {
		d, p = 1, s.http.resp
	}
	avail, _ := sg.Lengths()
	s.delivered[d] += int64(max(skip, 0) + avail)
	if skip > 0 {
		s.e.stats.gaps.Add(1)
		s.e.stats.gapBytes.Add(uint64(skip))
		ts := sg.CaptureInfo(0).Timestamp
		if ts.Before(s.last[d]) {
			ts = s.last[d]
		}
		p.gap(int64(skip), ts)
	}
	if avail > 0 && !s.done[d] {
		// Fetch may alias reassembly's buffers: the parser copies what it keeps.
		data := sg.Fetch(avail)
		if sg.Stats().Chunks <= 1 {
			s.feed(d, p, data, sg.CaptureInfo(0).Timestamp)
		} else {
			s.feedChunks(d, p, sg, data)
		}
	}
	if end && !s.done[d] {
		s.done[d] = true
		if s.rst {
			p.eof(false, ReasonReset)
		} else {
			p.eof(true, ReasonClosed)
		}
	}
}

// feed passes data to p with a time that never goes backwards: bytes become
// available to the application when the segments before them have arrived.
func (s *stream) feed(d int, p *halfParser, data []byte, ts time.Time) {
	if ts.Before(s.last[d]) {
		ts = s.last[d]
	}
	s.last[d] = ts
	p.feed(data, ts)
}

// feedChunks splits data delivered from several segments (after reordering)
// at the points where the capture time changes, so each piece carries the
// time its segment was seen.
func (s *stream) feedChunks(d int, p *halfParser, sg reassembly.ScatterGather, data []byte) {
	off := 0
	for off < len(data) {
		ts := sg.CaptureInfo(off).Timestamp
		// Binary search for the end of the run of bytes with this time.
		lo, hi := off+1, len(data)
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if sg.CaptureInfo(mid).Timestamp.Equal(ts) {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		s.feed(d, p, data[off:lo], ts)
		off = lo
	}
}

func (s *stream) ReassemblyComplete(_ reassembly.AssemblerContext) bool {
	for d, p := range []*halfParser{s.http.req, s.http.resp} {
		if !s.done[d] {
			s.done[d] = true
			p.eof(false, ReasonUnfinished)
		}
	}
	s.http.drain()
	s.e.conns--
	delete(s.e.live, s.key)
	delete(s.e.live, connKey{s.key.net.Reverse(), s.key.tcp.Reverse()})
	return true
}

// nullStream ignores a connection over the MaxConnections limit.
type nullStream struct{}

func (nullStream) Accept(*layers.TCP, gopacket.CaptureInfo, reassembly.TCPFlowDirection, reassembly.Sequence, *bool, reassembly.AssemblerContext) bool {
	return false
}
func (nullStream) ReassembledSG(reassembly.ScatterGather, reassembly.AssemblerContext) {}
func (nullStream) ReassemblyComplete(reassembly.AssemblerContext) bool                 { return true }
