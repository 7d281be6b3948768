package replayer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/sse"
)

// DefaultForwardHeaders are the recorded request headers replayed by default.
// Everything else recorded is dropped; headers for the shadow (credentials
// included) come from [Options.Headers].
var DefaultForwardHeaders = []string{"Content-Type", "Accept", "User-Agent", "OpenAI-Beta", "Anthropic-Version"}

// credentialHeader reports whether a header name looks like it carries a
// credential or session secret. Such recorded headers are never forwarded,
// even when listed in [Options.ForwardHeaders].
func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"auth", "cookie", "token", "key", "secret", "session", "password", "credential", "signature"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// hopHeader reports whether a header is connection-level and must not be copied.
func hopHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Host", "Content-Length", "Connection", "Keep-Alive", "Transfer-Encoding", "Te", "Trailer",
		"Upgrade", "Proxy-Connection", "Accept-Encoding", "Expect":
		return true
	}
	return false
}

// ErrTruncatedBody marks an exchange whose request body was truncated at
// record time: replaying it would send broken JSON, so it is skipped and the
// skip is written as an error row.
var ErrTruncatedBody = errors.New("request body truncated in the recording (record with a larger --max-body)")

// prepared is a request rebuilt from an exchange, ready to send: the whole
// HTTP/1.1 request (head and body) rendered once, written with one write.
type prepared struct {
	wire []byte     // request line, headers, blank line, body
	head bool       // a HEAD request: the response has no body
	pin  pinOutcome // what --pin-output did to the body
}

// defaultUserAgent goes out when no recorded or --header User-Agent does.
const defaultUserAgent = "reel-replay"

// requestBuilder turns exchanges into requests for one target.
type requestBuilder struct {
	target       *url.URL
	host         string          // the Host header: the target's, or Options.Headers' Host
	forward      map[string]bool // canonical names of recorded headers to copy
	extra        http.Header     // --header values, applied last
	pinOutput    PinMode
	ignoreEOS    bool
	includeUsage bool
}

func newRequestBuilder(target *url.URL, forward []string, extra http.Header, pinOutput PinMode, ignoreEOS, includeUsage bool) *requestBuilder {
	if forward == nil {
		forward = DefaultForwardHeaders
	}
	f := make(map[string]bool, len(forward))
	for _, h := range forward {
		f[http.CanonicalHeaderKey(h)] = true
	}
	host := target.Host
	if h := extra.Get("Host"); h != "" {
		host = h // --header 'Host: …': the virtual host the shadow routes by
	}
	return &requestBuilder{target: target, host: host, forward: f, extra: extra, pinOutput: pinOutput, ignoreEOS: ignoreEOS, includeUsage: includeUsage}
}

// build rebuilds x's request for the target.
func (b *requestBuilder) build(x *formats.Exchange) (*prepared, error) {
	if x.ReqBodyTrunc {
		return nil, ErrTruncatedBody
	}
	method := x.Method
	if method == "" {
		method = http.MethodGet
	}
	h := make(http.Header, len(b.forward)+len(b.extra)+1)
	for k, v := range x.ReqHeaders {
		ck := http.CanonicalHeaderKey(k)
		if !b.forward[ck] || credentialHeader(ck) || hopHeader(ck) || !validHeader(ck, v) {
			continue // a recorded value that cannot go on the wire as it is, is dropped
		}
		h.Set(ck, v)
	}
	if x.ReqContentType != "" && h.Get("Content-Type") == "" && len(x.ReqBody) > 0 && validHeader("Content-Type", x.ReqContentType) {
		h.Set("Content-Type", x.ReqContentType)
	}
	for k, vs := range b.extra {
		if ck := http.CanonicalHeaderKey(k); !hopHeader(ck) {
			h[ck] = vs
		}
	}
	body := x.ReqBody
	pin := b.pinOutput.pinDecision(x)
	if pin == pinned || b.ignoreEOS || b.includeUsage {
		if looksJSON(x.ReqContentType, body) {
			nb, didPin, err := rewriteLLMBody(body, llmRewrite{api: sse.APIForPath(x.Path), pin: pin == pinned,
				outputTokens: x.OutputTokens, ignoreEOS: b.ignoreEOS, usage: b.includeUsage})
			if err != nil {
				return nil, fmt.Errorf("rewrite body: %w", err)
			}
			body = nb
			if pin == pinned && !didPin {
				pin = pinNotJSON
			}
		} else if pin == pinned {
			pin = pinNotJSON
		}
	}
	if !httpguts.ValidHeaderFieldName(method) {
		return nil, fmt.Errorf("recorded method %q is not an HTTP token", method)
	}
	return &prepared{wire: renderRequest(method, b.host, requestURI(b.target.Path, x.Path, x.Query), h, body), head: method == http.MethodHead, pin: pin}, nil
}

