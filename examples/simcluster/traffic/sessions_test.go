package traffic

import (
	"context"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/examples/simcluster/cluster"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/proxy"
	"github.com/reelkit/reel/redact"
)

// memSink keeps recorded exchanges.
type memSink struct {
	mu sync.Mutex
	xs []*formats.Exchange
}

func (s *memSink) Write(x *formats.Exchange) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.xs = append(s.xs, x)
	return nil
}
func (s *memSink) Close(context.Context) error { return nil }

// TestSessionsInferredAfterRedaction runs conversations and agent loops
// against the simulator through reel's redacting recorder, then infers the
// sessions from the redacted recording alone: every later turn is linked
// to its predecessor, and no link joins two different sessions (the
// x-session-id header, pseudonymised, is the truth; it is not used to
// infer).
func TestSessionsInferredAfterRedaction(t *testing.T) {
	ctx := context.Background()
	srv, err := cluster.Start(ctx, "127.0.0.1:0", cluster.Options{TimeScale: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(ctx)
	red, err := redact.New(redact.DefaultPolicy(), []byte("sessions-test-key-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	rec := recorder.New(sink, red, recorder.Options{Pipeline: recorder.PipelineOptions{Queue: 1 << 14, QueueBytes: 1 << 30}})
	up, _ := url.Parse(srv.URL)
	p, err := proxy.New(proxy.Options{Upstream: up, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	sum, err := Run(ctx, Options{
		Target: front.URL, Rate: 40, Duration: 2 * time.Second, Seed: 3, SystemPrompts: 2,
		Sessions: Sessions{Share: 0.7, Turns: 4, Think: 40 * time.Millisecond, AgentShare: 0.4, Steps: 6, AgentThink: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if sum.Failed != 0 || sum.Sessions < 20 || sum.FollowUps < 2*sum.Sessions {
		t.Fatalf("traffic summary %+v", sum)
	}
	xs := sink.xs
	slices.SortFunc(xs, func(a, b *formats.Exchange) int { return int(a.TsUnixNs - b.TsUnixNs) })
	if len(xs) != sum.Sent {
		t.Fatalf("recorded %d exchanges of %d sent", len(xs), sum.Sent)
	}
	l := analysis.NewLinker(analysis.SessionsInferred, analysis.LinkerOptions{})
	prevOf := map[string]int{} // recorded session → index of its latest turn
	linked, later := 0, 0
	for i, x := range xs {
		lk := l.Link(int64(i), "", x)
		want, hasPrev := prevOf[x.Session]
		if x.Session != "" {
			prevOf[x.Session] = i
		}
		if x.Session != "" && hasPrev {
			later++
		}
		switch {
		case len(lk.Deps) == 0 && x.Session != "" && hasPrev:
			t.Errorf("turn %d of session %s not linked (parent_turn_key %x)", i, x.Session, x.ParentTurnKey)
		case len(lk.Deps) > 1:
			t.Errorf("exchange %d has %d predecessors", i, len(lk.Deps))
		case len(lk.Deps) == 1:
			linked++
			d := int(lk.Deps[0])
			if x.Session == "" || xs[d].Session != x.Session || d != want {
				t.Errorf("false link: exchange %d (session %q) → %d (session %q), want %d", i, x.Session, d, xs[d].Session, want)
			}
		}
		if string(x.ReqBody) != "" && x.RedactErr != "" {
			t.Errorf("exchange %d: redaction error %s", i, x.RedactErr)
		}
	}
	if linked != later || later == 0 {
		t.Fatalf("%d links for %d later turns", linked, later)
	}
	t.Logf("%d exchanges, %d sessions, %d later turns all linked, no false link", len(xs), sum.Sessions, later)
}
