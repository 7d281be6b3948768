package redact

import (
	"crypto/aes"
	"crypto/hmac"
	"crypto/sha256"
	"testing"
)

// The keyed PRF behind the chain, measured per word on the text of the
// chat benchmark body: each case digests the state over all text up to
// every word end (what synthesize needs), nothing else. The old chain
// (HMAC-SHA256 per 64-byte block, redact/1) is the peer.

// benchWordEnds returns the text of benchBody and its word ends (after
// each letter or digit run).
func benchWordEnds(tb testing.TB) ([]byte, []int) {
	text := benchBody(tb)
	var ends []int
	for i := 0; i < len(text); i++ {
		if isASCIIAlnum(text[i]) && (i+1 == len(text) || !isASCIIAlnum(text[i+1])) {
			ends = append(ends, i+1)
		}
	}
	return text, ends
}

func BenchmarkWordPRF(b *testing.B) {
	text, ends := benchWordEnds(b)
	key := []byte("bench-key-0123456789abcdef")
	b.Run("siphash13-stream (redact/2)", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		var sink uint64
		for b.Loop() {
			var s sipState
			s.init(sipKey{1, 2})
			done := 0
			for _, e := range ends {
				s.write(text[done:e])
				done = e
				sink ^= s.sum()
			}
		}
		_ = sink
	})
	b.Run("aes-cbcmac-stream", func(b *testing.B) {
		blk, _ := aes.NewCipher(key[:16])
		b.SetBytes(int64(len(text)))
		var state, tmp [16]byte
		for b.Loop() {
			state = [16]byte{}
			n := 0 // bytes of text in state's pending block
			var pend [16]byte
			done := 0
			for _, e := range ends {
				for _, c := range text[done:e] {
					pend[n] = c
					n++
					if n == 16 {
						for k := range state {
							state[k] ^= pend[k]
						}
						blk.Encrypt(state[:], state[:])
						n = 0
					}
				}
				done = e
				tmp = state
				for k := 0; k < n; k++ {
					tmp[k] ^= pend[k]
				}
				tmp[15] ^= byte(n) | 0x80
				blk.Encrypt(tmp[:], tmp[:])
			}
		}
	})
	b.Run("hmac-sha256-per-word", func(b *testing.B) {
		mac := hmac.New(sha256.New, key)
		b.SetBytes(int64(len(text)))
		var prev [32]byte
		for b.Loop() {
			prev = [32]byte{}
			done := 0
			for _, e := range ends {
				mac.Reset()
				mac.Write(prev[:])
				mac.Write(text[done:e])
				mac.Sum(prev[:0])
				done = e
			}
		}
	})
	b.Run("old-hmac-sha256-per-64B-block", func(b *testing.B) {
		mac := hmac.New(sha256.New, key)
		b.SetBytes(int64(len(text)))
		var prev [32]byte
		for b.Loop() {
			prev = [32]byte{}
			for i := 0; i < len(text); i += 64 {
				mac.Reset()
				mac.Write(prev[:])
				mac.Write(text[i:min(i+64, len(text))])
				mac.Sum(prev[:0])
			}
		}
	})
}
