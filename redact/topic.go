package redact

import (
	"bytes"
	"strings"
)

type topicRule struct {
	name     string
	keywords [][]byte // lower-cased
}

// topicIndex finds every rule's keywords in one pass over the text.
type topicIndex struct {
	rules []topicRule
	first [256][]topicKeyword // keywords by their first byte
}

type topicKeyword struct {
	word []byte
	rule int
	id   int // distinct per (rule, keyword)
}

func compileTopics(rules []TopicRule) *topicIndex {
	if len(rules) == 0 {
		return nil
	}
	ix := &topicIndex{}
	id := 0
	for ri, t := range rules {
		tr := topicRule{name: t.Name}
		for _, k := range t.Keywords {
			if k == "" {
				continue
			}
			w := []byte(strings.ToLower(k))
			tr.keywords = append(tr.keywords, w)
			ix.first[w[0]] = append(ix.first[w[0]], topicKeyword{word: w, rule: ri, id: id})
			id++
		}
		ix.rules = append(ix.rules, tr)
	}
	return ix
}

// topic labels raw text: the rule with the most distinct keywords found
// wins, the first one on a tie; "" when none matches. text is lower-cased
// (ASCII) in place. ASCII keywords match only at word starts.
func (r *Redactor) topic(text []byte) string {
	ix := r.topics
	if ix == nil || len(text) == 0 {
		return ""
	}
	for i, c := range text {
		if c >= 'A' && c <= 'Z' {
			text[i] = c + 'a' - 'A'
		}
	}
	var seenBuf [64]bool
	seen := seenBuf[:0]
	hits := make([]int, len(ix.rules))
	prevAlnum := false
	for i, c := range text {
		alnum := isASCIIAlnum(c)
		if (alnum && prevAlnum) || len(ix.first[c]) == 0 {
			prevAlnum = alnum
			continue
		}
		prevAlnum = alnum
		for _, k := range ix.first[c] {
			if !bytes.HasPrefix(text[i:], k.word) {
				continue
			}
			for len(seen) <= k.id {
				seen = append(seen, false)
			}
			if !seen[k.id] {
				seen[k.id] = true
				hits[k.rule]++
			}
		}
	}
	best, bestHits := "", 0
	for ri, h := range hits {
		if h > bestHits {
			best, bestHits = ix.rules[ri].name, h
		}
	}
	return best
}

// Topic labels text by the policy's keyword rules; see Policy.Topics.
func (r *Redactor) Topic(text string) string { return r.topic([]byte(text)) }
