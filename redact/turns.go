package redact

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"hash"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/internal/jsonstr"
	"github.com/reelkit/reel/sse"
)

// Turn links: how a follow-up turn is recognised after redaction.
//
// Request B continues request A when B's conversation begins with A's whole
// conversation followed by A's answer. Deciding that needs the raw text,
// which redaction discards, so it is decided here, at record time, as two
// keyed digests (HMAC-SHA-256 with the dataset key, first 8 bytes):
//
//   - turn_key: the request's messages followed by the exchange's answer
//     (the response's first choice, as an assistant message);
//   - parent_turn_key: the request's messages up to and including its last
//     assistant message that is followed by another message (a user turn,
//     or tool results for an agent step).
//
// B continues A exactly when B.parent_turn_key == A.turn_key; the
// conversation before A need not be re-examined, because A's own digest
// already covers all of it. The digests are of a canonical form of each
// message, so that an answer streamed as SSE deltas and sent back by the
// client as one message digests the same: the role, the message's text
// (string content or its text parts, concatenated), its tool calls (id,
// name, and arguments as re-encoded JSON with sorted keys), its tool
// results (id and text), and any other part as re-encoded JSON. Reasoning
// and thinking blocks are left out on both sides (clients do not send them
// back the same way). OpenAI chat completions and Anthropic messages are
// understood, as requests, JSON responses and event streams.
//
// Keyed with the dataset key, the digests say nothing about the text to
// someone without the key (no guessing of short prompts), and they match
// across recorders that share the key. Without a follow-up's exact copy of
// the answer (a client that edits, truncates or summarises history) there
// is no link: that turn starts a session of its own, never a false one.

// domainTurns separates the turn digests from every other use of the key.
const domainTurns = "reel/turn-links/1"

// domainTurnsBytes is domainTurns as the MAC takes it (a conversion at the
// call would allocate: the MAC is an interface).
var domainTurnsBytes = []byte(domainTurns)

// turnScratch is where the turn links frame messages and take digests.
type turnScratch struct {
	buf []byte
	sum [sha256.Size]byte
}

// turnScratches holds *turnScratch.
var turnScratches = sync.Pool{New: func() any { return &turnScratch{buf: make([]byte, 0, 1024)} }}

// maxPooledTurnBuf bounds the buffers turnScratches keeps.
const maxPooledTurnBuf = 64 << 10

// LinkTurns sets x.TurnKey and x.ParentTurnKey from x's raw request and
// response bodies, keyed with key; both stay zero when the request is not a
// conversation (or, for TurnKey, when its answer was not seen whole). It
// must run before the bodies are redacted; RedactExchange calls it.
func LinkTurns(x *formats.Exchange, key []byte) {
	if t, ok := startTurnLinks(x, conversationRequest(x), hmac.New(sha256.New, key), nil); ok {
		m, ok := answerOf(x)
		t.finish(x, m, ok)
	}
}

// conversationRequest decodes x's raw request body for the turn links; nil
// when it cannot hold a conversation.
func conversationRequest(x *formats.Exchange) *sse.Request {
	if !mayLink(x) {
		return nil
	}
	req, err := sse.ParseRequest(x.ReqBody)
	if err != nil {
		return nil
	}
	return &req
}

// mayLink reports whether x's request body may be a conversation to link:
// whole, not content-encoded, with messages.
func mayLink(x *formats.Exchange) bool {
	return !x.ReqBodyTrunc && bytes.Contains(x.ReqBody, []byte(`"messages"`)) && !encoded(x.ReqHeaders)
}

// turnLink is a request's conversation digested, waiting for its answer.
type turnLink struct {
	mac  hash.Hash
	pool *Redactor // the MAC goes back to its pool; nil when it has none
	s    *turnScratch
}

// startTurnLinks sets x.ParentTurnKey from x's request, decoded (req; nil
// when it is not a JSON request), with the keyed MAC mac, fresh, or when
// pool is not nil that Redactor's pooled MAC (mac is then nil), which
// finish hands back. It returns the digest to finish with the answer;
// false when the request is not linked (x.TurnKey is then 0 too).
func startTurnLinks(x *formats.Exchange, req *sse.Request, mac hash.Hash, pool *Redactor) (turnLink, bool) {
	x.TurnKey, x.ParentTurnKey = 0, 0
	if req == nil || len(req.Messages) == 0 || !mayLink(x) {
		return turnLink{}, false
	}
	if pool != nil {
		mac = pool.mac()
	}
	t := turnLink{mac: mac, pool: pool, s: turnScratches.Get().(*turnScratch)}
	buf := t.s.buf[:0]
	t.mac.Write(domainTurnsBytes)
	// Each message is framed and written as it is read; the parent key is
	// set only once every message has been read (one that cannot be read
	// leaves the request unlinked).
	var parent int64
	if len(req.System) > 0 && string(req.System) != "null" {
		sys := canonMessage{role: "system"}
		sys.addContent(req.System)
		buf = sys.appendTo(buf[:0])
		t.mac.Write(buf)
	}
	for i := range req.Messages {
		m, ok := canonRequestMessage(&req.Messages[i])
		if !ok {
			t.s.buf = buf
			t.release()
			return turnLink{}, false
		}
		buf = m.appendTo(buf[:0])
		t.mac.Write(buf)
		if m.role == "assistant" && i+1 < len(req.Messages) {
			parent = digest(t.mac, t.s.sum[:0])
		}
	}
	t.s.buf = buf
	x.ParentTurnKey = parent
	return t, true
}

