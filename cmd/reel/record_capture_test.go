package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/formatstest"
	"github.com/reelkit/reel/recorder/capture/capturetest"
)

// TestRecordPcap imports a tcpdump-style capture end to end: flags, engine,
// pipeline (enrich + redact) and the Parquet dataset.
func TestRecordPcap(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC)
	c := capturetest.NewConn(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:8000"))
	body := `{"model":"m1","max_tokens":7,"messages":[]}`
	req := fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	packets := append(c.Handshake(t0), c.Send(true, t0.Add(time.Millisecond), []byte(req))...)
	packets = append(packets, c.Send(false, t0.Add(9*time.Millisecond), []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))...)
	packets = append(packets, c.Send(true, t0.Add(20*time.Millisecond), []byte("GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n"))...)
	path := capturetest.WriteFile(t, capturetest.LinuxSLL2, packets) // no response, no FIN: cut off

	out := t.TempDir()
	var stderr bytes.Buffer
	err := runRecord(context.Background(), []string{"--pcap", path, "--port", "8000", "--out", out,
		"--metrics-listen", "", "--recorder-id", "t", "--raw"}, io.Discard, &stderr)
	if err != nil {
		t.Fatalf("record: %v\n%s", err, stderr.String())
	}
	rows := formatstest.Read[formats.Exchange](t, out)
	if len(rows) != 2 {
		t.Fatalf("%d rows; stderr:\n%s", len(rows), stderr.String())
	}
	if r := rows[0]; r.Path != "/v1/chat/completions" || !r.Complete || r.TTFBNs != int64(8*time.Millisecond) ||
		r.Model != "m1" || r.MaxTokens != 7 || r.Status != 200 {
		t.Errorf("row 0: %+v", r)
	}
	if r := rows[1]; r.Path != "/healthz" || r.Complete || r.Error != "incomplete: no_response" {
		t.Errorf("row 1: path %s complete %v error %q", r.Path, r.Complete, r.Error)
	}
	if !strings.Contains(stderr.String(), "no_response 1") {
		t.Errorf("stderr does not report the incomplete exchange:\n%s", stderr.String())
	}
}

func TestRecordAccessLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "access.jsonl")
	lines := `{"msec":"1772632800.250","request_time":"0.250","request_method":"POST","request_uri":"/v1/completions","status":"200","request_body":"{\"model\":\"m2\",\"prompt\":\"hi\"}"}
{broken
`
	if err := os.WriteFile(log, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var stderr bytes.Buffer
	err := runRecord(context.Background(), []string{"--access-log", log, "--out", out, "--metrics-listen", "", "--raw"}, io.Discard, &stderr)
	if err != nil {
		t.Fatalf("record: %v\n%s", err, stderr.String())
	}
	rows := formatstest.Read[formats.Exchange](t, out)
	if len(rows) != 1 || rows[0].Model != "m2" || rows[0].DurationNs != int64(250*time.Millisecond) {
		t.Fatalf("rows: %+v", rows)
	}
	if !strings.Contains(stderr.String(), "access.jsonl:2: not a JSON object") {
		t.Errorf("bad line not reported with its number:\n%s", stderr.String())
	}
}

func TestRecordCaptureMisuse(t *testing.T) {
	d := t.TempDir() // a misuse must be refused before anything is written, but never litter the tree
	for _, args := range [][]string{
		{"--pcap", "x.pcap", "--out", d},                                  // no --port
		{"--pcap", "x.pcap", "--port", "http", "--out", d},                // bad port
		{"--pcap", "x.pcap", "--iface", "lo", "--port", "80", "--out", d}, // two sources
		{"--access-log", "a", "--log-field", "colour=x", "--out", d},
	} {
		err := runRecord(context.Background(), append(args, "--metrics-listen", "", "--raw"), io.Discard, io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}

// An offline import opens no metrics listener unless asked: with the
// default metrics port taken by another process it still runs, and it
// opens one when --metrics-listen is given.
func TestOfflineImportOpensNoListener(t *testing.T) {
	if ln, err := net.Listen("tcp", "127.0.0.1:9464"); err == nil { // the default --metrics-listen; if taken already, so much the better
		defer ln.Close()
	}
	log := filepath.Join(t.TempDir(), "access.jsonl")
	line := `{"msec":"1772632800.250","request_time":"0.250","request_method":"POST","request_uri":"/v1/completions","status":"200","request_body":"{\"model\":\"m2\",\"prompt\":\"hi\"}"}` + "\n"
	if err := os.WriteFile(log, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		extra    []string
		listener bool
	}{
		{"default", nil, false},
		{"asked", []string{"--metrics-listen", "127.0.0.1:0"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			args := append([]string{"--access-log", log, "--out", t.TempDir(), "--raw"}, tc.extra...)
			if err := runRecord(context.Background(), args, io.Discard, &stderr); err != nil {
				t.Fatalf("record: %v\n%s", err, stderr.String())
			}
			if got := strings.Contains(stderr.String(), "metrics on http://"); got != tc.listener {
				t.Errorf("metrics listener opened: %v, want %v\n%s", got, tc.listener, stderr.String())
			}
		})
	}
}

// TestRecordLiveReadyLine: --iface prints "capturing" once its socket is
// open, so a request sent the moment the line appears is recorded (a
// script waits for the line, as bench/capture does). Needs CAP_NET_RAW.
func TestRecordLiveReadyLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"text":"ok"}]}`)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	out := t.TempDir()
	stderr := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- runRecord(ctx, []string{"--iface", "lo", "--port", port, "--out", out, "--metrics-listen", "", "--raw"}, io.Discard, stderr)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !bytes.Contains(stderr.Bytes(), []byte("reel record: capturing lo")) {
		select {
		case err := <-done:
			var usage *usageError
			if errors.As(err, &usage) && strings.Contains(err.Error(), "CAP_NET_RAW") {
				t.Skip("live capture needs CAP_NET_RAW")
			}
			t.Fatalf("record stopped before capturing: %v\n%s", err, stderr.Bytes())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no capturing line after 10s:\n%s", stderr.Bytes())
		}
	}
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/completions", "application/json", strings.NewReader(`{"model":"m1","prompt":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	time.Sleep(300 * time.Millisecond) // the ring hands a block over within its retire time
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("record: %v\n%s", err, stderr.Bytes())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("record did not stop within 10s of cancel")
	}
	rows := formatstest.Read[formats.Exchange](t, out)
	if len(rows) != 1 || rows[0].Model != "m1" || rows[0].Status != 200 {
		t.Fatalf("want the one request sent after the capturing line, got %d rows: %+v\n%s", len(rows), rows, stderr.Bytes())
	}
}
