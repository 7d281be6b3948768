package redact

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// maxJSONDepth bounds nesting; deeper input is redacted as text from there.
const maxJSONDepth = 512

type editKind uint8

const (
	editSynth editKind = iota // a string whose new content is synth[a:b], already JSON-escaped
	editText                  // a string whose new content is text[a:b]
	editRaw                   // a number replaced by text[a:b]
	editTail                  // unparsable remainder replaced by synth[a:b], unquoted
)

// edit replaces in[start:end] in the output.
type edit struct {
	start, end int
	kind       editKind
	a, b       int
	expl       int // index into job.expl, or -1
}

// segment is a string in prompt scope, in document order: a view of the
// input, or of doc for unescaped strings. The chain absorbs it under its
// key and, unless edit is -1 (a kept value), turns it into synthetic text
// for edits[edit].
type segment struct {
	text []byte
	key  string
	edit int
}

// job holds one redaction's scratch state; pooled per Redactor.
type job struct {
	r         *Redactor
	in        []byte
	pos       int
	errPos    int
	path      []string
	doc       []byte // decoded prompt text of the current document
	synth     []byte // synthetic text
	text      []byte // detector replacements
	scratch   []byte // decoded strings
	edits     []edit
	segs      []segment
	domain    byte      // domainPrompt or domainResponse
	chain     chain     // the document's chain (prompt scope)
	field     chain     // scratch chain for a string keyed by its own value
	allPrompt bool      // responses: every string is in prompt scope
	topics    topicScan // keyword hits over the raw prompt (requests)
	explain   bool
	expl      []Explanation
	explPath  []string             // keys and "[i]" indices, only while explaining
	rules     map[string]fieldRule // classification by path, kept across uses
	pathKey   []byte
	answer    *answerScan // an event stream's lines go here too (see redactBody)
}

// fieldRule is how a string at one path is handled.
type fieldRule struct {
	keep, prompt bool
	chained      bool   // in prompt scope: part of the chain's input, kept or not
	rule         string // the matching rule, for explanations
}

// classify returns how a string at the current path is handled, from a
// per-job cache: a body repeats a handful of paths many times.
func (j *job) classify() fieldRule {
	j.pathKey = j.pathKey[:0]
	for _, k := range j.path {
		j.pathKey = append(j.pathKey, k...)
		j.pathKey = append(j.pathKey, 0)
	}
	if fr, ok := j.rules[string(j.pathKey)]; ok {
		return fr
	}
	var fr fieldRule
	promptRule, inPrompt := j.r.prompt.find(j.path)
	if rule, ok := j.r.keep.find(j.path); ok {
		fr = fieldRule{keep: true, chained: inPrompt, rule: rule}
	} else if inPrompt {
		fr = fieldRule{prompt: true, chained: true, rule: promptRule}
	}
	if j.rules == nil || len(j.rules) > 4096 {
		j.rules = make(map[string]fieldRule)
	}
	j.rules[string(j.pathKey)] = fr
	return fr
}

func (r *Redactor) getJob(domain byte) *job {
	j := r.jobs.Get().(*job)
	j.r = r
	j.domain = domain
	j.chain.reset(r.chainKey(domain), r.blockBytes, domain == domainPrompt)
	j.allPrompt = domain == domainResponse
	j.topics.reset(r.topics)
	j.explain = false
	j.expl = j.expl[:0]
	return j
}

func (r *Redactor) putJob(j *job) {
	j.in, j.answer = nil, nil
	clear(j.segs) // do not keep the caller's body alive from the pool
	j.segs = j.segs[:0]
	j.path = j.path[:0]
	if cap(j.doc) > 1<<22 || cap(j.synth) > 1<<22 {
		j.doc, j.synth = nil, nil // do not pin huge buffers in the pool
	}
	j.r.jobs.Put(j)
}

