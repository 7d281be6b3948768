package sse

import (
	"bytes"
	"math/bits"

	"github.com/reelkit/reel/internal/jsonstr"
)

// fastClassify classifies the common shapes of streaming chunks with one
// pass over the bytes and no allocation. It answers only when it is sure the
// answer equals classifyJSON's: ok is false for anything unusual (a syntax
// error, a relevant key spelled with escapes, other case or non-ASCII bytes,
// a relevant key seen twice, a relevant value of an unexpected type, numbers
// that are not plain int64 integers, nesting deeper than maxDepth), and the
// caller then decodes with encoding/json. tok is the content span of the
// last token-position string it read (the answer depends on that string
// only through whether it is empty), for Timeline's frame.
func fastClassify(data []byte) (c Chunk, tok contentSpan, ok bool) {
	w := walker{b: data}
	var (
		usage, msgUsage usageVal
		respUsage       usageVal
		seen            uint32
	)
	ok = w.object(func(k int) bool {
		switch k {
		case keyChoices:
			return w.array(func() bool { return w.choice(&c) })
		case keyDelta:
			if w.atString() { // Responses: "delta" is the generated text itself
				return w.nonEmpty(&c.Tokens)
			}
			return w.delta(&c)
		case keyResponse: // Responses: response.completed and its kin carry response.usage
			var rseen uint32
			return w.objectOrNull(func(k int) bool {
				if k != keyUsage {
					return w.skipValue()
				}
				return w.usage(&respUsage)
			}, &rseen)
		case keyUsage:
			return w.usage(&usage)
		case keyMessage:
			return w.objectOrNull(func(k int) bool {
				if k != keyUsage {
					return w.skipValue()
				}
				return w.usage(&msgUsage)
			}, &seen)
		}
		return w.skipValue()
	}, &seen)
	if !ok {
		return Chunk{}, contentSpan{}, false
	}
	w.ws()
	if w.i != len(w.b) {
		return Chunk{}, contentSpan{}, false // trailing data
	}
	u := usage
	if !u.set {
		u = msgUsage
	}
	if !u.set {
		u = respUsage
	}
	if u.set {
		c.HasUsage = true
		c.Usage = u.usage()
	}
	return c, w.tok, true
}

// Relevant keys, as indexes into keyNames.
const (
	keyOther = iota - 1
	keyChoices
	keyDelta
	keyUsage
	keyMessage
	keyText
	keyContent
	keyReasoningContent
	keyReasoning
	keyPartialJSON
	keyToolCalls
	keyFunction
	keyArguments
	keyPromptTokens
	keyCompletionTokens
	keyInputTokens
	keyOutputTokens
	keyPromptTokensDetails
	keyInputTokensDetails
	keyCachedTokens
	keyCacheReadInputTokens
	keyCacheCreationInputTokens
	keyResponse
)

var keyNames = [...]string{"choices", "delta", "usage", "message", "text", "content",
	"reasoning_content", "reasoning", "partial_json", "tool_calls", "function", "arguments",
	"prompt_tokens", "completion_tokens", "input_tokens", "output_tokens",
	"prompt_tokens_details", "input_tokens_details", "cached_tokens",
	"cache_read_input_tokens", "cache_creation_input_tokens", "response"}

// classifyKeys are the keys fastClassify looks for.
var classifyKeys = newKeyTable(keyNames[:])

// keyTable is a set of at most 32 relevant key names, indexed by length so
// that a key is compared with the few names as long as it.
type keyTable struct {
	names []string
	byLen [32]uint32 // bit i: names[i] has this length
}

func newKeyTable(names []string) keyTable {
	t := keyTable{names: names}
	for i, n := range names {
		t.byLen[len(n)] |= 1 << i
	}
	return t
}

// find returns the index of key in the table (keyOther when it is not
// there); ok is false for a key that matches a name only without regard to
// case, which encoding/json would take for it.
func (t *keyTable) find(key []byte) (k int, ok bool) {
	if len(key) >= len(t.byLen) {
		return keyOther, true
	}
	for set := t.byLen[len(key)]; set != 0; set &= set - 1 {
		i := bits.TrailingZeros32(set)
		if name := t.names[i]; bytes.EqualFold(key, []byte(name)) {
			return i, string(key) == name
		}
	}
	return keyOther, true
}

// maxDepth bounds the nesting the fast path follows.
const maxDepth = 64

type walker struct {
	b     []byte
	i     int
	depth int
	tok   contentSpan // the last string nonEmpty read
}

// contentSpan is where a string value's content (between its quotes) lies
// in the walked data; set is false when there is none.
type contentSpan struct {
	from, to int
	set      bool
}

