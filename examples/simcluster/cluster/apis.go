package cluster

// The APIs beyond OpenAI chat and completions (api.go): OpenAI Responses,
// Anthropic Messages and embeddings. Each parses its request into a job for
// the same engine and answers in its own shape, streamed events included,
// so that recording and replaying them can be tested end to end.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"time"
)

// apiKind is the shape a job's answer takes.
type apiKind int

const (
	apiOpenAI     apiKind = iota // chat and completions (response, api.go)
	apiResponses                 // POST /v1/responses
	apiMessages                  // POST /v1/messages (Anthropic)
	apiEmbeddings                // POST /v1/embeddings
)

// setEngineHeaders sets the headers every answer carries: its id, the batch
// it joined and the queue it found.
func setEngineHeaders(h http.Header, id string, batch, queue int) {
	h.Set("x-request-id", id)
	h.Set("x-batch-size", strconv.Itoa(batch))
	h.Set("x-queue-depth", strconv.Itoa(queue))
}

// openEventStream answers 200 with an event stream's headers.
func openEventStream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

func (c *Cluster) newResponder(w http.ResponseWriter, j *job, id uint64) responder {
	switch j.api {
	case apiResponses:
		return &eventResponse{w: w, rc: http.NewResponseController(w), j: j, id: "resp_sim" + strconv.FormatUint(id, 10), noCache: c.o.DisablePrefixCache, shape: responsesShape{}}
	case apiMessages:
		return &eventResponse{w: w, rc: http.NewResponseController(w), j: j, id: "msg_sim" + strconv.FormatUint(id, 10), noCache: c.o.DisablePrefixCache, shape: messagesShape{}}
	case apiEmbeddings:
		return &embeddingResponse{w: w, j: j, id: "emb-sim" + strconv.FormatUint(id, 10)}
	}
	return newResponse(w, j, id, c.o.DisablePrefixCache)
}

func (c *Cluster) handleResponses(w http.ResponseWriter, r *http.Request) {
	c.serve(w, r, c.parseResponses)
}
func (c *Cluster) handleMessages(w http.ResponseWriter, r *http.Request) {
	c.serve(w, r, c.parseMessages)
}
func (c *Cluster) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	c.serve(w, r, c.parseEmbeddings)
}

// parseResponses reads an OpenAI Responses request: instructions (a system
// message), input (a string, or message items whose text parts count),
// max_output_tokens, stream.
func (c *Cluster) parseResponses(body []byte) (*job, int, error) {
	var req struct {
		Model           string          `json:"model"`
		Instructions    string          `json:"instructions"`
		Input           json.RawMessage `json:"input"`
		MaxOutputTokens *int            `json:"max_output_tokens"`
		Stream          bool            `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("%w: invalid JSON: %v", errBadRequest, err)
	}
	var msgs []apiMessage
	if req.Instructions != "" {
		q, _ := json.Marshal(req.Instructions)
		msgs = append(msgs, apiMessage{Role: "system", Content: q})
	}
	in := bytes.TrimSpace(req.Input)
	switch {
	case len(in) > 0 && in[0] == '"':
		msgs = append(msgs, apiMessage{Role: "user", Content: in})
	case len(in) > 0 && in[0] == '[':
		var items []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			Output  json.RawMessage `json:"output"`
			Type    string          `json:"type"`
		}
		if err := json.Unmarshal(in, &items); err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("%w: input: %v", errBadRequest, err)
		}
		for _, it := range items {
			switch {
			case it.Role != "":
				msgs = append(msgs, apiMessage{Role: it.Role, Content: it.Content})
			case it.Type == "function_call_output":
				msgs = append(msgs, apiMessage{Role: "tool", Content: it.Output})
			}
		}
	default:
		return nil, http.StatusBadRequest, fmt.Errorf("%w: input is required", errBadRequest)
	}
	return c.eventJob(apiResponses, body, req.Model, req.Stream, msgs, req.MaxOutputTokens)
}

// parseMessages reads an Anthropic Messages request: system (a string or
// text blocks), messages, the required max_tokens, stream.
func (c *Cluster) parseMessages(body []byte) (*job, int, error) {
	var req struct {
		Model     string          `json:"model"`
		System    json.RawMessage `json:"system"`
		Messages  []apiMessage    `json:"messages"`
		MaxTokens *int            `json:"max_tokens"`
		Stream    bool            `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("%w: invalid JSON: %v", errBadRequest, err)
	}
	if req.MaxTokens == nil {
		return nil, http.StatusBadRequest, fmt.Errorf("%w: max_tokens: Field required", errBadRequest)
	}
	msgs := req.Messages
	if s := bytes.TrimSpace(req.System); len(s) > 0 && string(s) != "null" {
		msgs = append([]apiMessage{{Role: "system", Content: s}}, msgs...)
	}
	return c.eventJob(apiMessages, body, req.Model, req.Stream, msgs, req.MaxTokens)
}

