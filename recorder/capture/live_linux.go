//go:build linux

package capture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/gopacket/pcapgo"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Live captures from an interface until ctx is cancelled, feeding e. It
// opens an AF_PACKET socket (pure Go, no libpcap) with a kernel BPF filter
// for e's ports; on loopback the filter also drops the outgoing copy of
// every packet, so each exchange is recorded once. Kernel drops are read
// every StatsEvery and accumulated in e's Stats. When ctx ends, Live flushes
// e and returns ctx's error.
//
// The socket needs CAP_NET_RAW: without it Live returns an error wrapping
// ErrNoCapNetRaw.
func Live(ctx context.Context, e *Engine, opts LiveOptions) error {
	opts.defaults()
	intf, err := net.InterfaceByName(opts.Interface)
	if err != nil {
		return fmt.Errorf("open interface: %w", err)
	}
	if err := probeCapNetRaw(); err != nil {
		return err
	}
	h, err := pcapgo.NewEthernetHandle(opts.Interface)
	if err != nil {
		return fmt.Errorf("open %s: %w", opts.Interface, err)
	}
	loopback := intf.Flags&net.FlagLoopback != 0
	link := LinkEthernet
	if !loopback && len(intf.HardwareAddr) != 6 {
		link = LinkRaw // tun, WireGuard, ...: IP without a link header
	}
	if err := h.SetCaptureLength(opts.SnapLen); err != nil {
		h.Close()
		return fmt.Errorf("set snap length: %w", err)
	}
	filter, err := Filter(e.opts.Ports, link == LinkEthernet, loopback, uint32(opts.SnapLen))
	if err != nil {
		h.Close()
		return err
	}
	if err := h.SetBPF(filter); err != nil {
		h.Close()
		return fmt.Errorf("attach filter: %w", err)
	}
	if err := setRcvBuf(h, opts.SocketBuffer); err != nil {
		h.Close()
		return err
	}
	// What queued before the filter was attached is anything on the
	// interface: drop it, and reset the kernel counters it touched.
	drainUnfiltered(h)
	_, _ = h.Stats()
	if opts.Promiscuous {
		if err := h.SetPromiscuous(true); err != nil {
			h.Close()
			return fmt.Errorf("set promiscuous mode: %w", err)
		}
	}

	if opts.Started != nil {
		opts.Started()
	}
	var (
		mu      sync.Mutex // guards e and closed: the reader and the ticker share the engine
		closed  bool
		stopped atomic.Bool
		readErr = make(chan error, 1)

		handleMu     sync.Mutex // guards handleClosed: Stats and SetBPF never run on a closed (possibly reused) fd
		handleClosed bool
	)
	withHandle := func(f func()) {
		handleMu.Lock()
		defer handleMu.Unlock()
		if !handleClosed {
			f()
		}
	}
	go func() {
		// Close cannot interrupt a blocked read, so this goroutine owns the
		// handle and closes it after the first read that follows the stop
		// (or fails).
		defer func() {
			handleMu.Lock()
			h.Close()
			handleClosed = true
			handleMu.Unlock()
		}()
		for {
			data, ci, err := h.ZeroCopyReadPacketData()
			if stopped.Load() {
				return
			}
			if err != nil {
				readErr <- fmt.Errorf("read packet: %w", err)
				return
			}
			mu.Lock()
			if !closed {
				e.Packet(link, data, ci)
			}
			mu.Unlock()
		}
	}()

	tick := time.NewTicker(opts.StatsEvery)
	defer tick.Stop()
	readStats := func() {
		withHandle(func() {
			if st, err := h.Stats(); err == nil {
				// tp_packets includes the dropped ones.
				e.stats.addKernel(uint64(st.Packets), uint64(st.Drops))
			}
		})
	}
	var runErr error
loop:
	for {
		select {
		case <-ctx.Done():
			runErr = ctx.Err()
			break loop
		case err := <-readErr:
			runErr = err
			break loop
		case now := <-tick.C:
			readStats()
			mu.Lock()
			e.Flush(now)
			mu.Unlock()
		}
	}
	readStats()
	mu.Lock()
	closed = true
	e.Finish()
	mu.Unlock()
	// Open the filter before raising stopped: the reader closes the handle
	// only after it sees stopped.
	withHandle(func() { openFilter(h) })
	stopped.Store(true)
	if loopback {
		pokeLoopback()
	}
	return runErr
}

