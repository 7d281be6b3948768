package jsonstr

import "encoding/binary"

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
	for prefix+8 <= n && binary.LittleEndian.Uint64(prev[prefix:]) == binary.LittleEndian.Uint64(b[prefix:]) {
		prefix += 8
	}
	for prefix < n && prev[prefix] == b[prefix] {
		prefix++
	}
	rest := n - prefix
	for suffix+8 <= rest && binary.LittleEndian.Uint64(prev[len(prev)-suffix-8:]) == binary.LittleEndian.Uint64(b[len(b)-suffix-8:]) {
		suffix += 8
	}
	for suffix < rest && prev[len(prev)-suffix-1] == b[len(b)-suffix-1] {
		suffix++
	}
	return prefix, suffix
}

// ValidContent reports whether inner is the well-formed content of a JSON
// string (what lies between its quotes): no quote or control character
// outside an escape, and every escape one of \" \\ \/ \b \f \n \r \t or
// \u with four hex digits. A trailing lone backslash (which would escape
// the closing quote) is not well-formed. UTF-8 validity is not checked:
// readers treat invalid bytes alike wherever they sit.
func ValidContent(inner []byte) bool {
	for i := 0; i < len(inner); i++ {
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