// finish sets x.TurnKey from the answer (none when ok is false) and
// releases the digest.
func (t *turnLink) finish(x *formats.Exchange, answer canonMessage, ok bool) {
	if ok {
		t.s.buf = answer.appendTo(t.s.buf[:0])
		t.mac.Write(t.s.buf)
		x.TurnKey = digest(t.mac, t.s.sum[:0])
	}
	t.release()
}

func (t *turnLink) release() {
	if cap(t.s.buf) <= maxPooledTurnBuf {
		turnScratches.Put(t.s)
	}
	if t.pool != nil {
		t.pool.putMAC(t.mac)
	}
}

// encoded reports whether a body is content-encoded (gzip …): its bytes are
// not the conversation's text, so no link is drawn from them.
func encoded(h map[string]string) bool {
	v := strings.ToLower(header(h, "content-encoding"))
	return v != "" && v != "identity"
}

// digest is the first 8 bytes of the running MAC, never 0 (0 means "no
// link" in the columns).
func digest(mac hash.Hash, b []byte) int64 {
	d := int64(binary.BigEndian.Uint64(mac.Sum(b)[:8]))
	if d == 0 {
		d = 1
	}
	return d
}

// canonMessage is one message in canonical form.
type canonMessage struct {
	role string
	// text is the text content, concatenated: a view of the body it was
	// read from until a second piece is added (owned).
	text  []byte
	owned bool
	calls []string // tool calls: id, name, arguments, framed
	other []string // tool results and other parts, framed, in order
}

// addText appends p to the message's text.
func (m *canonMessage) addText(p []byte) {
	switch {
	case len(p) == 0:
	case len(m.text) == 0 && !m.owned:
		m.text = p
	default:
		if !m.owned {
			m.text, m.owned = append(make([]byte, 0, len(m.text)+len(p)), m.text...), true
		}
		m.text = append(m.text, p...)
	}
}

// appendTo frames the message: each field length-prefixed, so that
// distinct messages never encode alike.
func (m *canonMessage) appendTo(b []byte) []byte {
	field := func(b []byte, tag byte, s string) []byte {
		b = append(b, tag)
		b = binary.AppendUvarint(b, uint64(len(s)))
		return append(b, s...)
	}
	b = field(b, 'M', m.role)
	b = append(b, 'T')
	b = binary.AppendUvarint(b, uint64(len(m.text)))
	b = append(b, m.text...)
	for _, c := range m.calls {
		b = field(b, 'C', c)
	}
	for _, o := range m.other {
		b = field(b, 'O', o)
	}
	return append(b, 'E')
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []toolCall      `json:"tool_calls"`   // OpenAI assistant
	ToolCallID string          `json:"tool_call_id"` // OpenAI tool result
}

type toolCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// canonRequestMessage is a request message in canonical form; false when
// its tool calls are not a list of calls (the request is then not linked,
// as when it does not decode).
func canonRequestMessage(rm *sse.Message) (canonMessage, bool) {
	if len(rm.ToolCalls) == 0 {
		return canonOf(rm.Role, rm.Content, nil, rm.ToolCallID), true
	}
	var calls []toolCall // declared here: decoding into it moves it to the heap
	if json.Unmarshal(rm.ToolCalls, &calls) != nil {
		return canonMessage{}, false
	}
	return canonOf(rm.Role, rm.Content, calls, rm.ToolCallID), true
}

func (m *chatMessage) canon() canonMessage {
	return canonOf(m.Role, m.Content, m.ToolCalls, m.ToolCallID)
}

// canonOf is the canonical form of a message of role with the given
// content, tool calls and tool-call id (a tool result's).
func canonOf(role string, content json.RawMessage, calls []toolCall, toolCallID string) canonMessage {
	c := canonMessage{role: role}
	c.addContent(content)
	for _, tc := range calls {
		c.calls = append(c.calls, frameCall(tc.ID, tc.Function.Name, canonJSONText(tc.Function.Arguments)))
	}
	if toolCallID != "" {
		c.other = append([]string{"tool_call_id\x00" + toolCallID}, c.other...)
	}
	return c
}

