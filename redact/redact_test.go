package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/reelkit/reel/formats"
)

func mustNew(tb testing.TB, p *Policy, key string) *Redactor {
	tb.Helper()
	r, err := New(p, []byte(key))
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return r
}

func chatBody(msgs ...string) []byte {
	type msg struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	body := struct {
		Model    string `json:"model"`
		Messages []msg  `json:"messages"`
		Stream   bool   `json:"stream"`
	}{Model: "gpt-4o", Stream: true}
	for i, m := range msgs {
		role := "user"
		if i == 0 {
			role = "system"
		} else if i%2 == 0 {
			role = "assistant"
		}
		body.Messages = append(body.Messages, msg{role, m})
	}
	b, _ := json.Marshal(body)
	return b
}

func TestNewKeys(t *testing.T) {
	if _, err := New(nil, nil); err != ErrNoKey {
		t.Errorf("New(nil key) = %v, want ErrNoKey", err)
	}
	if _, err := New(nil, []byte("short")); err == nil {
		t.Error("New accepted a 5-byte key")
	}
	tests := []struct {
		in      string
		wantLen int
		wantErr bool
	}{
		{strings.Repeat("ab", 32) + "\n", 32, false},
		{"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0", 27, false}, // base64
		{"a plain passphrase of some length", 33, false},
		{"  \n", 0, true},
		{"tooshort", 0, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%.10q", tt.in), func(t *testing.T) {
			k, err := ParseKey([]byte(tt.in))
			if (err != nil) != tt.wantErr || len(k) != tt.wantLen {
				t.Errorf("ParseKey = %d bytes, %v; want %d bytes, error %v", len(k), err, tt.wantLen, tt.wantErr)
			}
		})
	}
	k1, _ := NewRandomKey()
	k2, _ := NewRandomKey()
	if bytes.Equal(k1, k2) || len(k1) != 32 {
		t.Errorf("NewRandomKey: %x, %x", k1, k2)
	}
}

func TestDeterminismAndKeys(t *testing.T) {
	body := chatBody("You are a helpful assistant for ACME Corp.", "My email is jane.doe@example.com; what is 2+2?")
	a1 := mustNew(t, nil, "key-one-0123456789")
	a2 := mustNew(t, nil, "key-one-0123456789")
	b := mustNew(t, nil, "key-two-0123456789")

	ra1, _ := a1.RedactRequestBody("application/json", "", body)
	ra2, _ := a2.RedactRequestBody("application/json", "", body)
	rb, _ := b.RedactRequestBody("application/json", "", body)
	if !bytes.Equal(ra1.Data, ra2.Data) || !reflect.DeepEqual(ra1.PrefixHashes, ra2.PrefixHashes) {
		t.Errorf("same key, same input, different output:\n%s\n%s", ra1.Data, ra2.Data)
	}
	if bytes.Equal(ra1.Data, rb.Data) {
		t.Errorf("different keys gave the same output: %s", rb.Data)
	}
	if ra1.PrefixHashes[0] == rb.PrefixHashes[0] {
		t.Error("different keys gave the same first prefix hash")
	}
	if a1.Fingerprint() != a2.Fingerprint() || a1.Fingerprint() == b.Fingerprint() {
		t.Errorf("fingerprints: %q %q %q", a1.Fingerprint(), a2.Fingerprint(), b.Fingerprint())
	}
	if strings.Contains(a1.Fingerprint(), "key-one") {
		t.Errorf("fingerprint shows the key: %q", a1.Fingerprint())
	}
	p := DefaultPolicy()
	p.BlockBytes = 128
	if c := mustNew(t, p, "key-one-0123456789"); c.Fingerprint() == a1.Fingerprint() {
		t.Error("a different policy has the same fingerprint")
	}
	// Tokens: deterministic per key, different across keys.
	s := "call +14155552671"
	x1, _ := a1.Detect(s)
	x2, _ := a2.Detect(s)
	y, _ := b.Detect(s)
	if x1 != x2 || x1 == y || x1 == s {
		t.Errorf("tokens: %q %q %q", x1, x2, y)
	}
}

