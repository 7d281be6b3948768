package jsonstr

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// The events of one stream share their framing: a chat chunk repeats its
// id, model and nesting and differs from the one before only in the text
// of one string (the token). Splice and ValidContent let a reader that has
// walked one event recognise the next as "the same, with that string's
// content replaced" and reuse what it learned, instead of walking the
// JSON again. Equal framing around a well-formed string content leaves a
// left-to-right JSON parser in the same state before, at the end of and
// after the string, so only what the reader took from that string's value
// can differ.

// Splice compares b with prev: prefix is the length of their longest
// common prefix and suffix that of the longest common suffix of what
// remains (prefix+suffix never exceeds either length), so that
// prev[prefix:len(prev)-suffix] became b[prefix:len(b)-suffix].
func Splice(prev, b []byte) (prefix, suffix int) {
	n := min(len(prev), len(b))
	if len(prev) == len(b) && bytes.Equal(prev, b) {
		return n, 0 // a stream's repeated event: one vectorised compare
	}
	prefix = commonPrefix(prev[:n], b[:n])
	rest := n - prefix
	return prefix, commonSuffix(prev[len(prev)-rest:], b[len(b)-rest:])
}

// commonPrefix is the length of the longest common prefix of a and b,
// which are of one length: eight bytes at a time, the first differing
// byte of a word found from the lowest set bit of the words' XOR.
func commonPrefix(a, b []byte) int {
	i := 0
	for ; i+8 <= len(a) && i+8 <= len(b); i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for ; i < len(a) && i < len(b) && a[i] == b[i]; i++ {
	}
	return i
}

// commonSuffix is the length of the longest common suffix of a and b,
// which are of one length, as commonPrefix finds a prefix.
func commonSuffix(a, b []byte) int {
	n := 0
	for ; n+8 <= len(a) && n+8 <= len(b); n += 8 {
		if x := binary.LittleEndian.Uint64(a[len(a)-n-8:]) ^ binary.LittleEndian.Uint64(b[len(b)-n-8:]); x != 0 {
			return n + bits.LeadingZeros64(x)/8
		}
	}
	for ; n < len(a) && n < len(b) && a[len(a)-n-1] == b[len(b)-n-1]; n++ {
	}
	return n
}

// ValidContent reports whether inner is the well-formed content of a JSON
// string (what lies between its quotes): no quote or control character
// outside an escape, and every escape one of \" \\ \/ \b \f \n \r \t or
// \u with four hex digits. A trailing lone backslash (which would escape
// the closing quote) is not well-formed. UTF-8 validity is not checked:
// readers treat invalid bytes alike wherever they sit.
func ValidContent(inner []byte) bool {
	for i := 0; i < len(inner); i++ {
		if i += PlainRun(inner[i:]); i == len(inner) {
			break
		}
		switch c := inner[i]; {
		case c == '"' || c < 0x20:
			return false
		case c == '\\':
			var ok bool
			if i, ok = SkipEscape(inner, i); !ok {
				return false
			}
		}
	}
	return true
}

// SkipEscape checks the escape that starts with the backslash at b[i]: one
// of \" \\ \/ \b \f \n \r \t, or \u with four hex digits. It returns the
// index of the escape's last byte; ok is false when b holds no such escape
// at i.
func SkipEscape(b []byte, i int) (last int, ok bool) {
	if i+1 >= len(b) {
		return i, false
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 1, true
	case 'u':
		if i+6 > len(b) {
			return i, false
		}
		for _, h := range b[i+2 : i+6] {
			if !isHex(h) {
				return i, false
			}
		}
		return i + 5, true
	}
	return i, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
