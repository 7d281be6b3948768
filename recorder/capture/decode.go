package capture

import (
	"encoding/binary"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// LinkType is a pcap LINKTYPE_ value. (gopacket's layers.LinkType is a
// uint8 and cannot hold LINKTYPE_LINUX_SLL2, 276.)
type LinkType uint16

// The link types the engine decodes itself.
const (
	LinkNull      LinkType = 0   // BSD loopback, host byte order
	LinkEthernet  LinkType = 1   // Ethernet, with up to two VLAN tags
	LinkRaw       LinkType = 101 // raw IPv4 or IPv6
	LinkLoop      LinkType = 108 // OpenBSD loopback, network byte order
	LinkLinuxSLL  LinkType = 113 // Linux cooked capture (tcpdump -i any)
	LinkIPv4      LinkType = 228
	LinkIPv6      LinkType = 229
	LinkLinuxSLL2 LinkType = 276 // Linux cooked capture v2 (newer tcpdump -i any)

	linkUnknown LinkType = 0xffff // a pcapng packet naming an undescribed interface
)

// Why a packet was not handed to reassembly. The strings are the values of
// the reason label on the skipped-packets counter.
const (
	skipLinkType  = "link_type"    // unsupported link-layer type
	skipMalformed = "malformed"    // too short or inconsistent headers
	skipNotIP     = "not_ip"       // ARP, LLDP and other non-IP frames
	skipNotTCP    = "not_tcp"      // UDP, ICMP, ...
	skipFragment  = "ip_fragment"  // IPv4 fragments are not reassembled
	skipPort      = "port"         // TCP, but on none of the configured ports
	skipTruncated = "snap_trunc"   // captured shorter than on the wire (counted, still used)
	skipConnLimit = "conn_limit"   // the connection table was full
	skipNoConn    = "no_conn"      // a bare ACK/FIN/RST of no tracked connection
	skipUnknownIf = "unknown_intf" // pcapng packet naming an interface never described
)

// decoder turns one captured frame into an IP flow and a decoded TCP layer.
// It decodes link layers itself (Ethernet with VLAN tags, Linux SLL and
// SLL2, BSD null/loop, raw IP) and uses gopacket's IPv4, IPv6 and TCP
// DecodeFromBytes, which cost far less than gopacket.NewPacket. Not safe for
// concurrent use: the layers are reused on every call.
type decoder struct {
	ip4 layers.IPv4
	ip6 layers.IPv6
	tcp layers.TCP
}

// decode returns the network flow and the TCP layer of data, or a skip
// reason. The returned TCP layer aliases data and the decoder's state: it is
// valid until the next call.
func (d *decoder) decode(link LinkType, data []byte) (gopacket.Flow, *layers.TCP, string) {
	var ethType layers.EthernetType
	var payload []byte
	switch link {
	case LinkEthernet:
		if len(data) < 14 {
			return gopacket.Flow{}, nil, skipMalformed
		}
		ethType = layers.EthernetType(binary.BigEndian.Uint16(data[12:14]))
		payload = data[14:]
		// 802.1Q / 802.1ad tags, up to two.
		for i := 0; i < 2 && (ethType == layers.EthernetTypeDot1Q || ethType == layers.EthernetTypeQinQ); i++ {
			if len(payload) < 4 {
				return gopacket.Flow{}, nil, skipMalformed
			}
			ethType = layers.EthernetType(binary.BigEndian.Uint16(payload[2:4]))
			payload = payload[4:]
		}
	case LinkLinuxSLL:
		if len(data) < 16 {
			return gopacket.Flow{}, nil, skipMalformed
		}
		ethType = layers.EthernetType(binary.BigEndian.Uint16(data[14:16]))
		payload = data[16:]
	case LinkLinuxSLL2:
		// protocol(2) reserved(2) ifindex(4) hatype(2) pkttype(1) halen(1) addr(8)
		if len(data) < 20 {
			return gopacket.Flow{}, nil, skipMalformed
		}
		ethType = layers.EthernetType(binary.BigEndian.Uint16(data[0:2]))
		payload = data[20:]
	case LinkNull, LinkLoop:
		if len(data) < 4 {
			return gopacket.Flow{}, nil, skipMalformed
		}
		// The address family is in host order (null) or network order
		// (loop); look at both bytes ends.
		fam := binary.LittleEndian.Uint32(data[:4])
		if link == LinkLoop || fam > 0xffff {
			fam = binary.BigEndian.Uint32(data[:4])
		}
		switch fam {
		case 2:
			ethType = layers.EthernetTypeIPv4
		case 10, 24, 28, 30:
			ethType = layers.EthernetTypeIPv6
		default:
			return gopacket.Flow{}, nil, skipNotIP
		}
		payload = data[4:]
	case LinkRaw, LinkIPv4, LinkIPv6, 12 /* DLT_RAW on some BSDs */ :
		if len(data) < 1 {
			return gopacket.Flow{}, nil, skipMalformed
		}
		switch data[0] >> 4 {
		case 4:
			ethType = layers.EthernetTypeIPv4
		case 6:
			ethType = layers.EthernetTypeIPv6
		default:
			return gopacket.Flow{}, nil, skipNotIP
		}
		payload = data
	default:
		return gopacket.Flow{}, nil, skipLinkType
	}
	return d.decodeIP(ethType, payload)
}

func (d *decoder) decodeIP(ethType layers.EthernetType, data []byte) (gopacket.Flow, *layers.TCP, string) {
	var flow gopacket.Flow
	var seg []byte
	switch ethType {
	case layers.EthernetTypeIPv4:
		if err := d.ip4.DecodeFromBytes(data, gopacket.NilDecodeFeedback); err != nil {
			return flow, nil, skipMalformed
		}
		if d.ip4.Flags&layers.IPv4MoreFragments != 0 || d.ip4.FragOffset != 0 {
			return flow, nil, skipFragment
		}
		if d.ip4.Protocol != layers.IPProtocolTCP {
			return flow, nil, skipNotTCP
		}
		flow, seg = d.ip4.NetworkFlow(), d.ip4.Payload
	case layers.EthernetTypeIPv6:
		if err := d.ip6.DecodeFromBytes(data, gopacket.NilDecodeFeedback); err != nil {
			return flow, nil, skipMalformed
		}
		if d.ip6.NextHeader != layers.IPProtocolTCP {
			return flow, nil, skipNotTCP
		}
		flow, seg = d.ip6.NetworkFlow(), d.ip6.Payload
	default:
		return flow, nil, skipNotIP
	}
	if err := d.tcp.DecodeFromBytes(seg, gopacket.NilDecodeFeedback); err != nil {
		return flow, nil, skipMalformed
	}
	return flow, &d.tcp, ""
}
