//go:build linux

package capture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/google/gopacket"
)

// Live captures from an interface until ctx is cancelled, feeding e. It
// opens an AF_PACKET socket with a TPACKET_V3 receive ring (pure Go, no
// libpcap) and a kernel BPF filter for e's ports; on loopback the filter
// also drops the outgoing copy of every packet, so each exchange is
// recorded once. One goroutine walks the ring a block at a time and feeds
// e, so a packet costs no system call and no lock, and the exchanges a
// block completes go to the recorder as one batch. Kernel drops are read
// every StatsEvery and accumulated in e's Stats. When ctx ends, Live reads
// what the ring still holds (waiting at most two block-retire periods),
// flushes e and returns ctx's error.
//
// The socket needs CAP_NET_RAW: without it Live returns an error wrapping
// ErrNoCapNetRaw.
func Live(ctx context.Context, e *Engine, opts LiveOptions) error {
	opts.defaults()
	intf, err := net.InterfaceByName(opts.Interface)
	if err != nil {
		return fmt.Errorf("open interface: %w", err)
	}
	loopback := intf.Flags&net.FlagLoopback != 0
	link := LinkEthernet
	if !loopback && len(intf.HardwareAddr) != 6 {
		link = LinkRaw // tun, WireGuard, ...: IP without a link header
	}
	filter, err := Filter(e.opts.Ports, link == LinkEthernet, loopback, uint32(opts.SnapLen))
	if err != nil {
		return err
	}
	r, err := openRing(ringOptions{
		ifindex:     intf.Index,
		filter:      filter,
		bufferBytes: opts.SocketBuffer,
		blockSize:   ringBlockSize(opts.SnapLen),
		retire:      ringRetire,
		promiscuous: opts.Promiscuous,
	})
	if err != nil {
		return fmt.Errorf("capture on %s: %w", opts.Interface, err)
	}
	defer r.close()
	if opts.Started != nil {
		opts.Started()
	}

	readStats := func() {
		if packets, drops, err := r.stats(); err == nil {
			e.stats.addKernel(packets, drops)
		}
	}
	feed := func(data []byte, ci gopacket.CaptureInfo) { e.Packet(link, data, ci) }
	// Wake a reader waiting for a block as soon as ctx ends; drain then
	// reads what is left with deadlines of its own, once the wake-up has
	// run: a late one would cut drain's wait short and lose the last block.
	woken := make(chan struct{})
	stopWake := context.AfterFunc(ctx, func() {
		r.file.SetReadDeadline(time.Now())
		close(woken)
	})
	defer stopWake()
	nextTick := time.Now().Add(opts.StatsEvery)
	for {
		if err := ctx.Err(); err != nil {
			if !stopWake() {
				<-woken
			}
			drain(r, feed)
			readStats()
			e.Finish()
			return err
		}
		wait := min(time.Until(nextTick), ringPollWait)
		if _, err := r.readBlock(wait, feed); err != nil {
			readStats()
			e.Finish()
			return err
		}
		e.submitPending() // the block's exchanges, as one hand-off
		if now := time.Now(); !now.Before(nextTick) {
			readStats()
			e.Flush(now)
			nextTick = now.Add(opts.StatsEvery)
		}
	}
}

// drain reads what the ring still holds when the capture stops: blocks
// the reader had not reached, and the block being filled, which the kernel
// hands over within ringRetire. Traffic up to the cancellation is recorded.
func drain(r *ring, feed func([]byte, gopacket.CaptureInfo)) {
	deadline := time.Now().Add(2 * ringRetire)
	for {
		wait := time.Until(deadline)
		if wait <= 0 {
			return
		}
		if n, err := r.readBlock(wait, feed); err != nil || n == 0 {
			return
		}
	}
}

// The ring's shape. A block goes to the reader when it is full or
// ringRetire after its first packet, whichever is first; packet timestamps
// are the kernel's, so the retire delay moves no recorded time, only when
// the exchanges reach the pipeline. At rates that do not fill a block
// first, ringRetire sets how often the reader, the workers and the writer
// wake, and how many exchanges each wake-up handles; it also makes the
// ring hold blocks × ringRetire of traffic before the kernel drops
// (measured in docs/performance.md, "Passive capture"). The reader also
// wakes every ringPollWait, which bounds how late it notices a
// cancellation that raced with setting its read deadline.
const (
	ringRetire   = 64 * time.Millisecond
	ringPollWait = 100 * time.Millisecond
)

// ringBlockSize is the smallest power-of-two block, at least 1 MiB, that
// holds a packet of snap bytes with its headers.
func ringBlockSize(snap int) int {
	size := 1 << 20
	for size < snap+4096 {
		size <<= 1
	}
	return size
}

// LiveOptions configure Live. Interface is required; the zero value of
// every other field works.
type LiveOptions struct {
	Interface   string        // interface name, e.g. eth0 or lo
	SnapLen     int           // bytes kept of each packet (default 262144, enough for GRO/TSO super-packets)
	Promiscuous bool          // also capture traffic not addressed to this host
	StatsEvery  time.Duration // how often kernel drops are read and idle connections flushed (default 1s)
	// SocketBuffer is the size of the receive ring shared with the kernel
	// (default 16 MiB, whole 1-MiB blocks): it absorbs bursts while the
	// reader is busy. The ring stays resident, so it counts in the
	// recorder's RSS.
	SocketBuffer int
	// Started, if set, is called once the socket is open and filtered:
	// traffic from then on is captured.
	Started func()
}

func (o *LiveOptions) defaults() {
	if o.SnapLen <= 0 {
		o.SnapLen = maxPacket
	}
	if o.StatsEvery <= 0 {
		o.StatsEvery = time.Second
	}
	if o.SocketBuffer <= 0 {
		o.SocketBuffer = 16 << 20
	}
}

// ErrNoCapNetRaw is wrapped by Live's error when the process may not open a
// packet socket.
var ErrNoCapNetRaw = errors.New("passive capture needs CAP_NET_RAW: run as root, " +
	"grant it (setcap cap_net_raw+ep reel) or add NET_RAW to the container's capabilities")
