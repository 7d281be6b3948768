package sse

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// chunkWith is an OpenAI chat chunk whose first choice's content is the
// JSON string content raw (escapes as written).
func chunkWith(raw string) string {
	return `{"id":"chatcmpl-7","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"` + raw + `"},"finish_reason":null}]}`
}

// frameStreams are event sequences whose neighbours look alike in ways
// that must and must not change the answers.
var frameStreams = [][]string{
	{chunkWith(" Hello"), chunkWith(" world"), chunkWith(""), chunkWith("x"), chunkWith(`\n\"q\" \u00e9`), chunkWith(" again"), "[DONE]", chunkWith(" after")},
	{chunkWith("a"), chunkWith(`a","role":"x`), chunkWith(`b\`), chunkWith(`\x41`), chunkWith("tab\tin"), chunkWith("\xff bad"), chunkWith("ok")},
	{chunkWith("a"), strings.Replace(chunkWith("a"), `"finish_reason":null`, `"finish_reason":"stop"`, 1), strings.Replace(chunkWith("b"), `"index":0`, `"index":1`, 1), chunkWith("c")},
	{`{"choices":[{"delta":{"reasoning_content":"think"}}]}`, `{"choices":[{"delta":{"reasoning_content":""}}]}`, `{"choices":[{"delta":{"reasoning_content":"more"}}]}`},
	{`{"type":"response.output_text.delta","delta":" the","sequence_number":4}`, `{"type":"response.output_text.delta","delta":"","sequence_number":4}`, `{"type":"response.output_text.delta","delta":" cat","sequence_number":5}`},
	{`{"choices":[{"delta":{"content":"a"}}],"usage":{"prompt_tokens":1}}`, `{"choices":[{"delta":{"content":"b"}}],"usage":{"prompt_tokens":2}}`, `{"choices":[{"delta":{"content":"bb"}}],"usage":{"prompt_tokens":2}}`},
	{`  {"choices":[{"delta":{"content":"a"}}]}  `, `{"choices":[{"delta":{"content":"zz"}}]}`, "\t" + `{"choices":[{"delta":{"content":""}}]}`},
}

// TestTimelineFrame: a Timeline classifies every event as Classify does,
// and answers look-alikes from its frame.
func TestTimelineFrame(t *testing.T) {
	for i, stream := range frameStreams {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkTimelineFrame(t, stream) })
	}
	var tl Timeline
	tl.Observe(&Event{Data: []byte(chunkWith(" Hello"))})
	if _, ok := tl.frame.match([]byte(chunkWith(" other"))); !ok {
		t.Fatalf("a chunk with another token does not match the frame of the one before")
	}
}

func checkTimelineFrame(t *testing.T, stream []string) {
	t.Helper()
	var tl Timeline
	for _, data := range stream {
		if got, want := tl.Observe(&Event{Data: []byte(data)}), Classify([]byte(data)); got != want {
			t.Fatalf("after %q:\nTimeline classified %q as %+v, Classify says %+v", stream, data, got, want)
		}
	}
}

// TestChatDeltas: ChatDeltas.Read answers as ChatDelta does, and answers
// look-alikes from its frame.
func TestChatDeltas(t *testing.T) {
	for i, stream := range frameStreams {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkChatDeltas(t, stream) })
	}
	var r ChatDeltas
	r.Read([]byte(chunkWith(" Hello")))
	if _, ok := r.frame.match([]byte(chunkWith(" other"))); !ok {
		t.Fatalf("a chunk with another token does not match the frame of the one before")
	}
}

func checkChatDeltas(t *testing.T, stream []string) {
	t.Helper()
	var r ChatDeltas
	for _, data := range stream {
		got, gotOK := r.Read([]byte(data))
		want, wantOK := ChatDelta([]byte(data))
		if gotOK != wantOK || got.First != want.First || got.Finished != want.Finished || !bytes.Equal(got.Content, want.Content) {
			t.Fatalf("after %q:\nRead(%q) = %+v %v, ChatDelta says %+v %v", stream, data, got, gotOK, want, wantOK)
		}
	}
}

// FuzzFrames: over any sequence of events (lines of the input), a
// Timeline classifies as Classify and ChatDeltas reads as ChatDelta.
func FuzzFrames(f *testing.F) {
	for _, s := range frameStreams {
		f.Add(strings.Join(s, "\n"))
	}
	f.Fuzz(func(t *testing.T, in string) {
		stream := strings.Split(in, "\n")
		checkTimelineFrame(t, stream)
		checkChatDeltas(t, stream)
	})
}
