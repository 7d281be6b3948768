package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// TestO200kPromptsAndPrefixCache: under TokenizerO200k, usage.prompt_tokens
// is the o200k_base count of the rendered messages, and a request sharing a
// prefix with an earlier one is served from whole cached 16-token blocks up
// to the first token that differs.
func TestO200kPromptsAndPrefixCache(t *testing.T) {
	_, srv := startCluster(t, Options{Tokenizer: TokenizerO200k, TimeScale: 50})
	codec, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	count := func(s string) int { ids, _, _ := codec.Encode(s); return len(ids) }
	system := strings.Repeat("You are a careful support agent for a bookshop; answer briefly. ", 12)
	ask := func(user string) (prompt, cached int) {
		body := fmt.Sprintf(`{"model":"m","max_tokens":2,"messages":[{"role":"system","content":%q},{"role":"user","content":%q}]}`, system, user)
		resp := post(t, context.Background(), srv.URL+"/v1/chat/completions", body)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out struct {
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return out.Usage.PromptTokens, out.Usage.PromptTokensDetails.CachedTokens
	}
	user := "Where is my order? It was due on Tuesday."
	p1, c1 := ask(user)
	if want := count("system: "+system+"\n") + count("user: "+user+"\n"); p1 != want {
		t.Errorf("prompt_tokens %d, want the o200k count %d", p1, want)
	}
	if c1 != 0 {
		t.Errorf("first request: %d cached tokens", c1)
	}
	_, c2 := ask("Where is my parcel? It was due on Monday.")
	shared := count("system: "+system+"\n") + count("user: Where is my")
	if want := shared / BlockTokens * BlockTokens; c2 != want {
		t.Errorf("second request: %d cached tokens, want the %d whole blocks before the first differing token", c2, want)
	}
}
