package redact

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"testing"

	"github.com/reelkit/reel/internal/cputime"
)

// benchBody is a realistic chat body: the English and Chinese samples'
// conversations concatenated into one multi-turn request with a long
// system prompt, about 6 KiB.
func benchBody(tb testing.TB) []byte {
	tb.Helper()
	var en, zh map[string]any
	for file, dst := range map[string]*map[string]any{"testdata/chat_en.json": &en, "testdata/chat_zh.json": &zh} {
		data, err := os.ReadFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		if err := json.Unmarshal(data, dst); err != nil {
			tb.Fatal(err)
		}
	}
	msgs := append(en["messages"].([]any), zh["messages"].([]any)[1:]...)
	msgs = append(msgs, en["messages"].([]any)[1:]...)
	en["messages"] = msgs
	en["user"] = "user-8812"
	body, err := json.Marshal(en)
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// BenchmarkRedactChat measures redaction throughput on a chat body (MB/s
// is per core: one goroutine); MB/cpu-s is the same per CPU-second of the
// process, which a loaded machine moves far less.
func BenchmarkRedactChat(b *testing.B) {
	r := testRedactor(b)
	body := benchBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for b.Loop() {
		if _, err := r.RedactRequestBody("application/json", "", body); err != nil {
			b.Fatal(err)
		}
	}
	if cpu := cputime.Process() - cpu0; cpu > 0 {
		b.ReportMetric(float64(len(body))*float64(b.N)/cpu.Seconds()/1e6, "MB/cpu-s")
	}
}

// BenchmarkRedactChatNoTopics is BenchmarkRedactChat without topic rules.
func BenchmarkRedactChatNoTopics(b *testing.B) {
	p := DefaultPolicy()
	p.Topics = nil
	r, err := New(p, testKey)
	if err != nil {
		b.Fatal(err)
	}
	body := benchBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r.RedactJSON(body)
	}
}

// BenchmarkPeerJSONRoundTrip is the peer measured in the same run:
// encoding/json decoding the same body into a map and encoding it again,
// the least any structure-aware rewrite with the standard library costs.
func BenchmarkPeerJSONRoundTrip(b *testing.B) {
	body := benchBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPeerSHA256 hashes the same body once: the floor of any keyed
// chain over the text.
func BenchmarkPeerSHA256(b *testing.B) {
	body := benchBody(b)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		sha256.Sum256(body)
	}
}

// BenchmarkRedactSSE measures a streamed response of 200 small events.
func BenchmarkRedactSSE(b *testing.B) {
	r := testRedactor(b)
	var body []byte
	for i := range 200 {
		body = append(body, `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":" word`...)
		body = append(body, byte('a'+i%26))
		body = append(body, `"},"finish_reason":null}]}`+"\n\n"...)
	}
	body = append(body, "data: [DONE]\n\n"...)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.RedactResponseBody("text/event-stream", "", body); err != nil {
			b.Fatal(err)
		}
	}
}
