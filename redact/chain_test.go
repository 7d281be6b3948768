package redact

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// sipReference is SipHash-c-d written plainly from the paper, one call
// per message.
func sipReference(c, d int, k sipKey, msg []byte) uint64 {
	v0, v1, v2, v3 := k.k0^0x736f6d6570736575, k.k1^0x646f72616e646f6d, k.k0^0x6c7967656e657261, k.k1^0x7465646279746573
	rounds := func(n int) {
		for range n {
			v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		}
	}
	last := uint64(len(msg)) << 56
	for i := 0; i < len(msg); i++ {
		if i%8 == 0 && i+8 <= len(msg) {
			m := binary.LittleEndian.Uint64(msg[i:])
			v3 ^= m
			rounds(c)
			v0 ^= m
			i += 7
			continue
		}
		last |= uint64(msg[i]) << (8 * (i % 8))
	}
	v3 ^= last
	rounds(c)
	v0 ^= last
	v2 ^= 0xff
	rounds(d)
	return v0 ^ v1 ^ v2 ^ v3
}

// TestSipHashVectors checks the reference SipHash-2-4 against the vectors
// of the authors' implementation (key 00..0f, message 00..n-1), then the
// streaming SipHash-1-3 of the chain against the reference at 1-3, written
// whole and in every split into pieces of 1 and more bytes, with write
// and with writeShort.
func TestSipHashVectors(t *testing.T) {
	key := sipKey{k0: 0x0706050403020100, k1: 0x0f0e0d0c0b0a0908}
	msg := make([]byte, 64)
	for i := range msg {
		msg[i] = byte(i)
	}
	for n, want := range map[int]uint64{0: 0x726fdb47dd0e0e31, 1: 0x74f839c593dc67fd, 7: 0xab0200f58b01d137, 8: 0x93f5f5799a932462, 15: 0xa129ca6149be45e5, 63: 0x958a324ceb064572} {
		if got := sipReference(2, 4, key, msg[:n]); got != want {
			t.Errorf("SipHash-2-4 of %d bytes: %#x, want %#x", n, got, want)
		}
	}
	for n := 0; n <= len(msg); n++ {
		want := sipReference(1, 3, key, msg[:n])
		for split := 0; split <= n; split++ {
			var s sipState
			s.init(key)
			s.write(msg[:split])
			if split < n {
				s.writeByte(msg[split])
				for p := split + 1; p < n; p += 3 {
					s.write(msg[p:min(p+3, n)])
				}
			}
			if got := s.sum(); got != want {
				t.Fatalf("n=%d split=%d: %#x, want %#x", n, split, got, want)
			}
			// writeShort, in pieces of 1 to 8 bytes after the split.
			s.init(key)
			s.write(msg[:split])
			for p, k := split, 1; p < n; p, k = p+k, k%8+1 {
				piece := msg[p:min(p+k, n)]
				s.writeShort(load64(piece), len(piece))
			}
			if got := s.sum(); got != want {
				t.Fatalf("writeShort n=%d split=%d: %#x, want %#x", n, split, got, want)
			}
			// writeString of the rest after the split.
			s.init(key)
			s.write(msg[:split])
			s.writeString(string(msg[split:n]))
			if got := s.sum(); got != want {
				t.Fatalf("writeString n=%d split=%d: %#x, want %#x", n, split, got, want)
			}
		}
	}
}

// wordsText is n words of varied prose: letters of mixed case, digits,
// punctuation, a CJK and a Cyrillic word now and then.
func wordsText(n, seed int) []string {
	vocab := strings.Fields("the order arrived late and Support said it ships on Tuesday 42 items, " +
		"please check refund policy: 3.5% fee applies; iPhone McDonald OK? 你好 世界 Привет naïve " +
		"agent tool call returned JSON with status 200 after 17 retries (timeout) — done.")
	out := make([]string, n)
	x := uint64(seed)*0x9e3779b97f4a7c15 + 1
	for i := range out {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		out[i] = vocab[x%uint64(len(vocab))]
	}
	return out
}

