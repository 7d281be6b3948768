package recorder

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/reelkit/reel/internal/jsonstr"
	"github.com/reelkit/reel/sse"
)

// TokenCounter counts the tokens of a piece of text. *Tokenizer (a real
// BPE) is one; ApproxTokens is the cheap one the live pipeline uses.
type TokenCounter interface {
	Count(s string) int
}

// ApproxTokens counts tokens from the text's character classes, calibrated
// on o200k_base (docs/performance.md gives its error): an ASCII word is a
// token per 8 letters begun, digits a token per 3, a run of ASCII symbols a
// token per 4, CJK, kana and Hangul three tokens per four characters, other
// letters a token per 3. It allocates nothing and costs a fraction of BPE
// (BenchmarkEstimatePrompt), so the live recording pipeline runs it on
// every exchange the server sent no usage for.
var ApproxTokens TokenCounter = approxCounter{}

type approxCounter struct{}

func (approxCounter) Count(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case isASCIILetter(c):
			j := i + 1
			for j < len(s) && isASCIILetter(s[j]) {
				j++
			}
			n += (j - i + approxLettersPerToken - 1) / approxLettersPerToken
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			n += (j - i + 2) / 3 // o200k splits numbers into groups of three
			i = j
		case c < utf8.RuneSelf: // a run of ASCII symbols
			j := i + 1
			for j < len(s) && s[j] < utf8.RuneSelf && !isASCIILetter(s[j]) && (s[j] < '0' || s[j] > '9') && s[j] != ' ' && s[j] != '\n' {
				j++
			}
			n += (j - i + approxSymbolsPerToken - 1) / approxSymbolsPerToken
			i = j
		default:
			j, wide, letters := i, 0, 0
			for j < len(s) && s[j] >= utf8.RuneSelf {
				r, size := utf8.DecodeRuneInString(s[j:])
				switch {
				case isWide(r):
					wide++
				case unicode.IsLetter(r) || unicode.IsMark(r):
					letters++
				default:
					n++ // a symbol, CJK punctuation, an invalid byte
				}
				j += size
			}
			n += (wide*approxWidePerToken4 + 3) / 4
			n += (letters + 2) / 3
			i = j
		}
	}
	return n
}

// ApproxTokens' calibration on o200k_base (TestPromptEstimateError).
const (
	approxLettersPerToken = 8 // an ASCII word: one token per 8 letters begun
	approxSymbolsPerToken = 4 // a run of ASCII symbols (JSON's `":"`, `},{"`)
	approxWidePerToken4   = 3 // CJK: three tokens per four characters
)

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// isWide reports whether r is a CJK ideograph, kana or Hangul: about a
// token each under o200k_base.
func isWide(r rune) bool {
	return r >= 0x2E80 && (unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r))
}

// PromptEstimate is what EstimatePrompt found.
type PromptEstimate struct {
	Tokens int // the prompt tokens counted
	// Uncounted is the number of parts that could not be counted: images
	// by URL or of an unreadable format, audio, files. Tokens then counts
	// the rest: a lower bound.
	Uncounted int
	// Images is the number of images counted by their documented rule.
	Images int
}

// EstimatePrompt counts the prompt tokens of a request body of the given
// API the way the vendors document them, with tc counting text:
//
//   - chat (and Responses input items, and Anthropic messages): each
//     message's role and text, 3 tokens per message and 3 to prime the
//     reply (OpenAI's published rule; Anthropic publishes none), a tool
//     call's name and arguments, a tool result's text;
//   - tool definitions: their name, description and parameters, as JSON;
//   - images: OpenAI's tile rule (85 tokens, plus 170 per 512-px tile of
//     the image scaled into 2048×2048 and its short side to 768, unless
//     detail is "low"); Anthropic's width×height/750 of the image scaled to
//     1568 px on its long side. The size comes from the image's own header
//     in a data: URL or base64 source, never from the length of its
//     base64; an image by URL is Uncounted;
//   - completions and embeddings: the prompt or input text, or the length
//     of a token array.
//
// ok is false when body is not a request of that API.
func EstimatePrompt(api sse.API, body []byte, tc TokenCounter) (est PromptEstimate, ok bool) {
	req, err := sse.ParseRequest(body)
	if err != nil {
		return est, false
	}
	return estimateRequest(api, &req, tc)
}

