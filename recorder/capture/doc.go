// Package capture records HTTP/1.1 exchanges passively, from packets: live
// from a network interface (Live: an AF_PACKET socket with a kernel BPF
// filter and a TPACKET_V3 receive ring, pure Go) or from pcap and pcapng files (ReadFile).
//
// An Engine decodes link, IP and TCP headers, reassembles both directions
// of each connection with gopacket's reassembly package (memory bounded,
// time driven by packet timestamps), parses HTTP/1.1 incrementally
// (keep-alive, pipelining, chunked bodies, 1xx responses, HEAD, upgrades)
// and pairs requests with responses in order, using TCP acknowledgement
// numbers to stay aligned when responses were lost. Each exchange is built
// by the recorder.Recorder the engine is given, exactly as in proxy mode
// (SSE event times come from the packets that completed the events), and
// handed back to it as it ends (Recorder.Record: filter, sampling, redaction
// and the queue to disk); Options.Emit can take them raw instead.
//
// An exchange reel did not see completely is still emitted, with
// Complete=false and Error "incomplete: REASON" (the Reason constants).
// Stats counts packets, bytes, kernel drops, reassembly gaps and incomplete
// exchanges by reason, and exports them to Prometheus.
package capture
