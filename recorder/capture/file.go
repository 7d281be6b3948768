package capture

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/google/gopacket"
	"github.com/google/gopacket/pcapgo"
)

// ErrNotCapture is returned by ReadFile for input that is neither pcap nor
// pcapng (gzip'd or not).
var ErrNotCapture = errors.New("not a pcap or pcapng file")

// packetSource yields packets with the link type of their interface
// (linkUnknown for an undescribed one); data is valid until the next call.
type packetSource func() ([]byte, gopacket.CaptureInfo, LinkType, error)

// ReadFile feeds every packet of a pcap or pcapng capture (optionally gzip
// compressed) in r to e. Several files (tcpdump -C/-G rotations) may be
// fed to one engine in time order; call e.Close after the last one so
// unfinished exchanges are recorded.
// Link types: Ethernet, Linux cooked (SLL and SLL2), BSD loopback and raw
// IP; pcapng files may mix interfaces of different link types. Packet
// timestamps drive every timing, so an import is deterministic. A file cut
// short ends the import with an error after what was read was processed.
func ReadFile(ctx context.Context, r io.Reader, e *Engine) error {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, err := br.Peek(4)
	if err != nil {
		return fmt.Errorf("read capture header: %w", ErrNotCapture)
	}
	if magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("open gzip: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<16)
		if magic, err = br.Peek(4); err != nil {
			return fmt.Errorf("read capture header: %w", ErrNotCapture)
		}
	}
	var next packetSource
	if bytes.Equal(magic, []byte{0x0a, 0x0d, 0x0d, 0x0a}) {
		ng, err := newNgReader(br)
		if err != nil {
			return fmt.Errorf("open pcapng: %w", err)
		}
		next = ng.next
	} else {
		switch m := magic; {
		case bytes.Equal(m, []byte{0xd4, 0xc3, 0xb2, 0xa1}), bytes.Equal(m, []byte{0xa1, 0xb2, 0xc3, 0xd4}),
			bytes.Equal(m, []byte{0x4d, 0x3c, 0xb2, 0xa1}), bytes.Equal(m, []byte{0xa1, 0xb2, 0x3c, 0x4d}):
		default:
			return ErrNotCapture
		}
		hdr, err := br.Peek(24)
		if err != nil {
			return fmt.Errorf("read pcap header: %w", ErrNotCapture)
		}
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return fmt.Errorf("open pcap: %w", err)
		}
		// Like tcpdump, ignore the header's snap length: it bounds the
		// buffer pcapgo allocates, and some writers lie about it.
		pr.SetSnaplen(maxPacket)
		// The header's link type is a uint32 that gopacket narrows to a
		// byte; read it here (SLL2 is 276).
		link := LinkType(binary.LittleEndian.Uint32(hdr[20:24]))
		if magic[0] == 0xa1 { // big-endian file
			link = LinkType(binary.BigEndian.Uint32(hdr[20:24]))
		}
		next = func() ([]byte, gopacket.CaptureInfo, LinkType, error) {
			data, ci, err := pr.ZeroCopyReadPacketData()
			return data, ci, link, err
		}
	}
	for n := 0; ; n++ {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		data, ci, link, err := next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read packet %d: %w", n+1, err)
		}
		if ci.CaptureLength > len(data) || ci.CaptureLength < 0 {
			ci.CaptureLength = len(data)
		}
		if link == linkUnknown {
			e.stats.packets.Add(1)
			e.stats.skip(skipUnknownIf)
			continue
		}
		e.Packet(link, data, ci)
	}
}
