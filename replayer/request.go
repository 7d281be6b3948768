package replayer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/reelkit/reel/formats"
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

// prepared is a request rebuilt from an exchange, ready to send many times.
type prepared struct {
	method string
	url    string
	header http.Header
	body   []byte
	// headBytes estimates the request line and headers on the wire.
	headBytes int64
}

// requestBuilder turns exchanges into requests for one target.
type requestBuilder struct {
	target       *url.URL
	forward      map[string]bool // canonical names of recorded headers to copy
	extra        http.Header     // --header values, applied last
	pinOutput    bool
	includeUsage bool
}

func newRequestBuilder(target *url.URL, forward []string, extra http.Header, pinOutput, includeUsage bool) *requestBuilder {
	if forward == nil {
		forward = DefaultForwardHeaders
	}
	f := make(map[string]bool, len(forward))
	for _, h := range forward {
		f[http.CanonicalHeaderKey(h)] = true
	}
	return &requestBuilder{target: target, forward: f, extra: extra, pinOutput: pinOutput, includeUsage: includeUsage}
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
	u := *b.target
	u.Path = joinPath(b.target.Path, x.Path)
	u.RawPath = ""
	u.RawQuery = x.Query
	h := make(http.Header, len(b.forward)+len(b.extra)+1)
	for k, v := range x.ReqHeaders {
		ck := http.CanonicalHeaderKey(k)
		if !b.forward[ck] || credentialHeader(ck) || hopHeader(ck) {
			continue
		}
		h.Set(ck, v)
	}
	if x.ReqContentType != "" && h.Get("Content-Type") == "" && len(x.ReqBody) > 0 {
		h.Set("Content-Type", x.ReqContentType)
	}
	for k, vs := range b.extra {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
	}
	body := x.ReqBody
	if (b.pinOutput || b.includeUsage) && looksJSON(x.ReqContentType, body) {
		nb, err := rewriteLLMBody(body, b.pinOutput, x.OutputTokens, b.includeUsage)
		if err != nil {
			return nil, fmt.Errorf("rewrite body: %w", err)
		}
		body = nb
	}
	p := &prepared{method: method, url: u.String(), header: h, body: body}
	p.headBytes = int64(len(method) + 1 + len(u.RequestURI()) + len(" HTTP/1.1\r\n") + len("Host: \r\n") + len(u.Host) + 2)
	for k, vs := range h {
		for _, v := range vs {
			p.headBytes += int64(len(k) + 2 + len(v) + 2)
		}
	}
	if len(body) > 0 {
		p.headBytes += int64(len("Content-Length: \r\n") + len(fmt.Sprint(len(body))))
	}
	return p, nil
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

// rewriteLLMBody applies --pin-output (max_tokens := the recorded output
// tokens, ignore_eos) and --include-usage (stream_options.include_usage on
// streaming requests) to an OpenAI-style JSON body. Other fields are kept
// byte for byte; a body that is not a JSON object is returned unchanged.
func rewriteLLMBody(body []byte, pin bool, outputTokens int32, usage bool) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return body, nil // not an object: leave it to the target to judge
	}
	changed := false
	if pin && outputTokens > 0 {
		n := json.RawMessage(fmt.Sprint(outputTokens))
		m["max_tokens"] = n
		if _, ok := m["max_completion_tokens"]; ok {
			m["max_completion_tokens"] = n
		}
		m["ignore_eos"] = json.RawMessage("true")
		changed = true
	}
	if usage && string(bytes.TrimSpace(m["stream"])) == "true" {
		so := map[string]json.RawMessage{}
		if raw, ok := m["stream_options"]; ok {
			_ = json.Unmarshal(raw, &so) // a malformed value is replaced
		}
		so["include_usage"] = json.RawMessage("true")
		raw, err := json.Marshal(so)
		if err != nil {
			return nil, err
		}
		m["stream_options"] = raw
		changed = true
	}
	if !changed {
		return body, nil
	}
	return json.Marshal(m)
}
