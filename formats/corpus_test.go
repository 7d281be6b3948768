package formats_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/redact"
)

// The benchmark corpus (docs/performance.md, "Formats"): exchanges as the
// recorder hands them to the writer, i.e. raw traffic run through the real
// redactor with the default policy. Redaction keeps lengths, JSON structure
// and prefix sharing, so what reaches disk repeats exactly where the raw
// traffic repeated: shared system prompts, resent conversation history,
// headers, models.

// corpusSpec describes one generated corpus.
type corpusSpec struct {
	name string
	// chat: multi-turn conversations from a few apps with shared system
	// prompts; every request resends the conversation so far. Otherwise
	// every request is one turn of fresh random text (the adversarial case).
	chat bool
	// live is the number of conversations in flight at once: consecutive
	// turns of one conversation are about live requests apart.
	live int
	// stream makes every response an SSE stream of one event per word.
	stream bool
}

var corpora = []corpusSpec{
	{name: "chat", chat: true, live: 256},
	{name: "chat-idle", chat: true, live: 4096},
	{name: "chat-sse", chat: true, live: 256, stream: true},
	{name: "random", live: 256},
}

const corpusRecords = 16384

var words = strings.Fields(`the of and to in is you that it he was for on are as with his they at be this
from have or by one had not but what all were when we there can an your which their said if do will each about how
up out them then she many some so these would other into has more her two like him see time could no make than first
water been call who oil its now find long down day did get come made may part model token cache prompt request reply
please explain write function return error value table query summary customer order account invoice shipping policy`)

// text returns about n bytes of prose from the word list.
func text(rng *rand.Rand, n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		if sb.Len() > 0 {
			if rng.IntN(12) == 0 {
				sb.WriteString(". ")
			} else {
				sb.WriteByte(' ')
			}
		}
		sb.WriteString(words[rng.IntN(len(words))])
	}
	return sb.String()
}

// randomText returns about n bytes of words of random letters: nothing
// repeats beyond single letters.
func randomText(rng *rand.Rand, n int) string {
	b := make([]byte, 0, n+12)
	for len(b) < n {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		for range 2 + rng.IntN(9) {
			b = append(b, byte('a'+rng.IntN(26)))
		}
	}
	return string(b)
}

func between(rng *rand.Rand, lo, hi int) int { return lo + rng.IntN(hi-lo+1) }

// app is one client application: its system prompt, model and SDK.
type app struct {
	system, model, ua, sdkVersion string
}

type message struct{ role, content string }

type conversation struct {
	app   *app
	msgs  []message
	turns int // turns left
	sess  string
	conn  int64
	seq   int32
}

// newCorpus generates n redacted exchanges 10 ms apart (±jitter).
func newCorpus(spec corpusSpec, n int) []formats.Exchange {
	rng := rand.New(rand.NewPCG(42, uint64(len(spec.name))))
	apps := []app{
		{text(rng, 180), "gpt-4o-mini", "OpenAI/Python 1.40.0", "1.40.0"},
		{text(rng, 420), "gpt-4o-mini", "OpenAI/JS 4.56.0", "4.56.0"},
		{text(rng, 650), "llama-3.1-70b-instruct", "OpenAI/Python 1.40.0", "1.40.0"},
		{text(rng, 260), "llama-3.1-70b-instruct", "OpenAI/Python 1.35.3", "1.35.3"},
		{text(rng, 900), "qwen2.5-7b-instruct", "python-httpx/0.27.0", "0.27.0"},
		{text(rng, 120), "gpt-4o", "OpenAI/JS 4.56.0", "4.56.0"},
	}
	appWeights := []int{30, 20, 20, 15, 10, 5}
	pickApp := func() *app {
		r := rng.IntN(100)
		for i, w := range appWeights {
			if r < w {
				return &apps[i]
			}
			r -= w
		}
		return &apps[0]
	}
	var nextConn int64
	newConv := func() *conversation {
		nextConn++
		a := pickApp()
		c := &conversation{app: a, sess: fmt.Sprintf("user-%06d", rng.IntN(100000)), conn: nextConn}
		if spec.chat {
			c.msgs = []message{{"system", a.system}}
			c.turns = 1
			for c.turns < 8 && rng.IntN(100) < 62 {
				c.turns++
			}
		} else {
			c.msgs = []message{{"system", randomText(rng, between(rng, 100, 500))}}
			c.turns = 1
		}
		return c
	}
	live := make([]*conversation, spec.live)
	for i := range live {
		live[i] = newConv()
	}

	key := bytes.Repeat([]byte("reel-benchmark-key!"), 2)
	red, err := redact.New(redact.DefaultPolicy(), key)
	if err != nil {
		panic(err)
	}
	start := time.Date(2025, 3, 14, 10, 0, 0, 0, time.UTC)
	out := make([]formats.Exchange, n)
	for i := range out {
		slot := rng.IntN(len(live))
		c := live[slot]
		if spec.chat {
			c.msgs = append(c.msgs, message{"user", text(rng, between(rng, 40, 260))})
		} else {
			c.msgs = append(c.msgs, message{"user", randomText(rng, between(rng, 300, 900))})
		}
		var answer string
		if spec.chat {
			answer = text(rng, between(rng, 80, 520))
		} else {
			answer = randomText(rng, between(rng, 150, 700))
		}
		ts := start.Add(time.Duration(i)*10*time.Millisecond + time.Duration(rng.IntN(9000))*time.Microsecond)
		out[i] = rawExchange(rng, c, answer, ts, spec.stream)
		out[i].Seq = int64(i + 1)
		red.RedactExchange(&out[i])
		if out[i].RedactErr != "" {
			panic("corpus: redaction failed: " + out[i].RedactErr)
		}
		c.msgs = append(c.msgs, message{"assistant", answer})
		c.seq++
		if c.turns--; c.turns <= 0 {
			live[slot] = newConv()
		}
	}
	return out
}