// LiveOptions configure Live. Interface is required; the zero value of
// every other field works.
type LiveOptions struct {
	Interface   string        // interface name, e.g. eth0 or lo
	SnapLen     int           // bytes kept of each packet (default 262144, enough for GRO/TSO super-packets)
	Promiscuous bool          // also capture traffic not addressed to this host
	StatsEvery  time.Duration // how often kernel drops are read and idle connections flushed (default 1s)
	// SocketBuffer is the kernel receive buffer of the socket (default 64
	// MiB): it absorbs bursts while the reader is busy. The kernel's default
	// (about 200 KiB, a few hundred packets) drops under load.
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
		o.SocketBuffer = 64 << 20
	}
}

// ErrNoCapNetRaw is wrapped by Live's error when the process may not open a
// packet socket.
var ErrNoCapNetRaw = errors.New("passive capture needs CAP_NET_RAW: run as root, " +
	"grant it (setcap cap_net_raw+ep reel) or add NET_RAW to the container's capabilities")

// probeCapNetRaw opens and closes a packet socket to turn EPERM into a clear
// error (gopacket's handle reports it as text only).
func probeCapNetRaw() error {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return fmt.Errorf("open packet socket: %w", ErrNoCapNetRaw)
		}
		return fmt.Errorf("open packet socket: %w", err)
	}
	unix.Close(fd)
	return nil
}

// handleFD returns the handle's socket. pcapgo keeps the descriptor private
// and offers no setter for the buffer, so it is read with reflection
// (gopacket is pinned at v1.1.19, whose EthernetHandle has an int field fd);
// -1 if the field is not there.
func handleFD(h *pcapgo.EthernetHandle) int {
	f := reflect.ValueOf(h).Elem().FieldByName("fd")
	if !f.IsValid() || f.Kind() != reflect.Int {
		return -1
	}
	return int(f.Int())
}

// drainUnfiltered reads, without blocking, the packets queued on the socket
// before its filter was attached (bounded, in case traffic keeps coming).
func drainUnfiltered(h *pcapgo.EthernetHandle) {
	fd := handleFD(h)
	if fd < 0 {
		return
	}
	buf := make([]byte, 64)
	for range 1 << 16 {
		if _, _, err := unix.Recvfrom(fd, buf, unix.MSG_DONTWAIT|unix.MSG_TRUNC); err != nil {
			return
		}
	}
}

// setRcvBuf sets the socket's receive buffer. SO_RCVBUFFORCE
// (CAP_NET_ADMIN) may exceed net.core.rmem_max; without it, SO_RCVBUF is
// capped there.
func setRcvBuf(h *pcapgo.EthernetHandle, size int) error {
	fd := handleFD(h)
	if fd < 0 {
		return nil // another gopacket version: keep the kernel default
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size); err == nil {
		return nil
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, size); err != nil {
		return fmt.Errorf("set socket buffer: %w", err)
	}
	return nil
}

// openFilter lets every packet through, so any traffic wakes a reader
// blocked after a stop.
func openFilter(h *pcapgo.EthernetHandle) {
	if all, err := bpf.Assemble([]bpf.Instruction{bpf.RetConstant{Val: 1}}); err == nil {
		_ = h.SetBPF(all)
	}
}

// pokeLoopback sends one datagram on loopback to wake a blocked reader.
func pokeLoopback() {
	if c, err := net.Dial("udp", "127.0.0.1:9"); err == nil {
		_, _ = c.Write([]byte{0})
		c.Close()
	}
}
