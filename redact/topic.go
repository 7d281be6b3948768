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
	byteFlags [256]uint8     // flagFirst, flagAlnum, flagShort by raw byte
	lead      [64]uint64     // bit set of the hashed first three (lower-cased) bytes of every keyword (leadHash)
	firstList []topicKeyword // all keywords, by id
}

type topicKeyword struct {
	word []byte
	rule int
	id   int // distinct per (rule, keyword)
}

// Flags of a raw byte for scan.
const (
	flagFirst = 1 << iota // a keyword may start with it (isFirst)
	flagAlnum             // ASCII letter or digit: a word's start, the rest of its run skipped
	flagShort             // a keyword of one or two bytes starts with it: no mayStart filter
)

// leadHash maps three lower-cased bytes to a bit of topicIndex.lead.
func leadHash(a, b, c byte) uint32 {
	return (uint32(a)<<16 | uint32(b)<<8 | uint32(c)) * 0x9E3779B1 >> 20
}

func (ix *topicIndex) setLead(a, b, c byte) {
	h := leadHash(a, b, c)
	ix.lead[h>>6] |= 1 << (h & 63)
}

// mayStart reports whether a keyword may start with the three bytes at
// s[0:3] (false positives possible, no false negatives).
func (ix *topicIndex) mayStart(s []byte) bool {
	h := leadHash(lowerASCII[s[0]], lowerASCII[s[1]], lowerASCII[s[2]])
	return ix.lead[h>>6]&(1<<(h&63)) != 0
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
			if len(w) >= 3 {
				ix.setLead(w[0], w[1], w[2])
			} else {
				ix.byteFlags[w[0]] |= flagShort
				if w[0] >= 'a' && w[0] <= 'z' {
					ix.byteFlags[w[0]-('a'-'A')] |= flagShort
				}
			}
			ix.firstList = append(ix.firstList, k)
			id++
		}
		ix.rules = append(ix.rules, tr)
	}
	for c := range 256 {
		if ix.isFirst[c] {
			ix.byteFlags[c] |= flagFirst
		}
		if asciiAlnum[c] {
			ix.byteFlags[c] |= flagAlnum
		}
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
// ASCII keywords only at word starts). Past a word start the rest of an
// ASCII letter-or-digit run is skipped: no keyword can start inside it.
func (ix *topicIndex) scan(text []byte, ts *topicScan) { ix.scanRange(text, 0, len(text), ts) }

// scanRange is scan over the keyword starts in text[from:to] (a keyword
// may run on past to).
func (ix *topicIndex) scanRange(text []byte, from, to int, ts *topicScan) {
	i := from
	if i > 0 && i < to && asciiAlnum[text[i-1]] {
		for i < to && asciiAlnum[text[i]] { // inside a word: not a start
			i++
		}
	}
	for ; i < to && i+1 < len(text); i++ {
		f := ix.byteFlags[text[i]]
		if f == 0 {
			continue
		}
		ix.at(text, i, ts)
		if f&flagAlnum != 0 {
			for i+1 < to && asciiAlnum[text[i+1]] {
				i++
			}
		}
	}
}

// at records the keywords starting at text[p], a keyword start (p+1 <
// len(text): scan never looks at the last byte).
func (ix *topicIndex) at(text []byte, p int, ts *topicScan) {
	raw := text[p]
	if f := ix.byteFlags[raw]; f&flagFirst != 0 && (f&flagShort != 0 || p+2 < len(text) && ix.mayStart(text[p:])) {
		ix.match(text[p:], lowerASCII[raw], ts)
	}
}

// wordAt is at for an ASCII letter or digit at text[p] that synthesis
// found starting a run: a keyword start unless it follows another ASCII
// letter or digit (the second part of camelCase, letters after digits).
// The byte test comes first and inlines: most words start no keyword.
func (ix *topicIndex) wordAt(text []byte, p int, ts *topicScan) {
	if ix.byteFlags[text[p]]&flagFirst != 0 {
		ix.wordStartAt(text, p, ts)
	}
}

func (ix *topicIndex) wordStartAt(text []byte, p int, ts *topicScan) {
	if p+1 < len(text) && (p == 0 || !asciiAlnum[text[p-1]]) {
		ix.at(text, p, ts)
	}
}

// runeAt is at for any other byte synthesis visits: a kept ASCII byte, or
// the first byte of a non-ASCII rune. No keyword starts inside a rune:
// keywords are valid UTF-8 (strings.ToLower in compileTopics turns invalid
// bytes into U+FFFD), so synthesis, which visits rune starts only, finds
// every keyword a scan would.
func (ix *topicIndex) runeAt(text []byte, p int, ts *topicScan) {
	if ix.byteFlags[text[p]]&flagFirst != 0 && p+1 < len(text) {
		ix.at(text, p, ts)
	}
}

// match records the keywords starting with c found at the start of s.
func (ix *topicIndex) match(s []byte, c byte, ts *topicScan) {
	for _, k := range ix.first[c] {
		if !ts.seen[k.id] && hasPrefixFold(s, k.word) {
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
