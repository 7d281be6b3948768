package redact

import (
	"encoding/binary"
	"hash"
	"unicode"
	"unicode/utf8"
)

// rng is a small deterministic generator (splitmix64) seeded from a keyed
// block hash. Its output must never change between releases: datasets
// redacted by different versions must still share prefixes.
type rng struct{ s uint64 }

func newRNG(seed []byte) rng {
	return rng{s: binary.LittleEndian.Uint64(seed[:8]) ^ binary.LittleEndian.Uint64(seed[8:16])}
}

func (g *rng) next() uint64 {
	g.s += 0x9e3779b97f4a7c15
	z := g.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// intn returns a value in [0, n) for 0 < n < 2^32.
func (g *rng) intn(n int) int { return int((g.next() >> 32) * uint64(n) >> 32) }

// Domain bytes keep the chains of different uses apart.
const (
	domainPrompt   = 'p' // request prompt chain (PrefixHashes)
	domainResponse = 'r' // response chain
	domainField    = 'f' // a non-prompt field, keyed by its own value
	domainPII      = 'i' // a detected value's token
	domainSession  = 's' // session pseudonym
	domainKeyID    = 'k' // key fingerprint
)

// chain is the keyed hash chain over a document's text: block i's hash is
// HMAC(key, domain || hash(i-1) || block i). Two documents that share their
// first k blocks share their first k hashes and nothing after.
type chain struct {
	mac    hash.Hash
	domain byte
	prev   [32]byte
	n      int // blocks so far
	sum    [32]byte
	hdr    [33]byte // domain || previous hash; a field so it does not escape per call
}

func (c *chain) reset(mac hash.Hash, domain byte) {
	c.mac, c.domain, c.n = mac, domain, 0
	c.prev = [32]byte{}
}

// next chains one block and returns its hash.
func (c *chain) next(block []byte) []byte {
	c.mac.Reset()
	c.hdr[0] = c.domain
	copy(c.hdr[1:], c.prev[:])
	if c.n == 0 {
		c.mac.Write(c.hdr[:1])
	} else {
		c.mac.Write(c.hdr[:])
	}
	c.mac.Write(block)
	c.mac.Sum(c.sum[:0])
	c.prev = c.sum
	c.n++
	return c.sum[:]
}

// blockHash reduces a block hash to the int64 stored in PrefixHashes.
func blockHash(sum []byte) int64 { return int64(binary.BigEndian.Uint64(sum[:8])) }

// nextBlockEnd returns the end of the block of text that starts at src[0]:
// the first word start (after whitespace, or before a CJK character) at or
// after target bytes; past 2×target any non-alphanumeric byte will do; a
// rune boundary at 4×target at the latest; or len(src).
func nextBlockEnd(src []byte, target int) int {
	if len(src) <= target {
		return len(src)
	}
	limit := min(len(src), 4*target)
	for i := target; i < limit; i++ {
		c := src[i]
		switch {
		case c >= 0xE0: // CJK and other wide scripts: every character starts a word
			return i
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case src[i-1] == ' ' || src[i-1] == '\t' || src[i-1] == '\n' || src[i-1] == '\r':
			return i
		case i >= 2*target && c < 0x80 && !isASCIIAlnum(c):
			return i
		}
	}
	if limit == len(src) {
		return limit
	}
	i := limit
	for i > limit-utf8.UTFMax && i > 0 && !utf8.RuneStart(src[i]) {
		i--
	}
	if i == 0 || !utf8.RuneStart(src[i]) {
		return limit // invalid UTF-8: any cut will do, but never an empty block
	}
	return i
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// synthesize appends synthetic text for src to dst, drawing every choice
// from g: the same number of runes, each keeping its script class. Latin
// letter runs become dictionary words of the same length with the same
// upper-case positions; digits become random digits; Han, kana, Hangul,
// Cyrillic and Greek letters become common letters of their script;
// whitespace, punctuation, symbols and marks stay. Invalid UTF-8 becomes
// U+FFFD, one rune per bad byte.
func synthesize(dst, src []byte, g *rng) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		if c < 0x80 {
			switch {
			case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
				j, n, upper := latinRun(src, i)
				dst = appendWord(dst, n, upper, g)
				i = j
			case c >= '0' && c <= '9':
				dst = append(dst, byte('0'+g.intn(10)))
				i++
			default:
				dst = append(dst, c)
				i++
			}
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && size <= 1 {
			dst = append(dst, "\uFFFD"...)
			i++
			continue
		}
		switch classify(r) {
		case classLatin:
			j, n, upper := latinRun(src, i)
			dst = appendWord(dst, n, upper, g)
			i = j
			continue
		case classDigit:
			dst = append(dst, byte('0'+g.intn(10)))
		case classHan:
			dst, i = appendHanRun(dst, src, i, g)
			continue
		case classHiragana:
			dst = utf8.AppendRune(dst, rune(0x3042+2*g.intn(20))) // あいうえお… (vowel/k/s/… rows)
		case classKatakana:
			dst = utf8.AppendRune(dst, rune(0x30A2+2*g.intn(20)))
		case classHangul:
			dst = utf8.AppendRune(dst, hangulRunes[g.intn(len(hangulRunes))])
		case classCyrillic:
			dst = utf8.AppendRune(dst, caseOf(r, rune(0x0430+g.intn(32))))
		case classGreek:
			dst = utf8.AppendRune(dst, caseOf(r, rune(0x03B1+g.intn(17))))
		case classLetter:
			dst = utf8.AppendRune(dst, otherLetter(r, g))
		default:
			dst = append(dst, src[i:i+size]...)
		}
		i += size
	}
	return dst
}

// latinRun scans the run of Latin letters at src[i:], returning its end,
// its length in runes and a bit mask of its upper-case positions (first 64).
func latinRun(src []byte, i int) (end, n int, upper uint64) {
	for i < len(src) {
		c := src[i]
		if c < 0x80 {
			if c >= 'a' && c <= 'z' {
				i++
			} else if c >= 'A' && c <= 'Z' {
				if n > 0 && src[i-1] >= 'a' && src[i-1] <= 'z' {
					break // camelCase: each part is a word of its own
				}
				if n < 64 {
					upper |= 1 << n
				}
				i++
			} else {
				break
			}
			n++
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError || classify(r) != classLatin {
			break
		}
		if n < 64 && unicode.IsUpper(r) {
			upper |= 1 << n
		}
		i += size
		n++
	}
	return i, n, upper
}

// appendHanRun appends synthetic text for the run of Han characters at
// src[i:] and returns the run's end. A common character becomes a common
// one or, with its common neighbour, a common two-character word; any other
// character becomes a rarer one, keeping the run's token cost.
func appendHanRun(dst, src []byte, i int, g *rng) ([]byte, int) {
	pendingCommon := 0 // common characters seen but not yet written
	flush := func() {
		for pendingCommon > 0 {
			if pendingCommon >= 2 && g.intn(100) < hanWordPercent {
				dst = append(dst, hanWordList[g.intn(len(hanWordList))]...)
				pendingCommon -= 2
				continue
			}
			dst = utf8.AppendRune(dst, hanRunes[g.intn(len(hanRunes))])
			pendingCommon--
		}
	}
	for i < len(src) && src[i] >= 0xE0 {
		r, size := utf8.DecodeRune(src[i:])
		if classify(r) != classHan {
			break
		}
		if commonSet.has(r) {
			pendingCommon++
		} else {
			flush()
			dst = utf8.AppendRune(dst, rareRunes[g.intn(len(rareRunes))])
		}
		i += size
	}
	flush()
	return dst, i
}

// appendWord appends n letters of dictionary words, upper-cased where the
// mask says. Runs longer than the longest bucket are filled with several
// words run together.
func appendWord(dst []byte, n int, upper uint64, g *rng) []byte {
	if n >= 2 && n < len(acronymsByLen) && upper == 1<<n-1 && len(acronymsByLen[n]) > 0 {
		b := acronymsByLen[n]
		w := b[g.intn(len(b))]
		for i := 0; i < len(w); i++ {
			dst = append(dst, w[i]-('a'-'A'))
		}
		return dst
	}
	start := len(dst)
	for n > 0 {
		k := n
		if k > maxWordLen || len(wordsByLen[k]) < minWordsPerLength {
			k = min(n, 8)
			if rest := n - k; rest > 0 && rest < 3 {
				k = n - 3
			}
			for len(wordsByLen[k]) < minWordsPerLength && k > 1 {
				k--
			}
		}
		b := wordsByLen[k]
		dst = append(dst, b[g.intn(len(b))]...)
		n -= k
	}
	if upper != 0 {
		w := dst[start:]
		for p := 0; p < len(w) && p < 64; p++ {
			if upper&(1<<p) != 0 {
				w[p] -= 'a' - 'A'
			}
		}
	}
	return dst
}

func caseOf(orig, r rune) rune {
	if unicode.IsUpper(orig) {
		return unicode.ToUpper(r)
	}
	return r
}

// otherLetter picks a letter near r in its Unicode block (same script in
// practice), or 'x' when a few tries find none.
func otherLetter(r rune, g *rng) rune {
	base := r &^ 0x7F
	for range 6 {
		c := base + rune(g.intn(0x80))
		if unicode.IsLetter(c) && classify(c) == classLetter {
			return c
		}
	}
	return 'x'
}
