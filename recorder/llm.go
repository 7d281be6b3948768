package recorder

import (
	"bytes"
	"strings"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/sse"
)

// Enrich derives the LLM fields of x from its raw (unredacted) bodies with
// the cheap ApproxTokens estimate; see EnrichWith.
func Enrich(x *formats.Exchange) { EnrichWith(x, ApproxTokens) }

// EnrichWith derives the LLM fields of x from its raw (unredacted) bodies,
// by the rules of the API its path names (sse.APIForPath): model, stream
// and the output cap (max_completion_tokens or max_tokens, Responses'
// max_output_tokens, Anthropic's max_tokens) from the JSON request; prompt
// and output tokens from a non-streaming JSON response's usage; and, when
// no upstream usage was seen, a prompt-token estimate counted with tc by
// EstimatePrompt (prompt_tokens_source=estimate, or estimate_min when parts
// of the prompt could not be counted). It must run before redaction.
// Fields already set (from SSE usage, for example) are kept: the server's
// usage always wins. Bodies that are not JSON are left alone; a truncated
// request body is estimated from its original size (a token per 4 bytes).
func EnrichWith(x *formats.Exchange, tc TokenCounter) {
	enrichRequest(x, tc, parseRequest(x))
}

// parseRequest decodes x's raw request body for every reader of it, so
// that the pipeline decodes it once for enrichment and the turn links
// (redact.Redactor.RedactExchangeRequest); nil when the body was truncated,
// is not JSON or is not a request (sse.ParseRequest).
func parseRequest(x *formats.Exchange) *sse.Request {
	if x.ReqBodyTrunc || !looksJSON(x.ReqContentType, x.ReqBody) {
		return nil
	}
	req, err := sse.ParseRequest(x.ReqBody)
	if err != nil {
		return nil
	}
	return &req
}

// enrichRequest is EnrichWith with x's request body decoded by
// parseRequest already.
func enrichRequest(x *formats.Exchange, tc TokenCounter, req *sse.Request) {
	api := sse.APIForPath(x.Path)
	parsed := req != nil
	if api == sse.Unknown && parsed && (req.Messages != nil || len(req.Prompt) > 0) {
		api = sse.ChatCompletions // an OpenAI-shaped body on an unusual path
		if len(req.Messages) == 0 {
			api = sse.Completions
		}
	}
	if parsed {
		if x.Model == "" {
			x.Model = req.Model
		}
		x.Stream = x.Stream || req.Stream
		if x.MaxTokens == 0 {
			for _, f := range api.MaxOutputFields() {
				if n := req.MaxOutput(f); n > 0 {
					x.MaxTokens = clamp32(n)
					break
				}
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
	if parsed {
		if est, ok := estimateRequest(api, req, tc); ok {
			x.PromptTokens = clamp32(int64(max(est.Tokens, 1)))
			x.PromptTokensSource = formats.TokensFromEstimate
			if est.Uncounted > 0 {
				x.PromptTokensSource = formats.TokensFromEstimateMin
			}
		}
		return
	}
	if x.ReqBodyTrunc && api != sse.Unknown {
		x.PromptTokens = clamp32(max(x.ReqBodyBytes/4, 1))
		x.PromptTokensSource = formats.TokensFromEstimate
	}
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
