// Package capturetest builds synthetic TCP conversations and writes them as
// pcap or pcapng files, for tests and benchmarks of passive capture. A Conn
// produces the packets of one connection (handshake, data segmented at an
// MSS, FIN or RST) with the times the test chooses; the test may drop,
// duplicate or reorder them before writing.
package capturetest

import (
	"bufio"
	"encoding/binary"
	"io"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// Link types Frame can wrap packets in (pcap LINKTYPE_ values).
const (
	Ethernet  = 1
	LinuxSLL  = 113
	LinuxSLL2 = 276
	Raw       = 101
)

// Packet is one IP packet (no link-layer header) and the time it was seen.
type Packet struct {
	Time time.Time // when the packet was seen
	IP   []byte    // the packet, from its IP header on
	// FromClient is true for client-to-server packets.
	FromClient bool
}

// Conn builds the packets of one TCP connection between Client and Server.
// Sequence numbers advance with every payload byte sent, so dropping a
// packet leaves a real gap and duplicating one is a real retransmission.
type Conn struct {
	Client, Server netip.AddrPort // the connection's two endpoints
	MSS            int            // payload bytes per segment (default 1448)
	cseq, sseq     uint32
}

// NewConn returns a connection with fixed initial sequence numbers.
func NewConn(client, server netip.AddrPort) *Conn {
	return &Conn{Client: client, Server: server, MSS: 1448, cseq: 1000, sseq: 5000}
}

// Handshake returns SYN, SYN-ACK and ACK, 10µs apart from at.
func (c *Conn) Handshake(at time.Time) []Packet {
	out := []Packet{
		c.segment(true, at, nil, flags{syn: true}),
		c.segment(false, at.Add(10*time.Microsecond), nil, flags{syn: true, ack: true}),
	}
	c.cseq++
	c.sseq++
	out = append(out, c.segment(true, at.Add(20*time.Microsecond), nil, flags{ack: true}))
	return out
}

// Send returns payload sent by the client (fromClient) or the server at
// time at, cut into MSS-sized segments that all carry time at.
func (c *Conn) Send(fromClient bool, at time.Time, payload []byte) []Packet {
	mss := c.MSS
	if mss <= 0 {
		mss = 1448
	}
	var out []Packet
	for len(payload) > 0 {
		n := min(mss, len(payload))
		out = append(out, c.segment(fromClient, at, payload[:n], flags{ack: true, psh: n == len(payload)}))
		if fromClient {
			c.cseq += uint32(n)
		} else {
			c.sseq += uint32(n)
		}
		payload = payload[n:]
	}
	return out
}

// Fin returns a FIN from each side at at (client first): the connection's
// orderly end.
func (c *Conn) Fin(at time.Time) []Packet {
	out := []Packet{c.segment(true, at, nil, flags{fin: true, ack: true})}
	c.cseq++
	out = append(out, c.segment(false, at.Add(10*time.Microsecond), nil, flags{fin: true, ack: true}))
	c.sseq++
	return out
}

// Ack returns a segment without data from the client (fromClient) or the
// server at at, acknowledging everything the other side has sent.
func (c *Conn) Ack(fromClient bool, at time.Time) Packet {
	return c.segment(fromClient, at, nil, flags{ack: true})
}

// Reset returns an RST from the client or the server at at.
func (c *Conn) Reset(fromClient bool, at time.Time) []Packet {
	return []Packet{c.segment(fromClient, at, nil, flags{rst: true, ack: true})}
}

type flags struct{ syn, ack, psh, fin, rst bool }

func (c *Conn) segment(fromClient bool, at time.Time, payload []byte, f flags) Packet {
	src, dst := c.Client, c.Server
	seq, ack := c.cseq, c.sseq
	if !fromClient {
		src, dst = dst, src
		seq, ack = ack, seq
	}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(src.Port()), DstPort: layers.TCPPort(dst.Port()),
		Seq: seq, Ack: ack, SYN: f.syn, ACK: f.ack, PSH: f.psh, FIN: f.fin, RST: f.rst, Window: 65535}
	if !f.ack {
		tcp.Ack = 0
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	var err error
	if src.Addr().Is4() {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP,
			SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice(), Flags: layers.IPv4DontFragment}
		_ = tcp.SetNetworkLayerForChecksum(ip)
		err = gopacket.SerializeLayers(buf, opts, ip, tcp, gopacket.Payload(payload))
	} else {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
			SrcIP: src.Addr().AsSlice(), DstIP: dst.Addr().AsSlice()}
		_ = tcp.SetNetworkLayerForChecksum(ip)
		err = gopacket.SerializeLayers(buf, opts, ip, tcp, gopacket.Payload(payload))
	}
	if err != nil {
		panic("capturetest: serialize: " + err.Error()) // only on a bug in this package
	}
	return Packet{Time: at, IP: append([]byte(nil), buf.Bytes()...), FromClient: fromClient}
}

