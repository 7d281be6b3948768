package capture_test

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/internal/cputime"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/capture"
	"github.com/reelkit/reel/recorder/capture/capturetest"
	"github.com/reelkit/reel/recorder/recordertest"
)

// generate builds a pcapng of conns keep-alive connections, each with per
// exchanges, interleaved in time as a busy gateway's would be. sse selects
// streamed responses (8 token events) instead of small JSON.
func generate(tb testing.TB, conns, per int, sse bool) ([]byte, int) {
	tb.Helper()
	type flow struct {
		c  *capturetest.Conn
		at time.Time
	}
	flows := make([]flow, conns)
	var packets []capturetest.Packet
	for i := range flows {
		cl := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), uint16(30000+i%30000))
		flows[i] = flow{capturetest.NewConn(cl, server), t0.Add(time.Duration(i) * 37 * time.Microsecond)}
		packets = append(packets, flows[i].c.Handshake(flows[i].at)...)
	}
	body := `{"model":"rec-v3","features":[0.12,0.5,0.33,0.91],"user":"u-1234","k":10}`
	for j := range per {
		for i := range flows {
			f := &flows[i]
			f.at = f.at.Add(time.Millisecond)
			packets = append(packets, f.c.Send(true, f.at, request("POST", fmt.Sprintf("/v1/score?n=%d", j), body))...)
			if !sse {
				packets = append(packets, f.c.Send(false, f.at.Add(300*time.Microsecond),
					response(200, `{"scores":[0.9,0.1,0.4],"model":"rec-v3"}`))...)
				continue
			}
			packets = append(packets, f.c.Send(false, f.at.Add(200*time.Microsecond),
				[]byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"))...)
			for k := range 8 {
				ev := fmt.Sprintf("data: {\"choices\":[{\"delta\":{\"content\":\"tok%d\"}}]}\n\n", k)
				packets = append(packets, f.c.Send(false, f.at.Add(time.Duration(300+100*k)*time.Microsecond), chunk(ev))...)
			}
			packets = append(packets, f.c.Send(false, f.at.Add(1200*time.Microsecond), []byte("0\r\n\r\n"))...)
		}
	}
	for i := range flows {
		packets = append(packets, flows[i].c.Fin(flows[i].at.Add(time.Millisecond))...)
	}
	var buf bytes.Buffer
	if err := capturetest.WritePcapng(&buf, capturetest.Ethernet, packets); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), conns * per
}

// BenchmarkImport measures pcap → exchanges (decode, reassembly, HTTP
// parsing, pairing and the recorder's assembly, without redaction or
// writing). exchanges/s is per core: the import is single-threaded.
func BenchmarkImport(b *testing.B) {
	for _, tc := range []struct {
		name string
		sse  bool
	}{{"small-json", false}, {"sse-8-events", true}} {
		b.Run(tc.name, func(b *testing.B) {
			data, n := generate(b, 100, 200, tc.sse)
			rec, _ := recordertest.New(b, recorder.Options{})
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var peer, cpu time.Duration
			b.ResetTimer()
			for range b.N {
				cpu0 := cputime.Process()
				got := 0
				e, err := capture.NewEngine(capture.Options{Ports: []uint16{8000}, Recorder: rec,
					Emit: func(x *formats.Exchange) {
						if x.Complete {
							got++
						}
					}})
				if err != nil {
					b.Fatal(err)
				}
				if err := capture.ReadFile(context.Background(), bytes.NewReader(data), e); err != nil {
					b.Fatal(err)
				}
				e.Finish()
				if got != n {
					b.Fatalf("%d complete exchanges, want %d", got, n)
				}
				// The peer, timed right after under the same load.
				b.StopTimer()
				cpu += cputime.Process() - cpu0
				t := time.Now()
				decodeOnly(b, data, n)
				peer += time.Since(t)
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "exchanges/s")
			b.ReportMetric(float64(n*b.N)/cpu.Seconds(), "exchanges/cpu-s")
			b.ReportMetric(b.Elapsed().Seconds()/peer.Seconds(), "x-decode-only")
		})
	}
}

// decodeOnly is the peer: reading the same file and decoding every packet
// with gopacket.NewPacket (lazy, no copy), as a gopacket-based tool does
// before any reassembly or HTTP parsing.
func decodeOnly(b *testing.B, data []byte, n int) {
	r, err := pcapgo.NewNgReader(bytes.NewReader(data), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		b.Fatal(err)
	}
	tcp := 0
	for {
		pkt, _, err := r.ZeroCopyReadPacketData()
		if err != nil {
			break
		}
		p := gopacket.NewPacket(pkt, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
		if p.Layer(layers.LayerTypeTCP) != nil {
			tcp++
		}
	}
	if tcp < 2*n {
		b.Fatalf("%d TCP packets", tcp)
	}
}
