package redact_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/redact"
	"github.com/reelkit/reel/redact/redacttest"
)

// seededExchange puts v everywhere a recorder stores raw data: prompt
// text, allow-listed fields, a tool schema (kept verbatim), object keys,
// a JSON number when v is all digits, tool-call arguments, the path, the
// query, allow-listed and credential headers, the client, the session,
// context headers, an SSE response (content, id, event name) and a form
// or text body.
func seededExchange(v string, seq int64, bodyKind string) *formats.Exchange {
	q, _ := json.Marshal(v)
	sv := string(q)
	// Bare digits are seeded as JSON numbers for the types the number
	// detector covers (an unseparated 9-digit SSN is indistinguishable from
	// any other integer and is not claimed).
	number := "0"
	if digits := strings.NewReplacer(" ", "", "-", "").Replace(v); len(digits) >= 11 && digits[0] != '0' && strings.Trim(digits, "0123456789") == "" {
		number = digits
	}
	req := `{"model":"ft:gpt-4o:` + strings.Trim(sv, `"`) + `","stop":[` + sv + `],"user":` + sv + `,"metadata":{` + sv + `:{"nested":[[` + sv + `]],"n":` + number + `}},` +
		`"messages":[{"role":"system","content":"Contact: ` + strings.Trim(sv, `"`) + ` today"},{"role":"user","content":[{"type":"text","text":` + sv + `}]},` +
		`{"role":"assistant","tool_calls":[{"id":` + sv + `,"type":"function","function":{"name":"fn_` + strings.Trim(sv, `"`) + `","arguments":"{\"who\":` + strings.ReplaceAll(sv, `"`, `\"`) + `}"}}]}],` +
		`"tools":[{"type":"function","function":{"name":"fn_` + strings.Trim(sv, `"`) + `","description":` + sv + `,"parameters":{"type":"object","properties":{"who":{"type":"string","description":"e.g. ` + strings.Trim(sv, `"`) + `","default":` + sv + `}}}}}]}`
	// Error strings keep loopback and private addresses readable (they
	// name the operator's machines), the host column every address (it
	// names a server): seed those columns with a public address, and the
	// host with none.
	infra, host := v, v
	for _, m := range addrLike.FindAllString(v, -1) {
		if a, err := netip.ParseAddr(m); err == nil {
			host = "addr"
			if a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() {
				infra = "8.8.4.4"
			}
		}
	}
	resp := "event: " + v + "\nid: " + v + "\n" +
		`data: {"id":` + sv + `,"object":"chat.completion.chunk","model":"gpt-4o","choices":[{"delta":{"content":` + sv + `}}]}` + "\n\n" +
		"data: " + v + "\n\ndata: [DONE]\n\n"
	x := &formats.Exchange{
		Ts: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), TsUnixNs: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano(),
		Recorder: "leaktest", Seq: seq, Session: v, Client: v + ":5123",
		Model: "ft:gpt-4o:" + v, Upstream: "http://svcuser:" + url.PathEscape(v) + "@10.0.0.5:8000",
		Error:  "dial tcp 10.0.0.5:8000: refused for " + infra,
		Method: "POST", Host: "gw-" + host + ".internal", Path: "/v1/users/" + url.PathEscape(v) + "/chat/completions",
		Query:          "q=" + url.QueryEscape(v) + "&api-version=" + url.QueryEscape(v) + "&" + url.QueryEscape(v) + "=1&raw=" + v,
		ReqContentType: "application/json",
		ReqHeaders: map[string]string{
			"Content-Type": "application/json", "User-Agent": "client/1.0 (" + v + ")", "X-Request-Id": v,
			"Authorization": "Bearer " + v, "Cookie": "sid=" + v, "X-Api-Key": v, "X-End-User": v,
		},
		ReqBody:         []byte(req),
		Status:          200,
		RespContentType: "text/event-stream",
		RespHeaders:     map[string]string{"Content-Type": "text/event-stream", "Set-Cookie": "s=" + v, "X-Request-Id": v},
		RespBody:        []byte(resp),
		Context:         map[string]string{"x-tenant": v},
		BatchSize:       -1, QueueDepth: -1,
	}
	switch bodyKind {
	case "form":
		x.ReqContentType = "application/x-www-form-urlencoded"
		x.ReqBody = []byte("model=gpt-4o&prompt=" + url.QueryEscape(v) + "&stop=" + url.QueryEscape(v) + "&" + url.QueryEscape(v) + "=x")
	case "text":
		x.ReqContentType = "text/plain"
		x.ReqBody = []byte("Hello, my details: " + v + "\nthanks")
	case "json-as-form": // curl -d '{…}' sends JSON as a form
		x.ReqContentType = "application/x-www-form-urlencoded"
	case "text-as-form": // curl -d 'some text': all of it is one form key
		x.ReqContentType = "application/x-www-form-urlencoded"
		x.ReqBody = []byte("My name is John Q Public, diagnosis HIV positive, my password is hunter2, reach me at " + v)
	case "gzip": // compressed request and response bodies
		x.ReqHeaders["Content-Encoding"] = "gzip"
		x.RespHeaders["Content-Encoding"] = "gzip"
		x.ReqBody, x.RespBody = gzipped(x.ReqBody), gzipped(x.RespBody)
	}
	return x
}

