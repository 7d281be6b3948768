package cluster

import (
	"container/list"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// A prompt becomes token ids under Options.Tokenizer. TokenizerEstimate
// packs every four bytes of rendered prompt into one id (so its 16-token
// blocks are the rendered text's 64-byte blocks). TokenizerO200k encodes
// with a real BPE, o200k_base (tiktoken-go, vocabulary embedded: nothing
// is downloaded), so prompt_tokens and the 16-token KV blocks fall where a
// real engine's would, and no redaction block of reel's lines up with them
// by construction. A chat prompt is
// tokenized message by message ("role: content\n"), as a chat template's
// special tokens between messages keep a real engine's BPE from merging
// across them.
//
// Encoding costs about 4 MB of text per CPU-second, so token ids are
// cached per text in a bounded LRU: the earlier turns a conversation
// re-sends, and shared system prompts, are tokenized once.

// tokenCacheTokens bounds the token ids the cache holds (4 bytes each).
const tokenCacheTokens = 8 << 20

type bpe struct {
	codec tokenizer.Codec

	mu     sync.Mutex // guards the cache
	order  *list.List // front = most recently used; values are *cachedTokens
	byKey  map[uint64]*list.Element
	tokens int // ids held
}

type cachedTokens struct {
	key uint64
	ids []uint32
}

var sharedBPE = sync.OnceValues(func() (*bpe, error) {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		return nil, fmt.Errorf("o200k tokenizer: %w", err)
	}
	return &bpe{codec: c, order: list.New(), byKey: map[uint64]*list.Element{}}, nil
})

// encode returns text's token ids; the slice is shared: callers must not
// modify it.
func (t *bpe) encode(text []byte) []uint32 {
	if len(text) == 0 {
		return nil
	}
	h := fnv.New64a()
	h.Write(text)
	key := h.Sum64() ^ uint64(len(text))<<48
	t.mu.Lock()
	if e, ok := t.byKey[key]; ok {
		t.order.MoveToFront(e)
		ids := e.Value.(*cachedTokens).ids
		t.mu.Unlock()
		return ids
	}
	t.mu.Unlock()
	raw, _, _ := t.codec.Encode(string(text))
	ids := make([]uint32, len(raw))
	for i, id := range raw {
		ids[i] = uint32(id)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.byKey[key]; !ok && len(ids) <= tokenCacheTokens/4 {
		t.byKey[key] = t.order.PushFront(&cachedTokens{key: key, ids: ids})
		t.tokens += len(ids)
		for t.tokens > tokenCacheTokens {
			old := t.order.Back()
			c := old.Value.(*cachedTokens)
			t.order.Remove(old)
			delete(t.byKey, c.key)
			t.tokens -= len(c.ids)
		}
	}
	return ids
}

// chatTokens tokenizes a chat prompt message by message.
func (t *bpe) chatTokens(msgs []apiMessage) ([]uint32, error) {
	var ids []uint32
	for i := range msgs {
		one, err := renderChat(msgs[i : i+1])
		if err != nil {
			return nil, fmt.Errorf("%w (messages[%d])", err, i)
		}
		ids = append(ids, t.encode(one)...)
	}
	if len(msgs) == 0 {
		_, err := renderChat(msgs)
		return nil, err
	}
	return ids, nil
}

// blockHashes returns the chain hashes of the prompt's full 16-token
// blocks: hash i covers blocks 0..i, so equal hashes mean equal token
// prefixes, as in vLLM's prefix cache.
func blockHashes(ids []uint32) []uint64 {
	n := len(ids) / BlockTokens
	if n == 0 {
		return nil
	}
	out := make([]uint64, n)
	h := fnv.New64a()
	var b [4 * BlockTokens]byte
	for i := range n {
		for j, id := range ids[i*BlockTokens : (i+1)*BlockTokens] {
			binary.LittleEndian.PutUint32(b[4*j:], id)
		}
		h.Write(b[:])
		out[i] = h.Sum64()
	}
	return out
}

// estimateIDs packs text four bytes to an id (the last id zero-padded).
func estimateIDs(text []byte) []uint32 {
	ids := make([]uint32, (len(text)+3)/4)
	for i := range ids {
		var b [4]byte
		copy(b[:], text[4*i:])
		ids[i] = binary.LittleEndian.Uint32(b[:])
	}
	return ids
}

// textTokens turns rendered prompt text into ids under the tokenizer
// ("" is the default, TokenizerO200k).
func textTokens(tok Tokenizer, text []byte) ([]uint32, error) {
	if tok == TokenizerEstimate {
		return estimateIDs(text), nil
	}
	t, err := sharedBPE()
	if err != nil {
		return nil, err
	}
	return t.encode(text), nil
}

// requestTokens turns a chat or completion request's prompt into ids
// under the tokenizer.
func requestTokens(tok Tokenizer, chat bool, req *apiRequest) ([]uint32, error) {
	if chat {
		return messagesTokens(tok, req.Messages)
	}
	return promptTokens(tok, req.Prompt)
}

// messagesTokens turns chat messages into ids under the tokenizer.
func messagesTokens(tok Tokenizer, msgs []apiMessage) ([]uint32, error) {
	if tok == TokenizerEstimate {
		text, err := renderChat(msgs)
		return estimateIDs(text), err
	}
	t, err := sharedBPE()
	if err != nil {
		return nil, err
	}
	return t.chatTokens(msgs)
}

// promptTokens turns a completion prompt (a string, a token array, or a
// one-element array of either) into ids under the tokenizer.
func promptTokens(tok Tokenizer, raw []byte) ([]uint32, error) {
	ids, text, err := parsePrompt(raw)
	if err != nil || ids != nil {
		return ids, err
	}
	return textTokens(tok, text)
}

// PromptTokens is the prompt length the simulator with options o counts
// for a request body sent to path ("/v1/chat/completions" or
// "/v1/completions"): what its usage.prompt_tokens will say.
func (o Options) PromptTokens(path string, body []byte) (int, error) {
	var req apiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, fmt.Errorf("%w: invalid JSON: %v", errBadRequest, err)
	}
	ids, err := requestTokens(o.Tokenizer, strings.HasSuffix(path, "/chat/completions"), &req)
	return max(len(ids), 1), err
}

// MessageTokens is how many prompt tokens the simulator with options o
// counts for one chat message with a string content (rendered
// "role: content\n" and tokenized on its own, as every message is).
func (o Options) MessageTokens(role, content string) (int, error) {
	o, err := o.withDefaults()
	if err != nil {
		return 0, err
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return 0, err
	}
	ids, err := messagesTokens(o.Tokenizer, []apiMessage{{Role: role, Content: raw}})
	return len(ids), err
}
