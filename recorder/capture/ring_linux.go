//go:build linux

package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/google/gopacket"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// ring is an AF_PACKET socket with a TPACKET_V3 receive ring: the kernel
// copies filtered packets into memory shared with the process, a block of
// them at a time, and the reader walks a whole block per wake-up instead
// of paying one recvmsg system call per packet. This is libpcap's mmap
// path, written with golang.org/x/sys/unix so CGO_ENABLED=0 stays.
//
// The socket is non-blocking and waited on through the Go runtime's
// network poller: a goroutine waiting for a block parks like one waiting
// on a TCP connection, instead of holding a thread in poll(2), which the
// runtime's monitor would keep taking the P from (and, while it does, keep
// waking every 20 µs).
//
// A ring is used by one goroutine.
type ring struct {
	fd        int      // the socket; owned by file once that is set
	file      *os.File // fd registered with the runtime's network poller
	conn      syscall.RawConn
	mem       []byte // blockSize × blocks, mapped from the socket
	blockSize int
	blocks    int
	next      int // the block the kernel hands over next
}

// ringOptions shape a ring.
type ringOptions struct {
	ifindex     int
	filter      []bpf.RawInstruction
	bufferBytes int           // total ring size; rounded to whole blocks
	blockSize   int           // a power of two ≥ the largest packet kept
	retire      time.Duration // a partly filled block goes to the reader after this long
	promiscuous bool
}

// openRing opens the socket, attaches the filter and maps the ring before
// binding to the interface: an unbound packet socket of protocol 0 receives
// nothing, so no unfiltered packet is ever queued.
func openRing(o ringOptions) (*ring, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("open packet socket: %w", ErrNoCapNetRaw)
		}
		return nil, fmt.Errorf("open packet socket: %w", err)
	}
	r := &ring{fd: fd, blockSize: o.blockSize}
	if err := r.setup(o); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ring) setup(o ringOptions) error {
	if err := r.setFilter(o.filter); err != nil {
		return err
	}
	if err := unix.SetsockoptInt(r.fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return fmt.Errorf("select TPACKET_V3: %w", err)
	}
	page := os.Getpagesize()
	if r.blockSize < page || r.blockSize&(r.blockSize-1) != 0 {
		return fmt.Errorf("ring block size %d: want a power of two ≥ the page size %d", r.blockSize, page)
	}
	r.blocks = max(o.bufferBytes/r.blockSize, 2)
	const frame = unix.TPACKET_ALIGNMENT << 7 // V3 packs packets of any size; frames only satisfy the kernel's checks
	req := unix.TpacketReq3{
		Block_size:     uint32(r.blockSize),
		Block_nr:       uint32(r.blocks),
		Frame_size:     frame,
		Frame_nr:       uint32(r.blockSize / frame * r.blocks),
		Retire_blk_tov: uint32(max(o.retire.Milliseconds(), 1)),
	}
	if err := unix.SetsockoptTpacketReq3(r.fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return fmt.Errorf("set up receive ring (%d × %d bytes): %w", r.blocks, r.blockSize, err)
	}
	mem, err := unix.Mmap(r.fd, 0, r.blockSize*r.blocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map receive ring: %w", err)
	}
	r.mem = mem
	if o.promiscuous {
		mreq := unix.PacketMreq{Ifindex: int32(o.ifindex), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(r.fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			return fmt.Errorf("set promiscuous mode: %w", err)
		}
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: o.ifindex}
	if err := unix.Bind(r.fd, sa); err != nil {
		return fmt.Errorf("bind packet socket: %w", err)
	}
	r.file = os.NewFile(uintptr(r.fd), "packet socket") // non-blocking: registered with the poller
	conn, err := r.file.SyscallConn()
	if err != nil {
		return fmt.Errorf("poll packet socket: %w", err)
	}
	r.conn = conn
	return nil
}

// setFilter attaches a classic BPF program to the socket.
func (r *ring) setFilter(filter []bpf.RawInstruction) error {
	if len(filter) == 0 {
		return errors.New("attach filter: empty program")
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: (*unix.SockFilter)(unsafe.Pointer(&filter[0]))}
	if err := unix.SetsockoptSockFprog(r.fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
		return fmt.Errorf("attach filter: %w", err)
	}
	return nil
}

// blockHeader returns the header of block i; its status word is shared
// with the kernel.
func (r *ring) blockHeader(i int) *unix.TpacketHdrV1 {
	desc := (*unix.TpacketBlockDesc)(unsafe.Pointer(&r.mem[i*r.blockSize]))
	return (*unix.TpacketHdrV1)(unsafe.Pointer(&desc.Hdr[0]))
}

// readBlock waits at most wait for the next block, hands each of its
// packets to fn and returns the block to the kernel. data is valid only
// during fn. It reports how many packets it delivered; zero with a nil
// error means the wait ended without a block.
func (r *ring) readBlock(wait time.Duration, fn func(data []byte, ci gopacket.CaptureInfo)) (int, error) {
	h := r.blockHeader(r.next)
	if !blockReady(h) {
		// The kernel signals readiness when it retires a block to the
		// reader; the check runs again after every wake-up, so a block
		// retired between the check and the wait is not missed.
		if err := r.file.SetReadDeadline(time.Now().Add(wait)); err != nil {
			return 0, fmt.Errorf("poll packet socket: %w", err)
		}
		err := r.conn.Read(func(uintptr) bool { return blockReady(h) })
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("poll packet socket: %w", err)
		}
	}
	block := r.mem[r.next*r.blockSize : (r.next+1)*r.blockSize]
	n := int(h.Num_pkts)
	off := int(h.Offset_to_first_pkt)
	for k := 0; k < n; k++ {
		if off <= 0 || off+unix.SizeofTpacket3Hdr > len(block) {
			break // a corrupt offset would only come from a kernel bug: drop the rest of the block
		}
		ph := (*unix.Tpacket3Hdr)(unsafe.Pointer(&block[off]))
		start, end := off+int(ph.Mac), off+int(ph.Mac)+int(ph.Snaplen)
		if end <= len(block) {
			fn(block[start:end], gopacket.CaptureInfo{
				Timestamp:     time.Unix(int64(ph.Sec), int64(ph.Nsec)),
				CaptureLength: int(ph.Snaplen),
				Length:        int(ph.Len),
			})
		}
		if ph.Next_offset == 0 {
			break
		}
		off += int(ph.Next_offset)
	}
	atomic.StoreUint32(&h.Block_status, unix.TP_STATUS_KERNEL)
	r.next = (r.next + 1) % r.blocks
	return n, nil
}

// blockReady reports whether the kernel has handed block h to the reader.
func blockReady(h *unix.TpacketHdrV1) bool {
	return atomic.LoadUint32(&h.Block_status)&unix.TP_STATUS_USER != 0
}

// stats returns the packets the socket accepted and those it dropped
// because the ring was full, since the previous call (the kernel resets
// them on read; packets includes drops).
func (r *ring) stats() (packets, drops uint64, err error) {
	st, err := unix.GetsockoptTpacketStatsV3(r.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return 0, 0, fmt.Errorf("read capture statistics: %w", err)
	}
	return uint64(st.Packets), uint64(st.Drops), nil
}

func (r *ring) close() {
	if r.mem != nil {
		_ = unix.Munmap(r.mem)
		r.mem = nil
	}
	switch {
	case r.file != nil:
		r.file.Close()
		r.file, r.fd = nil, -1
	case r.fd >= 0:
		unix.Close(r.fd)
		r.fd = -1
	}
}

// htons returns v in network byte order, as sockaddr_ll's protocol wants it.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
