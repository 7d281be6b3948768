package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// startCluster serves a Cluster on loopback and stops it when the test ends.
func startCluster(t *testing.T, o Options) (*Cluster, *httptest.Server) {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	srv := httptest.NewServer(c)
	t.Cleanup(func() {
		cancel()
		<-done
		srv.Close()
	})
	return c, srv
}

func post(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// chunk is what OpenAI's client libraries decode from each stream event.
type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta *struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// readSSE splits a stream into its data payloads, checking the framing
// (every event is one "data: " line followed by a blank line).
func readSSE(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	expectBlank := false
	for sc.Scan() {
		line := sc.Text()
		if expectBlank {
			if line != "" {
				t.Fatalf("event not followed by a blank line: %q", line)
			}
			expectBlank = false
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("unexpected SSE line %q", line)
		}
		out = append(out, data)
		expectBlank = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStreamingFramingMatchesOpenAI(t *testing.T) {
	_, srv := startCluster(t, Options{TimeScale: 20})
	tests := []struct {
		name, path, body string
		chat, usage      bool
	}{
		{"chat with usage", "/v1/chat/completions",
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi there"}],"max_tokens":7,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, true, true},
		{"chat without usage", "/v1/chat/completions",
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":5,"ignore_eos":true,"stream":true}`, true, false},
		{"completion with usage", "/v1/completions",
			`{"model":"m","prompt":"Once upon a time","max_tokens":6,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, context.Background(), srv.URL+tt.path, tt.body)
			defer resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			for _, h := range []string{"x-batch-size", "x-queue-depth"} {
				if _, err := strconv.Atoi(resp.Header.Get(h)); err != nil {
					t.Errorf("header %s = %q, want a number", h, resp.Header.Get(h))
				}
			}
			events := readSSE(t, resp.Body)
			if len(events) == 0 || events[len(events)-1] != "[DONE]" {
				t.Fatalf("stream does not end with [DONE]: %q", events)
			}
			events = events[:len(events)-1]
			var chunks []chunk
			for _, e := range events {
				var c chunk
				if err := json.Unmarshal([]byte(e), &c); err != nil {
					t.Fatalf("event %q: %v", e, err)
				}
				chunks = append(chunks, c)
			}
			wantObject := "text_completion"
			if tt.chat {
				wantObject = "chat.completion.chunk"
			}
			for i, c := range chunks {
				if c.ID != chunks[0].ID || c.Object != wantObject || c.Model != "m" || c.Created == 0 {
					t.Errorf("chunk %d header fields: %+v", i, c)
				}
			}
			if tt.chat {
				first := chunks[0].Choices[0].Delta
				if first.Role == nil || *first.Role != "assistant" || first.Content == nil || *first.Content != "" {
					t.Errorf("first chunk is not role-only: %s", events[0])
				}
				chunks, events = chunks[1:], events[1:]
			}
			if tt.usage {
				u := chunks[len(chunks)-1]
				if len(u.Choices) != 0 || u.Usage == nil {
					t.Fatalf("last chunk is not the usage chunk: %s", events[len(events)-1])
				}
				if u.Usage.CompletionTokens < 5 || u.Usage.PromptTokens < 1 || u.Usage.TotalTokens != u.Usage.PromptTokens+u.Usage.CompletionTokens {
					t.Errorf("usage %+v", *u.Usage)
				}
				chunks, events = chunks[:len(chunks)-1], events[:len(events)-1]
				for i, e := range events {
					if !strings.Contains(e, `"usage":null`) {
						t.Errorf("chunk %d lacks usage:null with include_usage: %s", i, e)
					}
				}
			} else {
				for _, e := range events {
					if strings.Contains(e, `"usage"`) {
						t.Errorf("usage sent without include_usage: %s", e)
					}
				}
			}
			fin := chunks[len(chunks)-1].Choices[0]
			if fin.FinishReason == nil || *fin.FinishReason != "length" {
				t.Errorf("finish chunk: %s", events[len(events)-1])
			}
			var text strings.Builder
			for i, c := range chunks[:len(chunks)-1] {
				ch := c.Choices[0]
				if ch.FinishReason != nil {
					t.Errorf("content chunk %d has finish_reason %q", i, *ch.FinishReason)
				}
				s := ch.Text
				if tt.chat {
					s = ch.Delta.Content
				}
				if s == nil || len(*s) != 4 {
					t.Errorf("content chunk %d carries %v, want one 4-byte token", i, s)
					continue
				}
				text.WriteString(*s)
			}
			if n := len(chunks) - 1; n < 5 || text.Len() != 4*n {
				t.Errorf("%d content chunks, text %q", n, text.String())
			}
		})
	}
}

func TestNonStreamingResponse(t *testing.T) {
	_, srv := startCluster(t, Options{TimeScale: 20})
	resp := post(t, context.Background(), srv.URL+"/v1/chat/completions",
		`{"model":"m","messages":[{"role":"user","content":"hello"}],"max_tokens":9,"ignore_eos":true}`)
	defer resp.Body.Close()
	var out struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role, Content string
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || out.Object != "chat.completion" || len(out.Choices) != 1 {
		t.Fatalf("status %d, body %+v", resp.StatusCode, out)
	}
	c := out.Choices[0]
	if c.Message.Role != "assistant" || len(c.Message.Content) != 36 || c.FinishReason != "length" || out.Usage.CompletionTokens != 9 {
		t.Errorf("choice %+v usage %+v", c, out.Usage)
	}
	if resp.Header.Get("x-batch-size") == "" || resp.Header.Get("x-queue-depth") == "" {
		t.Errorf("batch headers missing: %v", resp.Header)
	}
}

func TestNaturalEOSIsDeterministicAndCapped(t *testing.T) {
	_, srv := startCluster(t, Options{TimeScale: 50, MeanOutputTokens: 8})
	get := func(body string) (int, string) {
		resp := post(t, context.Background(), srv.URL+"/v1/completions", body)
		defer resp.Body.Close()
		var out struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			}
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("decode: %v %+v", err, out)
		}
		return out.Usage.CompletionTokens, out.Choices[0].FinishReason
	}
	stops := 0
	for i := range 12 {
		body := fmt.Sprintf(`{"prompt":"question %d","max_tokens":20}`, i)
		n, reason := get(body)
		if n2, _ := get(body); n2 != n {
			t.Errorf("same body gave %d then %d tokens", n, n2)
		}
		switch {
		case n > 20:
			t.Errorf("%d tokens exceed max_tokens 20", n)
		case reason == "stop":
			stops++
		case reason != "length" || n != 20:
			t.Errorf("finish %q after %d tokens", reason, n)
		}
	}
	if stops == 0 {
		t.Error("no request stopped at a natural EOS with mean 8 and max_tokens 20")
	}
}

func TestRequestErrors(t *testing.T) {
	_, srv := startCluster(t, Options{TimeScale: 20, StrictModel: true, Model: "m", MaxModelLen: 1000, KVCapacityTokens: 4096, MaxBodyBytes: 10000})
	tests := []struct {
		name, path, body string
		status           int
	}{
		{"bad json", "/v1/chat/completions", `{"model":`, 400},
		{"no messages", "/v1/chat/completions", `{"model":"m","messages":[]}`, 400},
		{"bad content", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":7}]}`, 400},
		{"unknown model", "/v1/chat/completions", `{"model":"x","messages":[{"role":"user","content":"hi"}]}`, 404},
		{"n=2", "/v1/completions", `{"model":"m","prompt":"hi","n":2}`, 400},
		{"two prompts", "/v1/completions", `{"model":"m","prompt":["a","b"]}`, 400},
		{"no prompt", "/v1/completions", `{"model":"m"}`, 400},
		{"max_tokens 0", "/v1/completions", `{"model":"m","prompt":"hi","max_tokens":0}`, 400},
		{"too long", "/v1/completions", `{"model":"m","prompt":"` + strings.Repeat(" word", 1500) + `"}`, 400}, // 1,500 o200k tokens
		{"prompt+max_tokens too long", "/v1/completions", `{"model":"m","prompt":"hi","max_tokens":1000}`, 400},
		{"body too big", "/v1/completions", `{"model":"m","prompt":"` + strings.Repeat("a", 20000) + `"}`, 413},
		{"token prompt", "/v1/completions", `{"model":"m","prompt":[1,2,3],"max_tokens":2}`, 200},
		{"unknown path", "/v1/audio/speech", `{}`, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, context.Background(), srv.URL+tt.path, tt.body)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if tt.status != 200 {
				var e struct {
					Error struct{ Message, Type string }
				}
				if json.Unmarshal(b, &e) != nil || e.Error.Message == "" || e.Error.Type == "" {
					t.Errorf("not an OpenAI error object: %s", b)
				}
			}
		})
	}
}

func TestModelsEndpoint(t *testing.T) {
	_, srv := startCluster(t, Options{Model: "llama"})
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Object string
		Data   []struct{ ID, Object string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Object != "list" || len(out.Data) != 1 || out.Data[0].ID != "llama" {
		t.Errorf("models: %v %+v", err, out)
	}
}

func TestMetricsExposeVLLMNames(t *testing.T) {
	_, srv := startCluster(t, Options{TimeScale: 20})
	resp := post(t, context.Background(), srv.URL+"/v1/completions", `{"prompt":"hello world","max_tokens":3,"ignore_eos":true}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	mresp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer mresp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(mresp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	for _, name := range []string{
		"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc",
		"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds",
		"vllm:time_per_output_token_seconds", "vllm:e2e_request_latency_seconds", "vllm:request_queue_time_seconds",
		"vllm:request_success_total", "vllm:num_preemptions_total",
	} {
		f, ok := families[name]
		if !ok {
			t.Errorf("missing %s", name)
			continue
		}
		hasModel := false
		for _, l := range f.GetMetric()[0].GetLabel() {
			hasModel = hasModel || l.GetName() == "model_name" && l.GetValue() == "simcluster-8b"
		}
		if !hasModel {
			t.Errorf("%s lacks the model_name label: %v", name, f.GetMetric()[0].GetLabel())
		}
	}
	if v := families["vllm:generation_tokens_total"].GetMetric()[0].GetCounter().GetValue(); v != 3 {
		t.Errorf("generation tokens %v, want 3", v)
	}
	if n := families["vllm:time_to_first_token_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); n != 1 {
		t.Errorf("TTFT histogram count %d, want 1", n)
	}
}

// TestTTFTGrowsWithQueueOverHTTP checks the wall-clock path end to end:
// eight long prompts sent at once are prefilled one after another, so the
// last one waits behind the queue and says so in x-queue-depth.
func TestTTFTGrowsWithQueueOverHTTP(t *testing.T) {
	_, srv := startCluster(t, Options{TimeScale: 10})
	prompt := strings.Repeat("abcd", 8000) // 8,000 tokens: 4 steps, ~0.7 s simulated each
	type result struct {
		ttft  time.Duration
		queue int
	}
	results := make([]result, 8)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"prompt":"%d %s","max_tokens":2,"ignore_eos":true,"stream":true}`, i, prompt)
			start := time.Now()
			resp := post(t, context.Background(), srv.URL+"/v1/completions", body)
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Errorf("stream ended early: %v", err)
					return
				}
				if strings.HasPrefix(line, "data: {") {
					results[i].ttft = time.Since(start)
					break
				}
			}
			io.Copy(io.Discard, br)
			results[i].queue, _ = strconv.Atoi(resp.Header.Get("x-queue-depth"))
		}()
	}
	wg.Wait()
	first, last, deep := results[0], results[0], results[0]
	for _, r := range results {
		if r.ttft < first.ttft {
			first = r
		}
		if r.ttft > last.ttft {
			last = r
		}
		if r.queue > deep.queue {
			deep = r
		}
	}
	// Eight prefills of ~70 ms wall each: the last waits for ~seven.
	if last.ttft < 3*first.ttft {
		t.Errorf("slowest TTFT %v not ≫ fastest %v", last.ttft, first.ttft)
	}
	if deep.queue < 3 {
		t.Errorf("deepest x-queue-depth %d, want ≥ 3 with eight requests at once", deep.queue)
	}
}

func TestClientCancelFreesTheBatch(t *testing.T) {
	c, srv := startCluster(t, Options{TimeScale: 20})
	ctx, cancel := context.WithCancel(context.Background())
	resp := post(t, ctx, srv.URL+"/v1/completions", `{"prompt":"go","max_tokens":30000,"ignore_eos":true,"stream":true}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().Running != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("stream is not running: %+v", c.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	resp.Body.Close()
	for c.Stats().Running != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("cancelled request still running: %+v", c.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStopEndsStreams(t *testing.T) {
	srv, err := Start(context.Background(), "127.0.0.1:0", Options{TimeScale: 20})
	if err != nil {
		t.Fatal(err)
	}
	resp := post(t, context.Background(), srv.URL+"/v1/chat/completions",
		`{"messages":[{"role":"user","content":"go"}],"max_tokens":30000,"ignore_eos":true,"stream":true}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- srv.Close(context.Background()) }()
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Errorf("read the rest of the stream: %v", err)
	}
	if !bytes.Contains(rest, []byte(`"error"`)) || bytes.Contains(rest, []byte("[DONE]")) {
		t.Errorf("stream cut by shutdown should end with an error event, got tail %q", tail(rest))
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}

func tail(b []byte) []byte { return b[max(0, len(b)-200):] }

func FuzzParseJob(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true}`), true)
	f.Add([]byte(`{"prompt":[[1,2,3]],"max_completion_tokens":-1}`), false)
	f.Add([]byte(`{"prompt":["x"],"ignore_eos":true,"n":1}`), false)
	f.Add([]byte(`{"prompt":"x","max_tokens":9223372036854775807}`), false)
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}]}`), true)
	c, err := New(Options{MaxModelLen: 4096, KVCapacityTokens: 8192})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		j, status, err := c.parseJob(body, chat)
		if err != nil {
			if status < 400 {
				t.Fatalf("error %v with status %d", err, status)
			}
			return
		}
		if j.promptTokens < 1 || j.outLen < 1 || j.promptTokens+j.outLen > 4096 {
			t.Fatalf("accepted job out of bounds: prompt %d output %d", j.promptTokens, j.outLen)
		}
	})
}

func TestFullQueueAnswers503(t *testing.T) {
	c, srv := startCluster(t, Options{TimeScale: 1, MaxWaiting: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := `{"prompt":"` + strings.Repeat("abcd", 6000) + `","max_tokens":1,"stream":true}`
	for range 4 {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/completions", strings.NewReader(long))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().Waiting < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("queue never filled: %+v", c.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp := post(t, context.Background(), srv.URL+"/v1/completions", `{"prompt":"hi","max_tokens":1}`)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d with a full queue, want 503", resp.StatusCode)
	}
}
