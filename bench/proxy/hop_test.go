package main

import (
	"encoding/binary"
	"testing"
	"time"
)

// frame builds an Ethernet/IPv4/TCP frame from src to dst port with payload.
func frame(src, dst uint16, payload string) []byte {
	b := make([]byte, 14+20+20+len(payload))
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+20+len(payload)))
	ip[9] = 6
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], src)
	binary.BigEndian.PutUint16(tcp[2:], dst)
	tcp[12] = 5 << 4
	copy(tcp[20:], payload)
	return b
}

func TestHopPacketLegsAndMarkers(t *testing.T) {
	const up, bare, side, client = 9000, 9001, 9002, 40000
	hops := []uint16{bare, side}
	type seen struct{ leg, id, index int }
	tests := []struct {
		name     string
		src, dst uint16
		payload  string
		want     []seen
	}{
		{"request in", client, side, "POST /sse?m=" + marker(7, reqIndex) + " HTTP/1.1\r\n", []seen{{reqIn, 7, reqIndex}}},
		{"request out", 50000, up, "POST /sse?m=" + marker(7, reqIndex) + " HTTP/1.1\r\n", []seen{{reqOut, 7, reqIndex}}},
		{"events in, two in one segment", up, 50000, "data: " + marker(7, 0) + "\n\ndata: " + marker(7, 1) + "\n\n", []seen{{respIn, 7, 0}, {respIn, 7, 1}}},
		{"event out", bare, client, "1a\r\ndata: " + marker(8, 3) + "\n\n", []seen{{respOut, 8, 3}}},
		{"cut marker", bare, client, "data: @R0000000", nil},
		{"not a marker", bare, client, "data: @Rxxxxxxxx.001 and @R", nil},
		{"other ports", client, 7, "data: " + marker(1, 1), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []seen
			hopPacket(frame(tt.src, tt.dst, tt.payload), up, hops, func(leg, id, index int) { got = append(got, seen{leg, id, index}) })
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("marker %d: got %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestCollectPairsLegs checks that delays are out − in of the first
// sighting on each leg, that the id says the hop, and that a marker seen
// on one leg only counts as missing.
func TestCollectPairsLegs(t *testing.T) {
	times := hopTimes{}
	const first = 11
	us := int64(time.Microsecond)
	// request 11 → hop 0, request 12 → hop 1 (two hops).
	times.see(reqIn, 11, reqIndex, 100*us)
	times.see(reqOut, 11, reqIndex, 130*us)
	times.see(reqOut, 11, reqIndex, 999*us) // a retransmission: later sightings are ignored
	times.see(respIn, 11, 0, 500*us)
	times.see(respOut, 11, 0, 540*us)
	times.see(reqIn, 12, reqIndex, 200*us)
	times.see(reqOut, 12, reqIndex, 250*us)
	times.see(respIn, 12, 0, 600*us) // never left the hop
	times.see(reqIn, 3, reqIndex, 1) // before first: ignored
	times.see(reqOut, 3, reqIndex, 2)
	s, missing := times.collect(2, first)
	check := func(q string, hop int, want []int64) {
		t.Helper()
		got := s[q][hop]
		if len(got) != len(want) {
			t.Fatalf("%s hop %d: %v, want delays %v", q, hop, got, want)
		}
		for i := range got {
			if got[i].d != want[i]*us {
				t.Errorf("%s hop %d sample %d: %d ns, want %d µs", q, hop, i, got[i].d, want[i])
			}
		}
	}
	check(qRequest, 0, []int64{30})
	check(qRequest, 1, []int64{50})
	check(qResponse, 0, []int64{40})
	check(qResponse, 1, nil)
	check(qFirst, 0, []int64{70})
	check(qFirst, 1, nil)
	if missing[qResponse] != 1 {
		t.Errorf("missing responses %d, want 1", missing[qResponse])
	}
}

// TestDiffCICoversTheDifference checks the bootstrap interval on samples
// whose p99 differs by a known amount.
func TestDiffCICoversTheDifference(t *testing.T) {
	var a, b []hopSample
	for i := range 20000 {
		at := int64(i) * int64(time.Millisecond) / 4
		d := int64(100_000 + (i*7919)%1000*100) // 100–200 µs, spread evenly
		a = append(a, hopSample{at: at, d: d})
		b = append(b, hopSample{at: at, d: d + 50_000})
	}
	lo, hi := diffCI(a, b, 0.99, hopBlock, 200, 1)
	if lo > 50_000 || hi < 50_000 || hi-lo > 10_000 {
		t.Errorf("interval [%d, %d] ns, want a narrow one around 50000", lo, hi)
	}
}
