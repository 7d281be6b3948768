package redact

import (
	"fmt"
	"strings"
)

// pathRule is a compiled field path: parts matched against the key stack,
// "*" for any one key and "**" for any number of keys.
type pathRule struct {
	parts []string
	text  string
}

func compilePath(rule string) (pathRule, error) {
	if rule == "" {
		return pathRule{}, fmt.Errorf("empty field path")
	}
	parts := strings.Split(rule, ".")
	for _, p := range parts {
		if p == "" {
			return pathRule{}, fmt.Errorf("field path %q: empty key", rule)
		}
	}
	return pathRule{parts: parts, text: rule}, nil
}

func (r pathRule) match(path []string) bool { return matchParts(r.parts, path) }

func matchParts(p, s []string) bool {
	for len(p) > 0 {
		if p[0] == "**" {
			if len(p) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if matchParts(p[1:], s[i:]) {
					return true
				}
			}
			return false
		}
		if len(s) == 0 || (p[0] != "*" && p[0] != s[0]) {
			return false
		}
		p, s = p[1:], s[1:]
	}
	return len(s) == 0
}

// ruleSet is an ordered list of rules; first match wins.
type ruleSet []pathRule

func compileRules(rules []string) ruleSet {
	out := make(ruleSet, 0, len(rules))
	for _, r := range rules {
		if c, err := compilePath(r); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// find returns the first matching rule's text, or "".
func (rs ruleSet) find(path []string) (string, bool) {
	for _, r := range rs {
		if r.match(path) {
			return r.text, true
		}
	}
	return "", false
}
