//go:build linux

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/reelkit/reel/recorder/capture"
)

// packetSocket reads TCP segments of some ports on loopback with the
// kernel's receive timestamp of each (SO_TIMESTAMPNS): the moment the
// packet reached the receiving socket's side of lo, independent of when
// this process gets to read it. The outgoing copy of every loopback packet
// is dropped in the filter, so each segment is seen once.
type packetSocket struct {
	fd  int
	buf []byte
	oob []byte
}

// openPacketSocket opens an AF_PACKET socket on lo with capture's BPF
// filter for ports and a receive buffer of bufBytes (forced: the
// measurement must not lose the packets of a busy moment).
func openPacketSocket(ports []uint16, bufBytes int) (*packetSocket, error) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		return nil, fmt.Errorf("open lo: %w", err)
	}
	const snap = 64 << 10
	filter, err := capture.Filter(ports, true, true, snap)
	if err != nil {
		return nil, err
	}
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, proto)
	if err != nil {
		return nil, fmt.Errorf("packet socket (needs CAP_NET_RAW): %w", err)
	}
	s := &packetSocket{fd: fd, buf: make([]byte, snap), oob: make([]byte, 128)}
	fail := func(step string, err error) (*packetSocket, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", step, err)
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: (*unix.SockFilter)(unsafe.Pointer(&filter[0]))}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
		return fail("attach filter", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, bufBytes); err != nil {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, bufBytes); err != nil {
			return fail("receive buffer", err)
		}
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("timestamps", err)
	}
	// A read returns at least every 100 ms, so close is noticed.
	tv := unix.Timeval{Usec: 100_000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail("read timeout", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: lo.Index}); err != nil {
		return fail("bind lo", err)
	}
	// Packets that arrived before the filter was attached are unfiltered:
	// throw them away.
	for {
		if _, _, _, _, err := unix.Recvmsg(fd, s.buf, nil, unix.MSG_DONTWAIT); err != nil {
			break
		}
	}
	return s, nil
}

// errNoPacket is returned by read when no packet came within the read
// timeout.
var errNoPacket = errors.New("no packet")

// read returns the next packet (valid until the next read) and its kernel
// timestamp.
func (s *packetSocket) read() ([]byte, time.Time, error) {
	n, oobn, _, _, err := unix.Recvmsg(s.fd, s.buf, s.oob, 0)
	if err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			return nil, time.Time{}, errNoPacket
		}
		return nil, time.Time{}, err
	}
	msgs, err := unix.ParseSocketControlMessage(s.oob[:oobn])
	if err != nil {
		return nil, time.Time{}, err
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return s.buf[:n], time.Unix(int64(ts.Sec), int64(ts.Nsec)), nil
		}
	}
	return nil, time.Time{}, errors.New("packet without a kernel timestamp")
}

// drops returns the packets the kernel dropped for this socket since the
// previous call (PACKET_STATISTICS resets on read).
func (s *packetSocket) drops() (uint64, error) {
	st, err := unix.GetsockoptTpacketStats(s.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
	if err != nil {
		return 0, err
	}
	return uint64(st.Drops), nil
}

func (s *packetSocket) close() { unix.Close(s.fd) }

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// pinSelf restricts every thread of this process (and so the threads it
// starts later) to the CPUs in list ("0", "0-1", "0,2").
func pinSelf(list string) error {
	var set unix.CPUSet
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return fmt.Errorf("cpu list %q: %w", list, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return fmt.Errorf("cpu list %q: %w", list, err)
			}
		}
		for c := a; c <= b; c++ {
			set.Set(c)
		}
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("pin: %w", err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pin thread %d: %w", tid, err)
		}
	}
	return nil
}
