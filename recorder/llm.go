package recorder

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/sse"
)

// Enrich derives the LLM fields of x from its raw (unredacted) bodies:
// model, stream, max_tokens (or max_completion_tokens) from an
// OpenAI-compatible JSON request, prompt, output and cached tokens from a
// non-streaming JSON response's `usage` (sse.ResponseUsage), and a prompt-token estimate when no
// upstream usage was seen. It must run before redaction. Fields already set
// (from SSE usage, for example) are kept. Bodies that are not JSON are left
// alone.
//
// The estimate is cheap by design (it runs for every exchange): one token per
// four bytes of prompt text plus four tokens per chat message, marked
// prompt_tokens_source=estimate. A truncated request body is estimated from
// its original size.
func Enrich(x *formats.Exchange) {
	var req llmRequest
	parsed := false
	if looksJSON(x.ReqContentType, x.ReqBody) && !x.ReqBodyTrunc {
		parsed = json.Unmarshal(x.ReqBody, &req) == nil
	}
	if parsed {
		if x.Model == "" {
			x.Model = req.Model
		}
		x.Stream = x.Stream || req.Stream
		if x.MaxTokens == 0 {
			switch {
			case req.MaxCompletionTokens > 0:
				x.MaxTokens = clamp32(req.MaxCompletionTokens)
			case req.MaxTokens > 0:
				x.MaxTokens = clamp32(req.MaxTokens)
			}
		}
	}
	// exchange/1 has no response-truncated column: a raw body shorter than
	// its wire size was cut at --max-body.
	respTrunc := int64(len(x.RespBody)) < x.RespBodyBytes
	if x.RespBody != nil && !respTrunc && looksJSON(x.RespContentType, x.RespBody) {
		if u, ok := sse.ResponseUsage(x.RespBody); ok {
			if u.PromptTokens > 0 && x.PromptTokensSource != formats.TokensFromUsage {
				x.PromptTokens = clamp32(u.PromptTokens)
				x.PromptTokensSource = formats.TokensFromUsage
			}
			if u.CompletionTokens > 0 && x.OutputTokens == 0 {
				x.OutputTokens = clamp32(u.CompletionTokens)
			}
			if u.HasCached && x.CachedTokens == nil {
				x.CachedTokens = u.CachedColumn()
			}
		}
	}
	if x.PromptTokensSource != "" {
		return
	}
	switch {
	case parsed && (len(req.Messages) > 0 || len(req.Prompt) > 0):
		n := int64(len(req.Prompt)) / 4
		for _, m := range req.Messages {
			n += int64(len(m.Content))/4 + 4
		}
		x.PromptTokens = clamp32(max(n, 1))
		x.PromptTokensSource = formats.TokensFromEstimate
	case x.ReqBodyTrunc && strings.HasSuffix(x.Path, "completions"):
		x.PromptTokens = clamp32(max(x.ReqBodyBytes/4, 1))
		x.PromptTokensSource = formats.TokensFromEstimate
	}
}

// llmRequest holds the fields of an OpenAI-compatible request that reel
// records. Message contents stay raw: only their length is used.
type llmRequest struct {
	Model               string `json:"model"`
	Stream              bool   `json:"stream"`
	MaxTokens           int64  `json:"max_tokens"`
	MaxCompletionTokens int64  `json:"max_completion_tokens"`
	Messages            []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Prompt json.RawMessage `json:"prompt"`
}

func looksJSON(contentType string, body []byte) bool {
	if strings.Contains(contentType, "json") {
		return true
	}
	b := bytes.TrimLeft(body, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

func clamp32(n int64) int32 {
	if n > 1<<31-1 {
		return 1<<31 - 1
	}
	if n < 0 {
		return 0
	}
	return int32(n)
}

// Chat formatting overhead, after OpenAI's published counting rule for chat
// models (openai-cookbook, "How to count tokens with tiktoken"): every
// message costs chatTokensPerMessage on top of its role and content, and
// the reply is primed with chatReplyPriming more.
const (
	chatTokensPerMessage = 3
	chatReplyPriming     = 3
)

// ChatOverheadTokens is what the formatting of a chat of n messages with
// one-token roles ("user", "system", "assistant") adds to their contents'
// tokens. Trace import subtracts it so that a synthesized chat has the
// trace's length under the same rule the estimate uses.
func ChatOverheadTokens(n int) int {
	if n <= 0 {
		return 0
	}
	return n*(chatTokensPerMessage+1) + chatReplyPriming
}
