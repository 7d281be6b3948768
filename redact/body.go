package redact

import (
	"bytes"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/reelkit/reel/sse"
)

// Body is a redacted body and what was learned from its raw text.
type Body struct {
	Data         []byte  // the redacted body; nil when dropped
	PrefixHashes []int64 // keyed chain over the prompt text (requests only)
	Topic        string  // topic label from the raw prompt (requests only)
}

// Error is a body that could not be redacted: it must be stored empty
// (fail closed) with Reason in the exchange's redaction_error.
type Error struct{ Reason string }

// Error is the redaction_error column: "cannot redact: REASON".
func (e *Error) Error() string { return "cannot redact: " + e.Reason }

// bodyKind is how a body is handled.
type bodyKind uint8

const (
	kindJSON bodyKind = iota
	kindSSE
	kindForm
	kindText
	kindBinary
	kindEmpty
)

// kindOf picks the handler from the declared content type and what the
// body holds: a body is handled as what it is, not only as what it says it
// is. JSON declared as a form (curl -d's default content type) or as
// text/plain is JSON; it stays what was sent (replay sends the redacted
// JSON under the declared type, as the client did). A declared text type
// (JSON, form, text) over bytes that are not text cannot be redacted as
// either and fails closed. Without a content type, or with
// application/octet-stream, the body is sniffed.
func kindOf(contentType string, body []byte) (bodyKind, error) {
	if len(body) == 0 {
		return kindEmpty, nil
	}
	mt, params := "", map[string]string(nil)
	if contentType != "" && strings.IndexByte(contentType, ';') < 0 {
		// No parameters: what ParseMediaType (or the fallback below) gives,
		// without its map.
		mt = strings.ToLower(strings.TrimSpace(contentType))
	} else if contentType != "" {
		if t, p, err := mime.ParseMediaType(contentType); err == nil {
			mt, params = t, p
		} else {
			mt = strings.ToLower(strings.TrimSpace(strings.Split(contentType, ";")[0]))
		}
	}
	t := bytes.TrimLeft(body, " \t\r\n")
	looksJSON := len(t) > 0 && (t[0] == '{' || t[0] == '[')
	notText := func() error {
		return &Error{Reason: fmt.Sprintf("content type %s but the body is not text", mt)}
	}
	switch {
	case mt == "text/event-stream":
		return kindSSE, nil
	case mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "application/x-ndjson" || mt == "application/jsonl":
		// Anything that does not start like JSON is redacted as text from
		// there by the JSON redactor: only bytes that are not text at all
		// (a compressed body without Content-Encoding) are refused.
		if len(t) > 0 && !jsonStart(t[0]) && !isText(body) {
			return 0, notText()
		}
		return kindJSON, nil
	case mt == "application/x-www-form-urlencoded":
		switch {
		case looksJSON:
			return kindJSON, nil
		case !isText(body):
			return 0, notText()
		}
		return kindForm, nil
	case strings.HasPrefix(mt, "text/") || mt == "application/xml" || strings.HasSuffix(mt, "+xml") || mt == "application/javascript":
		switch cs := strings.ToLower(params["charset"]); {
		case looksJSON && mt == "text/plain":
			return kindJSON, nil
		case (cs == "" || cs == "utf-8" || cs == "us-ascii") && !isText(body):
			return 0, notText()
		}
		return kindText, nil
	case mt != "" && mt != "application/octet-stream":
		return kindBinary, nil
	}
	// No or generic content type: sniff.
	switch {
	case looksJSON:
		return kindJSON, nil
	case bytes.HasPrefix(t, []byte("data:")) || bytes.HasPrefix(t, []byte("event:")):
		return kindSSE, nil
	case isText(body):
		return kindText, nil
	}
	return kindBinary, nil
}

