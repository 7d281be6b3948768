package redact

import (
	"fmt"
	"strings"
	"testing"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/sse"
)

// turnGoldenCases are exchanges of every shape the turn links read; their
// digests are in TestTurnKeysGolden.
func turnGoldenCases() []*formats.Exchange {
	sys := `{"role":"system","content":"You are terse."}`
	u1 := `{"role":"user","content":"What is the capital of France?"}`
	long := strings.Repeat("Tell me about the weather in the mountains in winter. ", 12)
	anthropicStream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"role\":\"assistant\"}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me check.\"}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"weather\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"Paris\\\"}\"}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	return []*formats.Exchange{
		chatExchange(`{"model":"m","stream":true,"messages":[`+sys+`,`+u1+`]}`, 200, "text/event-stream", openAIStream("Paris, of course.")),
		chatExchange(`{"model":"m","messages":[`+sys+`,`+u1+`,{"role":"assistant","content":"Paris, of course."},{"role":"user","content":"And Spain?"}]}`, 200, "application/json", `{"choices":[{"index":0,"message":{"role":"assistant","content":"Madrid."}}]}`),
		chatExchange(`{"messages":[`+u1+`,{"role":"assistant","content":[{"type":"text","text":"Paris, "},{"type":"text","text":"of course."}]},{"role":"user","content":"And Spain?"}]}`, 200, "application/json", `{"choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"Ma"},{"type":"image_url","image_url":{"url":"x"}}]}}]}`),
		chatExchange(`{"stream":true,"messages":[`+u1+`]}`, 200, "text/event-stream", openAIStream("", [3]string{"call_1", "lookup", `{"city": "Paris", "n": 1.50}`})),
		chatExchange(`{"messages":[`+u1+`,{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"n\":1.50,\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"2.1M people"}]}`, 200, "text/event-stream", openAIStream("It has 2.1M.")),
		chatExchange(`{"system":"Be brief.","messages":[{"role":"user","content":"Weather in Paris?"}]}`, 200, "text/event-stream", anthropicStream),
		chatExchange(`{"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":[{"type":"text","text":"Weather in Paris?"}]},{"role":"assistant","content":[{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_1","name":"weather","input":{"city":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"Sunny"}]}]}`, 200, "application/json", `{"type":"message","role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"Hello!"}]}`),
		chatExchange(`{"messages":[{"role":"user","content":"Caf\u00e9 \"quoted\"\n`+long+`"},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}]}`, 200, "text/event-stream", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\\u00e9\\\"b\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" c\"}}]}\r\n\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\n\ndata: [DONE]\n\n"),
		chatExchange(`{"model":"m","stream":true,"max_tokens":32,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"`+long+`"}]}`, 200, "text/event-stream",
			strings.Repeat(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":" token"}}]}`+"\n\n", 32)+"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":32}}\n\ndata: [DONE]\n\n"),
		chatExchange(`{"messages":[{"role":"user","content":"Hi"}]}`, 200, "", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"He\"}}]}\n"+"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"llo\"}}]}\n\n: comment\nevent: x\ndata:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"!\"},\"finish_reason\":\"stop\"}]}"),
		chatExchange(`{"messages":[{"role":"user","content":"Hi"}]}`, 200, "text/event-stream", openAIStream("cut")[:40]),
		// A stream under another type is redacted as text, not walked as
		// events: its answer (the first case's) comes from a scan.
		chatExchange(`{"model":"m","stream":true,"messages":[`+sys+`,`+u1+`]}`, 200, "text/plain", openAIStream("Paris, of course.")),
	}
}

// TestTurnKeysGolden: the turn digests of each shape are the ones reel has
// always written (a dataset's links must join across versions), by both
// entry points.
func TestTurnKeysGolden(t *testing.T) {
	want := []string{
		"28432fffa64e1a2e 0",
		"3b628b4e47bee363 28432fffa64e1a2e",
		"b4cd0930c6978acb 3435d7407d1f27dd",
		"d38bb8fbb20e0029 0",
		"f5a55d4d38c341d1 d38bb8fbb20e0029",
		"66aeafd3ab64f173 0",
		"f923f3bd39af6d42 66aeafd3ab64f173",
		"bcdeb307f50adbb6 a7a1f0a6aee3e04e",
		"f51e9ad1b3ef25b4 0",
		"64b0dad1a7be9bb5 0",
		"0 0",
		"28432fffa64e1a2e 0",
	}
	r := testRedactor(t)
	var got []string
	for i, x := range turnGoldenCases() {
		a, b := cloneExchange(x), cloneExchange(x)
		LinkTurns(a, testKey)
		req, err := sse.ParseRequest(b.ReqBody)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		r.RedactExchangeRequest(b, &req)
		if a.TurnKey != b.TurnKey || a.ParentTurnKey != b.ParentTurnKey {
			t.Errorf("case %d: LinkTurns %x %x, RedactExchangeRequest %x %x", i, a.TurnKey, a.ParentTurnKey, b.TurnKey, b.ParentTurnKey)
		}
		got = append(got, fmt.Sprintf("%x %x", uint64(a.TurnKey), uint64(a.ParentTurnKey)))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("turn digests changed:\n%s", strings.Join(got, "\n"))
	}
}

// FuzzAnswerFromWalk: the answer rebuilt from the lines the response's
// redaction walks is the one a scan of the raw stream rebuilds.
func FuzzAnswerFromWalk(f *testing.F) {
	for _, x := range turnGoldenCases() {
		f.Add(x.RespBody)
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\ndata: {\"x\":1}\n\n:c\r\ndata\rdata:[DONE]\r\n"))
	r, err := New(DefaultPolicy(), testKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantOK := streamAnswer(body)
		a := newAnswerScan(body)
		if _, err := r.redactBody(domainResponse, "text/event-stream", "", body, a); err != nil || !a.walked {
			if len(body) > 0 {
				t.Fatalf("walk of %q: err %v, walked %v", body, err, a.walked)
			}
			return
		}
		got, gotOK := a.end()
		if gotOK != wantOK || string(got.text) != string(want.text) || strings.Join(got.calls, "\x00") != strings.Join(want.calls, "\x00") ||
			strings.Join(got.other, "\x00") != strings.Join(want.other, "\x00") || got.role != want.role {
			t.Fatalf("answer of %q from the walk %+v %v, from a scan %+v %v", body, got, gotOK, want, wantOK)
		}
	})
}
