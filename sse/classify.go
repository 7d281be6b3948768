package sse

import (
	"bytes"
	"encoding/json"
	"math"
)

// Usage is the token accounting an upstream reports in a `usage` object
// (of a streamed chunk, or of a whole response: see ResponseUsage). Fields
// absent from it are zero. This is the one place that knows usage's field
// names; an API with other names extends usageJSON and the fast path's
// usage walker together (FuzzClassify checks they agree).
type Usage struct {
	// PromptTokens counts every prompt token: usage.prompt_tokens (OpenAI
	// chat and completions, vLLM, SGLang), usage.input_tokens (OpenAI
	// Responses, where it includes cached tokens), or Anthropic's
	// input_tokens + cache_read_input_tokens + cache_creation_input_tokens
	// (its input_tokens leaves the cache out).
	PromptTokens int64
	// CompletionTokens is usage.completion_tokens or usage.output_tokens.
	CompletionTokens int64
	// CachedTokens are the prompt tokens served from the server's prefix
	// cache: usage.prompt_tokens_details.cached_tokens (OpenAI, vLLM with
	// --enable-prompt-tokens-details, SGLang),
	// usage.input_tokens_details.cached_tokens (OpenAI Responses) or
	// usage.cache_read_input_tokens (Anthropic). Valid when HasCached.
	CachedTokens int64
	HasCached    bool // the server reported a cached-token count (it may be 0)
}

// CachedColumn is the cached_tokens column value (exchange/1, result/1)
// of a usage report: nil when the server did not report a count.
func (u Usage) CachedColumn() *int32 {
	if !u.HasCached {
		return nil
	}
	n := int32(min(max(u.CachedTokens, 0), math.MaxInt32))
	return &n
}

// merge folds a later usage report into u: non-zero counts win, a
// reported cached count wins.
func (u *Usage) merge(v Usage) {
	if v.PromptTokens > 0 {
		u.PromptTokens = v.PromptTokens
	}
	if v.CompletionTokens > 0 {
		u.CompletionTokens = v.CompletionTokens
	}
	if v.HasCached && (!u.HasCached || v.CachedTokens > 0) {
		u.CachedTokens, u.HasCached = v.CachedTokens, true
	}
}

// ResponseUsage returns the usage of a whole non-streaming JSON response
// body (a top-level `usage`, or Anthropic's message.usage), the same rules
// as a streamed chunk's.
func ResponseUsage(body []byte) (Usage, bool) {
	c := Classify(body)
	return c.Usage, c.HasUsage
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
	c, _ := classifyTrimmed(bytes.TrimSpace(data))
	return c
}

// classifyTrimmed is Classify of data without surrounding space; tok is
// fastClassify's token string when the fast path answered.
func classifyTrimmed(data []byte) (Chunk, contentSpan) {
	if bytes.Equal(data, doneMarker) {
		return Chunk{Done: true}, contentSpan{}
	}
	if len(data) == 0 || data[0] != '{' {
		return Chunk{}, contentSpan{}
	}
	// The fast path first: when it answers, a chunk without any of the
	// keys mayMatter looks for comes out empty there too (it refuses
	// escaped or oddly cased keys, the only way such a chunk could matter).
	if c, tok, ok := fastClassify(data); ok {
		return c, tok
	}
	if !mayMatter(data) {
		return Chunk{}, contentSpan{}
	}
	return classifyJSON(data), contentSpan{}
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
		f := u.fields()
		out.Usage = f.usage()
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
	PromptTokens             int64              `json:"prompt_tokens"`
	CompletionTokens         int64              `json:"completion_tokens"`
	InputTokens              int64              `json:"input_tokens"`
	OutputTokens             int64              `json:"output_tokens"`
	PromptTokensDetails      *tokensDetailsJSON `json:"prompt_tokens_details"`
	InputTokensDetails       *tokensDetailsJSON `json:"input_tokens_details"`
	CacheReadInputTokens     *int64             `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64              `json:"cache_creation_input_tokens"`
}

type tokensDetailsJSON struct {
	CachedTokens *int64 `json:"cached_tokens"`
}

// usageFields are the counts of a usage object, each cached-token count
// with whether it was there (a number, not absent or null).
type usageFields struct {
	prompt, completion, input, output, cacheCreation int64
	promptCached, inputCached, cacheRead             int64
	hasPromptCached, hasInputCached, hasCacheRead    bool
}

// fields flattens the decoded object.
func (u *usageJSON) fields() usageFields {
	f := usageFields{prompt: u.PromptTokens, completion: u.CompletionTokens, input: u.InputTokens,
		output: u.OutputTokens, cacheCreation: u.CacheCreationInputTokens}
	if d := u.PromptTokensDetails; d != nil && d.CachedTokens != nil {
		f.promptCached, f.hasPromptCached = *d.CachedTokens, true
	}
	if d := u.InputTokensDetails; d != nil && d.CachedTokens != nil {
		f.inputCached, f.hasInputCached = *d.CachedTokens, true
	}
	if u.CacheReadInputTokens != nil {
		f.cacheRead, f.hasCacheRead = *u.CacheReadInputTokens, true
	}
	return f
}

// usage applies Usage's rules to the counts.
func (f *usageFields) usage() Usage {
	return Usage{
		PromptTokens:     f.prompt + f.input + f.cacheRead + f.cacheCreation,
		CompletionTokens: f.completion + f.output,
		CachedTokens:     f.promptCached + f.inputCached + f.cacheRead,
		HasCached:        f.hasPromptCached || f.hasInputCached || f.hasCacheRead,
	}
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