// jsonStart reports whether c can start a JSON value.
func jsonStart(c byte) bool {
	switch c {
	case '{', '[', '"', '-', 't', 'f', 'n', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// isText reports whether body is UTF-8 without NUL bytes, allowing a rune
// cut off at the end (a body truncated at --max-body).
func isText(body []byte) bool {
	if bytes.IndexByte(body, 0) >= 0 {
		return false
	}
	if utf8.Valid(body) {
		return true
	}
	for cut := 1; cut < utf8.UTFMax && cut < len(body); cut++ {
		if utf8.Valid(body[:len(body)-cut]) && !utf8.FullRune(body[len(body)-cut:]) {
			return true
		}
	}
	return false
}

// RedactRequestBody redacts a request body of the given content type.
// contentEncoding is the Content-Encoding header: gzip, deflate and zstd
// bodies are decompressed, redacted and compressed again (so the stored body
// still matches its header); anything else is refused with an *Error.
func (r *Redactor) RedactRequestBody(contentType, contentEncoding string, body []byte) (Body, error) {
	return r.redactBody(domainPrompt, contentType, contentEncoding, body, nil)
}

// RedactResponseBody redacts a response body; SSE events are redacted one
// by one with one chain across the stream.
func (r *Redactor) RedactResponseBody(contentType, contentEncoding string, body []byte) (Body, error) {
	return r.redactBody(domainResponse, contentType, contentEncoding, body, nil)
}

// redactBody redacts a body of the domain; when answer is not nil and the
// body is an event stream without content encoding, every line the walk
// reads goes to answer's scanner, and answer.walked is set at the end.
func (r *Redactor) redactBody(domain byte, contentType, contentEncoding string, body []byte, answer *answerScan) (b Body, err error) {
	if len(body) == 0 {
		return Body{Data: body}, nil
	}
	c, identity, ok := contentCodec(contentEncoding)
	if !ok {
		return Body{}, &Error{Reason: fmt.Sprintf("compressed body (content-encoding %s) that reel cannot decode", strings.TrimSpace(contentEncoding))}
	}
	if !identity {
		answer = nil // the walk reads the decoded bytes
		plain, err := decodeBody(c, body)
		if err != nil {
			return Body{}, &Error{Reason: fmt.Sprintf("content-encoding %s: %v", strings.TrimSpace(contentEncoding), err)}
		}
		body = plain
	}
	j := r.getJob(domain)
	j.answer = answer
	defer r.putJob(j)
	defer func() {
		if p := recover(); p != nil {
			b, err = Body{}, &Error{Reason: fmt.Sprintf("internal error: %v", p)}
		}
	}()
	kind, err := kindOf(contentType, body)
	if err != nil {
		return Body{}, err
	}
	b, err = j.body(kind, body)
	if err == nil && !identity && b.Data != nil {
		if b.Data, err = encodeBody(c, b.Data); err != nil {
			return Body{}, &Error{Reason: err.Error()}
		}
	}
	return b, err
}

// body redacts one body with a fresh job.
func (j *job) body(kind bodyKind, body []byte) (Body, error) {
	r := j.r
	var out []byte
	switch kind {
	case kindJSON:
		out = j.redactJSON(nil, body)
	case kindSSE:
		out = j.redactSSE(body)
	case kindForm:
		out = j.redactForm(body)
	case kindText:
		switch r.policy.Text {
		case TextDrop:
			return Body{}, nil
		case TextDetect:
			s, _ := r.detect(string(body))
			if r.topics != nil {
				r.topics.scan(body, &j.topics)
			}
			out = []byte(s)
		default:
			out = j.redactText(body)
		}
	case kindBinary:
		if r.policy.Binary == BinaryDrop {
			return Body{}, nil
		}
		out = make([]byte, len(body))
	}
	res := Body{Data: out}
	if j.domain == domainPrompt {
		j.chain.finish()
		if len(j.chain.hashes) > 0 {
			res.PrefixHashes = append([]int64(nil), j.chain.hashes...)
		}
		res.Topic = r.topics.best(&j.topics)
	}
	return res, nil
}

// redactText turns a whole text into chained synthetic text.
func (j *job) redactText(text []byte) []byte {
	if j.r.topics != nil && j.domain == domainPrompt {
		j.r.topics.scan(text, &j.topics)
	}
	j.in = text
	j.synth, j.edits = j.synth[:0], j.edits[:0]
	j.edits = append(j.edits, edit{start: 0, end: len(text), kind: editTail, expl: j.note("", "text", "text body: chained synthetic text", "", text)})
	j.segs = append(j.segs[:0], segment{text: text, key: "", edit: 0})
	j.runChain(nil)
	return j.write(nil)
}

// RedactText turns text into synthetic text (a request-side chain of its
// own): same runes per script class, whitespace and punctuation kept.
func (r *Redactor) RedactText(text []byte) []byte {
	j := r.getJob(domainPrompt)
	defer r.putJob(j)
	return j.redactText(text)
}

// redactSSE redacts each event's data: JSON data as JSON, other data as
// text, "[DONE]" kept; event names and ids pass the detectors, comments
// become synthetic text. The chain runs across events.
func (j *job) redactSSE(body []byte) []byte {
	out := make([]byte, 0, len(body)+len(body)/8)
	// framed: j's state is the walk of the latest data event, which the
	// next one may reuse (reframe).
	framed := false
	for len(body) > 0 {
		line := body
		next := len(body)
		if k := sse.IndexLineEnd(body); k >= 0 {
			line = body[:k]
			next = k + 1
			if body[k] == '\r' && k+1 < len(body) && body[k+1] == '\n' {
				next = k + 2
			}
		}
		if j.answer != nil {
			j.answer.sc.Line(line, j.answer.emit)
		}
		eol := body[len(line):next]
		body = body[next:]
		field, value, hasColon := bytes.Cut(line, []byte(":"))
		switch {
		case len(line) == 0:
		case len(field) == 0: // comment
			out = append(out, ':')
			out = j.appendTextValue(out, value)
			framed = false
			out = append(out, eol...)
			continue
		case string(field) == "data" && hasColon:
			out = append(out, "data:"...)
			v := value
			if len(v) > 0 && v[0] == ' ' {
				out = append(out, ' ')
				v = v[1:]
			}
			t := bytes.TrimSpace(v)
			switch {
			case string(t) == "[DONE]" || len(t) == 0:
				out = append(out, v...)
			case t[0] == '{' || t[0] == '[':
				var reused bool
				if framed {
					out, reused = j.reframe(out, v)
				}
				if !reused {
					out = j.redactJSON(out, v)
					framed = j.reframable()
				}
			default:
				out = j.appendTextValue(out, v)
				framed = false
			}
			out = append(out, eol...)
			continue
		case (string(field) == "event" || string(field) == "id" || string(field) == "retry") && hasColon:
			s, _ := j.r.detect(string(value))
			out = append(out, field...)
			out = append(out, ':')
			out = append(out, s...)
			out = append(out, eol...)
			continue
		default:
			out = j.appendTextValue(out, line)
			framed = false
			out = append(out, eol...)
			continue
		}
		out = append(out, line...)
		out = append(out, eol...)
	}
	if j.answer != nil {
		j.answer.walked = true
	}
	return out
}

// appendTextValue appends chained synthetic text for v.
func (j *job) appendTextValue(out, v []byte) []byte {
	j.in = v
	j.synth = j.synth[:0]
	j.edits = append(j.edits[:0], edit{start: 0, end: len(v), kind: editTail, expl: -1})
	j.segs = append(j.segs[:0], segment{text: v, key: "", edit: 0})
	j.runChain(nil)
	return j.write(out)
}

// redactForm redacts application/x-www-form-urlencoded bodies field by
// field: keys that look like field names pass the detectors, other keys
// (text posted as a form has no '=' and is all key) and the values of keys
// not kept become chained synthetic text; kept values pass the detectors.
func (j *job) redactForm(body []byte) []byte {
	out := make([]byte, 0, len(body)+16)
	for i, pair := range bytes.Split(body, []byte("&")) {
		if i > 0 {
			out = append(out, '&')
		}
		k, v, hasEq := bytes.Cut(pair, []byte("="))
		key, err := url.QueryUnescape(string(k))
		if err != nil {
			key = string(k)
		}
		var dk string
		if fieldName(key) {
			dk, _ = j.r.detect(key)
		} else { // text sent as a form: "name" is the text
			if j.r.topics != nil && j.domain == domainPrompt {
				j.r.topics.scan([]byte(key), &j.topics)
			}
			dk = string(j.appendTextValue(nil, []byte(key)))
		}
		out = append(out, url.QueryEscape(dk)...)
		if !hasEq {
			continue
		}
		out = append(out, '=')
		val, err := url.QueryUnescape(string(v))
		if err != nil {
			val = string(v)
		}
		var nv string
		if _, keep := j.r.keep.find([]string{key}); keep {
			nv, _ = j.r.detect(val)
		} else {
			if j.r.topics != nil && j.domain == domainPrompt {
				j.r.topics.scan([]byte(val), &j.topics)
			}
			nv = string(j.appendTextValue(nil, []byte(val)))
		}
		out = append(out, url.QueryEscape(nv)...)
	}
	return out
}

// maxFieldName is the longest form key kept as a field name.
const maxFieldName = 64

// fieldName reports whether a form key looks like a field name (user,
// messages[0][content], max_tokens) rather than text.
func fieldName(k string) bool {
	if len(k) > maxFieldName {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !isASCIIAlnum(c) && c != '_' && c != '-' && c != '.' && c != '[' && c != ']' {
			return false
		}
	}
	return true
}
