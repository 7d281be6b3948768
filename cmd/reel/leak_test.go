package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/formatstest"
	"github.com/reelkit/reel/recorder/capture/capturetest"
	"github.com/reelkit/reel/redact/redacttest"
)

// The leak tests seed every detector's entity type, plain and glued to
// neighbouring text, into every carrier a recording copies — the path, the
// query (keys and values), the Host header, User-Agent, X-Request-Id, the
// session and context headers, credentials, the model, JSON keys, `stop`,
// tool names and descriptions, a request body under each content type
// (JSON, form, text, JSON sent as a form, text sent as a form, gzip), SSE
// `id:` lines and the response id — and a password into the --upstream
// URL. They record it through the sidecar, the pcap import and the
// access-log import, and `reel redact` a raw recording; then they search
// the raw bytes of every file written (zstd pages and gzip bodies
// decompressed; the spool while it exists), the file metadata and the log
// output for any seeded value. Zero hits.

// upstreamPassword is the password in the --upstream URL.
const upstreamPassword = "Upstr3amPassw0rdX"

// leakCase is one request to record: a seeded value in one body kind.
type leakCase struct {
	value, kind string
}

// leakCases lists every corpus value with every body kind, and its glued
// forms with the JSON and form bodies.
func leakCases() []leakCase {
	var out []leakCase
	for _, e := range redacttest.Corpus() {
		for _, kind := range []string{"json", "form", "text", "json-as-form", "text-as-form", "gzip"} {
			out = append(out, leakCase{e.Value, kind})
		}
		for _, g := range redacttest.Glued(e) {
			out = append(out, leakCase{g, "json"}, leakCase{g, "form"})
		}
	}
	return out
}

// hostSafe reports whether v can go into a Host header and is not kept
// there by design: the host column keeps IP addresses (they name servers).
func hostSafe(v string) bool {
	if strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:@+") != "" {
		return false
	}
	for _, m := range addrLike.FindAllString(v, -1) {
		if _, err := netip.ParseAddr(m); err == nil {
			return false
		}
	}
	return true
}

var addrLike = regexp.MustCompile(`[0-9A-Fa-f:.]{7,}`)

// request builds the seeded request: its path and query, headers, content
// type and body (gzip'd for kind "gzip").
func (c leakCase) request(stream bool) (uri string, header http.Header, body []byte) {
	v := c.value
	uri = "/v1/users/" + url.PathEscape(v) + "/chat/completions?q=" + url.QueryEscape(v) + "&" + url.QueryEscape(v) + "=1"
	header = http.Header{}
	header.Set("User-Agent", "client/1.0 ("+v+")")
	header.Set("X-Request-Id", v)
	header.Set("X-Session-Id", v)
	header.Set("X-Tenant", v)
	header.Set("Authorization", "Bearer "+v)
	header.Set("X-Api-Key", v)
	if hostSafe(v) {
		header.Set("Host", "gw-"+v)
	}
	doc := map[string]any{
		"model": "ft:gpt-4o:" + v, "stream": stream, "stop": []string{v}, "user": v,
		"metadata": map[string]any{v: map[string]any{"nested": []string{v}}},
		"messages": []map[string]any{{"role": "user", "content": "please contact " + v + " today"}},
		"tools": []map[string]any{{"type": "function", "function": map[string]any{
			"name": "fn_" + v, "description": v,
			"parameters": map[string]any{"type": "object", "properties": map[string]any{v: map[string]any{"type": "string", "description": "e.g. " + v}}},
		}}},
	}
	jsonBody, _ := json.Marshal(doc)
	switch c.kind {
	case "json":
		header.Set("Content-Type", "application/json")
		body = jsonBody
	case "gzip":
		header.Set("Content-Type", "application/json")
		header.Set("Content-Encoding", "gzip")
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(jsonBody)
		zw.Close()
		body = buf.Bytes()
	case "form":
		header.Set("Content-Type", "application/x-www-form-urlencoded")
		body = []byte("model=gpt-4o&prompt=" + url.QueryEscape("contact "+v) + "&stop=" + url.QueryEscape(v) + "&" + url.QueryEscape(v) + "=x")
	case "text":
		header.Set("Content-Type", "text/plain")
		body = []byte("Hello, my details: " + v + "\nthanks")
	case "json-as-form": // curl -d '{…}'
		header.Set("Content-Type", "application/x-www-form-urlencoded")
		body = jsonBody
	case "text-as-form": // curl -d 'text': the whole text is one form key
		header.Set("Content-Type", "application/x-www-form-urlencoded")
		body = []byte("My name is John Q Public, my password is hunter2, reach me at " + v)
	}
	return uri, header, body
}