// RedactJSON redacts a request body as JSON and returns the new body.
// Input that is not JSON from some point on is redacted as text from that
// point; valid JSON always yields valid JSON of the same shape.
func (r *Redactor) RedactJSON(body []byte) []byte {
	j := r.getJob(domainPrompt)
	defer r.putJob(j)
	return j.redactJSON(nil, body)
}

// redactJSON parses one document, chains its prompt text and appends the
// redacted document to out.
func (j *job) redactJSON(out, in []byte) []byte {
	j.in, j.pos, j.errPos = in, 0, -1
	j.doc, j.synth, j.text = j.doc[:0], j.synth[:0], j.text[:0]
	j.edits, j.segs, j.path, j.explPath = j.edits[:0], j.segs[:0], j.path[:0], j.explPath[:0]
	for {
		j.skipWS()
		if j.pos >= len(in) || !j.value(0) {
			break
		}
	}
	if j.errPos >= 0 && j.errPos < len(in) {
		j.edits = append(j.edits, edit{start: j.errPos, end: len(in), kind: editTail, expl: j.note("", "text", "not JSON from here: synthetic text", "", in[j.errPos:])})
		j.segs = append(j.segs, segment{text: in[j.errPos:], key: "", edit: len(j.edits) - 1})
	}
	// Keywords are found in the synthesized values as they are synthesized
	// (kept values, roles and tool names, name no topic).
	var topics *topicIndex
	if !j.allPrompt {
		topics = j.r.topics
	}
	j.runChain(topics)
	return j.write(out)
}

// runChain feeds every segment to the chain in document order and
// synthesizes the ones that are not kept, recording topics' keywords in
// those (nil: none).
func (j *job) runChain(topics *topicIndex) {
	for _, s := range j.segs {
		j.chain.field(s.key)
		if s.edit < 0 {
			j.chain.absorb(s.text)
			continue
		}
		start := len(j.synth)
		e := &j.edits[s.edit]
		j.synth = j.chain.synthesize(j.synth, s.text, e.kind == editSynth, topics, &j.topics)
		e.a, e.b = start, len(j.synth)
	}
}

// lastKey returns the key a string sits under: the last key of its path,
// "" at the root.
func (j *job) lastKey() string {
	if len(j.path) == 0 {
		return ""
	}
	return j.path[len(j.path)-1]
}

// chainKept adds a kept string in prompt scope to the chain's input (as
// the raw value: what production's engine saw).
func (j *job) chainKept(raw []byte, esc bool) bool {
	text := raw
	if esc {
		a := len(j.doc)
		var ok bool
		if j.doc, ok = appendDecoded(j.doc, raw); !ok {
			j.doc = j.doc[:a]
			return false
		}
		text = j.doc[a:]
	}
	j.segs = append(j.segs, segment{text: text, key: j.lastKey(), edit: -1})
	return true
}

// write assembles the output: input bytes between edits, edits in place.
func (j *job) write(out []byte) []byte {
	in := j.in
	if out == nil {
		out = make([]byte, 0, len(in)+len(in)/8+16)
	}
	prev := 0
	for _, e := range j.edits {
		out = append(out, in[prev:e.start]...)
		switch e.kind {
		case editSynth:
			out = append(out, '"')
			out = append(out, j.synth[e.a:e.b]...)
			out = append(out, '"')
		case editText:
			out = append(out, '"')
			out = appendJSONEscaped(out, j.text[e.a:e.b])
			out = append(out, '"')
		case editRaw:
			out = append(out, j.text[e.a:e.b]...)
		case editTail:
			out = append(out, j.synth[e.a:e.b]...)
		}
		if e.expl >= 0 {
			var after []byte
			switch e.kind {
			case editSynth:
				after, _ = appendDecoded(nil, j.synth[e.a:e.b])
			case editTail:
				after = j.synth[e.a:e.b]
			default:
				after = j.text[e.a:e.b]
			}
			j.expl[e.expl].After = string(after)
		}
		prev = e.end
	}
	return append(out, in[prev:]...)
}

