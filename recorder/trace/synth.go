package trace

import (
	"github.com/reelkit/reel/recorder"
)

// commonWords is how many of the tokenizer's single-token words (the
// lowest token ids, the most frequent merges) fill the body of a block.
const commonWords = 4096

// synthesizer writes prompt text whose token structure follows hash ids.
type synthesizer struct {
	words []string // single-token words, see recorder.Tokenizer.SingleTokenWords
	block int      // tokens per hash id
}

func newSynthesizer(tok *recorder.Tokenizer, block int) *synthesizer {
	return &synthesizer{words: tok.SingleTokenWords(), block: block}
}

// word returns the k-th word of the block with hash id id. The first two
// words spell id in base len(words), so blocks with different ids differ
// from their first token whenever the ids differ modulo len(words) (44,339
// under o200k_base, 22,791 under cl100k_base) and always by their second
// for ids below len(words)²; the others are drawn from the common words by
// a hash of (id, k). A block's text depends on its id alone: a trace's
// equal ids are equal blocks, prefix included.
func (s *synthesizer) word(id int64, k int) string {
	v := uint64(len(s.words))
	u := uint64(id)
	switch k {
	case 0:
		return s.words[u%v]
	case 1:
		return s.words[(u/v)%v]
	}
	return s.words[mix(u, uint64(k))%uint64(min(commonWords, len(s.words)))]
}

// appendPrompt appends n tokens of prompt text for a row with the given
// block ids: tokens [j·block, (j+1)·block) come from ids[j]. Every token is
// " "+word, so the text has exactly n tokens however it is cut.
func (s *synthesizer) appendPrompt(dst []byte, ids []int64, n int) []byte {
	for t := range n {
		j := t / s.block
		dst = append(dst, ' ')
		dst = append(dst, s.word(ids[min(j, len(ids)-1)], t-j*s.block)...)
	}
	return dst
}

// prefixHashes returns the chain over the PrefixBlockTokens-token blocks
// of a prompt of n tokens whose trace blocks have the given ids: block i's
// hash mixes the previous hash with the ids of every trace block it
// overlaps, so two prompts share their first m hashes exactly when they
// share the ids of every trace block those m blocks touch.
func (s *synthesizer) prefixHashes(ids []int64, n int) []int64 {
	if n <= 0 || len(ids) == 0 {
		return nil
	}
	out := make([]int64, 0, (n+PrefixBlockTokens-1)/PrefixBlockTokens)
	h := uint64(0x7472616365) // "trace": apart from any other chain
	for from := 0; from < n; from += PrefixBlockTokens {
		to := min(from+PrefixBlockTokens, n) - 1
		for j := from / s.block; j <= to/s.block; j++ {
			h = mix(h, uint64(ids[min(j, len(ids)-1)]))
		}
		out = append(out, int64(h))
	}
	return out
}

// mix is a splitmix64 step over a and b.
func mix(a, b uint64) uint64 {
	z := a ^ (b + 0x9e3779b97f4a7c15 + a<<6 + a>>2)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