// renderRequest writes an HTTP/1.1 request: headers in sorted order, a
// Content-Length when there is a body (or the method expects one), the body.
func renderRequest(method, host, uri string, h http.Header, body []byte) []byte {
	keys := make([]string, 0, len(h))
	size := len(method) + len(uri) + len(host) + len(body) + 64
	for k, vs := range h {
		keys = append(keys, k)
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	slices.Sort(keys)
	w := make([]byte, 0, size)
	w = append(w, method...)
	w = append(w, ' ')
	w = append(w, uri...)
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, host...)
	w = append(w, "\r\n"...)
	if _, ok := h["User-Agent"]; !ok {
		w = append(w, "User-Agent: "+defaultUserAgent+"\r\n"...)
	}
	for _, k := range keys {
		for _, v := range h[k] {
			w = append(w, k...)
			w = append(w, ": "...)
			w = append(w, v...)
			w = append(w, "\r\n"...)
		}
	}
	if len(body) > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		w = append(w, "Content-Length: "...)
		w = strconv.AppendInt(w, int64(len(body)), 10)
		w = append(w, "\r\n"...)
	}
	w = append(w, "\r\n"...)
	return append(w, body...)
}

// requestURI is the request target for a recorded path and raw query under
// the target's base path; bytes that cannot appear in a request line are
// percent-encoded.
func requestURI(base, path, rawQuery string) string {
	u := url.URL{Path: joinPath(base, path), RawQuery: rawQuery}
	uri := u.RequestURI()
	for i := 0; i < len(uri); i++ {
		if c := uri[i]; c <= ' ' || c >= 0x7f {
			var b strings.Builder
			for j := 0; j < len(uri); j++ {
				if c := uri[j]; c <= ' ' || c >= 0x7f {
					fmt.Fprintf(&b, "%%%02X", c)
				} else {
					b.WriteByte(c)
				}
			}
			return b.String()
		}
	}
	return uri
}

// validHeader reports whether a header can be written as it is.
func validHeader(name, value string) bool {
	return httpguts.ValidHeaderFieldName(name) && httpguts.ValidHeaderFieldValue(value)
}

// validateHeaders checks headers meant for the shadow (--header): each name a
// token, each value free of control characters.
func validateHeaders(h http.Header) error {
	for k, vs := range h {
		for _, v := range vs {
			if !validHeader(k, v) {
				return fmt.Errorf("header %q: invalid name or value (control characters?)", k)
			}
		}
	}
	return nil
}

// joinPath appends a recorded path to the target's base path.
func joinPath(base, p string) string {
	if p == "" {
		p = "/"
	}
	if base == "" || base == "/" {
		if !strings.HasPrefix(p, "/") {
			return "/" + p
		}
		return p
	}
	return strings.TrimSuffix(base, "/") + "/" + strings.TrimPrefix(p, "/")
}

func looksJSON(contentType string, body []byte) bool {
	if strings.Contains(contentType, "json") {
		return true
	}
	t := bytes.TrimSpace(body)
	return len(t) > 0 && t[0] == '{'
}

// llmRewrite says how rewriteLLMBody changes a request body.
type llmRewrite struct {
	api          sse.API // the request's API (from its path)
	pin          bool    // --pin-output: cap the output at outputTokens
	outputTokens int32   // the recorded output tokens
	ignoreEOS    bool    // --ignore-eos: ask the server to generate to the cap
	usage        bool    // --include-usage: ask streams for usage
}

// rewriteLLMBody applies --pin-output (the API's output cap := the
// recorded output tokens: max_tokens, and max_completion_tokens when the
// request uses it; max_output_tokens for Responses; Anthropic's
// max_tokens), --ignore-eos (vLLM's ignore_eos, only on the APIs whose
// servers take it, see sse.API.TakesIgnoreEOS) and --include-usage
// (stream_options.include_usage on streaming chat and completion
// requests; Responses and Messages streams always report usage). Other
// fields are kept byte for byte; a body that is not a JSON object is
// returned unchanged. pinned reports whether the output cap was set.
func rewriteLLMBody(body []byte, rw llmRewrite) (out []byte, pinned bool, err error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return body, false, nil // not an object: leave it to the target to judge
	}
	changed := false
	if rw.pin && rw.outputTokens > 0 {
		n := json.RawMessage(fmt.Sprint(rw.outputTokens))
		fields := rw.api.MaxOutputFields()
		for i, f := range fields {
			if _, ok := m[f]; ok || i == len(fields)-1 {
				m[f] = n
				changed, pinned = true, true
			}
		}
	}
	if rw.ignoreEOS && (rw.api.TakesIgnoreEOS() || rw.api == sse.Unknown) {
		m["ignore_eos"] = json.RawMessage("true")
		changed = true
	}
	usage := rw.usage && (rw.api == sse.ChatCompletions || rw.api == sse.Completions || rw.api == sse.Unknown)
	if usage && string(bytes.TrimSpace(m["stream"])) == "true" {
		so := map[string]json.RawMessage{}
		if raw, ok := m["stream_options"]; ok {
			_ = json.Unmarshal(raw, &so) // a malformed value is replaced
		}
		so["include_usage"] = json.RawMessage("true")
		raw, err := json.Marshal(so)
		if err != nil {
			return nil, false, err
		}
		m["stream_options"] = raw
		changed = true
	}
	if !changed {
		return body, false, nil
	}
	out, err = json.Marshal(m)
	return out, pinned, err
}
