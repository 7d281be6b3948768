package sse

import (
	"encoding/json"

	"github.com/reelkit/reel/internal/jsonstr"
)

// Request is what the recorder reads from an LLM API request body, of any
// of the APIs: the model, the stream flag, the output caps and the
// prompt-bearing fields. Message contents and the fields whose shape
// varies by API stay as raw JSON (a subslice of the body, or a copy) for
// the reader that needs them: the prompt estimate and the turn links.
// ParseRequest decodes it once per exchange.
type Request struct {
	Model               string `json:"model"`
	Stream              bool   `json:"stream"`
	MaxTokens           int64  `json:"max_tokens"`
	MaxCompletionTokens int64  `json:"max_completion_tokens"`
	MaxOutputTokens     int64  `json:"max_output_tokens"`

	// Messages is nil when the body has no messages (or "messages": null),
	// empty but not nil for "messages": [].
	Messages     []Message       `json:"messages"`
	System       json.RawMessage `json:"system"` // Anthropic: a string or text blocks
	Prompt       json.RawMessage `json:"prompt"` // completions
	Input        json.RawMessage `json:"input"`  // Responses, embeddings
	Instructions string          `json:"instructions"`
	Tools        json.RawMessage `json:"tools"`
	Functions    json.RawMessage `json:"functions"` // chat's legacy functions
}

// Message is one element of a request's messages.
type Message struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`      // a string, a list of parts or blocks, null
	ToolCalls  json.RawMessage `json:"tool_calls"`   // OpenAI assistant
	ToolCallID string          `json:"tool_call_id"` // OpenAI tool result
}

// MaxOutput returns the value of an output-cap field named by
// API.MaxOutputFields (0 for any other name).
func (r *Request) MaxOutput(field string) int64 {
	switch field {
	case "max_tokens":
		return r.MaxTokens
	case "max_completion_tokens":
		return r.MaxCompletionTokens
	case "max_output_tokens":
		return r.MaxOutputTokens
	}
	return 0
}

// ParseRequest decodes body as json.Unmarshal into a Request does, error
// included (a value of the wrong type for one of Request's fields fails
// the whole body, as there). The common body is read in one pass without
// encoding/json: raw fields are then subslices of body, so body must not
// change while the Request is in use. Anything unusual (a relevant key
// that is spelled with escapes, other case or non-ASCII bytes, or seen
// twice; a number that is not a plain integer; deep nesting) is left to
// encoding/json (FuzzParseRequest compares the two).
func ParseRequest(body []byte) (Request, error) {
	if r, ok := fastRequest(body); ok {
		return r, nil
	}
	var r Request
	err := json.Unmarshal(body, &r)
	return r, err
}

// The keys of a request and of a message that fastRequest reads.
const (
	reqModel = iota
	reqStream
	reqMaxTokens
	reqMaxCompletionTokens
	reqMaxOutputTokens
	reqMessages
	reqSystem
	reqPrompt
	reqInput
	reqInstructions
	reqTools
	reqFunctions
)

var requestKeys = newKeyTable([]string{"model", "stream", "max_tokens", "max_completion_tokens",
	"max_output_tokens", "messages", "system", "prompt", "input", "instructions", "tools", "functions"})

const (
	msgRole = iota
	msgContent
	msgToolCalls
	msgToolCallID
)

var messageKeys = newKeyTable([]string{"role", "content", "tool_calls", "tool_call_id"})

// fastRequest is ParseRequest's one pass; ok is false when it is not sure
// to agree with encoding/json.
func fastRequest(body []byte) (r Request, ok bool) {
	w := walker{b: body}
	var seen uint32
	ok = w.objectOf(&requestKeys, func(k int) bool {
		switch k {
		case reqModel:
			return w.str(&r.Model)
		case reqStream:
			return w.bool(&r.Stream)
		case reqMaxTokens:
			return w.int(&r.MaxTokens)
		case reqMaxCompletionTokens:
			return w.int(&r.MaxCompletionTokens)
		case reqMaxOutputTokens:
			return w.int(&r.MaxOutputTokens)
		case reqMessages:
			return w.messages(&r.Messages)
		case reqSystem:
			return w.raw(&r.System)
		case reqPrompt:
			return w.raw(&r.Prompt)
		case reqInput:
			return w.raw(&r.Input)
		case reqInstructions:
			return w.str(&r.Instructions)
		case reqTools:
			return w.raw(&r.Tools)
		case reqFunctions:
			return w.raw(&r.Functions)
		}
		return w.skipValue()
	}, &seen)
	if !ok {
		return Request{}, false
	}
	w.ws()
	return r, w.i == len(w.b)
}

// messages reads a messages array (or null) of message objects (or nulls).
func (w *walker) messages(dst *[]Message) bool {
	w.ws()
	if w.literal("null") {
		return true
	}
	msgs := make([]Message, 0, 4)
	ok := w.array(func() bool {
		msgs = append(msgs, Message{})
		m := &msgs[len(msgs)-1]
		var seen uint32
		return w.objectOrNullOf(&messageKeys, func(k int) bool {
			switch k {
			case msgRole:
				return w.str(&m.Role)
			case msgContent:
				return w.raw(&m.Content)
			case msgToolCalls:
				return w.raw(&m.ToolCalls)
			case msgToolCallID:
				return w.str(&m.ToolCallID)
			}
			return w.skipValue()
		}, &seen)
	})
	*dst = msgs
	return ok
}

// str reads a string (or null, which leaves *dst as it is).
func (w *walker) str(dst *string) bool {
	w.ws()
	if w.literal("null") {
		return true
	}
	start := w.i
	if !w.atString() || !w.skipString() {
		return false
	}
	if r, ok := commonRole(w.b[start+1 : w.i-1]); ok {
		*dst = r // no copy of each message's role
		return true
	}
	s, err := jsonstr.Decode(w.b[start:w.i])
	*dst = s
	return err == nil
}

// commonRole returns content, a JSON string's raw content, as a constant
// when it is one of the common message roles (which hold no escapes).
func commonRole(content []byte) (string, bool) {
	switch string(content) {
	case "system":
		return "system", true
	case "user":
		return "user", true
	case "assistant":
		return "assistant", true
	case "tool":
		return "tool", true
	}
	return "", false
}

// bool reads true, false or null (which leaves *dst as it is).
func (w *walker) bool(dst *bool) bool {
	w.ws()
	switch {
	case w.literal("true"):
		*dst = true
	case w.literal("false"):
		*dst = false
	case w.literal("null"):
	default:
		return false
	}
	return true
}

// raw reads any value and keeps its bytes, as json.RawMessage does.
func (w *walker) raw(dst *json.RawMessage) bool {
	w.ws()
	start := w.i
	if !w.skipValue() {
		return false
	}
	*dst = w.b[start:w.i:w.i]
	return true
}