func jsonString(s string) string { return strconv.Quote(s) } // ASCII prose: Go quoting is valid JSON

func hexID(rng *rand.Rand, n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[rng.IntN(16)]
	}
	return string(b)
}

func alnumID(rng *rand.Rand, n int) string {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[rng.IntN(len(digits))]
	}
	return string(b)
}

// rawExchange is an exchange as the recorder fills it before redaction.
func rawExchange(rng *rand.Rand, c *conversation, answer string, ts time.Time, stream bool) formats.Exchange {
	a := c.app
	maxTokens := []int{256, 512, 1024, 2048}[rng.IntN(4)]
	var req strings.Builder
	fmt.Fprintf(&req, `{"model":%q,"messages":[`, a.model)
	for i, m := range c.msgs {
		if i > 0 {
			req.WriteByte(',')
		}
		fmt.Fprintf(&req, `{"role":%q,"content":%s}`, m.role, jsonString(m.content))
	}
	fmt.Fprintf(&req, `],"max_tokens":%d,"temperature":0.7,"stream":%v`, maxTokens, stream)
	if stream {
		req.WriteString(`,"stream_options":{"include_usage":true}`)
	}
	req.WriteByte('}')
	reqBody := []byte(req.String())

	id := "chatcmpl-" + alnumID(rng, 29)
	created := ts.Unix()
	promptTok := len(reqBody) / 4
	outTok := len(answer) / 4
	ttfb := time.Duration(between(rng, 80, 600)) * time.Millisecond
	var respBody []byte
	var gaps []int32
	var events int32
	var ttft time.Duration
	dur := ttfb
	respCT := "application/json"
	if stream {
		respCT = "text/event-stream; charset=utf-8"
		var sb strings.Builder
		chunk := func(delta, finish string) {
			fmt.Fprintf(&sb, `data: {"id":%q,"object":"chat.completion.chunk","created":%d,"model":%q,"system_fingerprint":"fp_%s","choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]}`+"\n\n",
				id, created, a.model, "f33640a400", delta, finish)
			events++
		}
		chunk(`{"role":"assistant","content":""}`, "null")
		ttft = ttfb
		for j, w := range strings.Fields(answer) {
			if j > 0 {
				w = " " + w
			}
			chunk(`{"content":`+jsonString(w)+`}`, "null")
			g := int32(between(rng, 8000, 40000))
			gaps = append(gaps, g)
			dur += time.Duration(g) * time.Microsecond
		}
		chunk(`{}`, `"stop"`)
		fmt.Fprintf(&sb, `data: {"id":%q,"object":"chat.completion.chunk","created":%d,"model":%q,"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\ndata: [DONE]\n\n",
			id, created, a.model, promptTok, outTok, promptTok+outTok)
		respBody = []byte(sb.String())
	} else {
		respBody = fmt.Appendf(nil, `{"id":%q,"object":"chat.completion","created":%d,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d},"system_fingerprint":"fp_f33640a400"}`,
			id, created, a.model, jsonString(answer), promptTok, outTok, promptTok+outTok)
		dur = ttfb + time.Duration(outTok)*15*time.Millisecond
	}
	batch, queue := between(rng, 1, 32), between(rng, 0, 12)
	reqH := map[string]string{
		"accept":                      "application/json",
		"accept-encoding":             "gzip, deflate",
		"authorization":               "Bearer sk-proj-" + alnumID(rng, 48),
		"connection":                  "keep-alive",
		"content-length":              strconv.Itoa(len(reqBody)),
		"content-type":                "application/json",
		"user-agent":                  a.ua,
		"x-stainless-arch":            "x64",
		"x-stainless-lang":            "python",
		"x-stainless-os":              "Linux",
		"x-stainless-package-version": a.sdkVersion,
		"x-stainless-retry-count":     "0",
		"x-stainless-runtime":         "CPython",
		"x-stainless-runtime-version": "3.11.9",
	}
	respH := map[string]string{
		"content-type":         respCT,
		"date":                 ts.Add(ttfb).Format(time.RFC1123),
		"server":               "uvicorn",
		"x-request-id":         hexID(rng, 32),
		"openai-processing-ms": strconv.Itoa(int(dur / time.Millisecond)),
		"x-batch-size":         strconv.Itoa(batch),
		"x-queue-depth":        strconv.Itoa(queue),
	}
	if stream {
		respH["transfer-encoding"] = "chunked"
		respH["cache-control"] = "no-cache"
	} else {
		respH["content-length"] = strconv.Itoa(len(respBody))
	}
	return formats.Exchange{
		Ts: ts.Truncate(time.Microsecond), TsUnixNs: ts.UnixNano(), Recorder: "edge-1",
		ConnID: c.conn, ConnSeq: c.seq, Session: c.sess,
		Client: fmt.Sprintf("10.1.%d.%d:%d", c.conn%8, c.conn%250, 30000+c.conn%20000),
		Method: "POST", Host: "llm-gateway.internal", Path: "/v1/chat/completions",
		ReqHeaders: reqH, ReqContentType: "application/json", ReqBody: reqBody, ReqBodyBytes: int64(len(reqBody)),
		Model: a.model, Stream: stream, MaxTokens: int32(maxTokens), PromptTokens: int32(promptTok),
		PromptTokensSource: formats.TokensFromUsage,
		Status:             200, RespHeaders: respH, RespContentType: respCT, RespBody: respBody,
		RespBodyBytes: int64(len(respBody)), TTFBNs: int64(ttfb), DurationNs: int64(dur),
		Events: events, TTFTNs: int64(ttft), EventGapsUs: gaps, OutputTokens: int32(outTok),
		BatchSize: int32(batch), QueueDepth: int32(queue), Upstream: "10.2.0.7:8000", Complete: true,
	}
}

// goReplay renders exchanges as GoReplay's file output stores them: for each
// request and response a payload header line ("1 <id> <ts> <latency>"), the
// raw HTTP/1.1 message, and the payload separator. Headers go in sorted
// order, as one client library always sends them the same way.
func goReplay(recs []formats.Exchange) []byte {
	var buf bytes.Buffer
	const sep = "\n\U0001F435\U0001F648\U0001F649\n"
	writeHeaders := func(h map[string]string) {
		keys := make([]string, 0, len(h))
		for k := range h {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&buf, "%s: %s\r\n", k, h[k])
		}
		buf.WriteString("\r\n")
	}
	for i := range recs {
		x := &recs[i]
		id := fmt.Sprintf("%024x", uint64(x.Seq)*0x9e3779b97f4a7c15)
		fmt.Fprintf(&buf, "1 %s %d 0\n", id, x.TsUnixNs)
		fmt.Fprintf(&buf, "%s %s HTTP/1.1\r\nHost: %s\r\n", x.Method, x.Path, x.Host)
		writeHeaders(x.ReqHeaders)
		buf.Write(x.ReqBody)
		buf.WriteString(sep)
		fmt.Fprintf(&buf, "2 %s %d %d\n", id, x.TsUnixNs+x.DurationNs, x.DurationNs)
		fmt.Fprintf(&buf, "HTTP/1.1 %d OK\r\n", x.Status)
		writeHeaders(x.RespHeaders)
		buf.Write(x.RespBody)
		buf.WriteString(sep)
	}
	return buf.Bytes()
}

func gzipSize(data []byte) int64 {
	var c countWriter
	zw := gzip.NewWriter(&c)
	zw.Write(data)
	zw.Close()
	return int64(c)
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

var corpusCache sync.Map // name → []formats.Exchange

func corpus(tb testing.TB, spec corpusSpec) []formats.Exchange {
	if v, ok := corpusCache.Load(spec.name); ok {
		return v.([]formats.Exchange)
	}
	recs := newCorpus(spec, corpusRecords)
	corpusCache.Store(spec.name, recs)
	return recs
}

// TestCorpusShape keeps the benchmark corpus honest: redacted bodies of about
// the sizes docs/performance.md states, prefix sharing preserved, no raw
// credential left.
func TestCorpusShape(t *testing.T) {
	recs := newCorpus(corpora[0], 2000)
	var req, resp int
	shared := 0
	seen := map[int64]bool{}
	for i := range recs {
		x := &recs[i]
		req += len(x.ReqBody)
		resp += len(x.RespBody)
		if strings.Contains(x.ReqHeaders["authorization"], "sk-proj-") {
			t.Fatalf("record %d: raw credential on disk", i)
		}
		if len(x.PrefixHashes) == 0 {
			t.Fatalf("record %d: no prefix hashes", i)
		}
		if seen[x.PrefixHashes[0]] {
			shared++
		}
		seen[x.PrefixHashes[0]] = true
	}
	meanReq, meanResp := req/len(recs), resp/len(recs)
	if meanReq < 600 || meanReq > 1600 || meanResp < 250 || meanResp > 900 {
		t.Errorf("mean bodies %d B / %d B, want about 1 KiB / 0.5 KiB", meanReq, meanResp)
	}
	if shared < len(recs)/2 {
		t.Errorf("only %d of %d requests share their first prompt block with an earlier one", shared, len(recs))
	}
	t.Logf("mean request body %d B, response body %d B; %d of %d share a first block", meanReq, meanResp, shared, len(recs))
}
