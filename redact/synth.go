package redact

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"unicode"
	"unicode/utf8"
)

// Scheme names the synthesis scheme: how synthetic text and prefix hashes
// are drawn from the key and the text. It leads every Fingerprint, so the
// reel.redaction metadata of a file says which scheme wrote it. Bytes of
// a scheme never change (TestGoldenSynthesis); a new way of drawing them is
// a new scheme.
//
//   - redact/1 (up to reel 0.x): an HMAC-SHA256 chain over blocks of at
//     least 64 bytes of prompt text; a shared prefix survived only to the
//     last whole block before the first difference.
//   - redact/2: a SipHash-1-3 state over everything up to each word; a
//     shared prefix survives to the word.
const Scheme = "redact/2"

// rng is a small deterministic generator (splitmix64). Its output must never
// change between releases: datasets redacted by different versions must
// still share prefixes and tokens.
type rng struct{ s uint64 }

// newRNG seeds a generator from a 16-byte keyed digest.
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

// Domain bytes keep the keys and seeds of different uses apart.
const (
	domainPrompt   = 'p' // request prompt chain (PrefixHashes)
	domainResponse = 'r' // response chain
	domainField    = 'f' // a non-prompt field, keyed by its own value
	domainPII      = 'i' // a detected value's token
	domainSession  = 's' // session pseudonym
	domainKeyID    = 'k' // key fingerprint
)

// sipKey is a 128-bit SipHash key.
type sipKey struct{ k0, k1 uint64 }

// sipState is SipHash-1-3 (Aumasson and Bernstein's SipHash with one
// compression and three finalization rounds, the keyed hash of CPython and
// Rust's standard library) written as a stream: bytes go in with write,
// and sum finalizes a copy, so the digest of every prefix of the stream
// costs one finalization, not a pass over the prefix. A digest per word is
// what the chain needs: SipHash is a PRF made for short inputs, and per
// word it costs about a seventh of HMAC-SHA256 and half of an AES-CBC-MAC,
// and 1-3 a further fifth less than 2-4 (docs/performance.md).
type sipState struct {
	v0, v1, v2, v3 uint64
	tail           uint64 // the last len%8 bytes, little-endian
	n              uint64 // bytes written
}

func (s *sipState) init(k sipKey) {
	s.v0 = k.k0 ^ 0x736f6d6570736575
	s.v1 = k.k1 ^ 0x646f72616e646f6d
	s.v2 = k.k0 ^ 0x6c7967656e657261
	s.v3 = k.k1 ^ 0x7465646279746573
	s.tail, s.n = 0, 0
}

func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

func (s *sipState) compress(m uint64) {
	v0, v1, v2, v3 := s.v0, s.v1, s.v2, s.v3^m
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	s.v0, s.v1, s.v2, s.v3 = v0^m, v1, v2, v3
}

func (s *sipState) write(p []byte) {
	fill := uint(s.n & 7)
	s.n += uint64(len(p))
	if fill != 0 {
		need := 8 - fill
		if uint(len(p)) < need {
			s.tail |= load64(p) << (8 * fill)
			return
		}
		s.compress(s.tail | load64(p[:need])<<(8*fill))
		p = p[need:]
	}
	for len(p) >= 8 {
		s.compress(binary.LittleEndian.Uint64(p))
		p = p[8:]
	}
	s.tail = load64(p)
}

// load64 reads up to 8 bytes as a little-endian number, with two
// overlapping loads instead of a loop over the bytes.
func load64(p []byte) uint64 {
	n := len(p)
	switch {
	case n >= 8:
		return binary.LittleEndian.Uint64(p)
	case n >= 4:
		lo := uint64(binary.LittleEndian.Uint32(p))
		hi := uint64(binary.LittleEndian.Uint32(p[n-4:]))
		return lo | hi<<(8*(n-4))
	case n > 0:
		return uint64(p[0]) | uint64(p[n/2])<<(8*(n/2)) | uint64(p[n-1])<<(8*(n-1))
	}
	return 0
}

// writeShort writes the n ≤ 8 bytes held little-endian in v (the bytes
// above them zero).
func (s *sipState) writeShort(v uint64, n int) {
	fill := uint(s.n & 7)
	s.n += uint64(n)
	t := s.tail | v<<(8*fill)
	if fill+uint(n) >= 8 {
		s.compress(t)
		t = v >> (8 * (8 - fill)) // 0 when fill is 0
	}
	s.tail = t
}