// estimateRequest is EstimatePrompt on a decoded request.
func estimateRequest(api sse.API, req *sse.Request, tc TokenCounter) (est PromptEstimate, ok bool) {
	e := estimator{tc: tc, anthropic: api == sse.AnthropicMessages}
	switch api {
	case sse.ChatCompletions, sse.AnthropicMessages:
		if len(req.Messages) == 0 {
			return est, false
		}
		if api == sse.AnthropicMessages {
			if sys := decodeContent(req.System); !sys.empty() {
				e.message("system", &sys)
			}
		}
		for i := range req.Messages {
			m := &req.Messages[i]
			content := decodeContent(m.Content)
			e.message(m.Role, &content)
			e.toolCalls(m.ToolCalls)
		}
		e.n += chatReplyPriming
		e.tools(req.Tools)
		e.tools(req.Functions)
	case sse.Responses:
		if len(req.Input) == 0 && req.Instructions == "" {
			return est, false
		}
		if req.Instructions != "" {
			e.message("system", &contentJSON{text: req.Instructions})
		}
		e.responsesInput(req.Input)
		e.n += chatReplyPriming
		e.tools(req.Tools)
	case sse.Completions:
		if len(req.Prompt) == 0 {
			return est, false
		}
		e.promptText(req.Prompt)
	case sse.Embeddings:
		if len(req.Input) == 0 {
			return est, false
		}
		e.promptText(req.Input)
	default:
		return est, false
	}
	return PromptEstimate{Tokens: e.n, Uncounted: e.uncounted, Images: e.images}, true
}

// contentJSON is a message content as the APIs spell it: a string, a list
// of parts, null, or (rarely) another value, kept as written. It decodes in
// the one pass over the body, so a large image is read once.
type contentJSON struct {
	text  string
	parts []partJSON
	other string
}

func (c *contentJSON) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || b[0] == 'n':
		return nil
	case b[0] == '"':
		var err error
		c.text, err = jsonstr.Decode(b)
		return err
	case b[0] == '[':
		if json.Unmarshal(b, &c.parts) == nil {
			return nil
		}
	}
	c.other = string(b)
	return nil
}

// decodeContent decodes a raw message content (nothing when raw is empty).
func decodeContent(raw json.RawMessage) contentJSON {
	var c contentJSON
	_ = c.UnmarshalJSON(raw) // a content of any shape decodes: unusual ones are kept as written
	return c
}

func (c *contentJSON) empty() bool { return c.text == "" && c.parts == nil && c.other == "" }

// imageURLJSON is chat's {"url", "detail"} object or Responses' plain string.
type imageURLJSON struct {
	URL    string
	Detail string
}

func (u *imageURLJSON) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '"' {
		var err error
		u.URL, err = jsonstr.Decode(b)
		return err
	}
	var obj struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(b, &obj) == nil {
		u.URL, u.Detail = obj.URL, obj.Detail
	}
	return nil
}

type estimator struct {
	tc        TokenCounter
	anthropic bool
	n         int
	uncounted int
	images    int
}

func (e *estimator) text(s string) { e.n += e.tc.Count(s) }

// message counts one chat message: the per-message overhead, its role and
// its content.
func (e *estimator) message(role string, content *contentJSON) {
	e.n += chatTokensPerMessage
	e.text(role)
	e.content(content)
}

// content counts a message content: a string, or a list of parts (text,
// images, tool uses and results, …).
func (e *estimator) content(c *contentJSON) {
	e.text(c.text)
	e.text(c.other)
	for i := range c.parts {
		e.part(&c.parts[i])
	}
}

