package capture

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/reelkit/reel/recorder/capture/capturetest"
)

func TestDecodeLinkTypes(t *testing.T) {
	c := capturetest.NewConn(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:8000"))
	p := c.Send(true, time.Unix(0, 0), []byte("GET / HTTP/1.1\r\n\r\n"))[0]
	eth := capturetest.Frame(capturetest.Ethernet, p)
	vlan := append(append(append([]byte{}, eth[:12]...), 0x81, 0x00, 0x00, 0x07), eth[12:]...) // one 802.1Q tag
	null := binary.LittleEndian.AppendUint32(nil, 2)                                           // AF_INET, host order
	null = append(null, p.IP...)
	loop := binary.BigEndian.AppendUint32(nil, 2)
	loop = append(loop, p.IP...)
	arp := append(append([]byte{}, eth[:12]...), 0x08, 0x06, 0, 1)
	for _, tc := range []struct {
		name string
		link LinkType
		data []byte
		skip string
	}{
		{"ethernet", LinkEthernet, eth, ""},
		{"vlan", LinkEthernet, vlan, ""},
		{"bsd null", LinkNull, null, ""},
		{"openbsd loop", LinkLoop, loop, ""},
		{"raw", LinkRaw, p.IP, ""},
		{"sll", LinkLinuxSLL, capturetest.Frame(capturetest.LinuxSLL, p), ""},
		{"sll2", LinkLinuxSLL2, capturetest.Frame(capturetest.LinuxSLL2, p), ""},
		{"arp", LinkEthernet, arp, skipNotIP},
		{"short", LinkEthernet, eth[:10], skipMalformed},
		{"truncated ip", LinkEthernet, eth[:20], skipMalformed},
		{"unknown link", 147, eth, skipLinkType},
	} {
		var d decoder
		_, tcp, why := d.decode(tc.link, tc.data)
		if why != tc.skip {
			t.Errorf("%s: skip %q, want %q", tc.name, why, tc.skip)
			continue
		}
		if why == "" && (tcp.DstPort != 8000 || string(tcp.Payload) != "GET / HTTP/1.1\r\n\r\n") {
			t.Errorf("%s: port %d payload %q", tc.name, tcp.DstPort, tcp.Payload)
		}
	}
}