// writeString is write for a string, up to eight bytes at a time.
func (s *sipState) writeString(p string) {
	for len(p) > 0 {
		n := min(len(p), 8)
		var v uint64
		for i := n - 1; i >= 0; i-- {
			v = v<<8 | uint64(p[i])
		}
		s.writeShort(v, n)
		p = p[n:]
	}
}

func (s *sipState) writeByte(c byte) {
	fill := s.n & 7
	s.tail |= uint64(c) << (8 * fill)
	s.n++
	if fill == 7 {
		s.compress(s.tail)
		s.tail = 0
	}
}

// sum returns the SipHash-1-3 digest of everything written so far, leaving
// the state as it is.
func (s *sipState) sum() uint64 {
	b := s.n<<56 | s.tail
	v0, v1, v2, v3 := s.v0, s.v1, s.v2, s.v3^b
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= b
	v2 ^= 0xff
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	return v0 ^ v1 ^ v2 ^ v3
}

// Bytes that frame a field in the chain's input: fieldStart, the field's
// key, fieldValue, then the value's text.
const (
	fieldStart = 0x1E // ASCII record separator
	fieldValue = 0x1F // ASCII unit separator
)

// chain is the keyed state over a document's text in order: every string
// in prompt scope, kept or synthesized, framed by its key (see field). A
// word's synthetic replacement is drawn from the digest of everything up to
// and including the word, so two documents that agree on their first N
// words agree on their first N synthetic words and differ from the first
// differing word on. A digest taken at the first word or field start after
// every blockBytes of input, and one at the end, are the prefix hashes
// (PrefixHashes).
type chain struct {
	st         sipState
	blockBytes int
	sinceCut   int  // input bytes since the last prefix hash
	record     bool // keep prefix hashes (the request prompt chain)
	hashes     []int64
}

// reset starts an empty chain under key.
func (c *chain) reset(k sipKey, blockBytes int, record bool) {
	c.st.init(k)
	c.blockBytes, c.record = blockBytes, record
	c.sinceCut = 0
	c.hashes = c.hashes[:0]
}

// absorb adds bytes to the state.
func (c *chain) absorb(p []byte) {
	c.st.write(p)
	c.sinceCut += len(p)
}

// boundary marks a place where a prefix hash may be taken: a word or field
// start. pending is how many input bytes before it are not absorbed yet.
func (c *chain) boundary(pending int) bool {
	return c.record && c.sinceCut+pending >= c.blockBytes
}

// cut takes a prefix hash of everything absorbed.
func (c *chain) cut() {
	c.hashes = append(c.hashes, int64(c.st.sum()))
	c.sinceCut = 0
}

// finish takes the hash of the last, partial block, as Mooncake's hash_ids
// do: every prompt has at least one prefix hash, and n blocks' worth of text
// has ceil(n) of them.
func (c *chain) finish() {
	if c.record && c.sinceCut > 0 {
		c.cut()
	}
}

// field frames the next value: the key it sits under (the last key on its
// path; "" for text that has none) goes into the state, so a role, a tool
// name or a field order the engine sees is in what later words depend on.
func (c *chain) field(key string) {
	if c.boundary(0) {
		c.cut()
	}
	c.st.writeByte(fieldStart)
	c.st.writeString(key)
	c.st.writeByte(fieldValue)
	c.sinceCut += len(key) + 2
}

// synthesizer turns one value's text into synthetic text, absorbing the
// text into the chain as it goes: src[:done] is in the state.
type synthesizer struct {
	c    *chain
	src  []byte
	done int
}

// wordStart is called before the word at src[i:]: the place for a prefix
// hash once a block's worth of input has gone by.
func (s *synthesizer) wordStart(i int) {
	if s.c.record && s.c.sinceCut+i-s.done >= s.c.blockBytes {
		s.cutAt(i)
	}
}

func (s *synthesizer) cutAt(i int) {
	s.c.absorb(s.src[s.done:i])
	s.done = i
	s.c.cut()
}