func (c *Cluster) eventJob(api apiKind, body []byte, model string, stream bool, msgs []apiMessage, maxTokens *int) (*job, int, error) {
	j := &job{api: api, chat: true, stream: stream, includeUsage: stream, model: model}
	if j.model == "" {
		j.model = c.o.Model
	}
	var err error
	if j.prompt, err = messagesTokens(c.o.Tokenizer, msgs); err != nil {
		return nil, http.StatusBadRequest, err
	}
	if status, err := c.sizeJob(j, body, maxTokens, nil, false); err != nil {
		return nil, status, err
	}
	return j, 0, nil
}

// parseEmbeddings reads an embeddings request: input is a string or a list
// of strings (token arrays count 4 bytes a token, as completions do). The
// engine prefills it and generates nothing more than one step.
func (c *Cluster) parseEmbeddings(body []byte) (*job, int, error) {
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("%w: invalid JSON: %v", errBadRequest, err)
	}
	j := &job{api: apiEmbeddings, model: req.Model}
	if j.model == "" {
		j.model = c.o.Model
	}
	in := bytes.TrimSpace(req.Input)
	var list []json.RawMessage
	if len(in) > 0 && in[0] == '[' && json.Unmarshal(in, &list) == nil && len(list) > 0 && bytes.TrimSpace(list[0])[0] == '"' {
		var text []byte
		for _, v := range list {
			var s string
			if json.Unmarshal(v, &s) != nil {
				return nil, http.StatusBadRequest, fmt.Errorf("%w: input must be strings", errBadRequest)
			}
			text = append(append(text, s...), '\n')
		}
		var err error
		if j.prompt, err = textTokens(c.o.Tokenizer, text); err != nil {
			return nil, http.StatusInternalServerError, err
		}
		j.inputs = len(list)
	} else {
		p, err := promptTokens(c.o.Tokenizer, in)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("%w: input is required", errBadRequest)
		}
		j.prompt, j.inputs = p, 1
	}
	one := 1
	if status, err := c.sizeJob(j, body, &one, nil, true); err != nil {
		return nil, status, err
	}
	return j, 0, nil
}

// eventShape is what differs between the Responses and Messages streams.
type eventShape interface {
	open(o *eventResponse) // the stream's opening events
	delta(o *eventResponse, text string)
	close(o *eventResponse, reason string, cached int) // closing events, usage included
	whole(o *eventResponse, text, reason string, cached int) any
}

// eventResponse answers a Responses or Messages request: typed SSE events
// ("event:" and "data:" lines) when streaming, one JSON object otherwise.
type eventResponse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	j       *job
	id      string
	noCache bool
	shape   eventShape

	started bool
	sent    int
	seq     int // sequence_number of the next Responses event
	buf     []byte
}

func (o *eventResponse) begun() bool { return o.started }