func frameCall(id, name, args string) string {
	return string(binary.AppendUvarint(nil, uint64(len(id)))) + id + string(binary.AppendUvarint(nil, uint64(len(name)))) + name + args
}

// contentBlock is one element of a content array (OpenAI parts, Anthropic
// blocks).
type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`          // Anthropic tool_use
	Name      string          `json:"name"`        // Anthropic tool_use
	Input     json.RawMessage `json:"input"`       // Anthropic tool_use
	ToolUseID string          `json:"tool_use_id"` // Anthropic tool_result
	Content   json.RawMessage `json:"content"`     // Anthropic tool_result
}

// addContent adds a content value: a string is the text; in an array, text
// parts are concatenated into the text, Anthropic tool_use blocks become
// calls, tool results (id and text) and other parts (re-encoded JSON) go
// to other, and reasoning blocks are left out.
func (c *canonMessage) addContent(raw json.RawMessage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	switch raw[0] {
	case '"':
		if s, err := jsonstr.DecodeBytes(raw); err == nil {
			c.addText(s)
		}
		return
	case '[':
	default:
		return
	}
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return
	}
	for _, e := range blocks {
		var blk contentBlock
		if json.Unmarshal(e, &blk) != nil {
			continue
		}
		switch blk.Type {
		case "text":
			c.addText([]byte(blk.Text))
		case "tool_use":
			c.calls = append(c.calls, frameCall(blk.ID, blk.Name, canonJSON(blk.Input)))
		case "thinking", "redacted_thinking", "reasoning":
		case "tool_result":
			var inner canonMessage
			inner.addContent(blk.Content)
			c.other = append(c.other, "tool_result\x00"+blk.ToolUseID+"\x00"+string(inner.appendTo(nil)))
		default:
			c.other = append(c.other, canonJSON(e))
		}
	}
}

// canonJSON re-encodes a JSON value with sorted keys and no insignificant
// space (numbers kept as written); invalid JSON is kept as it is.
func canonJSON(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return string(raw)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(out)
}

// canonJSONText is canonJSON of JSON carried as text (OpenAI's tool-call
// arguments); text that is not JSON is kept as it is.
func canonJSONText(s string) string { return canonJSON([]byte(s)) }

// answerOf is the exchange's answer as an assistant message, from a JSON
// response or an event stream; false when there is none to continue from
// (no 2xx response, a truncated or encoded body, a stream cut short).
func answerOf(x *formats.Exchange) (canonMessage, bool) {
	switch answerKindOf(x) {
	case answerNone:
		return canonMessage{}, false
	case answerStream:
		return streamAnswer(x.RespBody)
	}
	var resp struct {
		Choices []struct {
			Message chatMessage `json:"message"`
		} `json:"choices"`
		Type    string          `json:"type"` // Anthropic: "message"
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(x.RespBody, &resp) != nil {
		return canonMessage{}, false
	}
	switch {
	case len(resp.Choices) > 0:
		m := resp.Choices[0].Message
		m.Role = "assistant"
		return m.canon(), true
	case resp.Type == "message":
		m := chatMessage{Role: "assistant", Content: resp.Content}
		return m.canon(), true
	}
	return canonMessage{}, false
}

// answerKind is where an exchange's answer is read from.
type answerKind uint8

const (
	answerNone   answerKind = iota // no answer to continue from
	answerStream                   // an event stream (streamAnswer)
	answerJSON                     // a JSON response
)

// answerKindOf is where answerOf reads x's answer from, decided from its
// status, headers and raw response body.
func answerKindOf(x *formats.Exchange) answerKind {
	if x.Status < 200 || x.Status > 299 || len(x.RespBody) == 0 || int64(len(x.RespBody)) < x.RespBodyBytes || encoded(x.RespHeaders) {
		return answerNone
	}
	ct := x.RespContentType
	if ct == "" {
		ct = header(x.RespHeaders, "content-type")
	}
	if strings.Contains(ct, "event-stream") || bytes.HasPrefix(bytes.TrimSpace(x.RespBody), []byte("data:")) || bytes.HasPrefix(bytes.TrimSpace(x.RespBody), []byte("event:")) {
		return answerStream
	}
	return answerJSON
}

// streamAnswer rebuilds the first choice's answer from an OpenAI chat
// stream (delta content and tool-call fragments) or an Anthropic messages
// stream (content blocks and their deltas). A stream without its end
// (OpenAI's [DONE] or a finish_reason, Anthropic's message_stop) has no
// answer to continue from.
func streamAnswer(body []byte) (canonMessage, bool) {
	a := newAnswerScan(body)
	a.sc.Feed(body, time.Time{}, a.emit)
	return a.end()
}

// answerScan rebuilds a stream's answer (streamAnswer) from its bytes,
// fed to sc, or from its lines, handed to sc.Line by the redactor's walk of
// the same bytes (which then need not be scanned twice).
type answerScan struct {
	sc   *sse.Scanner
	b    streamAnswerBuilder
	emit func(*sse.Event)
	// walked is set by the redactor once every line of the stream has
	// gone to sc.Line.
	walked bool
}

// newAnswerScan is an answerScan for body.
func newAnswerScan(body []byte) *answerScan {
	// The answer's text is a small part of the stream's framing: start
	// with room for an eighth of it instead of growing from nothing.
	a := &answerScan{sc: sse.NewScanner(sse.Options{MaxEvent: len(body) + 1})}
	a.b.text = make([]byte, 0, min(len(body)/8, 64<<10))
	a.emit = func(ev *sse.Event) { a.b.event(ev.Data) }
	return a
}

// end flushes the scan and returns the answer.
func (a *answerScan) end() (canonMessage, bool) {
	a.sc.Flush(time.Time{}, a.emit)
	return a.b.answer()
}

// streamAnswerBuilder gathers an answer event by event.
type streamAnswerBuilder struct {
	text     []byte
	calls    []*streamCall // OpenAI tool calls by index
	blocks   map[int]*streamCall
	order    []int // Anthropic blocks in index order
	ended    bool
	sawDelta bool
	deltas   sse.ChatDeltas
}

type streamCall struct {
	id, name string
	args     strings.Builder
}

func (a *streamAnswerBuilder) callAt(i int) *streamCall {
	for len(a.calls) <= i {
		a.calls = append(a.calls, &streamCall{})
	}
	return a.calls[i]
}

// event adds one event's data. The plain chat chunk nearly every token of
// an OpenAI-compatible stream is goes through sse.ChatDelta (by way of
// ChatDeltas, which need not walk a chunk that repeats the one before
// but for its text), which reads what decodeEvent would without its
// allocations (FuzzStreamEventFastMatchesDecode); every other shape is
// decoded.
func (a *streamAnswerBuilder) event(data []byte) {
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		a.ended = true
		return
	}
	if d, ok := a.deltas.Read(data); ok {
		if d.First {
			a.sawDelta = true
			a.text = append(a.text, d.Content...)
			a.ended = a.ended || d.Finished
		}
		return
	}
	a.decodeEvent(data)
}

// decodeEvent is event's encoding/json path.
func (a *streamAnswerBuilder) decodeEvent(data []byte) {
	var c struct {
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Content   string `json:"content"`
				ToolCalls []struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock struct {
			Type string `json:"type"`
			Text string `json:"text"`
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"content_block"`
		Delta struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
		} `json:"delta"`
	}
	if json.Unmarshal(data, &c) != nil {
		return
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		a.sawDelta = true
		a.text = append(a.text, ch.Delta.Content...)
		for _, tc := range ch.Delta.ToolCalls {
			k := a.callAt(tc.Index)
			if tc.ID != "" {
				k.id = tc.ID
			}
			if tc.Function.Name != "" {
				k.name += tc.Function.Name
			}
			k.args.WriteString(tc.Function.Arguments)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			a.ended = true
		}
	}
	switch c.Type {
	case "content_block_start":
		if a.blocks == nil {
			a.blocks = map[int]*streamCall{}
		}
		a.sawDelta = true
		b := &streamCall{id: c.ContentBlock.ID, name: c.ContentBlock.Type + "\x00" + c.ContentBlock.Name}
		b.args.WriteString(c.ContentBlock.Text)
		if _, dup := a.blocks[c.Index]; !dup {
			a.order = append(a.order, c.Index)
		}
		a.blocks[c.Index] = b
	case "content_block_delta":
		if b := a.blocks[c.Index]; b != nil {
			b.args.WriteString(c.Delta.Text)
			b.args.WriteString(c.Delta.PartialJSON)
		}
	case "message_stop":
		a.ended = true
	}
}

// answer is the gathered answer; false when the stream did not end or
// carried no delta.
func (a *streamAnswerBuilder) answer() (canonMessage, bool) {
	if !a.ended || !a.sawDelta {
		return canonMessage{}, false
	}
	m := canonMessage{role: "assistant", text: a.text, owned: true}
	for _, k := range a.calls {
		m.calls = append(m.calls, frameCall(k.id, k.name, canonJSONText(k.args.String())))
	}
	slices.Sort(a.order)
	for _, i := range a.order {
		b := a.blocks[i]
		typ, name, _ := strings.Cut(b.name, "\x00")
		switch typ {
		case "text":
			m.addText([]byte(b.args.String()))
		case "tool_use":
			args := b.args.String()
			if args == "" {
				args = "{}"
			}
			m.calls = append(m.calls, frameCall(b.id, name, canonJSONText(args)))
		}
	}
	return m, true
}
