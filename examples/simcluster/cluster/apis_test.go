package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// typedEvent is one "event:" + "data:" pair of a Responses or Messages stream.
type typedEvent struct {
	name string
	data map[string]any
}

func readTypedSSE(t *testing.T, r io.Reader) []typedEvent {
	t.Helper()
	var out []typedEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			name = ""
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				t.Fatalf("data %q: %v", line, err)
			}
			if d["type"] != name {
				t.Fatalf("event %q carries data of type %v", name, d["type"])
			}
			out = append(out, typedEvent{name, d})
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return out
}

func num(v any) int { f, _ := v.(float64); return int(f) }

func TestResponsesAPI(t *testing.T) {
	_, srv := startCluster(t, Options{TimeScale: 20})
	resp := post(t, context.Background(), srv.URL+"/v1/responses",
		`{"model":"m","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"What is KV caching?"}]}],"max_output_tokens":7,"stream":true}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("x-batch-size") == "" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	evs := readTypedSSE(t, resp.Body)
	deltas := 0
	for _, e := range evs {
		if e.name == "response.output_text.delta" {
			deltas++
		}
	}
	last := evs[len(evs)-1]
	if evs[0].name != "response.created" || (last.name != "response.completed" && last.name != "response.incomplete") {
		t.Fatalf("events %v … %v", evs[0].name, last.name)
	}
	u := last.data["response"].(map[string]any)["usage"].(map[string]any)
	if num(u["output_tokens"]) != deltas || deltas < 1 || deltas > 7 || num(u["input_tokens"]) < 1 {
		t.Fatalf("%d deltas, usage %v", deltas, u)
	}
	if _, ok := u["input_tokens_details"].(map[string]any)["cached_tokens"]; !ok {
		t.Fatalf("usage %v lacks cached tokens", u)
	}

	whole := post(t, context.Background(), srv.URL+"/v1/responses", `{"input":"hi","max_output_tokens":3}`)
	var r struct {
		Object string `json:"object"`
		Output []struct {
			Content []struct{ Type, Text string } `json:"content"`
		} `json:"output"`
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(whole.Body).Decode(&r); err != nil || r.Object != "response" || r.Usage.OutputTokens < 1 || r.Output[0].Content[0].Type != "output_text" {
		t.Fatalf("response %+v, %v", r, err)
	}
}

func TestMessagesAPI(t *testing.T) {
	_, srv := startCluster(t, Options{TimeScale: 20})
	body := `{"model":"claude-sim","max_tokens":6,"system":"Be brief.","messages":[{"role":"user","content":"What is KV caching?"}],"stream":true}`
	for round := range 2 { // the second time the prefix cache serves the prompt
		resp := post(t, context.Background(), srv.URL+"/v1/messages", body)
		evs := readTypedSSE(t, resp.Body)
		resp.Body.Close()
		names := []string{}
		deltas := 0
		for _, e := range evs {
			names = append(names, e.name)
			if e.name == "content_block_delta" {
				deltas++
			}
		}
		if names[0] != "message_start" || names[len(names)-1] != "message_stop" || names[len(names)-2] != "message_delta" {
			t.Fatalf("events %v", names)
		}
		start := evs[0].data["message"].(map[string]any)["usage"].(map[string]any)
		final := evs[len(evs)-2].data["usage"].(map[string]any)
		if num(final["output_tokens"]) != deltas || deltas < 1 || deltas > 6 || num(start["input_tokens"]) < 1 {
			t.Fatalf("%d deltas, usage %v / %v", deltas, start, final)
		}
		cached := num(final["cache_read_input_tokens"])
		if got := num(final["input_tokens"]) + cached; got != num(start["input_tokens"]) {
			t.Fatalf("input %d + cached %d ≠ prompt %d", num(final["input_tokens"]), cached, num(start["input_tokens"]))
		}
		if round == 1 && cached == 0 && num(start["input_tokens"]) >= BlockTokens {
			t.Errorf("a repeated prompt read nothing from the cache: %v", final)
		}
	}
	resp := post(t, context.Background(), srv.URL+"/v1/messages", `{"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("no max_tokens: status %d", resp.StatusCode)
	}
}

func TestEmbeddingsAPI(t *testing.T) {
	_, srv := startCluster(t, Options{TimeScale: 20})
	resp := post(t, context.Background(), srv.URL+"/v1/embeddings", `{"model":"e","input":["alpha beta","gamma"]}`)
	var r struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Data) != 2 || len(r.Data[1].Embedding) != 8 || r.Usage.PromptTokens < 1 {
		t.Fatalf("embeddings %+v, %v", r, err)
	}
}