var addrLike = regexp.MustCompile(`[0-9A-Fa-f:.]{7,}`)

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// exchangeBytes is every stored field of x, raw, and its bodies
// decompressed.
func exchangeBytes(x *formats.Exchange) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n", x.Session, x.Client, x.Path, x.Query, x.Topic, x.RedactErr, x.Error,
		x.Model, x.Host, x.Upstream)
	for _, m := range []map[string]string{x.ReqHeaders, x.RespHeaders, x.Context} {
		for k, v := range m {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	for _, body := range [][]byte{x.ReqBody, x.RespBody} {
		for _, part := range redacttest.Expand(body) {
			b.Write(part)
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// TestNoLeak seeds every detector's entity type, in several formats, into
// every part of an exchange, redacts it, writes it with the dataset writer
// and searches the written files (zstd pages decompressed) for any original.
func TestNoLeak(t *testing.T) {
	policies := map[string]*redact.Policy{"default": redact.DefaultPolicy()}
	detectText := redact.DefaultPolicy()
	detectText.Text = redact.TextDetect
	policies["text-detect"] = detectText

	for name, p := range policies {
		t.Run(name, func(t *testing.T) {
			r, err := redact.New(p, []byte("leak-test-key-0123456789"))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			ctx := context.Background()
			w, err := formats.NewWriter[formats.Exchange](ctx, formats.WriterOptions{Dir: dir, Recorder: "leaktest", RedactionFingerprint: r.Fingerprint()})
			if err != nil {
				t.Fatalf("writer: %v", err)
			}
			var seq int64
			for _, e := range redacttest.Corpus() {
				for i, v := range append([]string{e.Value}, redacttest.Glued(e)...) {
					for _, kind := range []string{"json", "form", "text", "gzip", "json-as-form", "text-as-form"} {
						if i > 0 && kind != "json" && kind != "form" {
							continue // glued values: the carriers, not every body kind again
						}
						seq++
						x := seededExchange(v, seq, kind)
						if redacttest.Find(exchangeBytes(x), "seeded") == nil {
							t.Fatalf("%s %q: seeding did not place the value", e.Type, e.Value)
						}
						r.RedactExchange(x)
						if x.RedactErr != "" {
							t.Errorf("%s %q (%s): redaction error %q", e.Type, e.Value, kind, x.RedactErr)
						}
						if (kind == "json" || kind == "gzip" || kind == "json-as-form") && !json.Valid(redacttest.Expand(x.ReqBody)[len(redacttest.Expand(x.ReqBody))-1]) {
							t.Errorf("%s %q: request body no longer JSON: %s", e.Type, e.Value, x.ReqBody)
						}
						for _, l := range redacttest.Find(exchangeBytes(x), "exchange") {
							t.Errorf("%s %q (%s body) leaked as %q:\n%s", l.Type, l.Value, kind, l.Needle, exchangeBytes(x))
						}
						if kind == "text-as-form" && (bytes.Contains(exchangeBytes(x), []byte("hunter2")) || bytes.Contains(exchangeBytes(x), []byte("John Q Public"))) {
							t.Errorf("%s body: the prose survived:\n%s", kind, exchangeBytes(x))
						}
						if err := w.Write(x); err != nil {
							t.Fatalf("write: %v", err)
						}
					}
				}
			}
			if err := w.Close(context.Background()); err != nil {
				t.Fatalf("close: %v", err)
			}
			if os.Getenv("REEL_KEEP_LEAKDIR") != "" {
				os.CopyFS(os.Getenv("REEL_KEEP_LEAKDIR")+"/"+name, os.DirFS(dir))
			}
			leaks, scanned := redacttest.ScanDir(t, dir)
			for _, l := range leaks {
				t.Errorf("written file leaks %s %q as %q in %s", l.Type, l.Value, l.Needle, l.Where)
			}
			if scanned < int64(len(redacttest.Corpus()))*1000 {
				t.Errorf("scanned only %d bytes: did the writer write?", scanned)
			}
			t.Logf("%d exchanges, %d bytes searched (files and decompressed pages)", seq, scanned)
		})
	}
}

// TestScannerFindsRawValues proves the scan can fail: the same seeded
// exchanges written without redaction are caught.
func TestScannerFindsRawValues(t *testing.T) {
	dir := t.TempDir()
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: dir, Recorder: "raw", RedactionFingerprint: "raw"})
	if err != nil {
		t.Fatalf("writer: %v", err)
	}
	corpus := redacttest.Corpus()
	for i, e := range corpus {
		// Only the gzip'd response body holds the value: the scan must look
		// inside a gzip stream inside a zstd page to find it.
		x := seededExchange(e.Value, int64(i+1), "gzip")
		x.ReqBody, x.Path, x.Query, x.Client, x.Session = nil, "/", "", "", ""
		x.ReqHeaders, x.RespHeaders, x.Context = nil, nil, nil
		if err := w.Write(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	leaks, _ := redacttest.ScanDir(t, dir)
	found := map[string]bool{}
	for _, l := range leaks {
		found[l.Value] = true
	}
	for _, e := range corpus {
		if !found[e.Value] {
			t.Errorf("scanner missed raw %s %q", e.Type, e.Value)
		}
	}
}

func TestFailClosed(t *testing.T) {
	r, err := redact.New(nil, []byte("leak-test-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	x := &formats.Exchange{
		ReqContentType: "application/json",
		ReqHeaders:     map[string]string{"Content-Encoding": "br"},
		ReqBody:        []byte{0x1f, 0x8b, 8, 0, 1, 2, 3},
		RespBody:       []byte(`{"choices":[{"message":{"content":"fine"}}]}`),
		RespBodyBytes:  44,
	}
	r.RedactExchange(x)
	if x.ReqBody != nil || x.ReqBodyBytes != 7 || !strings.Contains(x.RedactErr, "request body: compressed body (content-encoding br)") {
		t.Errorf("request: body %q, size %d, error %q", x.ReqBody, x.ReqBodyBytes, x.RedactErr)
	}
	if len(x.RespBody) == 0 || bytes.Contains(x.RespBody, []byte("fine")) || x.RespBodyBytes != 44 {
		t.Errorf("response: %q size %d", x.RespBody, x.RespBodyBytes)
	}
	if x.ReqHeaders["Content-Encoding"] != "br" {
		t.Errorf("content-encoding header: %q", x.ReqHeaders["Content-Encoding"])
	}
}

func TestHeadersPathQuery(t *testing.T) {
	r, err := redact.New(nil, []byte("leak-test-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{"Authorization": "Bearer sk-abc", "Content-Type": "application/json", "X-Custom": "hello", "cookie": "a=b"}
	r.RedactHeaders(h)
	want := map[string]string{"Authorization": "<redacted len=13>", "Content-Type": "application/json", "X-Custom": "<redacted len=5>", "cookie": "<redacted len=3>"}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("%s = %q, want %q", k, h[k], v)
		}
	}
	if got := r.RedactPath("/v1/chat/completions"); got != "/v1/chat/completions" {
		t.Errorf("plain path changed: %q", got)
	}
	if got := r.RedactPath("/users/bob%40example.com/items"); strings.Contains(got, "bob") || !strings.HasPrefix(got, "/users/") || !strings.HasSuffix(got, "/items") {
		t.Errorf("path: %q", got)
	}
	if got := r.RedactQuery("api-version=2024-02-01&stream=true"); got != "api-version=2024-02-01&stream=true" {
		t.Errorf("plain query changed: %q", got)
	}
	p := redact.DefaultPolicy()
	p.QueryValues = redact.QuerySynthetic
	rs, _ := redact.New(p, []byte("leak-test-key-0123456789"))
	if got := rs.RedactQuery("api-version=2024-02-01&q=secret+words"); !strings.HasPrefix(got, "api-version=2024-02-01&q=") || strings.Contains(got, "secret") {
		t.Errorf("synthetic query: %q", got)
	}
}

// TestCompressedBodies checks gzip, deflate and zstd bodies are redacted
// inside and compressed again, and a corrupt one fails closed.
func TestCompressedBodies(t *testing.T) {
	r, err := redact.New(nil, []byte("leak-test-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte(`{"model":"gpt-4o","stop":["jane.doe@example.com"],"messages":[{"role":"user","content":"call +14155552671"}]}`)
	for _, enc := range []string{"gzip", "deflate", "zstd"} {
		t.Run(enc, func(t *testing.T) {
			var buf bytes.Buffer
			var zw io.WriteCloser
			switch enc {
			case "gzip":
				zw = gzip.NewWriter(&buf)
			case "deflate":
				zw = zlib.NewWriter(&buf)
			case "zstd":
				zw, _ = zstd.NewWriter(&buf)
			}
			zw.Write(plain)
			zw.Close()
			b, err := r.RedactRequestBody("application/json", enc, buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			var zr io.Reader
			switch enc {
			case "gzip":
				zr, err = gzip.NewReader(bytes.NewReader(b.Data))
			case "deflate":
				zr, err = zlib.NewReader(bytes.NewReader(b.Data))
			case "zstd":
				var d *zstd.Decoder
				d, err = zstd.NewReader(bytes.NewReader(b.Data))
				zr = d
			}
			if err != nil {
				t.Fatalf("stored body is not %s: %v", enc, err)
			}
			out, err := io.ReadAll(zr)
			if err != nil || !json.Valid(out) || len(out) != len(plain) {
				t.Fatalf("decoded %q, %v", out, err)
			}
			redacttest.AssertNoLeak(t, enc+" body", out)
			if len(b.PrefixHashes) == 0 || !bytes.Contains(out, []byte(`"model":"gpt-4o"`)) {
				t.Errorf("decoded: %s", out)
			}
		})
	}
	if _, err := r.RedactRequestBody("application/json", "gzip", []byte("not gzip at all")); err == nil {
		t.Error("corrupt gzip accepted")
	}
}

// TestBodyClassifiedByContent checks bodies are redacted as what they
// hold: JSON sent as a form (curl -d's default) is JSON and stays JSON,
// text sent as a form loses its prose, and bytes that are not text under a
// text type fail closed.
func TestBodyClassifiedByContent(t *testing.T) {
	r, err := redact.New(nil, []byte("leak-test-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	prompt := `{"model":"gpt-4o","messages":[{"role":"user","content":"My name is John Q Public, diagnosis HIV positive, my password is hunter2"}]}`
	asJSON, err := r.RedactRequestBody("application/json", "", []byte(prompt))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, ct string
		body     []byte
		json     bool   // stored body must be JSON
		same     []byte // stored body must equal this (nil: not checked)
		fail     bool
	}{
		{"json as form", "application/x-www-form-urlencoded", []byte(prompt), true, asJSON.Data, false},
		{"json as text", "text/plain", []byte(prompt), true, asJSON.Data, false},
		{"json as octet-stream", "application/octet-stream", []byte(prompt), true, asJSON.Data, false},
		{"text as form", "application/x-www-form-urlencoded", []byte("My name is John Q Public, diagnosis HIV positive, my password is hunter2"), false, nil, false},
		{"form", "application/x-www-form-urlencoded", []byte("user=John+Q+Public&note=diagnosis+HIV+positive+hunter2"), false, nil, false},
		{"gzip as form", "application/x-www-form-urlencoded", gzipped([]byte(prompt)), false, nil, true},
		{"gzip as json", "application/json", gzipped([]byte(prompt)), false, nil, true},
		{"binary as text", "text/plain", []byte("John Q Public\x00\xff\xfe hunter2"), false, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &formats.Exchange{ReqContentType: tt.ct, ReqBody: tt.body}
			r.RedactExchange(x)
			if tt.fail {
				if x.ReqBody != nil || x.ReqBodyBytes != int64(len(tt.body)) || !strings.Contains(x.RedactErr, "not text") {
					t.Fatalf("want fail closed: body %q, size %d, error %q", x.ReqBody, x.ReqBodyBytes, x.RedactErr)
				}
				return
			}
			if x.RedactErr != "" {
				t.Fatalf("redaction error %q", x.RedactErr)
			}
			for _, secret := range []string{"John", "Public", "HIV", "hunter2"} {
				if bytes.Contains(x.ReqBody, []byte(secret)) {
					t.Errorf("%q survived: %s", secret, x.ReqBody)
				}
			}
			if tt.json && !json.Valid(x.ReqBody) {
				t.Errorf("stored body is not JSON: %s", x.ReqBody)
			}
			if tt.same != nil && !bytes.Equal(x.ReqBody, tt.same) {
				t.Errorf("stored %s\nwant the JSON redaction %s", x.ReqBody, tt.same)
			}
			if x.ReqContentType != tt.ct {
				t.Errorf("content type changed to %q", x.ReqContentType)
			}
		})
	}
}

// TestTypedColumns checks every column that copies a request value goes
// through the detectors, with the same token the body gets, and that error
// strings keep the operator's own addresses readable.
func TestTypedColumns(t *testing.T) {
	r, err := redact.New(nil, []byte("leak-test-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	key := "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	x := &formats.Exchange{
		Model: "ft:gpt-4o:" + key, Host: "203.0.113.77:8443", Upstream: "http://svcuser:pw@10.0.0.5:8000",
		Error:          "read tcp 10.0.0.5:8000->203.0.113.9:51234: connection reset; dial [::1]:8000 refused",
		Query:          "password=hunter2&token=abc123&api-version=2024-02-01",
		ReqContentType: "application/json",
		ReqHeaders:     map[string]string{"x-" + key: "1", "authorization": "<redacted len=51>", "user-agent": "bot/" + key},
		ReqBody:        []byte(`{"model":"ft:gpt-4o:` + key + `"}`),
	}
	r.RedactExchange(x)
	var body struct{ Model string }
	if err := json.Unmarshal(x.ReqBody, &body); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(x.Model, key[4:]) || x.Model != body.Model || !strings.HasPrefix(x.Model, "ft:gpt-4o:ghp_") {
		t.Errorf("model column %q, body model %q", x.Model, body.Model)
	}
	if x.Host != "203.0.113.77:8443" {
		t.Errorf("host %q: a server's address is kept", x.Host)
	}
	if x.Upstream != "http://10.0.0.5:8000" {
		t.Errorf("upstream %q", x.Upstream)
	}
	if !strings.Contains(x.Error, "10.0.0.5:8000->") || strings.Contains(x.Error, "203.0.113.9") || !strings.Contains(x.Error, "[::1]:8000") {
		t.Errorf("error %q: want private and loopback kept, public replaced", x.Error)
	}
	if strings.Contains(x.Query, "hunter2") || strings.Contains(x.Query, "abc123") || !strings.HasSuffix(x.Query, "&api-version=2024-02-01") {
		t.Errorf("query %q", x.Query)
	}
	for k, v := range x.ReqHeaders {
		if strings.Contains(k+v, key[4:]) {
			t.Errorf("header %s: %s", k, v)
		}
	}
	if x.ReqHeaders["authorization"] != "<redacted len=51>" {
		t.Errorf("authorization marker of a raw dataset changed: %q", x.ReqHeaders["authorization"])
	}
}