// redactedPrompt returns the synthetic text of a one-message chat body
// and its prefix hashes.
func redactedPrompt(tb testing.TB, r *Redactor, text string) (string, []int64) {
	tb.Helper()
	b, err := r.RedactRequestBody("application/json", "", chatBody(text))
	if err != nil {
		tb.Fatal(err)
	}
	return promptText(tb, b.Data), b.PrefixHashes
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func commonHashes(a, b []int64) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestSharedPrefixEveryLength: two prompts that agree on their first N
// words, for every N from 1 to 300, agree on exactly their first N
// synthetic words (synthetic text keeps rune counts, so the same bytes
// before the first differing word, here ASCII) and differ from it on; their
// prefix hashes agree up to the divergence and not after.
func TestSharedPrefixEveryLength(t *testing.T) {
	r := testRedactor(t)
	words := wordsText(300, 1)
	sameFirst := 0
	for n := 1; n <= 300; n++ {
		prefix := strings.Join(words[:n], " ") + " "
		a := prefix + "zebra crossing ahead with 12 lanes and more"
		b := prefix + "yacht crossing ahead with 12 lanes and more"
		sa, ha := redactedPrompt(t, r, a)
		sb, hb := redactedPrompt(t, r, b)
		sp, hp := redactedPrompt(t, r, strings.TrimSuffix(prefix, " "))
		sp = strings.TrimSuffix(sp, "\n") + " "
		// The shared words redact to the prefix-only prompt's synthetic text.
		if !strings.HasPrefix(sa, sp) || !strings.HasPrefix(sb, sp) {
			t.Fatalf("n=%d: the shared %d words do not redact to the same synthetic text\n%q\n%q\n%q", n, n, sp, sa, sb)
		}
		// From the first differing word on, nothing is shared: the first
		// word differs but for a chance draw of the same dictionary word,
		// the identical words after it differ.
		firstA, restA, _ := strings.Cut(sa[len(sp):], " ")
		firstB, restB, _ := strings.Cut(sb[len(sp):], " ")
		if firstA == firstB {
			sameFirst++
		}
		if restA == restB {
			t.Fatalf("n=%d: the words after the first differing one redact the same: %q", n, restA)
		}
		// The prefix's hashes but its last (the partial block at its end)
		// start both prompts' hashes; one more may be shared (a block that
		// ends right before the differing word), none after.
		full := hp[:len(hp)-1]
		if !slices.Equal(full, ha[:len(full)]) || !slices.Equal(full, hb[:len(full)]) {
			t.Fatalf("n=%d: prefix hashes of the shared words differ", n)
		}
		if c := commonHashes(ha, hb); c < len(full) || c > len(full)+1 {
			t.Fatalf("n=%d: %d prefix hashes shared, the prefix alone has %d", n, c, len(hp))
		}
	}
	if sameFirst > 6 {
		t.Errorf("%d of 300 first differing words redacted to the same word", sameFirst)
	}
}

// TestFirstWordDiffers: prompts whose first words differ (same length and
// shape) get different first synthetic words and share nothing after. A
// draw can repeat a dictionary word by chance (about one in the size of a
// length's bucket), so most, not all, first words must differ.
func TestFirstWordDiffers(t *testing.T) {
	r := testRedactor(t)
	pairs := [][2]string{
		{"Hello", "Jelly"}, {"order", "older"}, {"apple", "ample"}, {"ships", "shops"}, {"north", "south"},
		{"agent", "angel"}, {"tools", "pools"}, {"money", "honey"}, {"water", "later"}, {"light", "night"},
		{"cats", "bats"}, {"door", "poor"}, {"rice", "mice"}, {"card", "hard"}, {"time", "lime"},
		{"42", "43"}, {"你", "我"}, {"Привет", "Пришёл"}, {"café", "cafe"}, {"a", "i"},
	}
	rest := " the rest of this prompt is the same in both and long enough to tell: see 12 items."
	differ := 0
	for _, p := range pairs {
		sa, _ := redactedPrompt(t, r, p[0]+rest)
		sb, _ := redactedPrompt(t, r, p[1]+rest)
		wa, ra, _ := strings.Cut(sa, " ")
		wb, rb, _ := strings.Cut(sb, " ")
		if wa != wb {
			differ++
		}
		if commonPrefix(ra, rb) > 4 {
			t.Errorf("%q/%q: the rest shares %d bytes after a different first word:\n%q\n%q", p[0], p[1], commonPrefix(ra, rb), ra, rb)
		}
	}
	if differ < len(pairs)-2 {
		t.Errorf("only %d of %d differing first words gave different synthetic words", differ, len(pairs))
	}
}

// TestSameWordDifferentPrefix: the same word after different prefixes
// becomes different synthetic words (no per-word mapping, which would leak
// word frequencies).
func TestSameWordDifferentPrefix(t *testing.T) {
	r := testRedactor(t)
	for _, word := range []string{"order", "refund", "Tuesday", "你", "42"} {
		seen := map[string]bool{}
		const prefixes = 60
		for i := range prefixes {
			prefix := strings.Join(wordsText(3, i+10), " ")
			s, _ := redactedPrompt(t, r, prefix+" "+word)
			s = strings.TrimSuffix(s, "\n")
			seen[s[len(s)-len(word):]] = true
		}
		// 60 draws from the smallest bucket used here (10 digit pairs … 100)
		// give well over 20 distinct words unless the word maps to itself.
		if len(seen) < 20 {
			t.Errorf("%q after %d prefixes: only %d distinct synthetic words %v", word, prefixes, len(seen), seen)
		}
	}
}

// TestChainFollowsWhatTheEngineSees: kept fields in prompt scope (roles,
// tool names) are part of the chain, fields outside it (model, sampling
// parameters, their order) are not.
func TestChainFollowsWhatTheEngineSees(t *testing.T) {
	r := testRedactor(t)
	content := func(body string) string {
		out := r.RedactJSON([]byte(body))
		return promptText(t, out)
	}
	base := content(`{"model":"a","messages":[{"role":"user","content":"Where is my order today?"}]}`)
	if got := content(`{"model":"b","temperature":0.2,"messages":[{"role":"user","content":"Where is my order today?"}]}`); got != base {
		t.Errorf("the model or a sampling parameter changed the synthetic prompt: %q vs %q", got, base)
	}
	if got := content(`{"model":"a","messages":[{"role":"system","content":"Where is my order today?"}]}`); got == base {
		t.Errorf("a different role gave the same synthetic text %q", got)
	}
	if got := content(`{"model":"a","messages":[{"content":"Where is my order today?","role":"user"}]}`); got == base {
		t.Errorf("the role after the content gave the same synthetic text %q", got)
	}
	tools := func(name string) string {
		return content(`{"tools":[{"type":"function","function":{"name":"` + name + `","description":"Look up an order."}}],"messages":[{"role":"user","content":"Where is my order today?"}]}`)
	}
	if tools("lookup") == tools("search") {
		t.Error("a different tool name gave the same synthetic prompt")
	}
}

// TestGoldenSynthesis pins the synthetic bytes of the current scheme for a
// fixed key and inputs: a release that changes them must name a new
// Scheme (refresh with go test ./redact -run TestGoldenSynthesis -update).
func TestGoldenSynthesis(t *testing.T) {
	r, err := New(nil, []byte("golden-key-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "fingerprint: %s\n", r.Fingerprint())
	for _, file := range []string{"chat_en.json", "chat_zh.json", "chat_code.json", "tools.json"} {
		body, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.RedactRequestBody("application/json", "", body)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "\n== %s\n%s\nprefix_hashes: %v\n", file, b.Data, b.PrefixHashes)
	}
	sse := "data: {\"choices\":[{\"delta\":{\"content\":\"Your order\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\" ships on Tuesday, 42 boxes.\"}}]}\n\ndata: [DONE]\n\n"
	b, err := r.RedactResponseBody("text/event-stream", "", []byte(sse))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&out, "\n== response.sse\n%s", b.Data)
	fmt.Fprintf(&out, "\n== field\n%s\n", r.SynthesizeString("Jane Doe, 12 Baker Street"))
	// Every script class, escapes, controls, camelCase, acronyms, long
	// runs, astral and other-script letters, and (as text) invalid UTF-8.
	scripts := `{"messages":[{"role":"user","content":"Привет мир, Καλημέρα κόσμε! ひらがな カタカナー・テスト 한국어 텍스트 naïve café ÀÉÎ Straße iPhoneX McDonald's API JSON HTTPServer supercalifragilisticexpialidocious antidisestablishmentarianism 3.14 +1-555-0100 ١٢٣ ٤٥ \"quoted\" back\\slash \ttab\nnewline \u0001ctrl \ud840\udc00 㐀 𠀁 עברית العربية हिन्दी ไทย 人工智能模型的训练数据 鑫淼焱"}]}`
	b, err = r.RedactRequestBody("application/json", "", []byte(scripts))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&out, "\n== scripts.json\n%s\nprefix_hashes: %v\n", b.Data, b.PrefixHashes)
	fmt.Fprintf(&out, "\n== invalid.txt\n%q\n", r.RedactText([]byte("bad \xff\xfe bytes a\xe4b c\xe4\xb8 done \xf0\x9f")))

	golden := filepath.Join("testdata", "golden", strings.ReplaceAll(Scheme, "/", "")+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("synthetic bytes of %s changed (line %d); a new way of drawing them is a new Scheme:\ngot:  %.200s\nwant: %.200s", Scheme, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("synthetic bytes of %s changed: %d lines, want %d", Scheme, len(gl), len(wl))
	}
}

func TestSchemeOf(t *testing.T) {
	r := testRedactor(t)
	for fp, want := range map[string]string{
		r.Fingerprint(): Scheme, "redact/1 policy=7ffd9dffbfaa key=42653c60af43": "redact/1",
		"raw": "raw", "": "", "something else": "",
	} {
		if got := SchemeOf(fp); got != want {
			t.Errorf("SchemeOf(%q) = %q, want %q", fp, got, want)
		}
	}
	if !strings.Contains(r.Fingerprint(), "prefix_block=64B") {
		t.Errorf("fingerprint %q does not name the prefix block", r.Fingerprint())
	}
}

// FuzzChainPrefix: for any text and any cut before a space, the synthetic
// text of the part before the cut is a prefix of the whole text's (what
// keeps a shared prompt prefix shared, for every script and for invalid
// UTF-8), and synthesis keeps the rune count.
func FuzzChainPrefix(f *testing.F) {
	for _, s := range []string{"Hello world, this is 42 a test", "你好 世界 日本語 テキスト 한국어", "Привет мир naïve café", "a\xffb c\xe4d", "iPhoneX McDonald 3.14 x"} {
		f.Add(s, 5)
	}
	r, err := New(nil, testKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string, n int) {
		if len(text) > 4096 {
			return
		}
		cut := strings.IndexByte(text[min(max(n, 0), len(text)):], ' ')
		if cut < 0 {
			return
		}
		cut += min(max(n, 0), len(text))
		whole := string(r.RedactText([]byte(text)))
		part := string(r.RedactText([]byte(text[:cut])))
		if !strings.HasPrefix(whole, part) {
			t.Fatalf("synthetic %q of %q is not a prefix of %q (of %q)", part, text[:cut], whole, text)
		}
		if utf8.ValidString(text) && utf8.RuneCountInString(whole) != utf8.RuneCountInString(text) {
			t.Fatalf("%d runes became %d", utf8.RuneCountInString(text), utf8.RuneCountInString(whole))
		}
	})
}