type usageVal struct {
	set bool
	usageFields
}

// optInt reads an integer or null; has says which (null is "not
// reported", as encoding/json decodes it into a nil pointer).
func (w *walker) optInt(dst *int64, has *bool) bool {
	w.ws()
	if w.literal("null") {
		*dst, *has = 0, false
		return true
	}
	*has = true
	return w.int(dst)
}

// details reads a prompt_tokens_details or input_tokens_details object (or
// null) for its cached_tokens.
func (w *walker) details(dst *int64, has *bool) bool {
	var seen uint32
	return w.objectOrNull(func(k int) bool {
		if k != keyCachedTokens {
			return w.skipValue()
		}
		return w.optInt(dst, has)
	}, &seen)
}

func (w *walker) choice(c *Chunk) bool {
	var seen uint32
	return w.objectOrNull(func(k int) bool {
		switch k {
		case keyDelta:
			return w.delta(c)
		case keyText:
			return w.nonEmpty(&c.Tokens)
		}
		return w.skipValue()
	}, &seen)
}

func (w *walker) delta(c *Chunk) bool {
	var seen uint32
	return w.objectOrNull(func(k int) bool {
		switch k {
		case keyContent, keyReasoningContent, keyReasoning, keyText, keyPartialJSON:
			return w.nonEmpty(&c.Tokens)
		case keyToolCalls:
			return w.array(func() bool {
				var seen uint32
				return w.objectOrNull(func(k int) bool {
					if k != keyFunction {
						return w.skipValue()
					}
					var seen uint32
					return w.objectOrNull(func(k int) bool {
						if k != keyArguments {
							return w.skipValue()
						}
						return w.nonEmpty(&c.Tokens)
					}, &seen)
				}, &seen)
			})
		}
		return w.skipValue()
	}, &seen)
}

func (w *walker) usage(u *usageVal) bool {
	w.ws()
	if w.literal("null") {
		return true
	}
	u.set = true
	var seen uint32
	return w.object(func(k int) bool {
		switch k {
		case keyPromptTokens:
			return w.int(&u.prompt)
		case keyCompletionTokens:
			return w.int(&u.completion)
		case keyInputTokens:
			return w.int(&u.input)
		case keyOutputTokens:
			return w.int(&u.output)
		case keyCacheCreationInputTokens:
			return w.int(&u.cacheCreation)
		case keyCacheReadInputTokens:
			return w.optInt(&u.cacheRead, &u.hasCacheRead)
		case keyPromptTokensDetails:
			return w.details(&u.promptCached, &u.hasPromptCached)
		case keyInputTokensDetails:
			return w.details(&u.inputCached, &u.hasInputCached)
		}
		return w.skipValue()
	}, &seen)
}

// atString reports whether the next value is a string.
func (w *walker) atString() bool {
	w.ws()
	return w.i < len(w.b) && w.b[w.i] == '"'
}

// nonEmpty skips a value and sets *tokens when it is a non-empty string or
// array, as the nonEmpty decoder does.
func (w *walker) nonEmpty(tokens *bool) bool {
	w.ws()
	start := w.i
	if !w.skipValue() {
		return false
	}
	v := w.b[start:w.i]
	if len(v) > 2 && (v[0] == '"' || v[0] == '[') {
		*tokens = true
	}
	if v[0] == '"' {
		w.tok = contentSpan{from: start + 1, to: w.i - 1, set: true}
	}
	return true
}

// int reads a plain integer (or null) that fits in an int64.
func (w *walker) int(dst *int64) bool {
	w.ws()
	if w.literal("null") {
		return true
	}
	neg := false
	if w.i < len(w.b) && w.b[w.i] == '-' {
		neg = true
		w.i++
	}
	start := w.i
	var n uint64
	for w.i < len(w.b) && w.b[w.i] >= '0' && w.b[w.i] <= '9' {
		if w.i-start >= 18 {
			return false // may not fit: let encoding/json decide
		}
		n = n*10 + uint64(w.b[w.i]-'0')
		w.i++
	}
	digits := w.i - start
	if digits == 0 || (digits > 1 && w.b[start] == '0') {
		return false
	}
	if w.i < len(w.b) {
		switch w.b[w.i] {
		case '.', 'e', 'E':
			return false
		}
	}
	*dst = int64(n)
	if neg {
		*dst = -*dst
	}
	return true
}

