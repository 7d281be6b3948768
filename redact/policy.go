package redact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Modes for Policy.Text, Policy.Binary and Policy.QueryValues.
const (
	TextSynthetic = "synthetic" // replace letters and digits with synthetic text (default)
	TextDetect    = "detect"    // keep the text, replace only what PII detectors find
	TextDrop      = "drop"      // store nothing, keep the size

	BinaryFiller = "filler" // same-length zero filler (default)
	BinaryDrop   = "drop"   // store nothing, keep the size

	QueryDetect    = "detect"    // keep values, replace what PII detectors find (default)
	QuerySynthetic = "synthetic" // synthetic text for every value not in QueryKeep
)

// DefaultBlockBytes is the default prefix block of PrefixHashes: about 16
// o200k tokens of English text, vLLM's KV-cache block. Blocks are counted in
// bytes, not tokens: redaction must not depend on one engine's tokenizer
// (nor pay for running one), and synthetic text no longer depends on
// blocks at all, so the block size only sets the resolution of the SQL
// column.
const DefaultBlockBytes = 64

// Policy says what redaction keeps. Field paths are dot-separated object
// keys from the body's root; array levels are transparent ("messages.role"
// matches the role of every message), "*" matches one key, a leading "**."
// matches at any depth and a trailing ".**" matches a whole subtree.
//
// The zero Policy keeps nothing verbatim and turns every string into
// synthetic text; DefaultPolicy is the one to start from.
type Policy struct {
	// Keep lists JSON field paths whose string values stay verbatim (PII
	// detectors still run on them).
	Keep []string `json:"keep" yaml:"keep"`
	// Prompt lists JSON field paths whose text forms the prompt: it is
	// chained in document order into PrefixHashes, so shared prompt
	// prefixes keep sharing. Other strings get synthetic text keyed by
	// their own value. Response bodies chain all their text.
	Prompt []string `json:"prompt" yaml:"prompt"`
	// KeepHeaders lists header names (case-insensitive) whose values stay,
	// after PII detection. Other headers keep their name and become
	// "<redacted len=N>".
	KeepHeaders []string `json:"keep_headers" yaml:"keep_headers"`
	// CredentialHeaders are always replaced by "<redacted len=N>", even if
	// listed in KeepHeaders.
	CredentialHeaders []string `json:"credential_headers" yaml:"credential_headers"`
	// QueryValues is QueryDetect (default) or QuerySynthetic.
	QueryValues string `json:"query_values" yaml:"query_values"`
	// QueryKeep lists query keys whose values stay (after PII detection)
	// when QueryValues is QuerySynthetic.
	QueryKeep []string `json:"query_keep" yaml:"query_keep"`
	// Text is what happens to text/* bodies and non-JSON text:
	// TextSynthetic (default), TextDetect or TextDrop.
	Text string `json:"text" yaml:"text"`
	// Binary is what happens to binary bodies: BinaryFiller (default) or
	// BinaryDrop.
	Binary string `json:"binary" yaml:"binary"`
	// BlockBytes is the target size of a PrefixHashes block in bytes of
	// chain input; blocks end at the first word or field start after it.
	// It changes only PrefixHashes, never the synthetic text. Default
	// DefaultBlockBytes.
	BlockBytes int `json:"block_bytes" yaml:"block_bytes"`
	// Topics label an exchange from keywords in its raw prompt text; the
	// rule with the most distinct keyword hits wins, the first on a tie.
	Topics []TopicRule `json:"topics" yaml:"topics"`
}

// TopicRule labels an exchange Name when any of Keywords (case-insensitive
// substrings) occurs in the prompt.
type TopicRule struct {
	Name     string   `json:"name" yaml:"name"`         // the topic label
	Keywords []string `json:"keywords" yaml:"keywords"` // case-insensitive substrings of the prompt
}

