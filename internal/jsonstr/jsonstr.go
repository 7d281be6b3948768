// Package jsonstr decodes one JSON string value, the way encoding/json
// decodes it into a Go string, without encoding/json's per-call cost for
// the common string that holds no escapes. The recorder and the redactor
// decode message contents with it inside their own UnmarshalJSON methods
// and turn-link walks, where a nested json.Unmarshal would scan each value
// a second time. It also tells when a stream's event repeats its
// predecessor but for one string's content (Splice, ValidContent), so that
// the event need not be walked again.
package jsonstr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"unicode/utf8"
)

// Decode returns the string raw encodes; raw is a whole JSON string value,
// quotes included (whitespace around it allowed). A string without
// backslashes whose bytes are valid UTF-8 and free of control characters
// is its own content; any other input is decoded by encoding/json, errors
// included, so Decode agrees with json.Unmarshal into a string
// (FuzzDecode).
func Decode(raw []byte) (string, error) {
	if inner, ok := plainContent(raw); ok {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// DecodeBytes is Decode for a reader that uses the text at once: the
// content of a plain string is returned as a view of raw, without a copy.
func DecodeBytes(raw []byte) ([]byte, error) {
	if inner, ok := plainContent(raw); ok {
		return inner, nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return []byte(s), err
}

// plainContent returns the content of raw, a JSON string value, when it
// is its own decoding (see plain).
func plainContent(raw []byte) ([]byte, bool) {
	b := bytes.Trim(raw, jsonSpace)
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' && plain(b[1:len(b)-1]) {
		return b[1 : len(b)-1], true
	}
	return nil, false
}

// jsonSpace is what JSON counts as whitespace; bytes.TrimSpace would also
// take Unicode's (\v, \f, U+0085, U+00A0), which encoding/json rejects.
const jsonSpace = " \t\n\r"

// plain reports whether a string's content needs no decoding: no
// backslash, no quote (the closing quote is the last byte), no control
// character and valid UTF-8.
func plain(b []byte) bool {
	return PlainRun(b) == len(b) && utf8.Valid(b)
}

// PlainRun is the length of the run at the start of b, a JSON string's
// content, that holds no quote, backslash or control character: what a
// reader may pass over to the string's next byte of interest. It tests
// eight bytes at a time (the bytes below 0x20 and those equal to '"' or
// '\\' are found with the borrow of a subtraction, as in Hacker's Delight
// 6-1), so a long text costs about a sixth of a byte loop.
func PlainRun(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, e := x^(ones*'"'), x^(ones*'\\')
		if ((x-ones*0x20)&^x|(q-ones)&^q|(e-ones)&^e)&highs != 0 {
			break // the word holds one: find it byte by byte
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c == '"' || c == '\\' {
			break
		}
	}
	return i
}
