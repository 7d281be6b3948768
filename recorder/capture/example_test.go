package capture_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder/capture"
	"github.com/reelkit/reel/recorder/capture/capturetest"
)

// Import a capture file: every exchange on port 8000, with timings from
// the packets.
func ExampleReadFile() {
	// A capture with one exchange, as tcpdump would write it.
	c := capturetest.NewConn(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:8000"))
	at := time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC)
	packets := append(c.Handshake(at), c.Send(true, at.Add(time.Millisecond), []byte("GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n"))...)
	packets = append(packets, c.Send(false, at.Add(4*time.Millisecond), []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))...)
	var file bytes.Buffer
	capturetest.WritePcapng(&file, capturetest.Ethernet, packets)

	e, err := capture.NewEngine(capture.Options{
		Ports: []uint16{8000},
		Emit: func(x *formats.Exchange) {
			fmt.Println(x.Method, x.Path, x.Status, time.Duration(x.TTFBNs), x.Complete)
		},
	})
	if err != nil {
		panic(err)
	}
	if err := capture.ReadFile(context.Background(), &file, e); err != nil {
		panic(err)
	}
	e.Finish()
	// Output: GET /v1/models 200 3ms true
}
