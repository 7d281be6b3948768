package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/sse"
)

func chatExchange(req string, status int32, ct, resp string) *formats.Exchange {
	return &formats.Exchange{
		Method: "POST", Path: "/v1/chat/completions", ReqContentType: "application/json",
		ReqBody: []byte(req), ReqBodyBytes: int64(len(req)),
		Status: status, RespContentType: ct, RespBody: []byte(resp), RespBodyBytes: int64(len(resp)),
	}
}

func openAIStream(text string, calls ...[3]string) string {
	var b strings.Builder
	b.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n")
	for i := 0; i < len(text); i += 3 {
		d, _ := json.Marshal(text[i:min(i+3, len(text))])
		fmt.Fprintf(&b, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s},\"logprobs\":null,\"finish_reason\":null}]}\n\n", d)
	}
	for i, c := range calls {
		fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,\"id\":%q,\"function\":{\"name\":%q,\"arguments\":\"\"}}]}}]}\n\n", i, c[0], c[1])
		for j := 0; j < len(c[2]); j += 4 {
			d, _ := json.Marshal(c[2][j:min(j+4, len(c[2]))])
			fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,\"function\":{\"arguments\":%s}}]}}]}\n\n", i, d)
		}
	}
	b.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	return b.String()
}

// TestLinkTurns: a follow-up carrying the previous answer links to it, in
// every API shape reel understands, and survives redaction; anything else
// does not link.
func TestLinkTurns(t *testing.T) {
	r := testRedactor(t)
	sys := `{"role":"system","content":"You are terse."}`
	u1 := `{"role":"user","content":"What is the capital of France?"}`
	cases := []struct {
		name     string
		a        *formats.Exchange
		b        string // the follow-up request body
		wantLink bool
	}{
		{
			name:     "openai stream, answer sent back as a string",
			a:        chatExchange(`{"model":"m","stream":true,"messages":[`+sys+`,`+u1+`]}`, 200, "text/event-stream", openAIStream("Paris, of course.")),
			b:        `{"model":"m","messages":[` + sys + `,` + u1 + `,{"role":"assistant","content":"Paris, of course."},{"role":"user","content":"And Spain?"}]}`,
			wantLink: true,
		},
		{
			name:     "openai json, answer sent back as text parts",
			a:        chatExchange(`{"messages":[`+u1+`]}`, 200, "application/json", `{"choices":[{"index":0,"message":{"role":"assistant","content":"Paris, of course."}}]}`),
			b:        `{"messages":[` + u1 + `,{"role":"assistant","content":[{"type":"text","text":"Paris, "},{"type":"text","text":"of course."}]},{"role":"user","content":"And Spain?"}]}`,
			wantLink: true,
		},
		{
			name:     "openai agent step: streamed tool call, then the tool's result",
			a:        chatExchange(`{"stream":true,"messages":[`+u1+`]}`, 200, "text/event-stream", openAIStream("", [3]string{"call_1", "lookup", `{"city": "Paris", "n": 1.50}`})),
			b:        `{"messages":[` + u1 + `,{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"n\":1.50,\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"2.1M people"}]}`,
			wantLink: true,
		},
		{
			name: "anthropic stream with a tool_use block, tool_result follows",
			a: chatExchange(`{"system":"Be brief.","messages":[{"role":"user","content":"Weather in Paris?"}]}`, 200, "text/event-stream",
				"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"role\":\"assistant\"}}\n\n"+
					"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"+
					"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me check.\"}}\n\n"+
					"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"weather\",\"input\":{}}}\n\n"+
					"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \"}}\n\n"+
					"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Paris\\\"}\"}}\n\n"+
					"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
			b:        `{"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":[{"type":"text","text":"Weather in Paris?"}]},{"role":"assistant","content":[{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"Sunny"}]}]}`,
			wantLink: true,
		},
		{
			name:     "anthropic json answer with a thinking block left out",
			a:        chatExchange(`{"messages":[{"role":"user","content":"Hi"}]}`, 200, "application/json", `{"type":"message","role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"Hello!"}]}`),
			b:        `{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"Bye"}]}`,
			wantLink: true,
		},
		{
			name: "history edited by the client: no link",
			a:    chatExchange(`{"messages":[`+u1+`]}`, 200, "application/json", `{"choices":[{"message":{"role":"assistant","content":"Paris, of course."}}]}`),
			b:    `{"messages":[` + u1 + `,{"role":"assistant","content":"Paris."},{"role":"user","content":"And Spain?"}]}`,
		},
		{
			name: "a different earlier prompt: no link",
			a:    chatExchange(`{"messages":[{"role":"user","content":"What is the capital of Italy?"}]}`, 200, "application/json", `{"choices":[{"message":{"role":"assistant","content":"Paris, of course."}}]}`),
			b:    `{"messages":[` + u1 + `,{"role":"assistant","content":"Paris, of course."},{"role":"user","content":"And Spain?"}]}`,
		},
		{
			name: "failed answer: nothing to continue",
			a:    chatExchange(`{"messages":[`+u1+`]}`, 500, "application/json", `{"error":"overloaded"}`),
			b:    `{"messages":[` + u1 + `,{"role":"assistant","content":""},{"role":"user","content":"And Spain?"}]}`,
		},
		{
			name: "stream cut short: nothing to continue",
			a:    chatExchange(`{"stream":true,"messages":[`+u1+`]}`, 200, "text/event-stream", strings.TrimSuffix(openAIStream("Paris, of course."), "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")),
			b:    `{"messages":[` + u1 + `,{"role":"assistant","content":"Paris, of course."},{"role":"user","content":"And Spain?"}]}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := chatExchange(tc.b, 200, "application/json", `{"choices":[{"message":{"role":"assistant","content":"ok"}}]}`)
			a2, b2 := cloneExchange(tc.a), cloneExchange(b)
			r.RedactExchange(tc.a)
			r.RedactExchange(b)
			// The recorder's way: the request decoded once, before redaction.
			for _, x := range []*formats.Exchange{a2, b2} {
				req, err := sse.ParseRequest(x.ReqBody)
				if err != nil {
					t.Fatal(err)
				}
				r.RedactExchangeRequest(x, &req)
			}
			if a2.TurnKey != tc.a.TurnKey || b2.ParentTurnKey != b.ParentTurnKey || !bytes.Equal(b2.ReqBody, b.ReqBody) {
				t.Fatalf("with the request decoded by the caller: turn_key %x parent %x, want %x %x", a2.TurnKey, b2.ParentTurnKey, tc.a.TurnKey, b.ParentTurnKey)
			}
			if b.ParentTurnKey == 0 {
				t.Fatal("follow-up has no parent key")
			}
			if got := b.ParentTurnKey == tc.a.TurnKey; got != tc.wantLink {
				t.Fatalf("linked = %v, want %v (a.turn_key %x, b.parent_turn_key %x)", got, tc.wantLink, tc.a.TurnKey, b.ParentTurnKey)
			}
			if strings.Contains(string(b.ReqBody), "Paris") || strings.Contains(string(b.ReqBody), "capital") {
				t.Fatalf("follow-up not redacted: %s", b.ReqBody)
			}
		})
	}
}

// cloneExchange copies what chatExchange fills, bodies included.
func cloneExchange(x *formats.Exchange) *formats.Exchange {
	c := *x
	c.ReqBody, c.RespBody = bytes.Clone(x.ReqBody), bytes.Clone(x.RespBody)
	return &c
}

func TestLinkTurnsKeyedAndQuiet(t *testing.T) {
	a := chatExchange(`{"messages":[{"role":"user","content":"Hi"}]}`, 200, "application/json", `{"choices":[{"message":{"role":"assistant","content":"Hello!"}}]}`)
	LinkTurns(a, []byte("key-one-0123456789"))
	k1 := a.TurnKey
	LinkTurns(a, []byte("key-two-0123456789"))
	if k1 == 0 || a.TurnKey == 0 || k1 == a.TurnKey {
		t.Fatalf("turn keys under two keys: %x %x", k1, a.TurnKey)
	}
	if a.ParentTurnKey != 0 {
		t.Fatalf("first turn has a parent key %x", a.ParentTurnKey)
	}
	// Prefill: a trailing assistant message is not an answered turn.
	p := chatExchange(`{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"{"}]}`, 200, "application/json", `{}`)
	LinkTurns(p, testKey)
	if p.ParentTurnKey != 0 {
		t.Fatalf("prefill-only request has a parent key %x", p.ParentTurnKey)
	}
	for _, body := range []string{``, `{`, `{"messages":"x"}`, `{"messages":[1,2]}`, `{"prompt":"hi"}`, `[{"messages":[]}]`} {
		x := chatExchange(body, 200, "application/json", `{"choices":[]}`)
		LinkTurns(x, testKey) // must not panic
	}
}

func BenchmarkLinkTurns(b *testing.B) {
	var msgs []string
	for i := range 8 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":%q},{"role":"assistant","content":%q}`, strings.Repeat("question words here ", 20+i), strings.Repeat("answer text goes on ", 40)))
	}
	req := `{"model":"m","stream":true,"messages":[{"role":"system","content":"You are a helpful assistant."},` + strings.Join(msgs, ",") + `,{"role":"user","content":"next?"}]}`
	x := chatExchange(req, 200, "text/event-stream", openAIStream(strings.Repeat("streamed answer ", 30)))
	b.SetBytes(int64(len(x.ReqBody) + len(x.RespBody)))
	b.ReportAllocs()
	for b.Loop() {
		LinkTurns(x, testKey)
	}
}