// response builds the upstream's answer for v: an event stream with v in
// its id: lines and chunk ids, or a JSON completion with v as its id.
func leakResponse(v string, stream bool) (contentType string, body []byte) {
	q, _ := json.Marshal(v)
	model, _ := json.Marshal("ft:gpt-4o:" + v)
	if stream {
		var b bytes.Buffer
		fmt.Fprintf(&b, "id: %s\nevent: message\ndata: {\"id\":%s,\"object\":\"chat.completion.chunk\",\"model\":%s,\"choices\":[{\"delta\":{\"content\":%s}}]}\n\n", v, q, model, q)
		b.WriteString("data: [DONE]\n\n")
		return "text/event-stream", b.Bytes()
	}
	return "application/json", fmt.Appendf(nil, `{"id":%s,"object":"chat.completion","model":%s,"choices":[{"message":{"role":"assistant","content":%s}}],"usage":{"prompt_tokens":5,"completion_tokens":3}}`, q, model, q)
}

// scanLeaks fails t for every seeded value, and the upstream password,
// found in the files under dir (decompressed) or in logs.
func scanLeaks(t *testing.T, what, dir string, logs ...[]byte) {
	t.Helper()
	leaks, scanned := redacttest.ScanDir(t, dir)
	for _, l := range leaks {
		t.Errorf("%s: file leaks %s %q as %q in %s", what, l.Type, l.Value, l.Needle, l.Where)
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			data, _ := os.ReadFile(path)
			for _, part := range redacttest.Expand(data) {
				if bytes.Contains(part, []byte(upstreamPassword)) {
					t.Errorf("%s: %s holds the --upstream password", what, path)
				}
			}
		}
		return nil
	})
	for i, l := range logs {
		for _, leak := range redacttest.Find(l, "log") {
			t.Errorf("%s: log %d leaks %s %q", what, i, leak.Type, leak.Value)
		}
		if bytes.Contains(l, []byte(upstreamPassword)) {
			t.Errorf("%s: log %d holds the --upstream password:\n%s", what, i, l)
		}
	}
	if scanned == 0 {
		t.Errorf("%s: nothing written under %s", what, dir)
	}
	t.Logf("%s: %d bytes searched", what, scanned)
}

// lockedBuffer is a log a recorder goroutine writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

func leakKeyFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, []byte("leak-test-key-0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// recordSidecar proxies every leak case through `reel record --upstream`
// with extra flags and returns the dataset directory and the logs. The
// spool is scanned while it exists, before shutdown.
func recordSidecar(t *testing.T, raw bool, extra ...string) (dir string, logs [][]byte) {
	t.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		v := r.Header.Get("X-Request-Id")
		ct, body := leakResponse(v, r.URL.Query().Has("stream"))
		w.Header().Set("Content-Type", ct)
		w.Header().Set("X-Request-Id", v)
		w.Write(body)
	}))
	defer upstream.Close()
	u, _ := url.Parse(upstream.URL)
	dir = t.TempDir()
	listen := freeAddr(t)
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	args := append([]string{"--listen", listen, "--upstream", "http://svcuser:" + upstreamPassword + "@" + u.Host,
		"--out", dir, "--metrics-listen", "", "--recorder-id", "leak", "--sync-every", "20ms",
		"--context-header", "x-tenant", "--queue", "100000", "--queue-bytes", "256MiB"}, extra...)
	go func() { done <- runRecord(ctx, args, &stdout, &stderr) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + listen + "/ready")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("recorder did not start: %v\n%s", err, stderr.Bytes())
		}
		time.Sleep(20 * time.Millisecond)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	cases := leakCases()
	for i, c := range cases {
		stream := i%2 == 1
		uri, h, body := c.request(stream)
		if stream {
			uri += "&stream=1"
		}
		req, err := http.NewRequest("POST", "http://"+listen+uri, bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%q: %v", c.value, err)
		}
		req.Header = h
		req.Host = h.Get("Host")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%q (%s): %v", c.value, c.kind, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%q (%s): status %d", c.value, c.kind, resp.StatusCode)
		}
	}
	// The spool holds what is not yet in a closed file: scan it now.
	if !raw {
		time.Sleep(200 * time.Millisecond)
		scanLeaks(t, "sidecar (running, spool)", dir, stderr.Bytes())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && err != context.Canceled {
			t.Fatalf("record: %v\n%s", err, stderr.Bytes())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("recorder did not stop")
	}
	posts := 0
	for _, x := range formatstest.Read[formats.Exchange](t, dir) {
		if x.Method == "POST" {
			posts++
		}
	}
	if posts != len(cases) {
		n := posts
		t.Fatalf("recorded %d requests, want %d: the scan would prove little", n, len(cases))
	}
	return dir, [][]byte{stdout.Bytes(), stderr.Bytes()}
}

func TestNoLeakSidecar(t *testing.T) {
	if testing.Short() {
		t.Skip("records a few hundred requests")
	}
	dir, logs := recordSidecar(t, false, "--redact-key-file", leakKeyFile(t))
	scanLeaks(t, "sidecar", dir, logs...)
	var inspectOut bytes.Buffer
	if err := dispatchErr(t, []string{"inspect", dir}, &inspectOut); err != nil {
		t.Fatal(err)
	}
	scanLeaks(t, "sidecar: reel inspect", dir, inspectOut.Bytes())
	if !strings.Contains(inspectOut.String(), "proxy:http://127.0.0.1:") {
		t.Errorf("inspect does not name the cleaned source:\n%s", inspectOut.String())
	}
}

// TestNoLeakRedactRaw records raw (--raw), then `reel redact`s the raw
// dataset: the output must hold nothing the raw one did.
func TestNoLeakRedactRaw(t *testing.T) {
	if testing.Short() {
		t.Skip("records a few hundred requests")
	}
	raw, _ := recordSidecar(t, true, "--raw")
	if leaks, _ := redacttest.ScanDir(t, raw); len(leaks) == 0 {
		t.Fatal("the raw recording holds no seeded value: the test proves nothing")
	}
	out := filepath.Join(t.TempDir(), "redacted")
	var stdout, stderr bytes.Buffer
	if err := runRedact(context.Background(), []string{raw, out, "--redact-key-file", leakKeyFile(t)}, &stdout, &stderr); err != nil {
		t.Fatalf("redact: %v\n%s", err, stderr.String())
	}
	scanLeaks(t, "reel redact", out, stdout.Bytes(), stderr.Bytes())
}