func (o *eventResponse) start(batch, queue int) {
	o.started = true
	setEngineHeaders(o.w.Header(), o.id, batch, queue)
	if !o.j.stream {
		return
	}
	openEventStream(o.w)
	o.shape.open(o)
	o.flush()
}

// event appends one typed event.
func (o *eventResponse) event(typ string, data map[string]any) {
	data["type"] = typ
	if _, ok := o.shape.(responsesShape); ok {
		data["sequence_number"] = o.seq
		o.seq++
	}
	b, _ := json.Marshal(data)
	o.buf = append(o.buf, "event: "...)
	o.buf = append(o.buf, typ...)
	o.buf = append(o.buf, "\ndata: "...)
	o.buf = append(o.buf, b...)
	o.buf = append(o.buf, "\n\n"...)
}

func (o *eventResponse) flush() error {
	_, err := o.w.Write(o.buf)
	o.buf = o.buf[:0]
	if err != nil {
		return err
	}
	return o.rc.Flush()
}

func (o *eventResponse) tokens(n int) error {
	if !o.j.stream {
		o.sent = max(o.sent, n)
		return nil
	}
	if n <= o.sent {
		return nil
	}
	for ; o.sent < n; o.sent++ {
		o.shape.delta(o, tokenText(o.j.seed, o.sent))
	}
	return o.flush()
}

func (o *eventResponse) finish(reason string, cached int) {
	if o.noCache {
		cached = -1
	}
	if !o.j.stream {
		text := make([]byte, 0, 4*o.sent)
		for i := range o.sent {
			text = append(text, tokenText(o.j.seed, i)...)
		}
		writeJSON(o.w, http.StatusOK, o.shape.whole(o, string(text), reason, cached))
		return
	}
	o.shape.close(o, reason, cached)
	o.flush()
}

func (o *eventResponse) fail(err error) {
	if !o.started || !o.j.stream {
		writeError(o.w, http.StatusServiceUnavailable, "overloaded_error", err.Error())
		return
	}
	o.event("error", map[string]any{"error": map[string]any{"type": "overloaded_error", "message": err.Error()}})
	o.flush()
}

// responsesShape is OpenAI's Responses API: response.created,
// response.output_text.delta per token, response.completed with usage
// (input_tokens, input_tokens_details.cached_tokens, output_tokens).
type responsesShape struct{}

func (responsesShape) object(o *eventResponse, status string) map[string]any {
	return map[string]any{"id": o.id, "object": "response", "created_at": time.Now().Unix(), "status": status, "model": o.j.model}
}

func (s responsesShape) open(o *eventResponse) {
	o.event("response.created", map[string]any{"response": s.object(o, "in_progress")})
	o.event("response.output_item.added", map[string]any{"output_index": 0,
		"item": map[string]any{"id": "msg_" + o.id, "type": "message", "role": "assistant", "status": "in_progress", "content": []any{}}})
}

func (responsesShape) delta(o *eventResponse, text string) {
	o.event("response.output_text.delta", map[string]any{"item_id": "msg_" + o.id, "output_index": 0, "content_index": 0, "delta": text})
}

func (responsesShape) usage(o *eventResponse, cached int) map[string]any {
	u := map[string]any{"input_tokens": o.j.promptTokens, "output_tokens": o.sent, "total_tokens": o.j.promptTokens + o.sent,
		"output_tokens_details": map[string]int{"reasoning_tokens": 0}}
	if cached >= 0 {
		u["input_tokens_details"] = map[string]int{"cached_tokens": cached}
	}
	return u
}

func (s responsesShape) close(o *eventResponse, reason string, cached int) {
	o.event("response.output_text.done", map[string]any{"item_id": "msg_" + o.id, "output_index": 0, "content_index": 0})
	r := s.whole(o, "", reason, cached).(map[string]any)
	typ := "response.completed"
	if reason == "length" { // stopped at max_output_tokens
		typ = "response.incomplete"
	}
	o.event(typ, map[string]any{"response": r})
}

