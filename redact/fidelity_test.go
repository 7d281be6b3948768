package redact

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// promptText concatenates the message contents of a chat body.
func promptText(tb testing.TB, body []byte) string {
	tb.Helper()
	var req struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		tb.Fatalf("parse chat body: %v", err)
	}
	s := ""
	for _, m := range req.Messages {
		s += m.Content + "\n"
	}
	return s
}

// TestTokenFidelity checks that redacted chat text costs about as many BPE
// tokens as the original (±10 %) under cl100k and o200k: letter soup would
// cost two to three times more and load a GPU differently.
func TestTokenFidelity(t *testing.T) {
	r := testRedactor(t)
	for _, enc := range []tokenizer.Encoding{tokenizer.Cl100kBase, tokenizer.O200kBase} {
		codec, err := tokenizer.Get(enc)
		if err != nil {
			t.Fatalf("tokenizer %s: %v", enc, err)
		}
		// chat_zh.json and chat_zh2.json tuned hanWordPercent. Code is the
		// hard case (identifiers glued to punctuation tokenize as common
		// code words, dictionary words do not): it is held to ±15 %.
		for _, tc := range []struct {
			file  string
			bound float64
		}{
			{"testdata/chat_en.json", 0.10}, {"testdata/chat_zh.json", 0.10},
			{"testdata/chat_zh2.json", 0.10}, {"testdata/chat_code.json", 0.15},
		} {
			file := tc.file
			t.Run(string(enc)+"/"+file, func(t *testing.T) {
				body, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				orig := promptText(t, body)
				red := promptText(t, r.RedactJSON(body))
				// Several keys: the ratio must hold for any key, not a lucky one.
				var sumOrig, sumRed int
				for _, key := range []string{"0123456789abcdef-k1", "0123456789abcdef-k2", "0123456789abcdef-k3"} {
					rk, err := New(nil, []byte(key))
					if err != nil {
						t.Fatal(err)
					}
					red = promptText(t, rk.RedactJSON(body))
					a, _, _ := codec.Encode(orig)
					b, _, _ := codec.Encode(red)
					sumOrig += len(a)
					sumRed += len(b)
				}
				ratio := float64(sumRed) / float64(sumOrig)
				t.Logf("%s %s: original %d tokens, redacted %d tokens, ratio %.3f", enc, file, sumOrig/3, sumRed/3, ratio)
				if ratio < 1-tc.bound || ratio > 1+tc.bound {
					t.Errorf("token ratio %.3f outside ±%.0f%%\noriginal: %.300s\nredacted: %.300s", ratio, 100*tc.bound, orig, red)
				}
			})
		}
	}
}

// TestSingleTokenHan checks the embedded cost table against the tokenizer:
// exactly the Han characters that are one cl100k token are in it.
func TestSingleTokenHan(t *testing.T) {
	codec, err := tokenizer.Get(tokenizer.Cl100kBase)
	if err != nil {
		t.Fatal(err)
	}
	for r := rune(0x4E00); r <= 0x9FFF; r++ {
		ids, _, _ := codec.Encode(string(r))
		if single := len(ids) == 1; single != commonSet.has(r) {
			t.Errorf("%q: one token %v, table says %v", r, single, commonSet.has(r))
		}
	}
	for _, r := range rareRunes {
		if commonSet.has(r) {
			t.Errorf("rare replacement %q is a single-token character", r)
		}
	}
	t.Logf("%d common replacements, %d words, %d rare replacements", len(hanRunes), len(hanWordList), len(rareRunes))
}
