package recorder

import (
	"bytes"
	"encoding/json"
	"strings"
)

// DefaultSessionFields are the request-body fields --session-field may name
// most often: OpenAI's `user`, a `conversation_id`, Anthropic's
// `metadata.user_id`. None is read unless configured: a user id groups a
// user's parallel conversations, which is not always what a session should
// mean (see replay --sessions).
var DefaultSessionFields = []string{"user", "conversation_id", "metadata.user_id"}

// sessionFromBody returns the first of fields (dotted paths into a JSON
// object, "metadata.user_id") that holds a string or a number in body; ""
// when none does or body is not a JSON object. It reads the raw body, so it
// runs before redaction; the redactor then pseudonymises the session.
func sessionFromBody(body []byte, fields []string) string {
	if len(fields) == 0 || !looksJSON("", body) {
		return ""
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	for _, f := range fields {
		if v := fieldValue(doc, strings.Split(f, ".")); v != "" {
			return v
		}
	}
	return ""
}

func fieldValue(doc map[string]json.RawMessage, path []string) string {
	raw, ok := doc[path[0]]
	if !ok {
		return ""
	}
	raw = bytes.TrimSpace(raw)
	if len(path) > 1 {
		var sub map[string]json.RawMessage
		if json.Unmarshal(raw, &sub) != nil {
			return ""
		}
		return fieldValue(sub, path[1:])
	}
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return ""
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}