// FuzzLinkTurns: any request and response bodies give links or none, never
// a panic or a hang.
func FuzzLinkTurns(f *testing.F) {
	f.Add(`{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"x"}]}`, `{"choices":[{"message":{"content":"ok"}}]}`)
	f.Add(`{"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}]}]}]}`, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	f.Add(`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"1"}]}`, openAIStream("a", [3]string{"c", "f", `{"a":1}`}))
	f.Fuzz(func(t *testing.T, req, resp string) {
		x := chatExchange(req, 200, "", resp)
		LinkTurns(x, testKey)
	})
}

// TestStreamEventFastMatchesDecode: the fast path (sse.ChatDelta) reads
// what encoding/json reads, and leaves every other shape to it.
func TestStreamEventFastMatchesDecode(t *testing.T) {
	head := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",`
	cases := []struct {
		data string
		fast bool
	}{
		{head + `"choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`, true},
		{head + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`, true},
		{head + `"choices":[{"index":0,"delta":{"content":"a \"quoted\" line\nnext \u00e9 \\ end"},"logprobs":null,"finish_reason":null}]}`, true},
		{head + `"choices":[{"index":0,"delta":{"content":"日本語 ok"},"logprobs":null,"finish_reason":null}],"usage":null}`, true},
		{head + `"choices":[{"index":0,"delta":{"role":"assistant"},"logprobs":null,"finish_reason":null}]}`, true},
		{head + `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":null}]}`, true},
		{head + `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`, true},
		{head + `"choices":[{"index":0,"delta":{"content":" token"}}]}`, true},
		{head + `"choices":[{"index":0,"delta":{"content":"x","reasoning_content":null},"finish_reason":null}]}`, true},
		{head + `"choices":[{"index":1,"delta":{"content":"x"},"finish_reason":null}]}`, true},
		{head + `"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null},{"index":1,"delta":{"content":"y"},"finish_reason":null}]}`, true},
		{head + `"choices":[null]}`, true},
		{`{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":32}}`, true},
		{head + `"choices":[{"index":0,"delta":{"content":"bad \xff byte"}}]}`, true},
		{head + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]},"finish_reason":null}]}`, false},
		{head + `"choices":[{"index":0,"delta":{"content":"x"}},{"index":0,"delta":{"content":"y"}}]}`, false},
		{head + `"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]`, false}, // truncated
		{head + `"choices":[{"index":0.0,"delta":{"content":"x"}}]}`, false},
		{head + `"choices":[{"index":0,"delta":{"content":7}}]}`, false},
		{head + `"Choices":[{"index":0,"delta":{"content":"x"}}]}`, false},
		{head + `"choices":[{"index":0,"delta":{"content":"x","Content":"y"}}]}`, false},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`, false},
	}
	for _, tc := range cases {
		data := []byte(strings.ReplaceAll(tc.data, `\xff`, "\xff"))
		if _, ok := sse.ChatDelta(data); ok != tc.fast {
			t.Errorf("fast = %v, want %v: %s", ok, tc.fast, data)
		}
		checkStreamEvent(t, data)
	}
	// A whole stream gives the same answer, digest included, either way.
	x := chatExchange(`{"messages":[{"role":"user","content":"Hi"}]}`, 200, "text/event-stream",
		"data: "+cases[1].data+"\n\ndata: "+cases[0].data+"\n\ndata: "+cases[2].data+"\n\ndata: "+cases[6].data+"\n\ndata: [DONE]\n\n")
	m, ok := answerOf(x)
	if want := "Hello" + "a \"quoted\" line\nnext é \\ end"; !ok || string(m.text) != want {
		t.Fatalf("answer %q (%v), want %q", m.text, ok, want)
	}
}

// checkStreamEvent fails when the fast path reads an event otherwise than
// encoding/json does.
func checkStreamEvent(t *testing.T, data []byte) {
	t.Helper()
	var fast, slow streamAnswerBuilder
	fast.event(data)
	slow.decodeEvent(bytes.TrimSpace(data))
	if string(data) == "[DONE]" {
		return
	}
	if fast.sawDelta != slow.sawDelta || fast.ended != slow.ended || string(fast.text) != string(slow.text) ||
		len(fast.calls) != len(slow.calls) || len(fast.order) != len(slow.order) {
		t.Fatalf("event %q: fast path read %+v, encoding/json %+v", data, fast, slow)
	}
}

// FuzzStreamEventFastMatchesDecode: for any event data, what sse.ChatDelta
// reads into the answer equals encoding/json's reading.
func FuzzStreamEventFastMatchesDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi \u00e9\n"},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`,
		`{"choices":[{"delta":{"content":"x","tool_calls":[]}},{"index":2,"delta":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{"}}]}}]}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"choices":[null,{"index":null,"delta":{"content":null},"finish_reason":""}],"x":[1,-2.5e3,true,{"a":"b"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkStreamEvent(t, data) })
}