// Frame wraps an IP packet in a link-layer header of the given type.
func Frame(link int, p Packet) []byte {
	v6 := len(p.IP) > 0 && p.IP[0]>>4 == 6
	etype := uint16(0x0800)
	if v6 {
		etype = 0x86dd
	}
	var hdr []byte
	switch link {
	case Ethernet:
		hdr = make([]byte, 14)
		copy(hdr[0:6], []byte{2, 0, 0, 0, 0, 2})
		copy(hdr[6:12], []byte{2, 0, 0, 0, 0, 1})
		binary.BigEndian.PutUint16(hdr[12:], etype)
	case LinuxSLL:
		hdr = make([]byte, 16)
		if !p.FromClient {
			binary.BigEndian.PutUint16(hdr[0:], 4) // outgoing
		}
		binary.BigEndian.PutUint16(hdr[2:], 1)
		binary.BigEndian.PutUint16(hdr[4:], 6)
		binary.BigEndian.PutUint16(hdr[14:], etype)
	case LinuxSLL2:
		hdr = make([]byte, 20)
		binary.BigEndian.PutUint16(hdr[0:], etype)
		binary.BigEndian.PutUint32(hdr[4:], 2) // ifindex
		binary.BigEndian.PutUint16(hdr[8:], 1) // ARPHRD_ETHER
		hdr[11] = 6
	case Raw:
	default:
		panic("capturetest: unsupported link type")
	}
	return append(hdr, p.IP...)
}

// WritePcapng writes packets to w as a pcapng file with one interface of
// the given link type.
func WritePcapng(w io.Writer, link int, packets []Packet) error {
	if link > 0xff {
		// gopacket's LinkType is a byte: write SLL2 files by hand.
		return writeNgRaw(w, link, packets)
	}
	ng, err := pcapgo.NewNgWriterInterface(w, pcapgo.NgInterface{
		Name: "test0", LinkType: layers.LinkType(link & 0xff), SnapLength: 262144,
		TimestampResolution: 9,
	}, pcapgo.NgWriterOptions{})
	if err != nil {
		return err
	}
	for _, p := range packets {
		data := Frame(link, p)
		ci := gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(data), Length: len(data)}
		if err := ng.WritePacket(ci, data); err != nil {
			return err
		}
	}
	return ng.Flush()
}

// writeNgRaw writes a minimal little-endian pcapng file by hand, for link
// types gopacket's writer cannot express.
func writeNgRaw(w io.Writer, link int, packets []Packet) error {
	bw := bufio.NewWriter(w)
	le := binary.LittleEndian
	block := func(typ uint32, body []byte) {
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
		total := uint32(12 + len(body))
		var h [8]byte
		le.PutUint32(h[0:], typ)
		le.PutUint32(h[4:], total)
		bw.Write(h[:])
		bw.Write(body)
		bw.Write(h[4:8])
	}
	shb := make([]byte, 16)
	le.PutUint32(shb[0:], 0x1a2b3c4d)
	le.PutUint16(shb[4:], 1)
	le.PutUint64(shb[8:], ^uint64(0))
	block(0x0a0d0d0a, shb)
	idb := make([]byte, 8)
	le.PutUint16(idb[0:], uint16(link))
	le.PutUint32(idb[4:], 262144)
	idb = append(idb, 9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0) // if_tsresol = 9 (ns), end of options
	block(1, idb)
	for _, p := range packets {
		data := Frame(link, p)
		epb := make([]byte, 20, 20+len(data))
		ns := uint64(p.Time.UnixNano())
		le.PutUint32(epb[4:], uint32(ns>>32))
		le.PutUint32(epb[8:], uint32(ns))
		le.PutUint32(epb[12:], uint32(len(data)))
		le.PutUint32(epb[16:], uint32(len(data)))
		block(6, append(epb, data...))
	}
	return bw.Flush()
}

// WritePcap writes packets to w as a classic pcap file (nanosecond
// timestamps) of the given link type.
func WritePcap(w io.Writer, link int, packets []Packet) error {
	bw := bufio.NewWriter(w)
	pw := pcapgo.NewWriterNanos(bw)
	if err := pw.WriteFileHeader(262144, layers.LinkType(link&0xff)); err != nil {
		return err
	}
	for _, p := range packets {
		data := Frame(link, p)
		ci := gopacket.CaptureInfo{Timestamp: p.Time, CaptureLength: len(data), Length: len(data)}
		if err := pw.WritePacket(ci, data); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteFile writes packets as a pcapng file in tb's temporary directory and
// returns its path.
func WriteFile(tb testing.TB, link int, packets []Packet) string {
	tb.Helper()
	f, err := os.CreateTemp(tb.TempDir(), "*.pcapng")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := WritePcapng(f, link, packets); err != nil {
		tb.Fatalf("write pcapng: %v", err)
	}
	return f.Name()
}
