package sse

import (
	"bytes"
	"math"
	"time"
)

// MaxGaps bounds the gaps a Timeline keeps; later gaps are dropped (the
// event count keeps counting).
const MaxGaps = 1 << 16

// firstGaps is the room the first gap makes for more.
const firstGaps = 64

// Timeline accumulates the timing of one streamed response, event by event.
// The zero value is ready to use; it is not safe for concurrent use.
//
// Gaps are measured between consecutive token-bearing events (so a trailing
// usage-only chunk or "[DONE]" adds no gap) and are the inter-token latency
// that reel's metrics use.
type Timeline struct {
	Events      int       // events observed, of any kind
	TokenEvents int       // token-bearing events
	FirstToken  time.Time // arrival of the first token-bearing event; zero if none
	LastToken   time.Time // arrival of the latest token-bearing event
	GapsUs      []int32   // µs between consecutive token-bearing events, at most MaxGaps
	HasUsage    bool      // some event carried a usage object
	Usage       Usage     // the last usage seen (fields merged: non-zero values win, a reported cached count wins)
	Done        bool      // "[DONE]" was seen

	// frame is the latest event the fast classifier walked, whose answer
	// framed holds; framedEmpty says whether its token string was empty.
	frame       frame
	framed      Chunk
	framedEmpty bool
}

// Observe adds one event to the timeline and returns its classification.
func (t *Timeline) Observe(ev *Event) Chunk {
	t.Events++
	c := t.classify(ev.Data)
	if c.Done {
		t.Done = true
	}
	if c.HasUsage {
		t.HasUsage = true
		t.Usage.merge(c.Usage)
	}
	if c.Tokens {
		if t.TokenEvents == 0 {
			t.FirstToken = ev.Time
		} else if len(t.GapsUs) < MaxGaps {
			if t.GapsUs == nil {
				t.GapsUs = make([]int32, 0, firstGaps) // one buffer for a typical answer
			}
			t.GapsUs = append(t.GapsUs, clampUs(ev.Time.Sub(t.LastToken)))
		}
		t.TokenEvents++
		t.LastToken = ev.Time
	}
	return c
}

// classify is Classify, answered from the frame for an event that repeats
// the latest walked one but for its token string's text, when that string
// is as empty as it was (the only thing the answer took from it).
// Classify is a function of the data alone, so the frame stays valid
// whatever events come between.
func (t *Timeline) classify(data []byte) Chunk {
	data = bytes.TrimSpace(data)
	if inner, ok := t.frame.match(data); ok && (len(inner) == 0) == t.framedEmpty {
		return t.framed
	}
	c, tok := classifyTrimmed(data)
	if tok.set {
		t.frame.remember(data, tok.from, tok.to)
		t.framed, t.framedEmpty = c, tok.from == tok.to
	}
	return c
}

// OutputTokens reports usage.completion_tokens when the stream reported it,
// else the number of token-bearing events.
func (t *Timeline) OutputTokens() int64 {
	if t.HasUsage && t.Usage.CompletionTokens > 0 {
		return t.Usage.CompletionTokens
	}
	return int64(t.TokenEvents)
}

func clampUs(d time.Duration) int32 {
	us := d.Microseconds()
	switch {
	case us < 0:
		return 0
	case us > math.MaxInt32:
		return math.MaxInt32
	}
	return int32(us)
}
