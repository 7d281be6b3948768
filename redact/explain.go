package redact

import (
	"fmt"
	"io"
	"strings"
)

// Explanation says what one field of a body became and why.
type Explanation struct {
	Field  string // path like "messages[1].content"; "$" for the root, " (key)" for an object key
	Action string // keep, detect, synthetic, text
	Why    string // why the action applies, e.g. "not allow-listed: synthetic text keyed by the field's value"
	Before string // the field's text before redaction
	After  string // the field's text after redaction
}

// Explain redacts a request body (response when response is true) the way
// RedactExchange would and reports, field by field, what each became and
// why.
func (r *Redactor) Explain(contentType string, body []byte, response bool) (Body, []Explanation, error) {
	domain := byte(domainPrompt)
	if response {
		domain = domainResponse
	}
	j := r.getJob(domain)
	defer r.putJob(j)
	j.explain = true
	kind, err := kindOf(contentType, body)
	if err != nil {
		return Body{}, nil, err
	}
	b, err := j.body(kind, body)
	expl := append([]Explanation(nil), j.expl...)
	return b, expl, err
}

// WriteExplanation prints explanations as a readable list.
func WriteExplanation(w io.Writer, b Body, expl []Explanation) error {
	var sb strings.Builder
	for _, e := range expl {
		fmt.Fprintf(&sb, "%s\n  action: %s (%s)\n  before: %s\n  after:  %s\n", e.Field, e.Action, e.Why, clip(e.Before), clip(e.After))
	}
	fmt.Fprintf(&sb, "prefix_hashes: %d blocks %v\n", len(b.PrefixHashes), b.PrefixHashes)
	fmt.Fprintf(&sb, "topic: %q\n", b.Topic)
	_, err := io.WriteString(w, sb.String())
	return err
}

func clip(s string) string {
	const max = 200
	q := fmt.Sprintf("%q", s)
	if len(q) > max {
		return q[:max] + "…"
	}
	return q
}
