package capture_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/capture"
	"github.com/reelkit/reel/recorder/capture/capturetest"
	"github.com/reelkit/reel/recorder/recordertest"
)

func fuzzEngine(t testing.TB) (*capture.Engine, *int) {
	n := new(int)
	e, err := capture.NewEngine(capture.Options{
		Ports:    []uint16{8000},
		Emit:     func(*formats.Exchange) { *n++ },
		Recorder: fuzzRecorder(t),
		// Small bounds so the fuzzer reaches them.
		PagesPerConnection: 8, PagesTotal: 64, MaxConnections: 16, MaxPipelined: 4, MaxHeader: 1024,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, n
}

// FuzzReadFile: any bytes as a capture file give an error or exchanges,
// never a panic; lengths in the file are checked before allocating.
func FuzzReadFile(f *testing.F) {
	for _, link := range []int{capturetest.Ethernet, capturetest.LinuxSLL2} {
		var b bytes.Buffer
		capturetest.WritePcapng(&b, link, keepAlive(capturetest.NewConn(client, server)))
		f.Add(b.Bytes())
	}
	var b bytes.Buffer
	capturetest.WritePcap(&b, capturetest.LinuxSLL, keepAlive(capturetest.NewConn(client, server)))
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		e, _ := fuzzEngine(t)
		_ = capture.ReadFile(context.Background(), bytes.NewReader(data), e)
		e.Finish()
	})
}

// FuzzPackets: arbitrary frames (the fuzzer mutates real TCP segments of
// an HTTP conversation: flags, sequence numbers, payloads) fed to the engine
// never panic and leave no connection state behind after Finish.
func FuzzPackets(f *testing.F) {
	var seed []byte
	for _, p := range keepAlive(capturetest.NewConn(client, server)) {
		frame := capturetest.Frame(capturetest.Ethernet, p)
		seed = binary.BigEndian.AppendUint16(seed, uint16(len(frame)))
		seed = append(seed, frame...)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		e, _ := fuzzEngine(t)
		ts := t0
		for len(data) >= 2 {
			n := int(binary.BigEndian.Uint16(data))
			data = data[2:]
			if n > len(data) {
				n = len(data)
			}
			ts = ts.Add(time.Millisecond)
			e.Packet(capture.LinkEthernet, data[:n], gopacket.CaptureInfo{Timestamp: ts, CaptureLength: n, Length: n})
			data = data[n:]
		}
		e.Finish()
		snap := e.Stats().Snapshot()
		if snap.Packets == 0 && snap.Exchanges > 0 {
			t.Fatal("exchanges without packets")
		}
	})
}

// fuzzRecorder builds the fuzz engines' exchanges with a small body cap.
func fuzzRecorder(tb testing.TB) *recorder.Recorder {
	rec, _ := recordertest.New(tb, recorder.Options{Config: recorder.Config{MaxBody: 1024}})
	return rec
}
