package sse

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Delta is what one OpenAI chat-completions chunk adds to its first choice
// (the choice with index 0), as ChatDelta reads it.
type Delta struct {
	First    bool   // the chunk has a choice with index 0 (an absent or null index is 0)
	Content  []byte // that choice's delta.content; aliases the data unless it held escapes
	Finished bool   // that choice has a non-empty finish_reason
}

// ChatDelta reads the first choice of an OpenAI chat-completions chunk in
// one pass, allocating only when the content holds escapes. It answers only
// for the plain chunk shape, where decoding with encoding/json into
//
//	{"choices":[{"index":int,"delta":{"content":string,"tool_calls":[…]},"finish_reason":*string}],
//	 "type":string,"index":int,"delta":…,"content_block":…}
//
// (the answer rebuilder of redact's turn links) gives the same: a valid JSON
// object without the Anthropic members (type, index, delta, content_block),
// choices an array of objects or nulls with at most one index 0, index a
// plain integer or null, delta an object or null whose content is a string
// or null and whose tool_calls are absent, null or empty, finish_reason a
// string or null, no relevant key twice or in another case or spelled
// with escapes. Anything else is ok false, for the caller's full decode.
func ChatDelta(data []byte) (d Delta, ok bool) {
	d, _, ok = chatDelta(data)
	return d, ok
}

// ChatDeltas reads the chunks of one stream as ChatDelta does, answering a
// chunk that repeats the latest one it walked but for the first choice's
// content text from that walk (the content decoded afresh). The zero
// value is ready to use; it is not safe for concurrent use.
type ChatDeltas struct {
	frame  frame
	framed Delta // the framed chunk's delta, without its content
}

// Read returns ChatDelta(data).
func (r *ChatDeltas) Read(data []byte) (Delta, bool) {
	if inner, ok := r.frame.match(data); ok {
		d := r.framed
		// inner is well-formed, so the decode cannot fail.
		if d.Content, ok = chatContent(data[r.frame.from-1 : r.frame.from+len(inner)+1]); ok {
			return d, true
		}
	}
	d, content, ok := chatDelta(data)
	if ok && content.set {
		r.frame.remember(data, content.from, content.to)
		r.framed = d
		r.framed.Content = nil
	}
	return d, ok
}

// chatDelta is ChatDelta; content is the span of the first choice's
// content string, when it has one.
func chatDelta(data []byte) (d Delta, content contentSpan, ok bool) {
	w := walker{b: data}
	var seen uint32
	ok = w.objectOf(&chunkKeys, func(k int) bool {
		switch k {
		case chunkChoices:
			return w.array(func() bool { return w.chatChoice(&d) })
		case keyOther:
			return w.skipValue()
		}
		return false // an Anthropic event's member
	}, &seen)
	if !ok {
		return Delta{}, contentSpan{}, false
	}
	w.ws()
	if w.i != len(w.b) {
		return Delta{}, contentSpan{}, false // trailing data
	}
	return d, w.tok, true
}

// Relevant keys of a chat chunk, its choices and their deltas (indexes into
// chunkKeys, choiceKeys and deltaKeys).
const (
	chunkChoices = iota
	chunkType
	chunkIndex
	chunkDelta
	chunkContentBlock
)

const (
	choiceIndex = iota
	choiceDelta
	choiceFinishReason
)

const (
	deltaContent = iota
	deltaToolCalls
)

var (
	chunkKeys  = newKeyTable([]string{"choices", "type", "index", "delta", "content_block"})
	choiceKeys = newKeyTable([]string{"index", "delta", "finish_reason"})
	deltaKeys  = newKeyTable([]string{"content", "tool_calls"})
)

// chatChoice reads one element of choices into d when its index is 0.
func (w *walker) chatChoice(d *Delta) bool {
	var (
		seen     uint32
		index    int64
		content  []byte // the raw JSON string, quotes included; nil when absent or null
		at       contentSpan
		finished bool
	)
	ok := w.objectOrNullOf(&choiceKeys, func(k int) bool {
		switch k {
		case choiceIndex:
			return w.int(&index)
		case choiceDelta:
			var dseen uint32
			return w.objectOrNullOf(&deltaKeys, func(k int) bool {
				switch k {
				case deltaContent:
					if !w.stringOrNull(&content) {
						return false
					}
					if content != nil {
						at = contentSpan{from: w.i - len(content) + 1, to: w.i - 1, set: true}
					}
					return true
				case deltaToolCalls:
					w.ws()
					return w.literal("null") || w.literal("[]")
				}
				return w.skipValue()
			}, &dseen)
		case choiceFinishReason:
			var reason []byte
			if !w.stringOrNull(&reason) {
				return false
			}
			finished = len(reason) > 2 // an escape never decodes to nothing
			return true
		}
		return w.skipValue()
	}, &seen)
	if !ok || index != 0 {
		return ok
	}
	if d.First {
		return false // two first choices: their texts would be joined
	}
	d.First, d.Finished = true, finished
	if content != nil {
		if d.Content, ok = chatContent(content); !ok {
			return false
		}
		w.tok = at
	}
	return true
}

// chatContent decodes a content string (quotes included) as encoding/json
// does, aliasing it when it holds no escapes.
func chatContent(content []byte) ([]byte, bool) {
	inner := content[1 : len(content)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner, true
	}
	// Escapes, or invalid UTF-8 that encoding/json turns into U+FFFD.
	var s string
	if json.Unmarshal(content, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// stringOrNull reads a string (its raw bytes, quotes included, into *raw) or
// null (leaving *raw nil).
func (w *walker) stringOrNull(raw *[]byte) bool {
	w.ws()
	if w.literal("null") {
		return true
	}
	if w.i >= len(w.b) || w.b[w.i] != '"' {
		return false
	}
	start := w.i
	if !w.skipString() {
		return false
	}
	*raw = w.b[start:w.i]
	return true
}