func (s responsesShape) whole(o *eventResponse, text, reason string, cached int) any {
	r := s.object(o, "completed")
	if reason == "length" {
		r["status"] = "incomplete"
		r["incomplete_details"] = map[string]string{"reason": "max_output_tokens"}
	}
	r["output"] = []any{map[string]any{"id": "msg_" + o.id, "type": "message", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}}
	r["usage"] = s.usage(o, cached)
	return r
}

// messagesShape is Anthropic's Messages API: message_start (usage with
// input_tokens, cache_read_input_tokens), content_block_start, a
// content_block_delta per token, content_block_stop, message_delta (the
// stop reason and output_tokens), message_stop. Anthropic's input_tokens
// leave out what the cache served.
type messagesShape struct{}

func (messagesShape) usage(o *eventResponse, cached, output int) map[string]any {
	u := map[string]any{"input_tokens": o.j.promptTokens - max(cached, 0), "output_tokens": output}
	if cached >= 0 {
		u["cache_read_input_tokens"] = cached
		u["cache_creation_input_tokens"] = 0
	}
	return u
}

func stopReason(reason string) string {
	if reason == "length" {
		return "max_tokens"
	}
	return "end_turn"
}

func (s messagesShape) open(o *eventResponse) {
	o.event("message_start", map[string]any{"message": map[string]any{"id": o.id, "type": "message", "role": "assistant",
		"content": []any{}, "model": o.j.model, "stop_reason": nil, "stop_sequence": nil, "usage": s.usage(o, -1, 1)}})
	o.event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	o.event("ping", map[string]any{})
}

func (messagesShape) delta(o *eventResponse, text string) {
	o.event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": text}})
}

func (s messagesShape) close(o *eventResponse, reason string, cached int) {
	o.event("content_block_stop", map[string]any{"index": 0})
	u := map[string]any{"output_tokens": o.sent}
	if cached >= 0 { // the final usage repeats the cache counts, as Anthropic's does
		for k, v := range s.usage(o, cached, o.sent) {
			u[k] = v
		}
	}
	o.event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stopReason(reason), "stop_sequence": nil}, "usage": u})
	o.event("message_stop", map[string]any{})
}

func (s messagesShape) whole(o *eventResponse, text, reason string, cached int) any {
	return map[string]any{"id": o.id, "type": "message", "role": "assistant", "model": o.j.model,
		"content":     []any{map[string]any{"type": "text", "text": text}},
		"stop_reason": stopReason(reason), "stop_sequence": nil, "usage": s.usage(o, cached, o.sent)}
}

// embeddingResponse answers an embeddings request once it has been
// prefilled: one deterministic 8-dimensional unit vector per input.
type embeddingResponse struct {
	w       http.ResponseWriter
	j       *job
	id      string
	started bool
}

func (o *embeddingResponse) begun() bool { return o.started }
func (o *embeddingResponse) start(batch, queue int) {
	o.started = true
	setEngineHeaders(o.w.Header(), o.id, batch, queue)
}
func (o *embeddingResponse) tokens(int) error { return nil }
func (o *embeddingResponse) fail(err error) {
	writeError(o.w, http.StatusServiceUnavailable, "overloaded_error", err.Error())
}

func (o *embeddingResponse) finish(string, int) {
	data := make([]any, o.j.inputs)
	for i := range data {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%d", o.j.seed, i)
		x := h.Sum64()
		vec, norm := make([]float64, 8), 0.0
		for k := range vec {
			x = x*6364136223846793005 + 1442695040888963407
			vec[k] = float64(int64(x>>11))/(1<<52) - 1
			norm += vec[k] * vec[k]
		}
		for k := range vec {
			vec[k] /= math.Sqrt(norm)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": vec}
	}
	writeJSON(o.w, http.StatusOK, map[string]any{"object": "list", "model": o.j.model, "data": data,
		"usage": map[string]int{"prompt_tokens": o.j.promptTokens, "total_tokens": o.j.promptTokens}})
}
