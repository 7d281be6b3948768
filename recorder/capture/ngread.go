package capture

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"time"

	"github.com/google/gopacket"
)

// maxPacket bounds the bytes read for one packet (tcpdump's MAXIMUM_SNAPLEN).
const maxPacket = 262144

// maxBlock bounds a pcapng block: a packet of maxPacket plus headers and
// generous options.
const maxBlock = maxPacket + 64<<10

// ngInterface is what ngReader keeps of an Interface Description Block.
type ngInterface struct {
	link   LinkType
	units  uint64 // timestamp units per second
	offset int64  // seconds added to every timestamp (if_tsoffset)
}

// ngReader reads pcapng files with every length checked before use: a
// corrupt or hostile file gives an error, never a huge allocation or a
// panic. (gopacket's NgReader trusts block and option lengths and divides
// by a resolution that can be zero.) It supports several sections and
// interfaces of mixed link types; it reads enhanced, simple and obsolete
// packet blocks and skips the rest.
type ngReader struct {
	r      *bufio.Reader
	order  binary.ByteOrder
	ifaces []ngInterface
	buf    []byte // the current block's body
}

func newNgReader(r *bufio.Reader) (*ngReader, error) {
	ng := &ngReader{r: r, buf: make([]byte, 0, 64<<10)}
	typ, body, err := ng.block()
	if err != nil {
		return nil, fmt.Errorf("read section header: %w", err)
	}
	if typ != 0x0a0d0d0a {
		return nil, ErrNotCapture
	}
	_ = body
	return ng, nil
}

var errBadBlock = errors.New("corrupt pcapng block")

// block reads one block and returns its type and body (without the type
// and the two lengths). A section header block resets byte order and
// interfaces.
func (ng *ngReader) block() (uint32, []byte, error) {
	var hdr [12]byte
	if _, err := io.ReadFull(ng.r, hdr[:8]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return 0, nil, fmt.Errorf("%w: file cut short", errBadBlock)
		}
		return 0, nil, err
	}
	typ := binary.LittleEndian.Uint32(hdr[:4])
	if typ == 0x0a0d0d0a {
		if _, err := io.ReadFull(ng.r, hdr[8:12]); err != nil {
			return 0, nil, fmt.Errorf("%w: file cut short", errBadBlock)
		}
		switch binary.LittleEndian.Uint32(hdr[8:12]) {
		case 0x1a2b3c4d:
			ng.order = binary.LittleEndian
		case 0x4d3c2b1a:
			ng.order = binary.BigEndian
		default:
			return 0, nil, fmt.Errorf("%w: bad byte-order magic", errBadBlock)
		}
		ng.ifaces = ng.ifaces[:0]
	} else if ng.order == nil {
		return 0, nil, ErrNotCapture
	}
	typ = ng.order.Uint32(hdr[:4])
	total := ng.order.Uint32(hdr[4:8])
	read := uint32(8)
	if typ == 0x0a0d0d0a {
		read = 12
	}
	if total%4 != 0 || total < read+4 || total > maxBlock {
		return 0, nil, fmt.Errorf("%w: block length %d", errBadBlock, total)
	}
	n := int(total - read) // body plus the trailing length
	if cap(ng.buf) < n {
		ng.buf = make([]byte, n)
	}
	b := ng.buf[:n]
	if _, err := io.ReadFull(ng.r, b); err != nil {
		return 0, nil, fmt.Errorf("%w: file cut short", errBadBlock)
	}
	if ng.order.Uint32(b[n-4:]) != total {
		return 0, nil, fmt.Errorf("%w: trailing length differs", errBadBlock)
	}
	return typ, b[:n-4], nil
}

// next returns the next packet and the link type of its interface (linkUnknown when
// the packet names an interface never described); data is valid until the
// next call.
func (ng *ngReader) next() ([]byte, gopacket.CaptureInfo, LinkType, error) {
	for {
		typ, b, err := ng.block()
		if err != nil {
			return nil, gopacket.CaptureInfo{}, 0, err
		}
		switch typ {
		case 1: // interface description
			if len(b) < 8 {
				return nil, gopacket.CaptureInfo{}, 0, fmt.Errorf("%w: short interface block", errBadBlock)
			}
			intf := ngInterface{link: LinkType(ng.order.Uint16(b[:2])), units: 1e6}
			ng.options(b[8:], func(code uint16, v []byte) {
				switch {
				case code == 9 && len(v) >= 1: // if_tsresol
					exp := uint64(v[0] & 0x7f)
					if v[0]&0x80 != 0 {
						if exp < 63 {
							intf.units = 1 << exp
						}
					} else if exp <= 18 {
						intf.units = 1
						for range exp {
							intf.units *= 10
						}
					}
				case code == 14 && len(v) >= 8: // if_tsoffset
					intf.offset = int64(ng.order.Uint64(v[:8]))
				}
			})
			ng.ifaces = append(ng.ifaces, intf)
		case 6, 2: // enhanced packet, obsolete packet
			if len(b) < 20 {
				return nil, gopacket.CaptureInfo{}, 0, fmt.Errorf("%w: short packet block", errBadBlock)
			}
			var id int
			if typ == 6 {
				id = int(ng.order.Uint32(b[:4]))
			} else {
				id = int(ng.order.Uint16(b[:2]))
			}
			caplen := ng.order.Uint32(b[12:16])
			if uint64(caplen) > uint64(len(b)-20) {
				return nil, gopacket.CaptureInfo{}, 0, fmt.Errorf("%w: captured length %d beyond its block", errBadBlock, caplen)
			}
			ci := gopacket.CaptureInfo{CaptureLength: int(caplen), Length: int(ng.order.Uint32(b[16:20])), InterfaceIndex: id}
			if id < 0 || id >= len(ng.ifaces) {
				return b[20 : 20+caplen], ci, linkUnknown, nil
			}
			intf := ng.ifaces[id]
			ts := uint64(ng.order.Uint32(b[4:8]))<<32 | uint64(ng.order.Uint32(b[8:12]))
			sec := ts / intf.units
			frac := ts % intf.units
			hi, lo := bits.Mul64(frac, 1e9)
			ns, _ := bits.Div64(hi, lo, intf.units) // frac < units: the quotient fits
			if sec > math.MaxInt64/2 {
				sec = 0
			}
			ci.Timestamp = time.Unix(int64(sec)+intf.offset, int64(ns)).UTC()
			return b[20 : 20+caplen], ci, intf.link, nil
		case 3: // simple packet: no timestamp, first interface
			if len(b) < 4 || len(ng.ifaces) == 0 {
				return nil, gopacket.CaptureInfo{}, 0, fmt.Errorf("%w: simple packet without interface", errBadBlock)
			}
			orig := ng.order.Uint32(b[:4])
			data := b[4:]
			if uint64(orig) < uint64(len(data)) {
				data = data[:orig]
			}
			ci := gopacket.CaptureInfo{CaptureLength: len(data), Length: int(orig)}
			return data, ci, ng.ifaces[0].link, nil
		}
	}
}

// options walks a pcapng option list, calling fn for each option.
func (ng *ngReader) options(b []byte, fn func(code uint16, v []byte)) {
	for len(b) >= 4 {
		code, n := ng.order.Uint16(b[:2]), int(ng.order.Uint16(b[2:4]))
		b = b[4:]
		if code == 0 || n > len(b) {
			return
		}
		fn(code, b[:n])
		pad := (n + 3) &^ 3
		if pad > len(b) {
			return
		}
		b = b[pad:]
	}
}
