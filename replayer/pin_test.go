package replayer

import (
	"bytes"
	"net/url"
	"strings"
	"testing"

	"github.com/reelkit/reel/formats"
)

// TestPinOutput: which requests each --pin-output mode caps at the
// recorded output count, what goes on the wire, and the report's line.
func TestPinOutput(t *testing.T) {
	chat := func(source string, out int32) *formats.Exchange {
		return &formats.Exchange{Method: "POST", Path: "/v1/chat/completions", ReqContentType: "application/json",
			ReqBody:            []byte(`{"model":"m","max_tokens":512,"messages":[{"role":"user","content":"hi"}]}`),
			PromptTokensSource: source, OutputTokens: out}
	}
	notJSON := chat(formats.TokensFromUsage, 40)
	notJSON.ReqContentType, notJSON.ReqBody = "text/plain", []byte("hello")
	xs := []*formats.Exchange{
		chat(formats.TokensFromUsage, 40),    // the server's count
		chat(formats.TokensFromTrace, 41),    // an imported trace's
		chat(formats.TokensFromEstimate, 42), // a stream without usage: counted events
		chat(formats.TokensFromUsage, 0),     // no answer
		notJSON,
	}
	tests := []struct {
		mode       PinMode
		wantPinned []bool
		wantLine   string
	}{
		{PinOff, []bool{false, false, false, false, false}, ""},
		{PinFromServer, []bool{true, true, false, false, false},
			"output pinned to the recording (--pin-output=server): 2 of 5 requests; not pinned: 1 output count counted from stream events, not the server's usage (--pin-output=true pins those too), 1 no output count recorded, 1 body not a JSON object"},
		{PinAll, []bool{true, true, true, false, false},
			"output pinned to the recording (--pin-output=true): 3 of 5 requests; not pinned: 1 no output count recorded, 1 body not a JSON object"},
	}
	target, _ := url.Parse("http://shadow:8000")
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			b := newRequestBuilder(target, nil, nil, tt.mode, false, false)
			rep := PinReport{Mode: tt.mode}
			for i, x := range xs {
				p, err := b.build(x)
				if err != nil {
					t.Fatal(err)
				}
				rep.add(p.pin)
				capped := bytes.Contains(p.wire, []byte(`"max_tokens":4`))
				if capped != tt.wantPinned[i] || (p.pin == pinned) != tt.wantPinned[i] {
					t.Errorf("request %d: capped %v (outcome %d), want %v:\n%s", i, capped, p.pin, tt.wantPinned[i], p.wire)
				}
				if !tt.wantPinned[i] && !bytes.HasSuffix(p.wire, x.ReqBody) {
					t.Errorf("request %d: body changed without pinning:\n%s", i, p.wire)
				}
			}
			if got := rep.String(int64(len(xs))); got != tt.wantLine {
				t.Errorf("report line\n got: %s\nwant: %s", got, tt.wantLine)
			}
		})
	}
	for _, s := range []string{"server", "true", "false"} {
		if m, err := ParsePinMode(s); err != nil || m.String() != s {
			t.Errorf("ParsePinMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParsePinMode("sometimes"); err == nil || !strings.Contains(err.Error(), "server") {
		t.Errorf("ParsePinMode accepted a bad value: %v", err)
	}
}
