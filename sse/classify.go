package sse

import (
	"bytes"
	"encoding/json"
)

// Usage is the token accounting an upstream reports in a chunk's `usage`
// object. Fields absent from the chunk are zero.
type Usage struct {
	PromptTokens     int64 // usage.prompt_tokens (OpenAI) or usage.input_tokens (Anthropic)
	CompletionTokens int64 // usage.completion_tokens (OpenAI) or usage.output_tokens (Anthropic)
}

// Chunk is what Classify learned from one event's data.
type Chunk struct {
	Done     bool  // the data is the OpenAI end marker "[DONE]"
	Tokens   bool  // the chunk carries generated text, reasoning or tool-call arguments
	HasUsage bool  // the chunk has a non-null usage object
	Usage    Usage // valid when HasUsage
}

var doneMarker = []byte("[DONE]")

// Classify inspects the data of one event from an OpenAI-compatible (or
// Anthropic-style) stream. A chunk is token-bearing when any choice has a
// non-empty delta.content, delta.reasoning_content, delta.reasoning, text
// (legacy completions) or tool-call function arguments, or when an
// Anthropic-style delta has non-empty text or partial_json. Role-only
// deltas, empty strings, finish-only chunks, comments, "[DONE]" and data
// that is not JSON do not count. Classify does not retain data. It reads
// the common chunk shapes in one pass without allocating, and decodes with
// encoding/json only what that pass is unsure of (escaped or oddly cased
// keys, duplicates, unexpected types, invalid JSON).
func Classify(data []byte) Chunk {
	data = bytes.TrimSpace(data)
	if bytes.Equal(data, doneMarker) {
		return Chunk{Done: true}
	}
	if len(data) == 0 || data[0] != '{' || !mayMatter(data) {
		return Chunk{}
	}
	if c, ok := fastClassify(data); ok {
		return c
	}
	return classifyJSON(data)
}

// classifyJSON is Classify's decoding path, the reference fastClassify is
// checked against (FuzzClassify).
func classifyJSON(data []byte) Chunk {
	var c chunkJSON
	if err := json.Unmarshal(data, &c); err != nil {
		return Chunk{}
	}
	var out Chunk
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Text || ch.Delta.Content || ch.Delta.ReasoningContent || ch.Delta.Reasoning || ch.Delta.Text {
			out.Tokens = true
		}
		for j := range ch.Delta.ToolCalls {
			if ch.Delta.ToolCalls[j].Function.Arguments {
				out.Tokens = true
			}
		}
	}
	if c.Delta.Text || c.Delta.PartialJSON || nonEmpty(c.Delta.isText) {
		out.Tokens = true
	}
	u := c.Usage
	if u == nil && c.Message != nil {
		u = c.Message.Usage
	}
	if u == nil && c.Response != nil {
		u = c.Response.Usage
	}
	if u != nil {
		out.HasUsage = true
		out.Usage = Usage{
			PromptTokens:     u.PromptTokens + u.InputTokens,
			CompletionTokens: u.CompletionTokens + u.OutputTokens,
		}
	}
	return out
}

// keys whose presence makes a full parse worthwhile.
var keys = [][]byte{[]byte(`"content"`), []byte(`"text"`), []byte(`"arguments"`),
	[]byte(`"usage"`), []byte(`"reasoning`), []byte(`"partial_json"`), []byte(`"delta"`)}

func mayMatter(data []byte) bool {
	for _, k := range keys {
		if bytes.Contains(data, k) {
			return true
		}
	}
	return false
}

// nonEmpty decodes any JSON value and records whether it is a non-empty
// string or array (a multi-part content list); it never copies the value.
type nonEmpty bool

func (n *nonEmpty) UnmarshalJSON(b []byte) error {
	*n = nonEmpty(len(b) > 2 && (b[0] == '"' || b[0] == '['))
	return nil
}

type usageJSON struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
}

type deltaJSON struct {
	Content          nonEmpty `json:"content"`
	ReasoningContent nonEmpty `json:"reasoning_content"`
	Reasoning        nonEmpty `json:"reasoning"`
	Text             nonEmpty `json:"text"`
	PartialJSON      nonEmpty `json:"partial_json"`
	ToolCalls        []struct {
		Function struct {
			Arguments nonEmpty `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type chunkJSON struct {
	Choices []struct {
		Delta deltaJSON `json:"delta"`
		Text  nonEmpty  `json:"text"`
	} `json:"choices"`
	Delta   topDeltaJSON `json:"delta"` // Anthropic content_block_delta, or Responses' text
	Usage   *usageJSON   `json:"usage"`
	Message *struct {
		Usage *usageJSON `json:"usage"`
	} `json:"message"` // Anthropic message_start
	Response *struct {
		Usage *usageJSON `json:"usage"`
	} `json:"response"` // Responses: response.completed, response.incomplete, response.failed
}

// topDeltaJSON is a chunk's top-level delta: Anthropic's object, or the
// OpenAI Responses events' string (response.output_text.delta and every
// other *.delta event carry the generated text there).
type topDeltaJSON struct {
	deltaJSON
	isText bool // a non-empty string
}

func (d *topDeltaJSON) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		d.isText = len(b) > 2
		return nil
	}
	return json.Unmarshal(b, &d.deltaJSON)
}
