package recorder

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/reelkit/reel/sse"
)

// pngOf returns a base64 PNG of w×h pixels padded to about size bytes: a
// real header, whatever follows (the estimate reads only the header).
func pngOf(w, h, size int) string {
	b := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR")
	b = binary.BigEndian.AppendUint32(b, uint32(w))
	b = binary.BigEndian.AppendUint32(b, uint32(h))
	b = append(b, 8, 2, 0, 0, 0)
	r := rand.New(rand.NewPCG(uint64(w), uint64(h)))
	for len(b) < size {
		b = append(b, byte(r.Uint32()))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// jpegOf returns a base64 JPEG header of w×h (SOI, an APP0 segment, SOF0).
func jpegOf(w, h int) string {
	b := []byte{0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0}
	b = append(b, 0xFF, 0xC0, 0x00, 0x11, 0x08)
	b = binary.BigEndian.AppendUint16(b, uint16(h))
	b = binary.BigEndian.AppendUint16(b, uint16(w))
	b = append(b, make([]byte, 10)...)
	return base64.StdEncoding.EncodeToString(b)
}

func testdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "redact", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func o200k(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := NewTokenizer(O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// manyTools returns a tools array of n distinct function definitions
// (about 370 bytes each).
func manyTools(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf(`{"type":"function","function":{"name":"lookup_%d","description":"Look up record %d in the inventory and return its fields","parameters":{"type":"object","properties":{"id":{"type":"string","description":"The record's id, e.g. INV-%d"},"fields":{"type":"array","items":{"type":"string"}}},"required":["id"]}}}`, i, i, i))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// TestEstimatePrompt checks each API's walk against a count made by hand
// from the same tokenizer: what is counted, and by which rule.
func TestEstimatePrompt(t *testing.T) {
	tok := o200k(t)
	c := tok.Count
	chat := func(msgs ...string) int { // role, content, role, content, …
		n := chatReplyPriming
		for i := 0; i < len(msgs); i += 2 {
			n += chatTokensPerMessage + c(msgs[i]) + c(msgs[i+1])
		}
		return n
	}
	img := pngOf(1024, 768, 400<<10) // 400 KB of base64: 4 tiles, 765 tokens
	toolJSON := `{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}`
	tests := []struct {
		name      string
		api       sse.API
		body      string
		want      int
		uncounted int
	}{
		{"chat", sse.ChatCompletions, `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is KV caching?"}]}`,
			chat("system", "Be brief.", "user", "What is KV caching?"), 0},
		{"chat parts", sse.ChatCompletions, `{"messages":[{"role":"user","content":[{"type":"text","text":"Describe"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + img + `"}}]}]}`,
			chat("user", "Describe") + 765, 0},
		{"chat low detail jpeg", sse.ChatCompletions, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,` + jpegOf(4000, 3000) + `","detail":"low"}}]}]}`,
			chat("user", "") + 85, 0},
		{"chat jpeg high", sse.ChatCompletions, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,` + jpegOf(4000, 3000) + `"}}]}]}`,
			chat("user", "") + 85 + 170*4, 0}, // 4000×3000 → 2048×1536 → 1024×768: 2×2 tiles
		{"chat image by url", sse.ChatCompletions, `{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`,
			chat("user", "hi"), 1},
		{"tools and calls", sse.ChatCompletions, `{"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","content":"18C, rain"}],"tools":[{"type":"function","function":` + toolJSON + `}]}`,
			chat("user", "Weather?", "assistant", "", "tool", "18C, rain") + c("get_weather") + c(`{"city":"Paris"}`) + c(toolJSON), 0},
		{"completions", sse.Completions, `{"prompt":"Once upon a time"}`, c("Once upon a time"), 0},
		{"completions token ids", sse.Completions, `{"prompt":[[1,2,3],[4,5]]}`, 5, 0},
		{"embeddings", sse.Embeddings, `{"input":["alpha beta","gamma"]}`, c("alpha beta") + c("gamma"), 0},
		{"responses string", sse.Responses, `{"instructions":"Be brief.","input":"What is KV caching?","max_output_tokens":50}`,
			chat("system", "Be brief.", "user", "What is KV caching?"), 0},
		{"responses items", sse.Responses, `{"input":[{"role":"user","content":[{"type":"input_text","text":"Describe"},{"type":"input_image","image_url":"data:image/png;base64,` + img + `"}]},{"type":"function_call","name":"f","arguments":"{}"},{"type":"function_call_output","output":"done"}],"tools":[{"type":"function","name":"f","description":"does f"}]}`,
			chat("user", "Describe") + 765 + c("f") + c("{}") + c("done") + c(`{"description":"does f","name":"f"}`), 0},
		{"anthropic", sse.AnthropicMessages, `{"system":"Be brief.","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"Describe"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pngOf(1568, 784, 64) + `"}}]},{"role":"assistant","content":[{"type":"tool_use","name":"look","input":{"q":1}}]},{"role":"user","content":[{"type":"tool_result","content":"seen"}]}],"tools":[{"name":"look","description":"looks","input_schema":{"type":"object"}}]}`,
			chat("system", "Be brief.", "user", "Describe", "assistant", "", "user", "") + 1640 + c("look") + c(`{"q":1}`) + c("seen") + c(`{"description":"looks","input_schema":{"type":"object"},"name":"look"}`), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			est, ok := EstimatePrompt(tt.api, []byte(tt.body), tok)
			if !ok {
				t.Fatal("not recognised")
			}
			want := tt.want
			if est.Tokens != want || est.Uncounted != tt.uncounted {
				t.Fatalf("estimate %+v, want %d tokens, %d uncounted", est, want, tt.uncounted)
			}
		})
	}
	if _, ok := EstimatePrompt(sse.ChatCompletions, []byte(`{"messages":[]}`), tok); ok {
		t.Error("an empty chat was estimated")
	}
}

// estimateCase is one kind of body the error table covers.
type estimateCase struct {
	name   string
	api    sse.API
	bodies [][]byte
}

// estimateCorpus builds bodies of each kind the issue names — chat, tools,
// multimodal, CJK — varied in length by cutting the test corpora's texts
// at random points, deterministically.
func estimateCorpus(t testing.TB) []estimateCase {
	r := rand.New(rand.NewPCG(19, 19))
	texts := func(name string) []string {
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(testdata(t, name), &req); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range req.Messages {
			if m.Content != "" {
				out = append(out, m.Content)
			}
		}
		return out
	}
	cut := func(s string) string {
		rs := []rune(s)
		return string(rs[:1+r.IntN(len(rs))])
	}
	chatOf := func(sys, user string, extra string) []byte {
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]string{{"role": "system", "content": sys}, {"role": "user", "content": user}}})
		if extra != "" {
			b = append(b[:len(b)-1], ","+extra+"}"...)
		}
		return b
	}
	en := append(texts("chat_en.json"), texts("chat_code.json")...)
	zh := append(texts("chat_zh.json"), texts("chat_zh2.json")...)
	var cases []estimateCase
	add := func(name string, api sse.API, gen func() []byte) {
		c := estimateCase{name: name, api: api}
		for range 200 {
			c.bodies = append(c.bodies, gen())
		}
		cases = append(cases, c)
	}
	add("chat", sse.ChatCompletions, func() []byte {
		return chatOf(cut(en[r.IntN(len(en))]), strings.Repeat(cut(en[r.IntN(len(en))])+" ", 1+r.IntN(4)), "")
	})
	add("tools", sse.ChatCompletions, func() []byte {
		return chatOf(cut(en[0]), cut(en[1]), `"tools":`+manyTools(1+r.IntN(60)))
	})
	add("multimodal", sse.ChatCompletions, func() []byte {
		w, h := 64+r.IntN(4000), 64+r.IntN(4000)
		return []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":` + jsonString(cut(en[2])) +
			`},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + pngOf(w, h, 1000+r.IntN(300<<10)) + `"}}]}]}`)
	})
	add("cjk", sse.ChatCompletions, func() []byte {
		return chatOf(cut(zh[r.IntN(len(zh))]), strings.Repeat(cut(zh[r.IntN(len(zh))]), 1+r.IntN(4)), "")
	})
	return cases
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// bytesPerFour is the estimate reel made before: a token per 4 bytes of
// each message's raw JSON content, plus 4 per message.
func bytesPerFour(body []byte) int {
	var req struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content)/4 + 4
	}
	return n
}

