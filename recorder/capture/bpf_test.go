package capture_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/net/bpf"

	"github.com/reelkit/reel/recorder/capture"
	"github.com/reelkit/reel/recorder/capture/capturetest"
)

func udpFrame(t *testing.T) []byte {
	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: []byte{10, 0, 0, 1}, DstIP: []byte{10, 0, 0, 2}}
	udp := &layers.UDP{SrcPort: 5353, DstPort: 8000}
	udp.SetNetworkLayerForChecksum(ip)
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ip, udp, gopacket.Payload("x")); err != nil {
		t.Fatal(err)
	}
	return capturetest.Frame(capturetest.Ethernet, capturetest.Packet{IP: buf.Bytes()})
}

// TestFilter runs the assembled kernel filter in x/net/bpf's VM. (The VM
// cannot run the PACKET_OUTGOING extension; TestLiveLoopback covers it.)
func TestFilter(t *testing.T) {
	v4 := capturetest.NewConn(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:8000"))
	v6 := capturetest.NewConn(netip.MustParseAddrPort("[fd00::1]:40000"), netip.MustParseAddrPort("[fd00::2]:8001"))
	other := capturetest.NewConn(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:9000"))
	at := time.Unix(0, 0)
	req := v4.Send(true, at, []byte("GET / HTTP/1.1\r\n\r\n"))[0]
	resp := v4.Send(false, at, []byte("HTTP/1.1 200 OK\r\n\r\n"))[0]
	req6 := v6.Send(true, at, []byte("GET / HTTP/1.1\r\n\r\n"))[0]
	miss := other.Send(true, at, []byte("GET / HTTP/1.1\r\n\r\n"))[0]
	frag := append([]byte(nil), req.IP...)
	frag[6], frag[7] = 0x00, 0x10 // fragment offset 16: no TCP header here

	for _, ethernet := range []bool{true, false} {
		link := capturetest.Raw
		if ethernet {
			link = capturetest.Ethernet
		}
		prog, err := capture.Filter([]uint16{8000, 8001}, ethernet, false, 65535)
		if err != nil {
			t.Fatal(err)
		}
		insns := make([]bpf.Instruction, len(prog))
		for i, r := range prog {
			insns[i] = r.Disassemble()
		}
		vm, err := bpf.NewVM(insns)
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name string
			data []byte
			want bool
		}{
			{"request to port", capturetest.Frame(link, req), true},
			{"response from port", capturetest.Frame(link, resp), true},
			{"ipv6 to second port", capturetest.Frame(link, req6), true},
			{"other port", capturetest.Frame(link, miss), false},
			{"fragment", capturetest.Frame(link, capturetest.Packet{IP: frag}), false},
		}
		if ethernet {
			cases = append(cases, struct {
				name string
				data []byte
				want bool
			}{"udp to port", udpFrame(t), false})
		}
		for _, tc := range cases {
			n, err := vm.Run(tc.data)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got := n > 0; got != tc.want {
				t.Errorf("ethernet=%v %s: accepted=%v, want %v", ethernet, tc.name, got, tc.want)
			}
		}
	}
	if _, err := capture.Filter(nil, true, true, 1); err == nil {
		t.Error("no ports: no error")
	}
	if _, err := capture.Filter(make([]uint16, 100), true, true, 1); err == nil {
		t.Error("100 ports: no error")
	}
	// With the loopback extension the program still assembles.
	if _, err := capture.Filter([]uint16{80}, true, true, 262144); err != nil {
		t.Error(err)
	}
}
