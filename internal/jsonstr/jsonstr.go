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
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return utf8.Valid(b)
}