// DefaultPolicy returns the built-in policy: safe for OpenAI- and
// Anthropic-style chat, completions, embeddings and responses bodies.
func DefaultPolicy() *Policy {
	return &Policy{
		Keep: []string{
			"model", "stream", "max_tokens", "temperature", "top_p", "n", "stop",
			"**.type", "**.role", "object", "id", "created", "system_fingerprint",
			"service_tier", "reasoning_effort", "modalities", "encoding_format",
			"tool_choice", "tool_choice.**", "parallel_tool_calls",
			"**.finish_reason", "stop_reason", "stop_sequence", "**.stop_reason",
			"tools.**.name", "tools.function.parameters.**", "tools.input_schema.**",
			"tools.function.strict", "functions.name", "functions.parameters.**",
			"function_call", "function_call.name",
			"**.tool_calls.id", "**.tool_calls.function.name", "**.tool_call_id",
			"**.function_call.name", "messages.content.name", "messages.content.id",
			"messages.content.tool_use_id", "**.content_block.name", "**.content_block.id",
			"response_format.**", "text.format.**", "stream_options.**",
			"logprobs", "top_logprobs", "truncation", "store",
			"usage.**", "message.id", "message.model", "message.type",
		},
		Prompt: []string{
			"messages.**", "system", "system.**", "prompt", "prompt.**",
			"input", "input.**", "instructions", "contents.**", "tools.**",
			"functions.**", "suffix",
		},
		KeepHeaders: []string{
			"content-type", "content-length", "content-encoding", "transfer-encoding",
			"accept", "accept-encoding", "cache-control", "connection", "date",
			"server", "vary", "user-agent", "x-request-id", "request-id",
			"openai-version", "openai-model", "openai-processing-ms", "openai-organization-type",
			"anthropic-version", "anthropic-beta", "x-stainless-lang",
			"x-stainless-package-version", "x-stainless-os", "x-stainless-arch",
			"x-stainless-runtime", "x-stainless-runtime-version", "x-stainless-retry-count",
			"x-ratelimit-limit-requests", "x-ratelimit-limit-tokens",
			"x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens",
			"x-ratelimit-reset-requests", "x-ratelimit-reset-tokens",
			"x-batch-size", "x-queue-depth", "retry-after",
		},
		CredentialHeaders: []string{
			"authorization", "proxy-authorization", "cookie", "set-cookie",
			"x-api-key", "api-key", "x-goog-api-key", "x-auth-token",
			"x-amz-security-token", "x-csrf-token", "openai-organization",
			"openai-project",
		},
		QueryValues: QueryDetect,
		QueryKeep:   []string{"api-version", "model", "stream", "alt", "beta"},
		Text:        TextSynthetic,
		Binary:      BinaryFiller,
		BlockBytes:  DefaultBlockBytes,
		Topics: []TopicRule{
			{Name: "coding", Keywords: []string{"func ", "def ", "class ", "python", "golang", "javascript", "typescript", "compile", "stack trace", "exception", "sql", "regex", "代码", "函数"}},
			{Name: "math", Keywords: []string{"equation", "integral", "derivative", "theorem", "probability", "calculate", "方程", "概率"}},
			{Name: "translation", Keywords: []string{"translate", "translation", "翻译"}},
			{Name: "writing", Keywords: []string{"essay", "rewrite", "summarize", "summary", "email draft", "poem", "总结", "写一"}},
		},
	}
}

// policyFile is the on-disk policy: additions to and removals from a base.
type policyFile struct {
	Version int    `json:"version" yaml:"version"` // 1
	Base    string `json:"base" yaml:"base"`       // "default" (default) or "none"
	JSON    struct {
		Keep   []string `json:"keep" yaml:"keep"`
		Unkeep []string `json:"unkeep" yaml:"unkeep"`
		Prompt []string `json:"prompt" yaml:"prompt"`
	} `json:"json" yaml:"json"`
	Headers struct {
		Keep        []string `json:"keep" yaml:"keep"`
		Unkeep      []string `json:"unkeep" yaml:"unkeep"`
		Credentials []string `json:"credentials" yaml:"credentials"`
	} `json:"headers" yaml:"headers"`
	Query struct {
		Values string   `json:"values" yaml:"values"`
		Keep   []string `json:"keep" yaml:"keep"`
	} `json:"query" yaml:"query"`
	Text       string      `json:"text" yaml:"text"`
	Binary     string      `json:"binary" yaml:"binary"`
	BlockBytes int         `json:"block_bytes" yaml:"block_bytes"`
	Topics     []TopicRule `json:"topics" yaml:"topics"`
	// ReplaceTopics drops the base policy's topic rules.
	ReplaceTopics bool `json:"replace_topics" yaml:"replace_topics"`
}

