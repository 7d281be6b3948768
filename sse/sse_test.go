package sse

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type got struct {
	name, data string
	trunc      bool
}

func scanAll(t testing.TB, s *Scanner, chunks []string) []got {
	var out []got
	emit := func(ev *Event) { out = append(out, got{string(ev.Name), string(ev.Data), ev.Truncated}) }
	at := time.Unix(0, 0)
	for _, c := range chunks {
		s.Feed([]byte(c), at, emit)
	}
	s.Flush(at, emit)
	return out
}

func TestScanner(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []got
	}{
		{"lf", "data: a\n\ndata: b\n\n", []got{{"", "a", false}, {"", "b", false}}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []got{{"", "a", false}, {"", "b", false}}},
		{"cr", "data: a\r\rdata: b\r\r", []got{{"", "a", false}, {"", "b", false}}},
		{"multiline", "data: a\ndata: b\ndata\n\n", []got{{"", "a\nb\n", false}}},
		{"comment only", ": keep-alive\n\n: ping\n\n", nil},
		{"comment inside", "data: x\n: c\ndata: y\n\n", []got{{"", "x\ny", false}}},
		{"event name", "event: delta\ndata: {}\n\n", []got{{"delta", "{}", false}}},
		{"no space", "data:x\n\n", []got{{"", "x", false}}},
		{"done", "data: [DONE]\n\n", []got{{"", "[DONE]", false}}},
		{"unterminated", "data: tail", []got{{"", "tail", false}}},
		{"id and retry ignored", "id: 7\nretry: 10\ndata: z\n\n", []got{{"", "z", false}}},
		{"event without data", "event: x\n\ndata: y\n\n", []got{{"", "y", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Whole, and split at every byte: same events.
			whole := scanAll(t, NewScanner(Options{}), []string{tt.stream})
			if fmt.Sprint(whole) != fmt.Sprint(tt.want) {
				t.Fatalf("whole: got %+v, want %+v", whole, tt.want)
			}
			var bytes []string
			for i := range len(tt.stream) {
				bytes = append(bytes, tt.stream[i:i+1])
			}
			split := scanAll(t, NewScanner(Options{}), bytes)
			if fmt.Sprint(split) != fmt.Sprint(tt.want) {
				t.Fatalf("byte by byte: got %+v, want %+v", split, tt.want)
			}
		})
	}
}

