package sse

import "strings"

// API names an LLM HTTP API whose requests and streams reel understands.
// The recorder and the replayer share these rules so that a request means
// the same thing to both: where its prompt is, which field caps its output,
// which events of its stream carry tokens (Classify) and where its usage is.
type API int

// The APIs reel knows. Unknown is any other request.
const (
	Unknown           API = iota
	ChatCompletions       // OpenAI /v1/chat/completions (vLLM, SGLang, TGI, …)
	Completions           // OpenAI legacy /v1/completions
	Responses             // OpenAI /v1/responses: input, instructions, max_output_tokens; response.* events
	AnthropicMessages     // Anthropic /v1/messages: system, messages, max_tokens; message_start / content_block_delta / message_delta
	Embeddings            // OpenAI /v1/embeddings: input, no output tokens, no stream
)

var apiNames = [...]string{"unknown", "chat_completions", "completions", "responses", "anthropic_messages", "embeddings"}

func (a API) String() string {
	if a < 0 || int(a) >= len(apiNames) {
		return "unknown"
	}
	return apiNames[a]
}

// APIForPath tells the API from a request path (the query left off): the
// path's last segments, so that gateway prefixes (/openai/v1/…, /v1beta/…)
// and Azure's deployment paths (/openai/deployments/D/chat/completions)
// are recognised.
func APIForPath(path string) API {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	path = strings.TrimSuffix(path, "/")
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return ChatCompletions
	case strings.HasSuffix(path, "/completions"):
		return Completions
	case strings.HasSuffix(path, "/responses"):
		return Responses
	case strings.HasSuffix(path, "/messages"):
		return AnthropicMessages
	case strings.HasSuffix(path, "/embeddings"):
		return Embeddings
	}
	return Unknown
}

// MaxOutputField is the request field that caps the output: max_tokens
// (chat completions also accept max_completion_tokens, which wins; see
// MaxOutputFields), max_output_tokens for Responses, Anthropic's required
// max_tokens. Embeddings have none ("").
func (a API) MaxOutputField() string {
	switch a {
	case Responses:
		return "max_output_tokens"
	case Embeddings, Unknown:
		return ""
	}
	return "max_tokens"
}

// MaxOutputFields lists every field that caps the output of a request of
// this API, most specific first: a request naming the first one means it.
func (a API) MaxOutputFields() []string {
	switch a {
	case ChatCompletions:
		return []string{"max_completion_tokens", "max_tokens"}
	case Unknown:
		return []string{"max_completion_tokens", "max_output_tokens", "max_tokens"}
	case Embeddings:
		return nil
	}
	return []string{a.MaxOutputField()}
}

// TakesIgnoreEOS reports whether a server of this API is known to accept
// vLLM's ignore_eos extension: the OpenAI-compatible chat and completions
// endpoints of vLLM and SGLang do; OpenAI's and Anthropic's own APIs reject
// unknown fields, and Responses and Messages are those vendors' shapes.
func (a API) TakesIgnoreEOS() bool { return a == ChatCompletions || a == Completions }

// Streams reports whether the API answers "stream": true with an event
// stream.
func (a API) Streams() bool { return a != Embeddings && a != Unknown }
