package cluster

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// apiRequest is the part of an OpenAI chat or completion request the
// simulator reads; other fields (temperature, tools, …) are accepted and
// ignored.
type apiRequest struct {
	Model               string          `json:"model"`
	Messages            []apiMessage    `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	IgnoreEOS bool `json:"ignore_eos"`
	N         *int `json:"n"`
}

type apiMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// errBadRequest marks input errors answered with 400.
var errBadRequest = errors.New("bad request")

// renderChat is the simulator's chat template: "role: content\n" per
// message, so requests sharing a system prompt share their leading blocks.
func renderChat(msgs []apiMessage) ([]byte, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: messages must not be empty", errBadRequest)
	}
	var b bytes.Buffer
	for i, m := range msgs {
		b.WriteString(m.Role)
		b.WriteString(": ")
		if err := appendContent(&b, m.Content); err != nil {
			return nil, fmt.Errorf("%w: messages[%d].content: %v", errBadRequest, i, err)
		}
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// appendContent writes a message's text: a string, null, or an array of
// parts whose "text" fields are concatenated (other parts are ignored).
func appendContent(b *bytes.Buffer, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		b.WriteString(s)
		return nil
	case raw[0] == '[':
		var parts []struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return err
		}
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return nil
	}
	return errors.New("want a string or an array of parts")
}

// parsePrompt reads a completion prompt: a string (text), a token array
// (ids), or a one-element array of either.
func parsePrompt(raw json.RawMessage) (ids []uint32, text []byte, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, fmt.Errorf("%w: prompt is required", errBadRequest)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return nil, []byte(s), nil
	}
	var list []int64
	if json.Unmarshal(raw, &list) == nil {
		ids = make([]uint32, len(list))
		for i, id := range list {
			ids[i] = uint32(id)
		}
		return ids, nil, nil
	}
	var prompts []json.RawMessage
	if json.Unmarshal(raw, &prompts) == nil {
		if len(prompts) != 1 {
			return nil, nil, fmt.Errorf("%w: the simulator serves one prompt per request, got %d", errBadRequest, len(prompts))
		}
		return parsePrompt(prompts[0])
	}
	return nil, nil, fmt.Errorf("%w: prompt must be a string or token array", errBadRequest)
}

// RenderPrompt returns the prompt text the simulator tokenises for a
// request body sent to path ("/v1/chat/completions" or "/v1/completions");
// token ids of a token-array prompt become 4 bytes each (one estimated
// token). Use it to turn recorded or planned bodies into SimRequests.
func RenderPrompt(path string, body []byte) ([]byte, error) {
	var req apiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("%w: invalid JSON: %v", errBadRequest, err)
	}
	if strings.HasSuffix(path, "/chat/completions") {
		return renderChat(req.Messages)
	}
	ids, text, err := parsePrompt(req.Prompt)
	if err != nil || ids == nil {
		return text, err
	}
	out := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		out = binary.LittleEndian.AppendUint32(out, id)
	}
	return out, nil
}

// job is a validated request, ready for the engine.
type job struct {
	api          apiKind // the shape of the answer (apis.go)
	inputs       int     // embeddings: inputs to answer
	chat         bool
	stream       bool
	includeUsage bool
	model        string
	prompt       []uint32 // token ids (o200k_base)
	promptTokens int
	outLen       int
	finish       string
	seed         uint64
}

// parseJob validates body and derives the simulated output length.
func (c *Cluster) parseJob(body []byte, chat bool) (*job, int, error) {
	var req apiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("%w: invalid JSON: %v", errBadRequest, err)
	}
	if c.o.StrictModel && req.Model != c.o.Model {
		return nil, http.StatusNotFound, fmt.Errorf("the model `%s` does not exist", req.Model)
	}
	if req.N != nil && *req.N != 1 {
		return nil, http.StatusBadRequest, fmt.Errorf("%w: n must be 1 on the simulator", errBadRequest)
	}
	j := &job{chat: chat, stream: req.Stream, model: req.Model}
	if j.model == "" {
		j.model = c.o.Model
	}
	j.includeUsage = req.Stream && (c.o.StreamUsage == UsageAlways || req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	var err error
	if j.prompt, err = requestTokens(c.o.Tokenizer, chat, &req); err != nil {
		return nil, http.StatusBadRequest, err
	}
	if status, err := c.sizeJob(j, body, req.MaxTokens, req.MaxCompletionTokens, req.IgnoreEOS); err != nil {
		return nil, status, err
	}
	return j, 0, nil
}

// sizeJob counts j's prompt tokens and derives its output length from the
// request's output caps (maxCompletion wins over maxTokens; nil: none) and
// whether it asked to ignore EOS. Every API's parser ends here.
func (c *Cluster) sizeJob(j *job, body []byte, maxTokensField, maxCompletion *int, ignoreEOS bool) (int, error) {
	req := struct {
		MaxTokens, MaxCompletionTokens *int
		IgnoreEOS                      bool
	}{maxTokensField, maxCompletion, ignoreEOS}
	j.promptTokens = max(len(j.prompt), 1)
	maxLen := c.o.MaxModelLen
	if j.promptTokens >= maxLen {
		return http.StatusBadRequest, fmt.Errorf("%w: this model's maximum context length is %d tokens, the prompt has %d", errBadRequest, maxLen, j.promptTokens)
	}
	maxTokens := maxLen - j.promptTokens
	if req.MaxCompletionTokens != nil {
		req.MaxTokens = req.MaxCompletionTokens
	}
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
		if maxTokens < 1 {
			return http.StatusBadRequest, fmt.Errorf("%w: max_tokens must be at least 1, got %d", errBadRequest, maxTokens)
		}
		if maxTokens > maxLen-j.promptTokens {
			return http.StatusBadRequest, fmt.Errorf("%w: this model's maximum context length is %d tokens; you requested %d (%d in the prompt, %d in the completion)",
				errBadRequest, maxLen, int64(j.promptTokens)+int64(maxTokens), j.promptTokens, maxTokens)
		}
	}
	h := fnv.New64a()
	h.Write(body)
	j.seed = h.Sum64()
	j.outLen, j.finish = maxTokens, "length"
	if !req.IgnoreEOS {
		if n := naturalLength(j.seed, c.o.MeanOutputTokens); n < maxTokens {
			j.outLen, j.finish = n, "stop"
		}
	}
	return 0, nil
}

// naturalLength draws where EOS falls: exponential with the given mean,
// seeded by the request so the same body always stops at the same token.
func naturalLength(seed uint64, mean int) int {
	seed ^= seed >> 33
	seed *= 0xff51afd7ed558ccd
	seed ^= seed >> 33
	u := float64(seed>>11) / (1 << 53)
	return max(1, int(math.Ceil(-math.Log1p(-u)*float64(mean))))
}

// vocab holds the simulated tokens: 4 bytes each, matching the prompt
// estimate, and safe inside a JSON string without escaping.
var vocab = [64]string{
	" the", " and", " for", " you", " not", " are", " but", " can", " was", " one",
	" all", " any", " new", " now", " way", " may", " use", " her", " how", " its",
	" our", " out", " day", " get", " has", " him", " his", " see", " two", " who",
	" did", " let", " put", " say", " she", " too", " old", " own", " set", " run",
	" few", " far", " end", " big", " yes", " yet", " why", " ask", " men", " job",
	" top", " act", " law", " car", " art", " air", " sun", " map", " key", " fix",
	" log", " row", " GPU", " KV.",
}

func tokenText(seed uint64, i int) string {
	x := seed + uint64(i)*0x9e3779b97f4a7c15
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	return vocab[x>>58]
}

func (c *Cluster) handleChat(w http.ResponseWriter, r *http.Request) {
	c.serve(w, r, func(body []byte) (*job, int, error) { return c.parseJob(body, true) })
}

func (c *Cluster) handleCompletion(w http.ResponseWriter, r *http.Request) {
	c.serve(w, r, func(body []byte) (*job, int, error) { return c.parseJob(body, false) })
}

func (c *Cluster) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": c.o.Model, "object": "model", "created": c.created,
			"owned_by": "simcluster", "max_model_len": c.o.MaxModelLen,
		}},
	})
}

// responder writes one request's answer in its API's shape: OpenAI chat or
// completions (response), Responses, Anthropic Messages or embeddings
// (apis.go).
type responder interface {
	start(batch, queue int) // headers (and a stream's opening events)
	begun() bool            // start has run
	tokens(n int) error     // the output has reached n tokens
	finish(reason string, cached int)
	fail(err error)
}

// serve runs one request through the engine; parse validates its body.
func (c *Cluster) serve(w http.ResponseWriter, r *http.Request, parse func([]byte) (*job, int, error)) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, c.o.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("body exceeds %d bytes", c.o.MaxBodyBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "read body: "+err.Error())
		return
	}
	j, status, err := parse(body)
	if err != nil {
		typ := "invalid_request_error"
		if status == http.StatusNotFound {
			typ = "not_found_error"
		}
		writeError(w, status, typ, err.Error())
		return
	}
	if c.waiting.Load() >= int64(c.o.MaxWaiting) {
		writeError(w, http.StatusServiceUnavailable, "overloaded_error", "waiting queue is full")
		return
	}
	id := c.nextID.Add(1)
	req := &request{arrival: time.Now(), notify: make(chan struct{}, 1)}
	req.s = seq{prompt: j.promptTokens, outLen: j.outLen, finish: j.finish, hashes: blockHashes(j.prompt), req: req}

	ctx := r.Context()
	select {
	case c.submit <- req:
	case <-ctx.Done():
		return
	case <-c.stopped:
		writeError(w, http.StatusServiceUnavailable, "overloaded_error", ErrStopped.Error())
		return
	}
	out := c.newResponder(w, j, id)
	for {
		select {
		case <-req.notify:
		case <-ctx.Done():
			req.canceled.Store(true)
			c.cancels.Add(1)
			return
		case <-c.stopped:
			if !req.done.Load() { // never reached the engine
				out.fail(ErrStopped)
				return
			}
		}
		done := req.done.Load()
		if done && req.err != nil {
			out.fail(req.err)
			return
		}
		if !out.begun() && (done || req.admitted.Load()) {
			out.start(req.s.batchAtAdmit, req.s.queueDepth)
		}
		n := int(req.generated.Load())
		if err := out.tokens(n); err != nil {
			req.canceled.Store(true)
			c.cancels.Add(1)
			return
		}
		if done {
			out.finish(req.finish, req.cached)
			return
		}
	}
}

// response writes one request's answer, streamed or whole.
type response struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	j       *job
	id      string
	created int64
	noCache bool

	started bool   // headers written
	sent    int    // tokens written (stream) or collected (JSON)
	buf     []byte // reused chunk buffer
	head    []byte // chunk prefix up to "choices"
}

func newResponse(w http.ResponseWriter, j *job, id uint64, noCache bool) *response {
	o := &response{w: w, rc: http.NewResponseController(w), j: j, created: time.Now().Unix(), noCache: noCache}
	kind, object := "cmpl-", "text_completion"
	if j.chat {
		kind, object = "chatcmpl-", "chat.completion.chunk"
	}
	o.id = kind + "sim" + strconv.FormatUint(id, 10)
	model, _ := json.Marshal(j.model)
	o.head = fmt.Appendf(nil, `data: {"id":%q,"object":%q,"created":%d,"model":%s,`, o.id, object, o.created, model)
	if j.chat {
		o.head = append(o.head, `"system_fingerprint":null,`...)
	}
	return o
}

func (o *response) begun() bool { return o.started }

// start writes the headers: the batch the request joined and the queue it
// found. Streams also get their role-only first chunk (chat) now.
func (o *response) start(batch, queue int) {
	o.started = true
	setEngineHeaders(o.w.Header(), o.id, batch, queue)
	if !o.j.stream {
		return
	}
	openEventStream(o.w)
	if o.j.chat {
		o.chunk(`{"role":"assistant","content":""}`, "null")
	}
	o.rc.Flush()
}

// chunk appends one SSE event with the given delta (chat) or text (JSON
// string, completions) and finish reason (JSON).
func (o *response) chunk(delta, finish string) {
	o.buf = append(o.buf, o.head...)
	if o.j.chat {
		o.buf = append(o.buf, `"choices":[{"index":0,"delta":`...)
		o.buf = append(o.buf, delta...)
	} else {
		o.buf = append(o.buf, `"choices":[{"index":0,"text":`...)
		o.buf = append(o.buf, delta...)
	}
	o.buf = append(o.buf, `,"logprobs":null,"finish_reason":`...)
	o.buf = append(o.buf, finish...)
	o.buf = append(o.buf, "}]"...)
	if o.j.includeUsage {
		o.buf = append(o.buf, `,"usage":null`...)
	}
	o.buf = append(o.buf, "}\n\n"...)
}

// tokens streams tokens up to n (one event per token) and flushes.
func (o *response) tokens(n int) error {
	if !o.j.stream {
		o.sent = max(o.sent, n)
		return nil
	}
	if n <= o.sent {
		return nil
	}
	for ; o.sent < n; o.sent++ {
		t := tokenText(o.j.seed, o.sent)
		if o.j.chat {
			o.chunk(`{"content":"`+t+`"}`, "null")
		} else {
			o.chunk(`"`+t+`"`, "null")
		}
	}
	return o.flush()
}

func (o *response) flush() error {
	_, err := o.w.Write(o.buf)
	o.buf = o.buf[:0]
	if err != nil {
		return err
	}
	return o.rc.Flush()
}

// usage returns the usage object.
func (o *response) usage(cached int) map[string]any {
	u := map[string]any{
		"prompt_tokens":     o.j.promptTokens,
		"completion_tokens": o.sent,
		"total_tokens":      o.j.promptTokens + o.sent,
	}
	if !o.noCache {
		u["prompt_tokens_details"] = map[string]int{"cached_tokens": cached}
	}
	return u
}

// finish ends the response: the finish chunk, usage and [DONE] for a
// stream, the whole body otherwise.
func (o *response) finish(reason string, cached int) {
	if !o.j.stream {
		text := make([]byte, 0, 4*o.sent)
		for i := range o.sent {
			text = append(text, tokenText(o.j.seed, i)...)
		}
		choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": reason}
		object := "text_completion"
		if o.j.chat {
			object = "chat.completion"
			choice["message"] = map[string]any{"role": "assistant", "content": string(text)}
		} else {
			choice["text"] = string(text)
		}
		writeJSON(o.w, http.StatusOK, map[string]any{
			"id": o.id, "object": object, "created": o.created, "model": o.j.model,
			"choices": []any{choice}, "usage": o.usage(cached),
		})
		return
	}
	if o.j.chat {
		o.chunk(`{}`, strconv.Quote(reason))
	} else {
		o.chunk(`""`, strconv.Quote(reason))
	}
	if o.j.includeUsage {
		u, _ := json.Marshal(o.usage(cached))
		o.buf = append(o.buf, o.head...)
		o.buf = append(o.buf, `"choices":[],"usage":`...)
		o.buf = append(o.buf, u...)
		o.buf = append(o.buf, "}\n\n"...)
	}
	o.buf = append(o.buf, "data: [DONE]\n\n"...)
	o.flush()
}

// fail ends the response with err: a 503 before headers, an error event
// (as OpenAI sends) inside a stream.
func (o *response) fail(err error) {
	if !o.started || !o.j.stream {
		writeError(o.w, http.StatusServiceUnavailable, "overloaded_error", err.Error())
		return
	}
	e, _ := json.Marshal(map[string]any{"error": map[string]any{"message": err.Error(), "type": "server_error"}})
	o.buf = append(o.buf, "data: "...)
	o.buf = append(o.buf, e...)
	o.buf = append(o.buf, "\n\n"...)
	o.flush()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"encode response"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeError writes an OpenAI-style error object.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"message": msg, "type": typ, "param": nil, "code": status,
	}})
}