// TestNoLeakPcapImport records the same traffic from a capture file.
func TestNoLeakPcapImport(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC)
	var packets []capturetest.Packet
	cases := leakCases()
	for i, c := range cases {
		stream := i%2 == 1
		uri, h, body := c.request(stream)
		host := h.Get("Host")
		if host == "" {
			host = "gw"
		}
		h.Del("Host")
		var req bytes.Buffer
		fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", uri, host, len(body))
		h.Write(&req)
		req.WriteString("\r\n")
		req.Write(body)
		ct, rbody := leakResponse(c.value, stream)
		resp := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\nX-Request-Id: %s\r\n\r\n%s", ct, len(rbody), c.value, rbody)
		at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		conn := capturetest.NewConn(netip.AddrPortFrom(netip.MustParseAddr("203.0.113.5"), uint16(20000+i)), netip.MustParseAddrPort("10.0.0.2:8000"))
		packets = append(packets, conn.Handshake(at)...)
		packets = append(packets, conn.Send(true, at.Add(time.Millisecond), req.Bytes())...)
		packets = append(packets, conn.Send(false, at.Add(3*time.Millisecond), []byte(resp))...)
		packets = append(packets, conn.Fin(at.Add(4*time.Millisecond))...)
	}
	path := capturetest.WriteFile(t, capturetest.Ethernet, packets)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := runRecord(context.Background(), []string{"--pcap", path, "--port", "8000", "--out", out, "--metrics-listen", "",
		"--recorder-id", "leak", "--context-header", "x-tenant", "--redact-key-file", leakKeyFile(t)}, &stdout, &stderr); err != nil {
		t.Fatalf("record: %v\n%s", err, stderr.String())
	}
	if n := len(formatstest.Read[formats.Exchange](t, out)); n != len(cases) {
		t.Fatalf("imported %d exchanges, want %d", n, len(cases))
	}
	scanLeaks(t, "pcap import", out, stdout.Bytes(), stderr.Bytes())
}

// TestNoLeakAccessLogImport records the same requests from an nginx
// access log (which holds no response body or headers beyond its fields).
func TestNoLeakAccessLogImport(t *testing.T) {
	var log bytes.Buffer
	t0 := time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC)
	n := 0
	for i, c := range leakCases() {
		if c.kind == "gzip" {
			continue // nginx logs the body as text
		}
		uri, h, body := c.request(false)
		_, rbody := leakResponse(c.value, false)
		host := h.Get("Host")
		if host == "" {
			host = "gw"
		}
		line, _ := json.Marshal(map[string]string{
			"msec": fmt.Sprintf("%d.%03d", t0.Unix()+int64(i), 0), "request_time": "0.010", "upstream_response_time": "0.009",
			"remote_addr": "203.0.113.5", "host": host, "request_method": "POST", "request_uri": uri, "status": "200",
			"content_type": h.Get("Content-Type"), "content_length": fmt.Sprint(len(body)), "body_bytes_sent": fmt.Sprint(len(rbody)),
			"upstream_addr": "10.0.0.5:8000", "request_body": string(body), "resp_body": string(rbody), "tenant": c.value,
		})
		log.Write(line)
		log.WriteByte('\n')
		n++
	}
	path := filepath.Join(t.TempDir(), "access.jsonl")
	if err := os.WriteFile(path, log.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := runRecord(context.Background(), []string{"--access-log", path, "--out", out, "--metrics-listen", "",
		"--recorder-id", "leak", "--log-field", "response_body=resp_body", "--log-field", "header:x-tenant=tenant",
		"--context-header", "x-tenant", "--redact-key-file", leakKeyFile(t)}, &stdout, &stderr); err != nil {
		t.Fatalf("record: %v\n%s", err, stderr.String())
	}
	if got := len(formatstest.Read[formats.Exchange](t, out)); got != n {
		t.Fatalf("imported %d exchanges, want %d\n%s", got, n, stderr.String())
	}
	scanLeaks(t, "access-log import", out, stdout.Bytes(), stderr.Bytes())
}

// dispatchErr runs a reel subcommand and returns its error.
func dispatchErr(t *testing.T, args []string, stdout io.Writer) error {
	t.Helper()
	var stderr bytes.Buffer
	if code := dispatch(context.Background(), args, stdout, &stderr); code != 0 {
		return fmt.Errorf("reel %s: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
	}
	return nil
}