func (j *job) fail(pos int) bool {
	if j.errPos < 0 {
		j.errPos = pos
	}
	return false
}

func (j *job) skipWS() {
	for j.pos < len(j.in) {
		switch j.in[j.pos] {
		case ' ', '\t', '\n', '\r':
			j.pos++
		default:
			return
		}
	}
}

func (j *job) value(depth int) bool {
	j.skipWS()
	if j.pos >= len(j.in) {
		return j.fail(j.pos)
	}
	switch c := j.in[j.pos]; {
	case c == '{':
		return j.object(depth + 1)
	case c == '[':
		return j.array(depth + 1)
	case c == '"':
		return j.stringValue()
	case c == 't':
		return j.literal("true")
	case c == 'f':
		return j.literal("false")
	case c == 'n':
		return j.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return j.number()
	}
	return j.fail(j.pos)
}

func (j *job) object(depth int) bool {
	if depth > maxJSONDepth {
		return j.fail(j.pos)
	}
	j.pos++
	j.skipWS()
	if j.pos < len(j.in) && j.in[j.pos] == '}' {
		j.pos++
		return true
	}
	for {
		j.skipWS()
		if j.pos >= len(j.in) || j.in[j.pos] != '"' {
			return j.fail(j.pos)
		}
		ks := j.pos
		end, esc, ok := j.scanString(ks)
		if !ok {
			return j.fail(ks)
		}
		key, ok := j.decode(j.in[ks+1:end-1], esc)
		if !ok {
			return j.fail(ks)
		}
		if needsScan(key) {
			if repl, changed := j.r.detect(string(key)); changed {
				a := len(j.text)
				j.text = append(j.text, repl...)
				j.edits = append(j.edits, edit{start: ks, end: end, kind: editText, a: a, b: len(j.text), expl: j.note(" (key)", "detect", "PII in an object key", "", key)})
			}
		}
		j.pos = end
		j.skipWS()
		if j.pos >= len(j.in) || j.in[j.pos] != ':' {
			return j.fail(j.pos)
		}
		j.pos++
		j.path = append(j.path, keyString(key, esc))
		if j.explain {
			j.explPath = append(j.explPath, "."+string(key))
		}
		ok = j.value(depth)
		j.path = j.path[:len(j.path)-1]
		if j.explain {
			j.explPath = j.explPath[:len(j.explPath)-1]
		}
		if !ok {
			return false
		}
		if done, ok := j.next('}'); done || !ok {
			return ok
		}
	}
}

func (j *job) array(depth int) bool {
	if depth > maxJSONDepth {
		return j.fail(j.pos)
	}
	j.pos++
	j.skipWS()
	if j.pos < len(j.in) && j.in[j.pos] == ']' {
		j.pos++
		return true
	}
	for i := 0; ; i++ {
		if j.explain {
			j.explPath = append(j.explPath, "["+strconv.Itoa(i)+"]")
		}
		ok := j.value(depth)
		if j.explain {
			j.explPath = j.explPath[:len(j.explPath)-1]
		}
		if !ok {
			return false
		}
		if done, ok := j.next(']'); done || !ok {
			return ok
		}
	}
}

// next consumes what follows a member or element: a ',' (more follow) or
// the container's closing byte (done). Anything else fails the document.
func (j *job) next(closing byte) (done, ok bool) {
	j.skipWS()
	if j.pos >= len(j.in) {
		return false, j.fail(j.pos)
	}
	switch j.in[j.pos] {
	case ',':
		j.pos++
		return false, true
	case closing:
		j.pos++
		return true, true
	}
	return false, j.fail(j.pos)
}

func (j *job) literal(lit string) bool {
	if !bytes.HasPrefix(j.in[j.pos:], []byte(lit)) {
		return j.fail(j.pos)
	}
	j.pos += len(lit)
	return true
}