// partJSON is one content part of any of the APIs.
type partJSON struct {
	Type     string       `json:"type"`
	Text     string       `json:"text"`
	ImageURL imageURLJSON `json:"image_url"`
	Detail   string       `json:"detail"` // Responses input_image
	Source   *struct {    // Anthropic image
		Type string `json:"type"`
		Data string `json:"data"`
	} `json:"source"`
	Name      string          `json:"name"`      // Anthropic tool_use
	Input     json.RawMessage `json:"input"`     // Anthropic tool_use
	Content   contentJSON     `json:"content"`   // Anthropic tool_result
	Arguments string          `json:"arguments"` // Responses function_call
	Output    contentJSON     `json:"output"`    // Responses function_call_output
}

func (e *estimator) part(p *partJSON) {
	switch p.Type {
	case "text", "input_text", "output_text", "":
		e.text(p.Text)
	case "image_url", "input_image":
		detail := p.ImageURL.Detail
		if p.Detail != "" {
			detail = p.Detail
		}
		e.image(p.ImageURL.URL, detail)
	case "image":
		if p.Source != nil && p.Source.Type == "base64" {
			e.imageBase64(p.Source.Data, "")
		} else {
			e.uncounted++
		}
	case "tool_use":
		e.text(p.Name)
		e.text(string(p.Input))
	case "tool_result":
		e.content(&p.Content)
	default: // input_audio, file, document, …
		e.uncounted++
	}
}

func (e *estimator) image(url, detail string) {
	data, ok := strings.CutPrefix(url, "data:")
	if !ok {
		e.uncounted++ // by URL: its size is not in the request
		return
	}
	if i := strings.Index(data, ";base64,"); i >= 0 {
		e.imageBase64(data[i+len(";base64,"):], detail)
		return
	}
	e.uncounted++
}

func (e *estimator) imageBase64(b64, detail string) {
	w, h, ok := imageSize(b64)
	if !ok {
		e.uncounted++
		return
	}
	e.images++
	if e.anthropic {
		e.n += anthropicImageTokens(w, h)
	} else {
		e.n += openAIImageTokens(w, h, detail)
	}
}