// draw absorbs the text up to end (the end of a word) and returns a
// generator seeded with the digest of everything so far.
func (s *synthesizer) draw(end int) rng {
	if n := end - s.done; n <= 8 && len(s.src)-s.done >= 8 {
		// A word and the bytes before it, most often: one load, no loop.
		s.c.st.writeShort(binary.LittleEndian.Uint64(s.src[s.done:])&(1<<(8*n)-1), n)
	} else {
		s.c.st.write(s.src[s.done:end])
	}
	s.c.sinceCut += end - s.done
	s.done = end
	return rng{s: s.c.st.sum()}
}

// synthesize appends synthetic text for src to dst: the same number of
// runes, each keeping its script class, every choice drawn from the chain
// (see chain). Latin letter runs become dictionary words of the same length
// with the same upper-case positions; digit runs become random digits; Han,
// kana and Hangul characters (each a word of its own) become common
// characters of their script; Cyrillic, Greek and other letter runs become
// letters of their script; whitespace, punctuation, symbols and marks stay.
// Invalid UTF-8 becomes U+FFFD, one rune per bad byte. With jsonEscape
// the kept bytes JSON escapes are appended escaped (synthetic letters never
// need it), so the text goes into a JSON string without a second pass.
// With topics, the keywords in src are recorded in ts on the way, exactly
// as topics.scan(src, ts) would (TestTopicsFoundWhileSynthesizing).
func (c *chain) synthesize(dst, src []byte, jsonEscape bool, topics *topicIndex, ts *topicScan) []byte {
	s := synthesizer{c: c, src: src}
	han := hanPair{}
	for i := 0; i < len(src); {
		b := src[i]
		if b < 0x80 {
			switch {
			case b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z':
				s.wordStart(i)
				j, n, upper := latinRun(src, i)
				if topics != nil {
					topics.wordAt(src, i, ts)
					if j-i != n { // non-ASCII letters inside: more starts
						topics.scanRange(src, i+1, j, ts)
					}
				}
				g := s.draw(j)
				dst = appendWord(dst, n, upper, &g)
				i = j
			case b >= '0' && b <= '9':
				s.wordStart(i)
				if topics != nil {
					topics.wordAt(src, i, ts)
				}
				j := skipDigits(src, i)
				g := s.draw(j)
				for ; i < j; i++ {
					dst = append(dst, byte('0'+g.intn(10)))
				}
			default:
				if topics != nil {
					topics.runeAt(src, i, ts)
				}
				if jsonEscape && jsonNeedsEscape[b] {
					dst = appendJSONEscapedByte(dst, b)
				} else {
					dst = append(dst, b)
				}
				i++
			}
			han.open = false
			continue
		}
		if topics != nil {
			topics.runeAt(src, i, ts)
		}
		var r rune
		var size int
		var class scriptClass
		if r, size = decodeHan(src[i:]); size > 0 {
			class = classHan
		} else {
			r, size = utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && size <= 1 {
				dst = append(dst, "\uFFFD"...)
				i++
				han.open = false
				continue
			}
			class = classify(r)
		}
		if class != classHan {
			han.open = false
		}
		switch class {
		case classLatin:
			s.wordStart(i)
			j, n, upper := latinRun(src, i)
			if topics != nil {
				topics.scanRange(src, i+1, j, ts)
			}
			g := s.draw(j)
			dst = appendWord(dst, n, upper, &g)
			i = j
			continue
		case classHan:
			s.wordStart(i)
			g := s.draw(i + size)
			dst = han.next(dst, r, &g)
		case classHiragana, classKatakana, classHangul, classDigit:
			s.wordStart(i)
			g := s.draw(i + size)
			dst = utf8.AppendRune(dst, letterOf(class, r, &g))
		case classCyrillic, classGreek, classLetter:
			s.wordStart(i)
			j := runOf(src, i, class)
			g := s.draw(j)
			for k := i; i < j; {
				r, size := utf8.DecodeRune(src[i:])
				if topics != nil && i > k {
					topics.runeAt(src, i, ts)
				}
				dst = utf8.AppendRune(dst, letterOf(class, r, &g))
				i += size
			}
			continue
		default:
			dst = append(dst, src[i:i+size]...)
		}
		i += size
	}
	c.absorb(src[s.done:])
	return dst
}