// skipDigits returns the index after the run of ASCII digits at p.
func skipDigits(in []byte, p int) int {
	for p < len(in) && in[p] >= '0' && in[p] <= '9' {
		p++
	}
	return p
}

func (j *job) number() bool {
	in, s := j.in, j.pos
	p := s
	if p < len(in) && in[p] == '-' {
		p++
	}
	ds := p
	if p = skipDigits(in, p); p == ds {
		return j.fail(s)
	}
	intEnd := p
	if p < len(in) && in[p] == '.' {
		q := p + 1
		if p = skipDigits(in, q); p == q {
			return j.fail(s)
		}
	}
	if p < len(in) && (in[p] == 'e' || in[p] == 'E') {
		p++
		if p < len(in) && (in[p] == '+' || in[p] == '-') {
			p++
		}
		q := p
		if p = skipDigits(in, q); p == q {
			return j.fail(s)
		}
	}
	if p < len(in) && !isDelim(in[p]) {
		return j.fail(s)
	}
	if p == intEnd && intEnd-ds >= 11 {
		if repl, ok := j.r.detectDigits(string(in[ds:intEnd])); ok {
			a := len(j.text)
			j.text = append(j.text, in[s:ds]...)
			j.text = append(j.text, repl...)
			j.edits = append(j.edits, edit{start: s, end: p, kind: editRaw, a: a, b: len(j.text), expl: j.note("", "detect", "PII in a number", "", in[s:p])})
		}
	}
	j.pos = p
	return true
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// stringValue handles a string in value position: kept, chained into the
// prompt, or synthesized from its own value.
func (j *job) stringValue() bool {
	s := j.pos
	end, esc, ok := j.scanString(s)
	if !ok {
		return j.fail(s)
	}
	raw := j.in[s+1 : end-1]
	j.pos = end
	fr := j.classify()
	if rule, keep := fr.rule, fr.keep; keep {
		val, ok := j.decode(raw, esc)
		if !ok {
			j.pos = s
			return j.fail(s)
		}
		if (fr.chained || j.allPrompt) && !j.chainKept(raw, esc) {
			j.pos = s
			return j.fail(s)
		}
		if needsScan(val) {
			if repl, changed := j.r.detect(string(val)); changed {
				a := len(j.text)
				j.text = append(j.text, repl...)
				j.edits = append(j.edits, edit{start: s, end: end, kind: editText, a: a, b: len(j.text), expl: j.note("", "detect", "kept by rule %s; PII replaced", rule, val)})
				return true
			}
		}
		if j.explain {
			j.note("", "keep", "kept by rule %s", rule, val)
			j.expl[len(j.expl)-1].After = string(val)
		}
		return true
	}
	rule, prompt := fr.rule, fr.prompt || j.allPrompt
	if prompt {
		text := raw
		if esc {
			a := len(j.doc)
			var ok bool
			if j.doc, ok = appendDecoded(j.doc, raw); !ok {
				j.doc = j.doc[:a]
				j.pos = s
				return j.fail(s)
			}
			text = j.doc[a:]
		}
		why := "prompt text (rule %s): chained synthetic text"
		if j.allPrompt {
			why = "response text: chained synthetic text"
		}
		j.edits = append(j.edits, edit{start: s, end: end, kind: editSynth, expl: j.note("", "synthetic", why, rule, text)})
		j.segs = append(j.segs, segment{text: text, key: j.lastKey(), edit: len(j.edits) - 1})
		return true
	}
	val, ok := j.decode(raw, esc)
	if !ok {
		j.pos = s
		return j.fail(s)
	}
	if j.r.topics != nil && !j.allPrompt {
		j.r.topics.scan(val, &j.topics)
	}
	a := len(j.synth)
	j.synth = j.r.synthesizeField(&j.field, j.synth, val, true)
	j.edits = append(j.edits, edit{start: s, end: end, kind: editSynth, a: a, b: len(j.synth), expl: j.note("", "synthetic", "not allow-listed: synthetic text keyed by the field's value", "", val)})
	return true
}

// note records an explanation when explaining; it returns its index or -1.
// why may hold one %s, filled with rule.
func (j *job) note(suffix, action, why, rule string, before []byte) int {
	if !j.explain {
		return -1
	}
	why = strings.Replace(why, "%s", rule, 1)
	j.expl = append(j.expl, Explanation{Field: j.pathString() + suffix, Action: action, Why: why, Before: string(before)})
	return len(j.expl) - 1
}

// pathString names the current field for explanations: keys and array
// indices ("messages[1].content"), "$" at the root.
func (j *job) pathString() string {
	if len(j.explPath) == 0 {
		return "$"
	}
	return strings.TrimPrefix(strings.Join(j.explPath, ""), ".")
}

// scanString finds the end (one past the closing quote) of the string at
// in[s], and whether it has escapes.
func (j *job) scanString(s int) (end int, esc, ok bool) {
	in := j.in
	p := s + 1
	for {
		k := bytes.IndexByte(in[p:], '"')
		if k < 0 {
			return 0, false, false
		}
		q := p + k
		if bytes.IndexByte(in[p:q], '\\') < 0 {
			return q + 1, esc, true
		}
		// Walk the escapes up to and including this quote.
		esc = true
		i := p
		for i < q {
			if in[i] == '\\' {
				i += 2
				continue
			}
			i++
		}
		if i == q { // the quote is not escaped
			return q + 1, true, true
		}
		p = q + 1 // escaped quote: keep looking
	}
}

// decode returns the string's content, unescaped when esc.
func (j *job) decode(raw []byte, esc bool) ([]byte, bool) {
	if !esc {
		return raw, true
	}
	var ok bool
	j.scratch, ok = appendDecoded(j.scratch[:0], raw)
	return j.scratch, ok
}

// keyString turns a key into a path element; escaped keys are copied since
// the scratch buffer is reused.
func keyString(key []byte, esc bool) string {
	if esc {
		return string(key)
	}
	return unsafeString(key)
}

// unsafeString views b as a string without copying; b must not change while
// the string is in use (the input body is never modified).
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// appendDecoded appends the unescaped JSON string content raw to dst.
func appendDecoded(dst, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			k := bytes.IndexByte(raw[i:], '\\')
			if k < 0 {
				return append(dst, raw[i:]...), true
			}
			dst = append(dst, raw[i:i+k]...)
			i += k
			continue
		}
		if i+1 >= len(raw) {
			return dst, false
		}
		switch raw[i+1] {
		case '"', '\\', '/':
			dst = append(dst, raw[i+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(raw[i+2:])
			if !ok {
				return dst, false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2, ok := hex4(raw[i+2:])
					if d := utf16.DecodeRune(r, r2); ok && d != utf8.RuneError {
						dst = utf8.AppendRune(dst, d)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return dst, false
		}
		i += 2
	}
	return dst, true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// appendJSONEscaped appends s as JSON string content.
func appendJSONEscaped(dst, s []byte) []byte {
	start := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; jsonNeedsEscape[c] {
			dst = append(dst, s[start:i]...)
			dst = appendJSONEscapedByte(dst, c)
			start = i + 1
		}
	}
	return append(dst, s[start:]...)
}

// jsonNeedsEscape marks the bytes JSON string content escapes: controls,
// '"' and '\\'.
var jsonNeedsEscape = func() (t [256]bool) {
	for c := range t {
		t[c] = c < 0x20 || c == '"' || c == '\\'
	}
	return t
}()

// appendJSONEscapedByte appends the escape of c, a jsonNeedsEscape byte.
func appendJSONEscapedByte(dst []byte, c byte) []byte {
	const hexDigits = "0123456789abcdef"
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}