func TestPrefixSharing(t *testing.T) {
	r := testRedactor(t)
	system := strings.Repeat("You are a support agent for a large online bookshop. Be polite and precise. ", 4)
	turn1 := "Where is my order? It was supposed to arrive last Tuesday and the tracking page shows nothing."
	reply1 := "I am sorry about the delay. Could you give me the order number so I can look it up?"
	turn2 := "Sure, it is the one with the blue notebooks and the calendar."

	t.Run("multi-turn", func(t *testing.T) {
		first, _ := r.RedactRequestBody("application/json", "", chatBody(system, turn1))
		second, _ := r.RedactRequestBody("application/json", "", chatBody(system, turn1, reply1, turn2))
		n := len(first.PrefixHashes)
		if n < 2 || len(second.PrefixHashes) <= n {
			t.Fatalf("hashes: %d then %d", n, len(second.PrefixHashes))
		}
		// All but turn 1's last hash (its partial final block) start turn 2's.
		if !reflect.DeepEqual(first.PrefixHashes[:n-1], second.PrefixHashes[:n-1]) {
			t.Errorf("turn 2 does not start with turn 1's hashes:\n%v\n%v", first.PrefixHashes, second.PrefixHashes[:n])
		}
		var a, b map[string]any
		json.Unmarshal(first.Data, &a)
		json.Unmarshal(second.Data, &b)
		ma, mb := a["messages"].([]any), b["messages"].([]any)
		for i := range ma {
			if !reflect.DeepEqual(ma[i], mb[i]) {
				t.Errorf("message %d differs between turns: %v vs %v", i, ma[i], mb[i])
			}
		}
	})

	t.Run("different system prompts share nothing", func(t *testing.T) {
		a, _ := r.RedactRequestBody("application/json", "", chatBody("Alpha system prompt.", turn1))
		b, _ := r.RedactRequestBody("application/json", "", chatBody("Omega system prompt.", turn1))
		for i := range min(len(a.PrefixHashes), len(b.PrefixHashes)) {
			if a.PrefixHashes[i] == b.PrefixHashes[i] {
				t.Errorf("block %d equal after a differing first block", i)
			}
		}
	})

	t.Run("block size is configurable", func(t *testing.T) {
		p := DefaultPolicy()
		p.BlockBytes = 16
		small := mustNew(t, p, string(testKey))
		a, _ := small.RedactRequestBody("application/json", "", chatBody(system))
		b, _ := r.RedactRequestBody("application/json", "", chatBody(system))
		if len(a.PrefixHashes) < 3*len(b.PrefixHashes) {
			t.Errorf("16-byte blocks: %d hashes, 64-byte blocks: %d", len(a.PrefixHashes), len(b.PrefixHashes))
		}
	})
}

func TestSyntheticTextShape(t *testing.T) {
	r := testRedactor(t)
	tests := []string{
		"Hello, World! This is a test of the redactor.",
		"ALL CAPS and MixedCase iPhone McDonald",
		"numbers 12345 and 3.14159, phone 555-0100",
		"你好，世界！这是一个测试。",
		"日本語のテキスト、ひらがなとカタカナ。",
		"한국어 문장입니다.",
		"Привет, как дела? Всё хорошо.",
		"Γειά σου Κόσμε",
		"مرحبا بالعالم",
		"emoji 😀🎉 and symbols © ® → ∑",
		"café naïve résumé Ærø",
		"tabs\tand\nnewlines\r\n  spaces",
		"supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis",
		"mixed中文English混合123",
		"invalid \xff\xfe utf8",
		"",
	}
	for _, in := range tests {
		t.Run(fmt.Sprintf("%.20q", in), func(t *testing.T) {
			out := string(r.RedactText([]byte(in)))
			if utf8.RuneCountInString(out) != utf8.RuneCountInString(in) {
				t.Fatalf("rune count %d → %d: %q", utf8.RuneCountInString(in), utf8.RuneCountInString(out), out)
			}
			var ri []rune // each invalid byte is one rune (U+FFFD), as RuneCount counts it
			for i := 0; i < len(in); {
				r, n := utf8.DecodeRuneInString(in[i:])
				ri = append(ri, r)
				i += n
			}
			ro := []rune(out)
			for i := range ri {
				ci, co := classify(ri[i]), classify(ro[i])
				if ci != co {
					t.Errorf("rune %d: %q (class %d) became %q (class %d)", i, ri[i], ci, ro[i], co)
				}
				if ci == classOther && ri[i] != utf8.RuneError && ri[i] != ro[i] {
					t.Errorf("rune %d: %q should stay, became %q", i, ri[i], ro[i])
				}
				if ci == classLatin && unicode.IsUpper(ri[i]) != unicode.IsUpper(ro[i]) {
					t.Errorf("rune %d: case of %q not kept in %q", i, ri[i], ro[i])
				}
			}
			if in != "" && out == in {
				t.Errorf("text unchanged: %q", out)
			}
		})
	}
}