// TestPromptEstimateError measures, per kind of body, the error of the
// cheap estimate (ApproxTokens, which the live pipeline runs) and of the
// old bytes/4 rule against the BPE count (o200k_base, the reference, which
// file imports run), and holds the cheap one to its documented bounds.
// docs/performance.md reports the table (go test ./recorder -run
// TestPromptEstimateError -v).
func TestPromptEstimateError(t *testing.T) {
	tok := o200k(t)
	bounds := map[string]float64{"chat": 0.15, "tools": 0.15, "multimodal": 0.05, "cjk": 0.25} // p99 |error| allowed
	for _, c := range estimateCorpus(t) {
		var approxErr, oldErr []float64
		for _, b := range c.bodies {
			ref, ok := EstimatePrompt(c.api, b, tok)
			if !ok {
				t.Fatalf("%s: body not recognised: %.200s", c.name, b)
			}
			est, _ := EstimatePrompt(c.api, b, ApproxTokens)
			approxErr = append(approxErr, float64(est.Tokens-ref.Tokens)/float64(ref.Tokens))
			oldErr = append(oldErr, float64(bytesPerFour(b)-ref.Tokens)/float64(ref.Tokens))
		}
		med, p99 := errStats(approxErr)
		omed, op99 := errStats(oldErr)
		t.Logf("%-10s approx: median %+6.1f%%  p99 |err| %5.1f%%   bytes/4: median %+8.1f%%  p99 |err| %8.1f%%", c.name, 100*med, 100*p99, 100*omed, 100*op99)
		if p99 > bounds[c.name] {
			t.Errorf("%s: approx p99 |error| %.1f%% above the documented %.0f%%", c.name, 100*p99, 100*bounds[c.name])
		}
	}
}

// errStats returns the median signed error and the p99 absolute error.
func errStats(errs []float64) (median, p99 float64) {
	s := slices.Clone(errs)
	slices.Sort(s)
	median = s[len(s)/2]
	abs := make([]float64, len(errs))
	for i, e := range errs {
		abs[i] = math.Abs(e)
	}
	slices.Sort(abs)
	return median, abs[min(len(abs)-1, int(math.Ceil(0.99*float64(len(abs))))-1)]
}

// BenchmarkEstimatePrompt measures the cost of an estimate per exchange,
// cheap and BPE, on each kind of body (docs/performance.md).
func BenchmarkEstimatePrompt(b *testing.B) {
	tok := o200k(b)
	for _, c := range estimateCorpus(b) {
		size := 0
		for _, body := range c.bodies {
			size += len(body)
		}
		for _, counter := range []struct {
			name string
			tc   TokenCounter
		}{{"approx", ApproxTokens}, {"bpe", tok}} {
			b.Run(c.name+"/"+counter.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(size / len(c.bodies)))
				for i := 0; b.Loop(); i++ {
					EstimatePrompt(c.api, c.bodies[i%len(c.bodies)], counter.tc)
				}
			})
		}
	}
}