// LoadPolicy reads a policy file (YAML, or JSON, which YAML accepts). The
// file adds to and removes from a base policy, DefaultPolicy unless it says
// base: none. Unknown fields are an error, so a typo cannot silently keep
// less redacted than intended.
func LoadPolicy(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	p, err := ParsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", path, err)
	}
	return p, nil
}

// ParsePolicy parses a policy document; see LoadPolicy.
func ParsePolicy(data []byte) (*Policy, error) {
	var f policyFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if f.Version != 0 && f.Version != 1 {
		return nil, fmt.Errorf("unsupported policy version %d (want 1)", f.Version)
	}
	var p *Policy
	switch f.Base {
	case "", "default":
		p = DefaultPolicy()
	case "none":
		p = &Policy{}
	default:
		return nil, fmt.Errorf("unknown base %q (want default or none)", f.Base)
	}
	p.Keep = remove(append(p.Keep, f.JSON.Keep...), f.JSON.Unkeep)
	p.Prompt = append(p.Prompt, f.JSON.Prompt...)
	p.KeepHeaders = remove(append(p.KeepHeaders, lower(f.Headers.Keep)...), lower(f.Headers.Unkeep))
	p.CredentialHeaders = append(p.CredentialHeaders, lower(f.Headers.Credentials)...)
	if f.Query.Values != "" {
		p.QueryValues = f.Query.Values
	}
	p.QueryKeep = append(p.QueryKeep, f.Query.Keep...)
	if f.Text != "" {
		p.Text = f.Text
	}
	if f.Binary != "" {
		p.Binary = f.Binary
	}
	if f.BlockBytes != 0 {
		p.BlockBytes = f.BlockBytes
	}
	if f.ReplaceTopics {
		p.Topics = nil
	}
	p.Topics = append(p.Topics, f.Topics...)
	if err := p.validate(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Policy) validate() error {
	switch p.Text {
	case "", TextSynthetic, TextDetect, TextDrop:
	default:
		return fmt.Errorf("text: unknown mode %q (want synthetic, detect or drop)", p.Text)
	}
	switch p.Binary {
	case "", BinaryFiller, BinaryDrop:
	default:
		return fmt.Errorf("binary: unknown mode %q (want filler or drop)", p.Binary)
	}
	switch p.QueryValues {
	case "", QueryDetect, QuerySynthetic:
	default:
		return fmt.Errorf("query values: unknown mode %q (want detect or synthetic)", p.QueryValues)
	}
	if p.BlockBytes < 0 || p.BlockBytes > 1<<20 {
		return fmt.Errorf("block_bytes %d out of range (1..1048576)", p.BlockBytes)
	}
	for _, rule := range append(slices.Clone(p.Keep), p.Prompt...) {
		if _, err := compilePath(rule); err != nil {
			return err
		}
	}
	for i, t := range p.Topics {
		if t.Name == "" || len(t.Keywords) == 0 {
			return fmt.Errorf("topic %d: needs a name and keywords", i)
		}
	}
	return nil
}

// fingerprint is a stable digest of the policy's effect.
func (p *Policy) fingerprint() string {
	b, _ := json.Marshal(p) // a Policy always marshals
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

func remove(list, drop []string) []string {
	out := list[:0:0]
	for _, s := range list {
		if !slices.Contains(drop, s) {
			out = append(out, s)
		}
	}
	return out
}

func lower(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = strings.ToLower(s)
	}
	return out
}