func TestSyntheticWordsAreDictionaryWords(t *testing.T) {
	r := testRedactor(t)
	dict := map[string]bool{}
	for _, b := range wordsByLen {
		for _, w := range b {
			dict[w] = true
		}
	}
	out := string(r.RedactText([]byte("Please summarise the quarterly revenue figures for our board meeting tomorrow")))
	for _, w := range strings.Fields(out) {
		if !dict[strings.ToLower(w)] {
			t.Errorf("%q is not a dictionary word (output %q)", w, out)
		}
	}
	for n := 1; n <= maxWordLen; n++ {
		if len(wordsByLen[n]) < minWordsPerLength && n > 2 {
			t.Errorf("only %d words of length %d", len(wordsByLen[n]), n)
		}
	}
}

// shape replaces every string by "s" so two JSON values can be compared
// for structure (keys, nesting, array lengths, numbers, bools, nulls).
func shape(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			m[k] = shape(e)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = shape(e)
		}
		return out
	case string:
		return "s"
	}
	return v
}

func TestJSONShapeAndAllowList(t *testing.T) {
	r := testRedactor(t)
	for _, file := range []string{"testdata/chat_en.json", "testdata/chat_zh.json", "testdata/tools.json"} {
		t.Run(file, func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			out := r.RedactJSON(in)
			if !json.Valid(out) {
				t.Fatalf("output is not JSON: %s", out)
			}
			var a, b any
			json.Unmarshal(in, &a)
			json.Unmarshal(out, &b)
			if !reflect.DeepEqual(shape(a), shape(b)) {
				t.Errorf("shape changed:\n%v\n%v", shape(a), shape(b))
			}
			ma, mb := a.(map[string]any), b.(map[string]any)
			for _, k := range []string{"model", "stream", "max_tokens", "temperature", "tool_choice"} {
				if !reflect.DeepEqual(ma[k], mb[k]) {
					t.Errorf("%s: %v → %v", k, ma[k], mb[k])
				}
			}
			ms, ok := mb["messages"].([]any)
			if !ok {
				return
			}
			for i, m := range ms {
				orig := ma["messages"].([]any)[i].(map[string]any)
				if m.(map[string]any)["role"] != orig["role"] {
					t.Errorf("message %d role changed", i)
				}
				if c, ok := orig["content"].(string); ok && len(c) > 10 && c == m.(map[string]any)["content"] {
					t.Errorf("message %d content kept verbatim", i)
				}
			}
		})
	}
	t.Run("tools keep names and schemas", func(t *testing.T) {
		in, _ := os.ReadFile("testdata/tools.json")
		out := r.RedactJSON(in)
		for _, keep := range []string{`"name":"get_weather"`, `"description":"City and country, e.g. Paris, France"`, `"enum":["celsius","fahrenheit"]`, `"name":"lookup_order"`} {
			if !bytes.Contains(out, []byte(keep)) {
				t.Errorf("lost %s in %s", keep, out)
			}
		}
	})
	t.Run("policy adds and removes", func(t *testing.T) {
		p, err := ParsePolicy([]byte("json:\n  keep: [metadata.tier]\n  unkeep: [model]\n"))
		if err != nil {
			t.Fatal(err)
		}
		rp := mustNew(t, p, string(testKey))
		out := rp.RedactJSON([]byte(`{"model":"gpt-4o","metadata":{"tier":"gold","note":"gold"}}`))
		var v struct {
			Model    string
			Metadata struct{ Tier, Note string }
		}
		json.Unmarshal(out, &v)
		if v.Model == "gpt-4o" || v.Metadata.Tier != "gold" || v.Metadata.Note == "gold" {
			t.Errorf("policy not applied: %s", out)
		}
	})
}