// decodeHan decodes a character of the CJK Unified Ideographs block
// (U+4E00–U+9FFF, three bytes in UTF-8: most of Chinese text) at the
// start of p without the general decoder; size 0 for anything else.
func decodeHan(p []byte) (r rune, size int) {
	if len(p) < 3 || p[0] < 0xE4 || p[0] > 0xE9 || p[1]&0xC0 != 0x80 || p[2]&0xC0 != 0x80 {
		return 0, 0
	}
	r = rune(p[0]&0x0F)<<12 | rune(p[1]&0x3F)<<6 | rune(p[2]&0x3F)
	if r < 0x4E00 {
		return 0, 0
	}
	return r, 3
}

// runOf returns the end of the run of class-class letters at src[i:].
func runOf(src []byte, i int, class scriptClass) int {
	for i < len(src) {
		r, size := utf8.DecodeRune(src[i:])
		if classify(r) != class {
			break
		}
		i += size
	}
	return i
}

// letterOf draws a replacement for one letter or digit of a script that is
// replaced character by character.
func letterOf(class scriptClass, r rune, g *rng) rune {
	switch class {
	case classDigit:
		return rune('0' + g.intn(10))
	case classHiragana:
		return rune(0x3042 + 2*g.intn(20)) // あいうえお… (vowel/k/s/… rows)
	case classKatakana:
		return rune(0x30A2 + 2*g.intn(20))
	case classHangul:
		return hangulRunes[g.intn(len(hangulRunes))]
	case classCyrillic:
		return caseOf(r, rune(0x0430+g.intn(32)))
	case classGreek:
		return caseOf(r, rune(0x03B1+g.intn(17)))
	}
	return otherLetter(r, g)
}

// hanPair carries a two-character word across the characters of a Han run.
// A common character becomes a common one, or opens a common two-character
// word whose second character replaces the next character if that one is
// common too; any other character becomes a rarer one, keeping the run's
// token cost. Each character is still its own word of the chain: the
// second character is drawn among the words that start with the first, from
// the digest that includes it.
type hanPair struct {
	open bool
	word int32 // index in hanPairWords of the open word (an index, not its slice: no pointer write per character)
}

func (h *hanPair) next(dst []byte, r rune, g *rng) []byte {
	if !commonSet.has(r) {
		h.open = false
		return utf8.AppendRune(dst, rareRunes[g.intn(len(rareRunes))])
	}
	if h.open {
		h.open = false
		seconds := hanPairWords[h.word].seconds
		return utf8.AppendRune(dst, seconds[g.intn(len(seconds))])
	}
	if g.intn(100) < hanWordPercent {
		k := g.intn(len(hanPairWords))
		h.open, h.word = true, int32(k)
		return utf8.AppendRune(dst, hanPairWords[k].first)
	}
	return utf8.AppendRune(dst, hanRunes[g.intn(len(hanRunes))])
}

// hanPairWord is a two-character word of hanWordList: its first character
// and the second characters of every word that starts with it.
type hanPairWord struct {
	first   rune
	seconds []rune
}

// hanPairWords holds one entry per two-character word, so a word is drawn
// uniformly.
var hanPairWords = func() []hanPairWord {
	seconds := make(map[rune][]rune)
	var firsts []rune
	for _, w := range hanWordList {
		if rs := []rune(w); len(rs) == 2 {
			firsts = append(firsts, rs[0])
			seconds[rs[0]] = append(seconds[rs[0]], rs[1])
		}
	}
	out := make([]hanPairWord, len(firsts))
	for i, f := range firsts {
		out[i] = hanPairWord{first: f, seconds: seconds[f]}
	}
	return out
}()

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
		b := wordSlots[k]
		w := &b[g.intn(len(b))]
		l := len(dst)
		dst = slices.Grow(dst, len(w))[:l+len(w)]
		*(*wordSlot)(dst[l:]) = *w
		dst = dst[:l+k]
		n -= k
	}
	w := dst[start:]
	for m := upper; m != 0; m &= m - 1 {
		if p := bits.TrailingZeros64(m); p < len(w) {
			w[p] -= 'a' - 'A'
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

// otherLetter picks a letter of r's 128-rune Unicode block (its script, in
// practice): the first letter from a random point on, so it always finds
// one (r itself at worst).
func otherLetter(r rune, g *rng) rune {
	base := r &^ 0x7F
	start := g.intn(0x80)
	for k := range 0x80 {
		c := base + rune((start+k)&0x7F)
		if unicode.IsLetter(c) && classify(c) == classLetter {
			return c
		}
	}
	return r
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
