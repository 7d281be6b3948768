package redact

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// walkingRedactor is testRedactor with reframe off: every event is walked.
func walkingRedactor(tb testing.TB) *Redactor {
	tb.Helper()
	r := testRedactor(tb)
	r.walkEveryEvent = true
	return r
}

// chatChunk is an OpenAI chat chunk whose content is the JSON string
// content raw (escapes as written).
func chatChunk(raw string) string {
	return `{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1733000000,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"` + raw + `"},"finish_reason":null}]}`
}

// TestReframe: an event that repeats its predecessor's framing around
// another string content is redacted from the predecessor's walk, with
// the walk's own bytes; anything else is walked.
func TestReframe(t *testing.T) {
	anthropic := func(text string) string {
		return `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + text + `"}}`
	}
	for _, tc := range []struct {
		name       string
		prev, next string
		reused     bool
	}{
		{"longer token", chatChunk(" Hello"), chatChunk(" wonderful"), true},
		{"shorter token", chatChunk(" wonderful"), chatChunk("!"), true},
		{"same event", chatChunk(" a"), chatChunk(" a"), true},
		{"token grows at its end", chatChunk("ab"), chatChunk("abc"), true},
		{"token grows at its start", chatChunk("bc"), chatChunk("abc"), true},
		{"escapes", chatChunk(" line"), chatChunk(`\n\"quoted\" \u00e9\ud83d\ude00`), true},
		{"empty token", chatChunk(" a"), chatChunk(""), true},
		{"from empty", chatChunk(""), chatChunk("x"), true},
		{"anthropic text delta", anthropic("Hi"), anthropic(" there, friend"), true},
		{"unescaped quote", chatChunk(" a"), chatChunk(`x","role":"user`), false},
		{"trailing backslash", chatChunk(" a"), chatChunk(`x\`), false},
		{"bad escape", chatChunk(" a"), chatChunk(`\x41`), false},
		{"short unicode escape", chatChunk(" a"), chatChunk(`\u00`), false},
		{"raw control byte", chatChunk(" a"), chatChunk("tab\there"), false},
		{"kept value changes", chatChunk(" a"), strings.Replace(chatChunk(" a"), "chatcmpl-7", "chatcmpl-8", 1), false},
		{"number changes", chatChunk(" a"), strings.Replace(chatChunk(" a"), "1733000000", "1733000001", 1), false},
		{"key changes", chatChunk(" a"), strings.Replace(chatChunk(" a"), `"content"`, `"contenu"`, 1), false},
		{"two strings change", chatChunk(" a"), strings.Replace(chatChunk(" b"), "chatcmpl-7", "chatcmpl-8", 1), false},
		{"other shape", chatChunk(" a"), `{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testRedactor(t)
			j := r.getJob(domainResponse)
			defer r.putJob(j)
			first := j.redactJSON(nil, []byte(tc.prev))
			if !j.reframable() {
				t.Fatalf("a clean response event is not reframable")
			}
			got, reused := j.reframe(nil, []byte(tc.next))
			if reused != tc.reused {
				t.Fatalf("reframe reused the walk: %v, want %v", reused, tc.reused)
			}
			if !reused {
				return
			}
			// The reference: the same chain state, every event walked.
			w := walkingRedactor(t).getJob(domainResponse)
			if ref := w.redactJSON(nil, []byte(tc.prev)); !bytes.Equal(ref, first) {
				t.Fatalf("first event differs from the reference")
			}
			want := w.redactJSON(nil, []byte(tc.next))
			if !bytes.Equal(got, want) {
				t.Fatalf("reframed:\n%s\nwalked:\n%s", got, want)
			}
		})
	}
}

// TestReframeMatchesWalk: whole streams redact to the same bytes with and
// without reframe: chat streams with escapes and odd tokens, usage and
// [DONE], comments and events between the chunks, CRLF lines, several
// data lines per event, Anthropic streams, and a kept value that changes.
func TestReframeMatchesWalk(t *testing.T) {
	tokens := []string{" Hello", ",", " world", `\n\n`, ` \"quoted\"`, "", " café", `\u00e9t\u00e9`, " 42", " x@y.com", `\\`, " sk-abcdefghijklmnopqrstuvwxyz0123"}
	var chat strings.Builder
	for i, tok := range tokens {
		fmt.Fprintf(&chat, "data: %s\n\n", chatChunk(tok))
		switch i {
		case 3:
			chat.WriteString(": keep-alive\n\n")
		case 6:
			chat.WriteString("event: message\nid: 7\n")
		case 8:
			fmt.Fprintf(&chat, "data: %s\r\n\r\n", chatChunk(" crlf"))
		case 9:
			fmt.Fprintf(&chat, "data: %s\ndata: %s\n\n", chatChunk(" one"), chatChunk(" two"))
		case 10:
			fmt.Fprintf(&chat, "data: %s\n\n", strings.Replace(chatChunk(" new id"), "chatcmpl-7", "chatcmpl-9", 1))
		}
	}
	chat.WriteString("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":13}}\n\ndata: [DONE]\n\n")
	var anth strings.Builder
	anth.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"role\":\"assistant\",\"model\":\"claude\"}}\n\n")
	for _, tok := range tokens {
		fmt.Fprintf(&anth, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%s\"}}\n\n", tok)
	}
	anth.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	for name, body := range map[string]string{"openai": chat.String(), "anthropic": anth.String()} {
		t.Run(name, func(t *testing.T) {
			checkReframeMatchesWalk(t, []byte(body))
		})
	}
}

func checkReframeMatchesWalk(t *testing.T, body []byte) {
	t.Helper()
	got, gotErr := testRedactor(t).RedactResponseBody("text/event-stream", "", body)
	want, wantErr := walkingRedactor(t).RedactResponseBody("text/event-stream", "", body)
	if (gotErr == nil) != (wantErr == nil) || !bytes.Equal(got.Data, want.Data) {
		t.Fatalf("input:\n%q\nreframed (%v):\n%q\nwalked (%v):\n%q", body, gotErr, got.Data, wantErr, want.Data)
	}
}

// FuzzReframeMatchesWalk: any body redacts as an event stream to the same
// bytes with and without reframe.
func FuzzReframeMatchesWalk(f *testing.F) {
	f.Add([]byte("data: " + chatChunk(" a") + "\n\ndata: " + chatChunk(" bc") + "\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: " + chatChunk(`\n`) + "\n\ndata: " + chatChunk(`\u00e9\"`) + "\n\n: c\n\ndata: " + chatChunk("x") + "\n\n"))
	f.Add([]byte("data: {\"a\":\"x\",\"b\":\"y\"}\n\ndata: {\"a\":\"x\",\"b\":\"yz\"}\n\ndata: {\"a\":\"xq\",\"b\":\"yz\"}\n\n"))
	f.Add([]byte("data: [\"a\",1]\n\ndata: [\"ab\",1]\n\ndata: [\"ab\",12345678901234]\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkReframeMatchesWalk(t, body)
	})
}
