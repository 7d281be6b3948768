package traffic

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Sessions makes part of the traffic multi-turn: conversations whose next
// turn carries the previous answer, and agent loops whose next step carries
// the model's answer and a tool's result. A session's first turn arrives
// on the plan's clock; each later turn is sent by Run a think time after
// the previous answer ended (closed loop, as a person or an agent would),
// so the recorded think times are real. Every turn of a session carries an
// x-session-id header, so reel can group them by header too.
type Sessions struct {
	// Share of the plan's arrivals that start a session, in [0, 1]; 0
	// (the default) keeps every request single.
	Share float64
	// Turns is the mean number of turns of a conversation (geometric, at
	// least 2). Default 4.
	Turns float64
	// Think is the mean think time of a conversation (exponential, capped
	// at 10×). Default 4 s.
	Think time.Duration
	// AgentShare of the sessions are agent loops: Steps steps (mean,
	// default 8), each after AgentThink (mean, default 150 ms: the tool's
	// run time).
	AgentShare float64
	Steps      float64
	AgentThink time.Duration
}

func (s Sessions) withDefaults() (Sessions, error) {
	if s.Turns == 0 {
		s.Turns = 4
	}
	if s.Think == 0 {
		s.Think = 4 * time.Second
	}
	if s.Steps == 0 {
		s.Steps = 8
	}
	if s.AgentThink == 0 {
		s.AgentThink = 150 * time.Millisecond
	}
	if !(s.Share >= 0 && s.Share <= 1) || !(s.AgentShare >= 0 && s.AgentShare <= 1) || !(s.Turns >= 2 && s.Turns < 1e4) || !(s.Steps >= 2 && s.Steps < 1e4) || s.Think < 0 || s.AgentThink < 0 {
		return s, fmt.Errorf("traffic options: sessions share and agent share in [0, 1], turns and steps ≥ 2, think times not negative")
	}
	return s, nil
}

// SessionPlan is a planned request's session: it is turn Turn (from 0) of
// Turns.
type SessionPlan struct {
	ID    int  // session id, from 0 in order of first arrival
	Agent bool // an agent loop (tool results) rather than a conversation
	Turn  int
	Turns int
	seed  uint64
	think time.Duration // mean think time after an answer
}

// Header is the session's x-session-id value.
func (s *SessionPlan) Header() string { return fmt.Sprintf("sim-%06d", s.ID) }

// newSession draws the session a planned arrival starts.
func (p *Planner) newSession() *SessionPlan {
	so := p.o.Sessions
	s := &SessionPlan{ID: p.sessions, seed: p.rng.Uint64(), think: so.Think}
	p.sessions++
	mean := so.Turns
	if p.rng.Float64() < so.AgentShare {
		s.Agent, mean, s.think = true, so.Steps, so.AgentThink
	}
	// Geometric with the given mean, at least two turns.
	q := 1 / (mean - 1)
	s.Turns = 2 + int(math.Floor(math.Log(1-p.rng.Float64())/math.Log(1-q)))
	s.Turns = min(s.Turns, 64)
	return s
}

// followUp is the request after r, whose answer was answer: the same
// conversation plus the answer and the user's next message (a
// conversation) or a tool's result (an agent loop), due think after the
// answer. ok is false when the session is over.
func followUp(r *Planned, answer string) (next Planned, think time.Duration, ok bool) {
	s := r.Session
	if s == nil || s.Turn+1 >= s.Turns {
		return Planned{}, 0, false
	}
	var b chatBody
	if json.Unmarshal(r.Body, &b) != nil {
		return Planned{}, 0, false
	}
	rng := rand.New(rand.NewPCG(s.seed, uint64(s.Turn+1)))
	answerMsg := message{Role: "assistant", Content: answer}
	var turn message
	if s.Agent {
		turn = message{Role: "tool", Content: fill(rng, "tool", "Tool output:\n", int(120*math.Exp(0.6*rng.NormFloat64()))), ToolCallID: fmt.Sprintf("call_%d_%d", s.ID, s.Turn)}
	} else {
		turn = message{Role: "user", Content: fill(rng, "user", "", int(40*math.Exp(0.7*rng.NormFloat64())))}
	}
	b.Messages = append(b.Messages, answerMsg, turn)
	b.MaxTokens = max(1, int(129*math.Exp(0.661*rng.NormFloat64())))
	body, err := json.Marshal(b)
	if err != nil {
		return Planned{}, 0, false
	}
	ns := *s
	ns.Turn++
	prompt := r.PromptTokens + mustTokens(answerMsg.Role, answerMsg.Content) + mustTokens(turn.Role, turn.Content)
	next = Planned{Path: r.Path, Body: body, MaxTokens: b.MaxTokens, Stream: r.Stream, PromptTokens: prompt, Session: &ns}
	think = time.Duration(rng.ExpFloat64() * float64(s.think))
	return next, min(think, 10*s.think), true
}