// openAIImageTokens is OpenAI's documented cost of an image for GPT-4o
// class models: 85 base tokens, plus 170 per 512-px tile after the image is
// scaled to fit in 2048×2048 and then its shortest side to 768; low detail
// is the 85 alone.
func openAIImageTokens(w, h int, detail string) int {
	if detail == "low" {
		return 85
	}
	fw, fh := float64(w), float64(h)
	if s := 2048 / math.Max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if s := 768 / math.Min(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	tiles := int(math.Ceil(fw/512) * math.Ceil(fh/512))
	return 85 + 170*tiles
}

// anthropicImageTokens is Anthropic's documented estimate: width×height/750
// after the image is scaled to at most 1568 px on its long side.
func anthropicImageTokens(w, h int) int {
	fw, fh := float64(w), float64(h)
	if s := 1568 / math.Max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	return int(math.Ceil(fw * fh / 750))
}

// imageSize reads the pixel size from the header of a base64 PNG, GIF,
// JPEG or WebP, decoding at most the first 64 KiB.
func imageSize(b64 string) (w, h int, ok bool) {
	const maxHead = 64 << 10
	head := b64[:min(len(b64), base64.StdEncoding.EncodedLen(maxHead))]
	head = head[:len(head)/4*4]
	b, err := base64.StdEncoding.DecodeString(head)
	if err != nil && len(b) == 0 {
		return 0, 0, false
	}
	switch {
	case len(b) >= 24 && string(b[:8]) == "\x89PNG\r\n\x1a\n":
		return int(binary.BigEndian.Uint32(b[16:20])), int(binary.BigEndian.Uint32(b[20:24])), true
	case len(b) >= 10 && (string(b[:6]) == "GIF87a" || string(b[:6]) == "GIF89a"):
		return int(binary.LittleEndian.Uint16(b[6:8])), int(binary.LittleEndian.Uint16(b[8:10])), true
	case len(b) >= 30 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		switch string(b[12:16]) {
		case "VP8X":
			return 1 + int(b[24]) | int(b[25])<<8 | int(b[26])<<16, 1 + int(b[27]) | int(b[28])<<8 | int(b[29])<<16, true
		case "VP8 ":
			return int(binary.LittleEndian.Uint16(b[26:28]) & 0x3fff), int(binary.LittleEndian.Uint16(b[28:30]) & 0x3fff), true
		case "VP8L":
			v := binary.LittleEndian.Uint32(b[21:25])
			return int(v&0x3fff) + 1, int(v>>14&0x3fff) + 1, true
		}
	case len(b) >= 4 && b[0] == 0xFF && b[1] == 0xD8:
		return jpegSize(b)
	}
	return 0, 0, false
}

// jpegSize walks a JPEG's markers to its start-of-frame.
func jpegSize(b []byte) (w, h int, ok bool) {
	for i := 2; i+9 < len(b); {
		if b[i] != 0xFF {
			return 0, 0, false
		}
		m := b[i+1]
		if m == 0xFF { // fill byte
			i++
			continue
		}
		seg := int(binary.BigEndian.Uint16(b[i+2 : i+4]))
		if m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC {
			return int(binary.BigEndian.Uint16(b[i+7 : i+9])), int(binary.BigEndian.Uint16(b[i+5 : i+7])), true
		}
		if seg < 2 {
			return 0, 0, false
		}
		i += 2 + seg
	}
	return 0, 0, false
}

// toolCalls counts an assistant message's tool calls: names and arguments.
func (e *estimator) toolCalls(raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	var calls []struct {
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &calls) != nil {
		return
	}
	for _, c := range calls {
		e.text(c.Function.Name)
		e.text(c.Function.Arguments)
	}
}

// tools counts tool (or legacy function) definitions: each one's JSON,
// without the "type" wrapper.
func (e *estimator) tools(raw json.RawMessage) {
	if len(raw) == 0 {
		return
	}
	var defs []map[string]json.RawMessage
	if json.Unmarshal(raw, &defs) != nil {
		return
	}
	for _, d := range defs {
		if f, ok := d["function"]; ok { // chat: {"type":"function","function":{…}}
			e.text(string(f))
			continue
		}
		delete(d, "type")
		b, _ := json.Marshal(d)
		e.text(string(b))
	}
}

// responsesInput counts a Responses input: a string (one user message) or
// a list of items — messages, function calls and their outputs.
func (e *estimator) responsesInput(raw json.RawMessage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	if raw[0] == '"' {
		var c contentJSON
		_ = c.UnmarshalJSON(raw)
		e.message("user", &c)
		return
	}
	var items []struct {
		partJSON
		Role string `json:"role"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return
	}
	for i := range items {
		it := &items[i]
		switch {
		case it.Role != "":
			e.message(it.Role, &it.Content)
		case it.Type == "function_call":
			e.text(it.Name)
			e.text(it.Arguments)
		case it.Type == "function_call_output":
			e.content(&it.Output)
		default:
			e.part(&it.partJSON)
		}
	}
}

// promptText counts a completion prompt or an embedding input: a string, a
// list of strings, a token array or a list of token arrays.
func (e *estimator) promptText(raw json.RawMessage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	if s, err := jsonstr.Decode(raw); err == nil {
		e.text(s)
		return
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return
	}
	for _, v := range list {
		v = bytes.TrimSpace(v)
		switch {
		case len(v) > 0 && v[0] == '"':
			if s, err := jsonstr.Decode(v); err == nil {
				e.text(s)
			}
		case len(v) > 0 && v[0] == '[':
			e.promptText(v)
		case len(v) > 0:
			e.n++ // one token id
		}
	}
}
