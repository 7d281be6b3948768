package redact

import "strings"

type topicRule struct {
	name     string
	keywords [][]byte // lower-cased
}

// topicIndex finds every rule's keywords in one pass over the text.
type topicIndex struct {
	rules     []topicRule
	first     [256][]topicKeyword // keywords by their first byte
	isFirst   [256]bool
	pair      [1024]uint64   // bit set of the first two (lower-cased) bytes of every keyword
	firstList []topicKeyword // all keywords, by id
}

type topicKeyword struct {
	word []byte
	rule int
	id   int // distinct per (rule, keyword)
}

func (ix *topicIndex) setPair(a, b byte) {
	k := int(a)<<8 | int(b)
	ix.pair[k>>6] |= 1 << (k & 63)
}

func (ix *topicIndex) hasPair(a, b byte) bool {
	k := int(a)<<8 | int(b)
	return ix.pair[k>>6]&(1<<(k&63)) != 0
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
			k := topicKeyword{word: w, rule: ri, id: id}
			ix.first[w[0]] = append(ix.first[w[0]], k)
			ix.isFirst[w[0]] = true
			if w[0] >= 'a' && w[0] <= 'z' {
				ix.isFirst[w[0]-('a'-'A')] = true // isFirst is indexed by the raw byte
			}
			if len(w) > 1 {
				ix.setPair(w[0], w[1])
			} else {
				for c := range 256 {
					ix.setPair(w[0], byte(c))
				}
			}
			ix.firstList = append(ix.firstList, k)
			id++
		}
		ix.rules = append(ix.rules, tr)
	}
	return ix
}

// topicScan accumulates keyword hits over the texts of one body.
type topicScan struct {
	seen []bool // by keyword id
	hits []int  // distinct keywords found, by rule
}

func (ts *topicScan) reset(ix *topicIndex) {
	if ix == nil {
		return
	}
	ts.seen = append(ts.seen[:0], make([]bool, len(ix.firstList))...)
	ts.hits = append(ts.hits[:0], make([]int, len(ix.rules))...)
}

// lowerASCII maps A-Z to a-z and every other byte to itself.
var lowerASCII = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if i >= 'A' && i <= 'Z' {
			t[i] = byte(i) + 'a' - 'A'
		}
	}
	return t
}()

// scan records the keywords found in text (case-insensitive for ASCII;
// ASCII keywords only at word starts).
func (ix *topicIndex) scan(text []byte, ts *topicScan) {
	for i := 0; i+1 < len(text); i++ {
		if !ix.isFirst[text[i]] {
			continue
		}
		c := lowerASCII[text[i]]
		if !ix.hasPair(c, lowerASCII[text[i+1]]) || (asciiAlnum[c] && i > 0 && asciiAlnum[text[i-1]]) {
			continue
		}
		for _, k := range ix.first[c] {
			if ts.seen[k.id] || !hasPrefixFold(text[i:], k.word) {
				continue
			}
			ts.seen[k.id] = true
			ts.hits[k.rule]++
		}
	}
}

var asciiAlnum = func() (t [256]bool) {
	for i := range t {
		t[i] = isASCIIAlnum(byte(i))
	}
	return t
}()

func hasPrefixFold(s, lowerPrefix []byte) bool {
	if len(s) < len(lowerPrefix) {
		return false
	}
	for i, c := range lowerPrefix {
		if lowerASCII[s[i]] != c {
			return false
		}
	}
	return true
}

// best names the rule with the most distinct keywords found, the first on
// a tie; "" when none matched.
func (ix *topicIndex) best(ts *topicScan) string {
	if ix == nil {
		return ""
	}
	best, bestHits := "", 0
	for ri, h := range ts.hits {
		if h > bestHits {
			best, bestHits = ix.rules[ri].name, h
		}
	}
	return best
}

// Topic labels text by the policy's keyword rules; see Policy.Topics.
func (r *Redactor) Topic(text string) string {
	var ts topicScan
	ts.reset(r.topics)
	if r.topics == nil {
		return ""
	}
	r.topics.scan([]byte(text), &ts)
	return r.topics.best(&ts)
}