// open enters a container that starts with opening, within maxDepth;
// empty reports that it closed at once (and was left again).
func (w *walker) open(opening, closing byte) (empty, ok bool) {
	w.ws()
	if w.i >= len(w.b) || w.b[w.i] != opening {
		return false, false
	}
	if w.depth++; w.depth > maxDepth {
		return false, false
	}
	w.i++
	w.ws()
	if w.i < len(w.b) && w.b[w.i] == closing {
		w.i++
		w.depth--
		return true, true
	}
	return false, true
}

// next consumes what follows a member or element: ',' (more follow) or the
// closing byte (done, and the container is left).
func (w *walker) next(closing byte) (done, ok bool) {
	w.ws()
	if w.i >= len(w.b) {
		return false, false
	}
	switch w.b[w.i] {
	case ',':
		w.i++
		return false, true
	case closing:
		w.i++
		w.depth--
		return true, true
	}
	return false, false
}

// object walks an object, calling field with the index of each key in
// keyNames (keyOther for irrelevant ones) positioned before its value; field
// must consume it. seen guards against duplicate relevant keys (one bit per
// key index).
func (w *walker) object(field func(k int) bool, seen *uint32) bool {
	return w.objectOf(&classifyKeys, field, seen)
}

// objectOf is object with the relevant keys of names.
func (w *walker) objectOf(names *keyTable, field func(k int) bool, seen *uint32) bool {
	if empty, ok := w.open('{', '}'); empty || !ok {
		return ok
	}
	for {
		w.ws()
		key, ok := w.key()
		if !ok {
			return false
		}
		w.ws()
		if w.i >= len(w.b) || w.b[w.i] != ':' {
			return false
		}
		w.i++
		k, ok := names.find(key)
		if !ok {
			return false // encoding/json matches keys case-insensitively
		}
		if k != keyOther {
			bit := uint32(1) << k
			if *seen&bit != 0 {
				return false
			}
			*seen |= bit
		}
		if !field(k) {
			return false
		}
		if done, ok := w.next('}'); done || !ok {
			return ok
		}
	}
}

func (w *walker) objectOrNull(field func(k int) bool, seen *uint32) bool {
	return w.objectOrNullOf(&classifyKeys, field, seen)
}

func (w *walker) objectOrNullOf(names *keyTable, field func(k int) bool, seen *uint32) bool {
	w.ws()
	if w.literal("null") {
		return true
	}
	return w.objectOf(names, field, seen)
}

// array walks an array (or null) of elements, each consumed by elem.
func (w *walker) array(elem func() bool) bool {
	w.ws()
	if w.literal("null") {
		return true
	}
	if empty, ok := w.open('[', ']'); empty || !ok {
		return ok
	}
	for {
		if !elem() {
			return false
		}
		if done, ok := w.next(']'); done || !ok {
			return ok
		}
	}
}

// key reads an object key; keys with escapes or non-ASCII bytes are left to
// encoding/json.
func (w *walker) key() ([]byte, bool) {
	if w.i >= len(w.b) || w.b[w.i] != '"' {
		return nil, false
	}
	start := w.i + 1
	for j := start; j < len(w.b); j++ {
		switch c := w.b[j]; {
		case c == '"':
			w.i = j + 1
			return w.b[start:j], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return nil, false
		}
	}
	return nil, false
}

func (w *walker) ws() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

func (w *walker) literal(s string) bool {
	if len(w.b)-w.i >= len(s) && string(w.b[w.i:w.i+len(s)]) == s {
		w.i += len(s)
		return true
	}
	return false
}

// skipValue skips one JSON value, checking its syntax.
func (w *walker) skipValue() bool {
	w.ws()
	if w.i >= len(w.b) {
		return false
	}
	switch c := w.b[w.i]; {
	case c == '"':
		return w.skipString()
	case c == '{':
		var seen uint32
		return w.object(func(int) bool { return w.skipValue() }, &seen)
	case c == '[':
		return w.array(w.skipValue)
	case c == 't':
		return w.literal("true")
	case c == 'f':
		return w.literal("false")
	case c == 'n':
		return w.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return w.skipNumber()
	}
	return false
}

func (w *walker) skipString() bool {
	for j := w.i + 1; j < len(w.b); j++ {
		if j += jsonstr.PlainRun(w.b[j:]); j == len(w.b) {
			break
		}
		switch c := w.b[j]; {
		case c == '"':
			w.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			var ok bool
			if j, ok = jsonstr.SkipEscape(w.b, j); !ok {
				return false
			}
		}
	}
	return false
}

// skipNumber checks the JSON number grammar.
func (w *walker) skipNumber() bool {
	b, i := w.b, w.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		s := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - s
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	w.i = i
	return true
}
