package redact

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/sse"
)

// RedactExchange redacts everything the recorder filled raw, in place:
// every column that copies a request or response value (path, query,
// host, model, client, session, upstream, context headers, error, header
// names and values) and both bodies.
// It sets PrefixHashes, Topic and the turn links (LinkTurns) from the raw
// bodies, and RedactErr when a
// body could not be redacted; that body is then emptied (its size fields
// are kept). It never panics.
func (r *Redactor) RedactExchange(x *formats.Exchange) {
	r.redactExchange(x, nil, false)
}

// RedactExchangeRequest is RedactExchange for a caller that has decoded
// x's raw request body with sse.ParseRequest already (the recorder, for its
// enrichment): req is that decode, nil when the body is not a JSON request,
// and the turn links read it instead of decoding the body again.
func (r *Redactor) RedactExchangeRequest(x *formats.Exchange, req *sse.Request) {
	r.redactExchange(x, req, true)
}

// redactExchange is RedactExchange with the request decoded (req, when
// decoded is true) or to be decoded here.
func (r *Redactor) redactExchange(x *formats.Exchange, req *sse.Request, decoded bool) {
	var errs []string
	defer func() {
		if p := recover(); p != nil { // fail closed: nothing raw may survive
			x.ReqBody, x.RespBody = nil, nil
			x.Path, x.Query, x.Client, x.Host, x.Model, x.Session = "", "", "", "", "", ""
			x.Upstream, x.Error, x.Topic = "", "", ""
			x.ReqHeaders, x.RespHeaders, x.Context = nil, nil, nil
			errs = append(errs, fmt.Sprintf("internal error: %v", p))
			x.RedactErr = strings.Join(errs, "; ")
		}
	}()
	if !decoded {
		req = conversationRequest(x)
	}
	// The turn links read the raw bodies, before they are redacted. A
	// streamed answer is rebuilt from the lines the response's redaction
	// walks (answer), not from a scan of its own.
	var answer *answerScan
	rawResp := x.RespBody
	if t, ok := startTurnLinks(x, req, nil, r); ok {
		if answerKindOf(x) == answerStream {
			answer = newAnswerScan(x.RespBody)
			defer func() {
				if !answer.walked { // not redacted as an event stream, or the walk failed
					answer = newAnswerScan(rawResp)
					answer.sc.Feed(rawResp, time.Time{}, answer.emit)
				}
				m, ok := answer.end()
				t.finish(x, m, ok)
			}()
		} else {
			m, ok := answerOf(x)
			t.finish(x, m, ok)
		}
	}
	x.Path = r.RedactPath(x.Path)
	x.Query = r.RedactQuery(x.Query)
	x.Client = r.redactClient(x.Client)
	// The model column is copied from the raw body ("ft:gpt-4o:" + anything):
	// the same detectors give the same token as the body's own "model".
	x.Model, _ = r.detect(x.Model)
	x.Host, _ = r.servers.detect(x.Host, r.detectServer)
	x.Upstream, _ = r.servers.detect(CleanURL(x.Upstream), r.detectServer)
	x.Error = r.detectError(x.Error)
	if x.Session != "" {
		x.Session = r.pseudonym(x.Session)
	}
	reqCE := header(x.ReqHeaders, "content-encoding")
	respCE := header(x.RespHeaders, "content-encoding")
	reqCT := x.ReqContentType
	if reqCT == "" {
		reqCT = header(x.ReqHeaders, "content-type")
	}
	respCT := x.RespContentType
	if respCT == "" {
		respCT = header(x.RespHeaders, "content-type")
	}
	r.RedactHeaders(x.ReqHeaders)
	r.RedactHeaders(x.RespHeaders)
	if len(x.Context) > 0 {
		for k, v := range x.Context {
			x.Context[k], _ = r.detect(v)
		}
	}

	if x.ReqBodyBytes == 0 {
		x.ReqBodyBytes = int64(len(x.ReqBody))
	}
	if x.RespBodyBytes == 0 {
		x.RespBodyBytes = int64(len(x.RespBody))
	}
	if b, err := r.RedactRequestBody(reqCT, reqCE, x.ReqBody); err != nil {
		x.ReqBody = nil
		errs = append(errs, "request body: "+reason(err))
	} else {
		x.ReqBody = b.Data
		x.PrefixHashes = b.PrefixHashes
		x.Topic = b.Topic
	}
	if b, err := r.redactBody(domainResponse, respCT, respCE, x.RespBody, answer); err != nil {
		x.RespBody = nil
		errs = append(errs, "response body: "+reason(err))
	} else {
		x.RespBody = b.Data
	}
	x.RedactErr = strings.Join(errs, "; ")
}

// redactClient is detect for the client column, remembered per address:
// the exchanges of one keep-alive connection share their client address,
// and finding and replacing an address costs more than the rest of the
// columns together.
func (r *Redactor) redactClient(s string) string {
	v, _ := r.clients.detect(s, r.detect)
	return v
}

// maxMemo bounds the values a detectMemo remembers; it starts again when it
// is full.
const maxMemo = 4096

// maxMemoValue bounds the length of a value a detectMemo remembers, so
// that a full memo holds at most about maxMemo*maxMemoValue bytes.
const maxMemoValue = 256

// detectMemo remembers a detect function's answers for values that repeat
// from one exchange to the next (a connection's client address, a client's
// User-Agent, a content type, the gateway's host). Each memo serves one
// function (detect, or detectServer), whose answer depends only on the
// value and the key, so the memo changes nothing stored.
type detectMemo struct {
	mu sync.Mutex          // guards m
	m  map[string]detected // value → what detect made of it
}

type detected struct {
	v       string
	changed bool
}

