package replayer

import (
	"fmt"
	"strings"

	"github.com/reelkit/reel/formats"
)

// PinMode says which requests get their API's output cap (max_tokens,
// max_completion_tokens, max_output_tokens) set to the recorded output
// tokens, so the shadow decodes as much as production did. A replay meant
// to redo production's work pins wherever the recorded count is the
// server's own: reel replay's default is PinFromServer
// (DefaultPinOutput); the zero value pins nothing.
type PinMode uint8

const (
	// PinOff sends every body as recorded.
	PinOff PinMode = iota
	// PinFromServer pins requests whose recorded output count is the
	// server's: from its usage (prompt_tokens_source "usage": the response
	// carried a usage object), or an imported trace's own length
	// ("trace"). A count reel made itself — token-bearing stream events of
	// a stream without usage — is not pinned: a server that sends several
	// tokens per event would be capped short.
	PinFromServer
	// PinAll pins every request with a recorded output count, counted
	// stream events included.
	PinAll
)

// DefaultPinOutput is reel replay's --pin-output.
const DefaultPinOutput = PinFromServer

// String is the mode as --pin-output and the pin_output result metadata
// spell it: "false", "server" or "true" (older results: "false", "true").
func (m PinMode) String() string {
	switch m {
	case PinFromServer:
		return "server"
	case PinAll:
		return "true"
	}
	return "false"
}

// ParsePinMode reads a --pin-output value: true (PinAll), false (PinOff)
// or server (PinFromServer).
func ParsePinMode(s string) (PinMode, error) {
	switch strings.ToLower(s) {
	case "true":
		return PinAll, nil
	case "false":
		return PinOff, nil
	case "server":
		return PinFromServer, nil
	}
	return PinOff, fmt.Errorf("want true, false or server, not %q", s)
}

// pinOutcome is what pinning did to one request.
type pinOutcome uint8

const (
	pinNotAsked      pinOutcome = iota // PinOff
	pinned                             // the output cap is the recorded count
	pinNoCount                         // no output count recorded (an error, not an LLM request)
	pinCountedEvents                   // the count is reel's own (stream events), PinFromServer
	pinNotJSON                         // the body is not a JSON object
	pinOutcomes
)

// pinWhy says why a request was not pinned, for the run report.
var pinWhy = [pinOutcomes]string{
	pinNoCount:       "no output count recorded",
	pinCountedEvents: "output count counted from stream events, not the server's usage (--pin-output=true pins those too)",
	pinNotJSON:       "body not a JSON object",
}

// pinDecision is what m does with x before its body is rewritten: pinned
// (if the body takes it) or why not.
func (m PinMode) pinDecision(x *formats.Exchange) pinOutcome {
	switch {
	case m == PinOff:
		return pinNotAsked
	case x.OutputTokens <= 0:
		return pinNoCount
	case m == PinFromServer && x.PromptTokensSource != formats.TokensFromUsage && x.PromptTokensSource != formats.TokensFromTrace:
		return pinCountedEvents
	}
	return pinned
}

// PinReport counts what --pin-output did over a run's sent requests.
type PinReport struct {
	Mode   PinMode
	Pinned int64 // requests sent with the recorded output cap
	// not counts the requests sent as recorded, by outcome (pinWhy says why).
	not [pinOutcomes]int64
}

func (p *PinReport) add(o pinOutcome) {
	if o == pinned {
		p.Pinned++
	} else if o != pinNotAsked {
		p.not[o]++
	}
}

// String is the report's line: "output pinned to the recording: 812 of 900
// requests (88 not: …)"; "" when the mode is PinOff.
func (p *PinReport) String(sent int64) string {
	if p.Mode == PinOff {
		return ""
	}
	s := fmt.Sprintf("output pinned to the recording (--pin-output=%s): %d of %d requests", p.Mode, p.Pinned, sent)
	var parts []string
	for _, o := range []pinOutcome{pinCountedEvents, pinNoCount, pinNotJSON} {
		if n := p.not[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, pinWhy[o]))
		}
	}
	if len(parts) == 0 {
		return s
	}
	return s + "; not pinned: " + strings.Join(parts, ", ")
}