func TestJSONEdgeCases(t *testing.T) {
	r := testRedactor(t)
	tests := []struct {
		name, in string
		valid    bool // output must be valid JSON
	}{
		{"escapes", `{"messages":[{"role":"user","content":"line1\nline2 \"quoted\" \\ back \u00e9\ud83d\ude00 \u4e2d"}]}`, true},
		{"lone surrogate", `{"prompt":"bad \ud800 x"}`, true},
		{"top-level array", `[{"prompt":"a"},"free text",1,true,null]`, true},
		{"top-level string", `"just a string"`, true},
		{"empty", `{}`, true},
		{"ndjson", "{\"prompt\":\"one\"}\n{\"prompt\":\"two\"}\n", false},
		{"truncated in string", `{"model":"gpt-4o","messages":[{"role":"user","content":"Hello my name is Jo`, false},
		{"truncated in literal", `{"stream":tru`, false},
		{"bare words", `{model: gpt-4o, secret: hunter2}`, false},
		{"deep", strings.Repeat("[", 2000) + strings.Repeat("]", 2000), false},
		{"big number", `{"card":4111111111111111,"n":12345678901234567890123}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := r.RedactJSON([]byte(tt.in))
			if json.Valid([]byte(tt.in)) && !json.Valid(out) {
				t.Errorf("valid input, invalid output: %s", out)
			}
			if tt.valid && !json.Valid([]byte(tt.in)) {
				t.Fatalf("test input is not valid JSON")
			}
			for _, secret := range []string{"Jo", "hunter2", "4111111111111111", "one", "two", "just a string", "line1"} {
				if strings.Contains(tt.in, secret) && bytes.Contains(out, []byte(secret)) {
					t.Errorf("%q survived: %s", secret, out)
				}
			}
			if len(out) > 2*len(tt.in)+16 {
				t.Errorf("output grew from %d to %d bytes", len(tt.in), len(out))
			}
		})
	}
}

func TestSSE(t *testing.T) {
	r := testRedactor(t)
	in := "event: message\nid: 7\n: keep-alive comment\n" +
		"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Your card 4111 1111 1111 1111\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" is on file.\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7}}\r\n\r\n" +
		"data: plain text line\n\n" +
		"data: [DONE]\n\n"
	b, err := r.RedactResponseBody("text/event-stream; charset=utf-8", "", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out := string(b.Data)
	if strings.Count(out, "\n") != strings.Count(in, "\n") || strings.Count(out, "data:") != 4 {
		t.Errorf("event framing changed:\n%s", out)
	}
	for _, keep := range []string{"event: message", "id: 7", `"model":"gpt-4o"`, `"role":"assistant"`, `"finish_reason":"stop"`, `"prompt_tokens":12`, "data: [DONE]", "\r\n\r\n"} {
		if !strings.Contains(out, keep) {
			t.Errorf("lost %q:\n%s", keep, out)
		}
	}
	for _, gone := range []string{"4111", "on file", "plain text", "keep-alive"} {
		if strings.Contains(out, gone) {
			t.Errorf("%q survived:\n%s", gone, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "data: {"); ok && !json.Valid([]byte("{"+strings.TrimSuffix(rest, "\r"))) {
			t.Errorf("event JSON invalid: %s", line)
		}
	}
}

func TestOtherBodies(t *testing.T) {
	r := testRedactor(t)
	t.Run("form", func(t *testing.T) {
		b, _ := r.RedactRequestBody("application/x-www-form-urlencoded", "", []byte("model=gpt-4o&prompt=Hello+John+Smith&email=a%40b.example.com&flag"))
		out := string(b.Data)
		if !strings.HasPrefix(out, "model=gpt-4o&prompt=") || !strings.HasSuffix(out, "&flag") || strings.Contains(out, "John") || strings.Contains(out, "a%40b.example.com") {
			t.Errorf("form: %s", out)
		}
	})
	t.Run("text", func(t *testing.T) {
		in := "Dear Bob, your SSN 078-05-1120 is on file."
		b, _ := r.RedactRequestBody("text/plain", "", []byte(in))
		if utf8.RuneCount(b.Data) != utf8.RuneCountInString(in) || bytes.Contains(b.Data, []byte("Bob")) || bytes.Contains(b.Data, []byte("078-05-1120")) {
			t.Errorf("text: %s", b.Data)
		}
		if len(b.PrefixHashes) == 0 {
			t.Error("text body has no prefix hashes")
		}
	})
	t.Run("binary filler", func(t *testing.T) {
		in := []byte("\x89PNG\r\n\x1a\nsecret pixels")
		b, _ := r.RedactRequestBody("image/png", "", in)
		if len(b.Data) != len(in) || bytes.Contains(b.Data, []byte("secret")) {
			t.Errorf("binary: %q", b.Data)
		}
	})
	t.Run("binary drop", func(t *testing.T) {
		p := DefaultPolicy()
		p.Binary = BinaryDrop
		b, _ := mustNew(t, p, string(testKey)).RedactRequestBody("application/octet-stream", "", []byte{0xff, 0, 1, 2})
		if len(b.Data) != 0 {
			t.Errorf("dropped binary kept %d bytes", len(b.Data))
		}
	})
	t.Run("compressed fails closed", func(t *testing.T) {
		_, err := r.RedactRequestBody("application/json", "gzip", []byte{0x1f, 0x8b, 1, 2})
		if err == nil || !strings.Contains(err.Error(), "gzip") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("sniffed JSON", func(t *testing.T) {
		b, _ := r.RedactRequestBody("", "", []byte(` {"model":"m","prompt":"secret words"}`))
		if !bytes.Contains(b.Data, []byte(`"model":"m"`)) || bytes.Contains(b.Data, []byte("secret")) {
			t.Errorf("sniffed: %s", b.Data)
		}
	})
}

func TestTopic(t *testing.T) {
	r := testRedactor(t)
	tests := []struct{ text, want string }{
		{"Please translate this paragraph into French", "translation"},
		{"Why does my Python function throw an exception when I compile?", "coding"},
		{"请帮我翻译这段话", "translation"},
		{"What a lovely day", ""},
		{"functional programming", ""}, // "func " needs the space; ASCII keywords match at word starts
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			b, _ := r.RedactRequestBody("application/json", "", chatBody("You are helpful.", tt.text))
			if b.Topic != tt.want {
				t.Errorf("topic = %q, want %q", b.Topic, tt.want)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	r := testRedactor(t)
	in, _ := os.ReadFile("testdata/tools.json")
	b, expl, err := r.Explain("application/json", in, false)
	if err != nil {
		t.Fatal(err)
	}
	byField := map[string]Explanation{}
	for _, e := range expl {
		byField[e.Field] = e
	}
	if e := byField["model"]; e.Action != "keep" || e.After != e.Before {
		t.Errorf("model: %+v", e)
	}
	if e := byField["messages[1].content"]; e.Action != "synthetic" || e.After == e.Before || !strings.Contains(e.Why, "messages.**") {
		t.Errorf("content: %+v", e)
	}
	var sb strings.Builder
	if err := WriteExplanation(&sb, b, expl); err != nil || !strings.Contains(sb.String(), "prefix_hashes:") {
		t.Errorf("WriteExplanation: %v\n%s", err, sb.String())
	}
}

func TestLoadPolicy(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, file, text string
		wantErr          string
		check            func(*Policy) bool
	}{
		{"yaml", "p.yaml", "version: 1\nblock_bytes: 128\nheaders:\n  keep: [X-Tenant]\ntopics:\n  - name: billing\n    keywords: [invoice, refund]\n", "",
			func(p *Policy) bool {
				return p.BlockBytes == 128 && contains(p.KeepHeaders, "x-tenant") && p.Topics[len(p.Topics)-1].Name == "billing"
			}},
		{"json", "p.json", `{"base":"none","json":{"keep":["model"]},"binary":"drop"}`, "",
			func(p *Policy) bool { return len(p.Keep) == 1 && p.Binary == BinaryDrop && len(p.KeepHeaders) == 0 }},
		{"empty file is the default", "e.yaml", "", "", func(p *Policy) bool { return reflect.DeepEqual(p, DefaultPolicy()) }},
		{"typo", "t.yaml", "jsn:\n  keep: [x]\n", "jsn", nil},
		{"bad mode", "m.yaml", "text: keep\n", "unknown mode", nil},
		{"bad base", "b.yaml", "base: other\n", "unknown base", nil},
		{"bad path", "p2.yaml", "json:\n  keep: [\"a..b\"]\n", "empty key", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := dir + "/" + tt.file
			os.WriteFile(path, []byte(tt.text), 0o600)
			p, err := LoadPolicy(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(p) {
				t.Errorf("policy not as expected: %+v", p)
			}
		})
	}
	if _, err := LoadPolicy(dir + "/missing.yaml"); err == nil {
		t.Error("missing file accepted")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestConcurrentUse(t *testing.T) {
	r := testRedactor(t)
	body := benchBody(t)
	want := r.RedactJSON(body)
	done := make(chan []byte, 8)
	for range 8 {
		go func() {
			var out []byte
			for range 20 {
				out = r.RedactJSON(body)
			}
			done <- out
		}()
	}
	for range 8 {
		if got := <-done; !bytes.Equal(got, want) {
			t.Error("concurrent redaction differs")
		}
	}
}

// TestRedactClientMemo: the remembered client address is what detecting it
// afresh gives, on every call and after the memo starts again.
func TestRedactClientMemo(t *testing.T) {
	r := testRedactor(t)
	for _, addr := range []string{"203.0.113.7:51234", "[2001:db8::1]:443", "10.0.0.3:80", "gateway-7:9000", ""} {
		want, _ := r.detect(addr)
		for i := range 3 {
			x := &formats.Exchange{Client: addr}
			r.RedactExchange(x)
			if x.Client != want {
				t.Fatalf("call %d: client %q redacted to %q, want %q", i, addr, x.Client, want)
			}
		}
		if strings.HasPrefix(addr, "203.") && want == addr {
			t.Fatalf("address %q kept raw", addr)
		}
	}
	for i := range maxMemo + 10 {
		r.redactClient(fmt.Sprintf("198.51.100.%d:%d", i%250, i))
	}
	if n := len(r.clients.m); n > maxMemo {
		t.Fatalf("memo holds %d addresses, bound %d", n, maxMemo)
	}
	want, _ := r.detect("198.51.100.9:9")
	if got := r.redactClient("198.51.100.9:9"); got != want {
		t.Fatalf("after the memo restarted: %q, want %q", got, want)
	}
}

// TestRedactHeaderMemo: a kept header's value is redacted as detecting it
// afresh gives, on every exchange that repeats it.
func TestRedactHeaderMemo(t *testing.T) {
	r := testRedactor(t)
	for _, ua := range []string{"Go-http-client/1.1", "crawler (mailto:ops@example.com)", "python-requests/2.31.0 203.0.113.9", strings.Repeat("x@example.com ", 30)} {
		want, _ := r.detect(ua)
		for i := range 3 {
			h := map[string]string{"user-agent": ua}
			r.RedactHeaders(h)
			if h["user-agent"] != want {
				t.Fatalf("call %d: %q redacted to %q, want %q", i, ua, h["user-agent"], want)
			}
		}
		if strings.Contains(ua, "@") && strings.Contains(want, "ops@example.com") {
			t.Fatalf("email kept raw in %q", want)
		}
	}
}