// detect is detect(s), remembered; a memo is always called with the same
// detect.
func (m *detectMemo) detect(s string, detect func(string) (string, bool)) (string, bool) {
	if len(s) > maxMemoValue {
		return detect(s)
	}
	m.mu.Lock()
	d, ok := m.m[s]
	m.mu.Unlock()
	if ok {
		return d.v, d.changed
	}
	d.v, d.changed = detect(s)
	m.mu.Lock()
	if m.m == nil || len(m.m) >= maxMemo {
		m.m = make(map[string]detected)
	}
	m.m[s] = d
	m.mu.Unlock()
	return d.v, d.changed
}

func reason(err error) string {
	if e, ok := err.(*Error); ok {
		return e.Reason
	}
	return err.Error()
}

// header looks a header up case-insensitively.
func header(h map[string]string, name string) string {
	if v, ok := h[name]; ok {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// RedactHeaders redacts a header map in place: credential headers and
// headers not on the allow-list keep their name and become
// "<redacted len=N>"; kept values pass the detectors, and so do names (a
// client can put anything in one).
func (r *Redactor) RedactHeaders(h map[string]string) {
	var buf [64]byte
	var renamed []string // old name, new name, …
	for k, v := range h {
		name := appendLower(buf[:0], k)
		// Indexing with string(name) does not allocate.
		if r.credHeaders[string(name)] || !r.keepHeaders[string(name)] {
			if !isMarker(v) {
				h[k] = redactedMarker(v)
			}
		} else if nv, changed := r.headerValues.detect(v, r.detect); changed {
			h[k] = nv
		}
		if needsScan(k) {
			if nk, changed := r.detect(k); changed {
				renamed = append(renamed, k, nk)
			}
		}
	}
	for i := 0; i < len(renamed); i += 2 {
		h[renamed[i+1]] = h[renamed[i]]
		delete(h, renamed[i])
	}
}

// appendLower appends s lower-cased to b. Header names are ASCII; other
// bytes are copied as they are, so such a name matches no list entry and
// its value is redacted.
func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		b = append(b, lowerByte(s[i]))
	}
	return b
}

// RedactPath runs the detectors over each percent-decoded path segment.
func (r *Redactor) RedactPath(p string) string {
	if !needsScan(p) && !strings.Contains(p, "%") {
		return p
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if nv, changed := r.detect(s); changed {
			s = url.PathEscape(nv)
			segs[i] = s
		}
		dec, err := url.PathUnescape(s)
		if err != nil {
			dec = s
		}
		if !needsScan(dec) {
			continue
		}
		if nv, changed := r.detect(dec); changed {
			segs[i] = url.PathEscape(nv)
		}
	}
	return strings.Join(segs, "/")
}

// RedactQuery redacts a raw query string pair by pair: keys and kept values
// pass the detectors; with QueryValues "synthetic" other values become
// synthetic text. Unchanged pairs keep their original encoding.
func (r *Redactor) RedactQuery(q string) string {
	if q == "" {
		return q
	}
	synthetic := r.policy.QueryValues == QuerySynthetic
	pairs := strings.Split(q, "&")
	for i, pair := range pairs {
		k, v, hasEq := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			key = k
		}
		k = r.detectQueryPart(k)
		if !hasEq {
			pairs[i] = k
			continue
		}
		if credentialQueryKeys[strings.ToLower(key)] && v != "" {
			g := r.seed(domainPII, EntityPassword, v)
			v = reshape(v, 0, &g)
		} else if synthetic && !r.queryKeep[key] {
			val, err := url.QueryUnescape(v)
			if err != nil {
				val = v
			}
			v = url.QueryEscape(r.SynthesizeString(val))
		} else {
			v = r.detectQueryPart(v)
		}
		pairs[i] = k + "=" + v
	}
	return strings.Join(pairs, "&")
}

// credentialQueryKeys name query parameters that carry a credential
// whatever its shape (a password has none): their values are replaced by
// same-shape tokens, as detected values are.
var credentialQueryKeys = map[string]bool{
	"password": true, "passwd": true, "pwd": true, "pass": true, "secret": true, "client_secret": true,
	"token": true, "access_token": true, "refresh_token": true, "id_token": true, "auth": true,
	"api_key": true, "apikey": true, "api-key": true, "key": true, "sig": true, "signature": true,
	"x-amz-signature": true, "x-amz-credential": true, "x-amz-security-token": true, "x-goog-signature": true,
	"x-goog-credential": true, "code": true, "sessionid": true, "session_id": true,
}

// detectQueryPart runs the detectors over a raw query key or value read
// three ways: as sent, percent-decoded with '+' kept (clients do not always
// escape a phone number's '+'), and form-decoded ('+' as a space). A
// change re-encodes the part.
func (r *Redactor) detectQueryPart(raw string) string {
	if nv, changed := r.detect(raw); changed {
		raw = url.QueryEscape(nv)
	}
	if dec, err := url.PathUnescape(raw); err == nil && dec != raw {
		if nv, changed := r.detect(dec); changed {
			raw = url.QueryEscape(nv)
		}
	}
	if dec, err := url.QueryUnescape(raw); err == nil && dec != raw {
		if nv, changed := r.detect(dec); changed {
			raw = url.QueryEscape(nv)
		}
	}
	return raw
}

// pseudonym maps a session key to a stable keyed name: sessions still
// group, their values (API key hashes, user ids, addresses) do not survive.
func (r *Redactor) pseudonym(s string) string {
	g := r.seed(domainSession, s)
	var b [8]byte
	for i := range b {
		b[i] = byte(g.next())
	}
	return "s-" + hex.EncodeToString(b[:])
}