func TestScannerMaxEvent(t *testing.T) {
	s := NewScanner(Options{MaxEvent: 8})
	long := "data: " + strings.Repeat("x", 100) + "\n\ndata: ok\n\n"
	out := scanAll(t, s, []string{long[:30], long[30:]})
	if len(out) != 2 || len(out[0].data) != 8 || !out[0].trunc || out[1].data != "ok" || out[1].trunc {
		t.Fatalf("got %+v", out)
	}
	if cap(s.line) > 64 || cap(s.data) > 64 {
		t.Fatalf("scanner buffered %d/%d bytes for an 8-byte limit", cap(s.line), cap(s.data))
	}
	// A full event that gets another data line: the joining "\n" would be
	// byte 9 (found by FuzzScanner).
	full := scanAll(t, NewScanner(Options{MaxEvent: 8}), []string{"data: 12345678\ndata\n\n"})
	if len(full) != 1 || full[0].data != "12345678" || !full[0].trunc {
		t.Fatalf("full event with another data line: got %+v", full)
	}
	// A name line longer than the carried-line bound: whole or carried over
	// a Feed boundary, the name is cut at the same length (FuzzScanner).
	name := "event:" + strings.Repeat("n", 20) + "\rdata\n\n"
	whole := scanAll(t, NewScanner(Options{MaxEvent: 8}), []string{name})
	split := scanAll(t, NewScanner(Options{MaxEvent: 8}), []string{name[:1], name[1:]})
	if fmt.Sprint(whole) != fmt.Sprint(split) || len(whole) != 1 || whole[0].name != "nnnnnnnn" {
		t.Fatalf("long name: whole %+v, split %+v", whole, split)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		data string
		want Chunk
	}{
		{"content", `{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`, Chunk{Tokens: true}},
		{"role only", `{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`, Chunk{}},
		{"role with empty content", `{"choices":[{"delta":{"role":"assistant","content":""}}]}`, Chunk{}},
		{"null content", `{"choices":[{"delta":{"content":null}}]}`, Chunk{}},
		{"finish only", `{"choices":[{"delta":{},"finish_reason":"stop"}]}`, Chunk{}},
		{"completions text", `{"choices":[{"text":" the","index":0}]}`, Chunk{Tokens: true}},
		{"tool call args", `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a"}}]}}]}`, Chunk{Tokens: true}},
		{"tool call name only", `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":""}}]}}]}`, Chunk{}},
		{"reasoning", `{"choices":[{"delta":{"reasoning_content":"hmm"}}]}`, Chunk{Tokens: true}},
		{"usage", `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46}}`,
			Chunk{HasUsage: true, Usage: Usage{PromptTokens: 12, CompletionTokens: 34}}},
		{"null usage", `{"choices":[{"delta":{"content":"a"}}],"usage":null}`, Chunk{Tokens: true}},
		{"anthropic delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, Chunk{Tokens: true}},
		{"anthropic start", `{"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}`,
			Chunk{HasUsage: true, Usage: Usage{PromptTokens: 5, CompletionTokens: 1}}},
		{"anthropic message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`,
			Chunk{HasUsage: true, Usage: Usage{CompletionTokens: 15}}},
		{"anthropic ping", `{"type": "ping"}`, Chunk{}},
		{"responses text delta", `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":" the","sequence_number":4}`, Chunk{Tokens: true}},
		{"responses arguments delta", `{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"a"}`, Chunk{Tokens: true}},
		{"responses empty delta", `{"type":"response.output_text.delta","delta":""}`, Chunk{}},
		{"responses created", `{"type":"response.created","response":{"id":"resp_1","status":"in_progress","usage":null}}`, Chunk{}},
		{"responses done text", `{"type":"response.output_text.done","text":"the whole answer"}`, Chunk{}},
		{"responses completed", `{"type":"response.completed","response":{"id":"resp_1","status":"completed","output":[{"content":[{"type":"output_text","text":"x"}]}],"usage":{"input_tokens":36,"output_tokens":87,"total_tokens":123}}}`,
			Chunk{HasUsage: true, Usage: Usage{PromptTokens: 36, CompletionTokens: 87}}},
		{"openai cached", `{"choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":34,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0}}}`,
			Chunk{HasUsage: true, Usage: Usage{PromptTokens: 1200, CompletionTokens: 34, CachedTokens: 1024, HasCached: true}}},
		{"vllm zero cached", `{"usage":{"prompt_tokens":40,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":0}}}`,
			Chunk{HasUsage: true, Usage: Usage{PromptTokens: 40, CompletionTokens: 5, HasCached: true}}},
		{"null details", `{"usage":{"prompt_tokens":40,"completion_tokens":5,"prompt_tokens_details":null}}`,
			Chunk{HasUsage: true, Usage: Usage{PromptTokens: 40, CompletionTokens: 5}}},
		{"null cached", `{"usage":{"prompt_tokens":40,"prompt_tokens_details":{"cached_tokens":null}}}`,
			Chunk{HasUsage: true, Usage: Usage{PromptTokens: 40}}},
		{"responses cached", `{"usage":{"input_tokens":300,"output_tokens":20,"input_tokens_details":{"cached_tokens":256}}}`,
			Chunk{HasUsage: true, Usage: Usage{PromptTokens: 300, CompletionTokens: 20, CachedTokens: 256, HasCached: true}}},
		{"anthropic cache read", `{"type":"message_start","message":{"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":2048,"output_tokens":1}}}`,
			Chunk{HasUsage: true, Usage: Usage{PromptTokens: 2160, CompletionTokens: 1, CachedTokens: 2048, HasCached: true}}},
		{"done", `[DONE]`, Chunk{Done: true}},
		{"not json", `hello "content"`, Chunk{}},
		{"broken json", `{"choices":[{"delta":{"content":"a`, Chunk{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify([]byte(tt.data)); got != tt.want {
				t.Fatalf("Classify(%s) = %+v, want %+v", tt.data, got, tt.want)
			}
			if got := classifyJSON([]byte(tt.data)); !tt.want.Done && got != tt.want {
				t.Fatalf("classifyJSON(%s) = %+v, want %+v", tt.data, got, tt.want)
			}
		})
	}
}

// TestFastClassify checks that the one-pass path answers the common chunk
// shapes itself (so they cost no allocation) and leaves the odd ones to
// encoding/json, with the same answer either way.
func TestFastClassify(t *testing.T) {
	tests := []struct {
		name string
		data string
		fast bool // fastClassify is expected to answer
	}{
		{"openai content", `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}`, true},
		{"openai role", `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, true},
		{"openai usage", `{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34,"total_tokens":46,"prompt_tokens_details":{"cached_tokens":0}}}`, true},
		{"tool call", `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"x","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}}]}`, true},
		{"anthropic delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, true},
		{"anthropic start", `{"type":"message_start","message":{"id":"m","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}`, true},
		{"multipart content", `{"choices":[{"delta":{"content":[{"type":"text","text":"a"}]}}]}`, true},
		{"escapes in values", `{"choices":[{"delta":{"content":"\u00e9\n\"q\""}}]}`, true},
		{"escaped key", `{"choices":[{"delta":{"con\u0074ent":"a"}}]}`, false},
		{"other case key", `{"Choices":[{"delta":{"content":"a"}}]}`, false},
		{"duplicate key", `{"choices":[{"delta":{"content":"","content":"a"}}]}`, false},
		{"float usage", `{"usage":{"prompt_tokens":1.0}}`, false},
		{"string usage", `{"usage":{"prompt_tokens":"1"}}`, false},
		{"choices not array", `{"choices":{"delta":{"content":"a"}}}`, false},
		{"broken", `{"choices":[{"delta":{"content":"a`, false},
		{"trailing data", `{"usage":null} x`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, ok := fastClassify([]byte(tt.data))
			if ok != tt.fast {
				t.Fatalf("fastClassify answered %v, want %v", ok, tt.fast)
			}
			if want := classifyJSON([]byte(tt.data)); ok && got != want {
				t.Fatalf("fast %+v != json %+v", got, want)
			}
		})
	}
	data := []byte(`{"id":"c1","choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":null}]}`)
	if n := testing.AllocsPerRun(100, func() { Classify(data) }); n != 0 {
		t.Fatalf("Classify of a content chunk allocates %v times", n)
	}
	resp := []byte(`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":" the","sequence_number":4}`)
	if n := testing.AllocsPerRun(100, func() { Classify(resp) }); n != 0 {
		t.Fatalf("Classify of a Responses text delta allocates %v times", n)
	}
}

// FuzzClassify checks the one-pass path against encoding/json: whenever it
// answers, the answer is the decoder's.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
		`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":34}}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{"}}]}}]}`,
		`{"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}`,
		`{"delta":{"partial_json":"[1"},"usage":null,"message":null}`,
		`{"usage":{"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":8},"input_tokens_details":null}}`,
		`{"message":{"usage":{"input_tokens":1,"cache_read_input_tokens":null,"cache_creation_input_tokens":3}}}`,
		`{"choices":[{"text":" x","delta":null}],"x":[1,-2.5e3,true,false,null,{"a":"\u00e9"}]}`,
		`{"type":"response.output_text.delta","delta":" the","sequence_number":4}`,
		`{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":36,"output_tokens":87}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, _, ok := fastClassify(data)
		if !ok {
			return
		}
		if want := classifyJSON(data); got != want {
			t.Fatalf("fastClassify(%q) = %+v, encoding/json says %+v", data, got, want)
		}
	})
}

func TestTimeline(t *testing.T) {
	t0 := time.Unix(100, 0)
	events := []struct {
		at   time.Duration
		data string
	}{
		{1 * time.Millisecond, `{"choices":[{"delta":{"role":"assistant"}}]}`},
		{5 * time.Millisecond, `{"choices":[{"delta":{"content":"a"}}]}`},
		{8 * time.Millisecond, `{"choices":[{"delta":{"content":"b"}}]}`},
		{20 * time.Millisecond, `{"choices":[{"delta":{"content":"c"}}]}`},
		{21 * time.Millisecond, `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7}}`},
		{22 * time.Millisecond, `[DONE]`},
	}
	var tl Timeline
	for _, e := range events {
		tl.Observe(&Event{Time: t0.Add(e.at), Data: []byte(e.data)})
	}
	if tl.Events != 6 || tl.TokenEvents != 3 || !tl.Done {
		t.Fatalf("events %d token events %d done %v", tl.Events, tl.TokenEvents, tl.Done)
	}
	if got := tl.FirstToken.Sub(t0); got != 5*time.Millisecond {
		t.Fatalf("first token at %v, want 5ms", got)
	}
	if fmt.Sprint(tl.GapsUs) != "[3000 12000]" {
		t.Fatalf("gaps %v", tl.GapsUs)
	}
	if tl.OutputTokens() != 7 || tl.Usage.PromptTokens != 3 {
		t.Fatalf("output tokens %d usage %+v", tl.OutputTokens(), tl.Usage)
	}
	var noUsage Timeline
	noUsage.Observe(&Event{Time: t0, Data: []byte(`{"choices":[{"delta":{"content":"a"}}]}`)})
	if noUsage.OutputTokens() != 1 {
		t.Fatalf("without usage: output tokens %d, want the token-event count 1", noUsage.OutputTokens())
	}
}

// FuzzScanner checks that any stream, fed whole or in two pieces, yields the
// same events, never panics and never exceeds the event bound.
func FuzzScanner(f *testing.F) {
	f.Add("data: a\r\n\r\ndata: b\n\n", 3)
	f.Add("event: x\rdata: y\r\r: c\n", 1)
	f.Add("data: [DONE]\n\n", 0)
	f.Fuzz(func(t *testing.T, stream string, cut int) {
		if cut < 0 || cut > len(stream) {
			cut = len(stream) / 2
		}
		if got, want := IndexLineEnd([]byte(stream)), strings.IndexAny(stream, "\r\n"); got != want {
			t.Fatalf("IndexLineEnd(%q) = %d, want %d", stream, got, want)
		}
		a := scanAll(t, NewScanner(Options{MaxEvent: 64}), []string{stream})
		b := scanAll(t, NewScanner(Options{MaxEvent: 64}), []string{stream[:cut], stream[cut:]})
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("whole %+v != split %+v", a, b)
		}
		for _, ev := range a {
			if len(ev.data) > 64 {
				t.Fatalf("event of %d bytes over the 64-byte bound", len(ev.data))
			}
			Classify([]byte(ev.data))
		}
	})
}

func BenchmarkScanClassify(b *testing.B) {
	var sb strings.Builder
	for range 100 {
		sb.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hello"}}]}` + "\n\n")
	}
	stream := []byte(sb.String())
	s := NewScanner(Options{})
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		var tl Timeline
		s.Feed(stream, time.Time{}, func(ev *Event) { tl.Observe(ev) })
	}
}
