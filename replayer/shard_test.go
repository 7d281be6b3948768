package replayer

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/sse"
)

// TestShards runs 4 shards with one --start-at against one loopback server:
// every exchange is sent exactly once, each recorded connection's requests
// arrive in order, and the union of arrivals follows the single schedule.
func TestShards(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	xs := evenTrace(start, 400, 5*time.Millisecond, 24) // 200 req/s for 2 s on 24 connections
	srv := newArrivals(t, nil)
	// Leave room for four plans to open on a loaded machine: a shard that
	// starts late catches up by design, which this test does not measure.
	startAt := time.Now().Add(2 * time.Second)
	startMono := mono() + int64(time.Until(startAt))
	var wg sync.WaitGroup
	reps := make([]*Report, 4)
	sinks := make([]*memSink, 4)
	errs := make([]error, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := NewPlan(context.Background(), sliceOpener(xs), Options{Target: srv.url(t), StartAt: startAt,
				Conn: ConnRecorded, Selection: Selection{Shard: Shard{Index: i, Count: 4}}})
			if err != nil {
				errs[i] = err
				return
			}
			sinks[i] = &memSink{}
			reps[i], errs[i] = p.Run(context.Background(), sinks[i], 1)
		}()
	}
	wg.Wait()
	total := 0
	for i := range 4 {
		if errs[i] != nil {
			t.Fatalf("shard %d: %v", i, errs[i])
		}
		if reps[i].Sent == 0 || reps[i].Sent > 250 {
			t.Errorf("shard %d sent %d of 400: not a fair share", i, reps[i].Sent)
		}
		total += int(reps[i].Sent)
		for _, r := range sinks[i].rows {
			if r.Shard != int32(i) {
				t.Fatalf("row of shard %d says shard %d", i, r.Shard)
			}
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if total != 400 || len(srv.at) != 400 {
		t.Fatalf("sent %d, server saw %d distinct of 400", total, len(srv.at))
	}
	for id := range srv.at {
		if id < 0 {
			t.Fatalf("exchange %d arrived twice", -id)
		}
	}
	// Each recorded connection is one connection to the target, in order.
	for addr, ids := range srv.conns {
		for k := 1; k < len(ids); k++ {
			if ids[k] < ids[k-1] || (ids[k]-ids[k-1])%24 != 0 {
				t.Fatalf("connection %s carried %v: not one recorded connection in order", addr, ids)
			}
		}
	}
	var off int
	for _, x := range xs {
		want := startMono + (x.TsUnixNs - xs[0].TsUnixNs)
		if d := time.Duration(srv.at[x.Seq] - want); d.Abs() > 50*time.Millisecond {
			off++
		}
	}
	if off > 8 && !testing.Short() {
		t.Errorf("%d of 400 arrivals more than 50ms off the shared schedule", off)
	}
}

// TestLateShard: a shard that reaches --start-at late keeps the shared
// clock and reports how late it was.
func TestLateShard(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	xs := evenTrace(start, 20, 50*time.Millisecond, 2) // 1 s
	srv := newArrivals(t, nil)
	var out strings.Builder
	rep, sink := run(t, xs, Options{Target: srv.url(t), StartAt: time.Now().Add(-300 * time.Millisecond), Progress: &out}, 1)
	if rep.StartLate < 300*time.Millisecond {
		t.Errorf("StartLate %s, want ≥ 300ms", rep.StartLate)
	}
	if !strings.Contains(out.String(), "late by") {
		t.Errorf("no late-start warning:\n%s", out.String())
	}
	rows := sink.byID()
	if lag := time.Duration(rows[1].LagNs); lag < 250*time.Millisecond {
		t.Errorf("first request lag %s: the late start is hidden", lag)
	}
	if lag := time.Duration(rows[20].LagNs); lag > 200*time.Millisecond {
		t.Errorf("last request lag %s: the shard shifted its clock instead of keeping the shared one", lag)
	}
}

// TestSelection checks filters, sampling and sharding are deterministic and
// keep connections whole.
func TestSelection(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	xs := evenTrace(start, 1000, time.Millisecond, 50)
	for i, x := range xs {
		if i%2 == 0 {
			x.Model = "big"
			x.Path = "/v1/chat/completions"
			x.PromptTokens = 5000
		}
	}
	count := func(sel Selection) int {
		n := 0
		for _, x := range xs {
			if sel.match(&linked{x: x}) {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name     string
		sel      Selection
		min, max int
	}{
		{"all", Selection{}, 1000, 1000},
		{"model", Selection{Models: []string{"big"}}, 500, 500},
		{"path prefix", Selection{Paths: []string{"/v1/chat/"}}, 500, 500},
		{"path glob", Selection{Paths: []string{"/v1/*/completions"}}, 500, 500},
		{"method", Selection{Methods: []string{"post"}}, 1000, 1000},
		{"header", Selection{Headers: []HeaderMatch{{Name: "content-type", Value: "APPLICATION/JSON"}}}, 1000, 1000},
		{"header absent", Selection{Headers: []HeaderMatch{{Name: "X-Other"}}}, 0, 0},
		{"prompt range", Selection{MinPromptTokens: 1000}, 500, 500},
		{"sample", Selection{Sample: 0.2}, 150, 250},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if n := count(tc.sel); n < tc.min || n > tc.max {
				t.Errorf("selected %d, want %d..%d", n, tc.min, tc.max)
			}
		})
	}
	seen := map[int64]int{}
	for i := range 3 {
		sel := Selection{Shard: Shard{Index: i, Count: 3}}
		for _, x := range xs {
			if sel.match(&linked{x: x}) {
				if prev, ok := seen[x.ConnID]; ok && prev != i {
					t.Fatalf("connection %d split across shards %d and %d", x.ConnID, prev, i)
				}
				seen[x.ConnID] = i
			}
		}
	}
	if len(seen) != 50 {
		t.Errorf("%d connections sharded, want 50", len(seen))
	}
	x := &formats.Exchange{Session: "s1", ConnID: 3, Recorder: "a"}
	y := &formats.Exchange{Session: "s1", ConnID: 9, Recorder: "b"}
	if shardKey(x) != shardKey(y) {
		t.Error("one session on two connections got two shard keys")
	}
}

func TestParseFrameRange(t *testing.T) {
	day := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		from    FrameRef
		to      FrameRef
		wantErr bool
	}{
		{in: "3:7", from: FrameRef{Set: true, Index: 3}, to: FrameRef{Set: true, Index: 7}},
		{in: "3", from: FrameRef{Set: true, Index: 3}, to: FrameRef{Set: true, Index: 3}},
		{in: "12:", from: FrameRef{Set: true, Index: 12}},
		{in: ":4", to: FrameRef{Set: true, Index: 4}},
		{in: "2026-11-25T14:00:05Z:2026-11-25T14:01:00Z", from: FrameRef{Set: true, Time: day.Add(5 * time.Second)}, to: FrameRef{Set: true, Time: day.Add(time.Minute)}},
		{in: "14:00:05:14:01:00", from: FrameRef{Set: true, Time: day.Add(5 * time.Second)}, to: FrameRef{Set: true, Time: day.Add(time.Minute)}},
		{in: "7:3", wantErr: true},
		{in: "a:b", wantErr: true},
		{in: "-1:2", wantErr: true},
		{in: ":", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			r, err := ParseFrameRange(tc.in, day)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && (r.From != tc.from || r.To != tc.to) {
				t.Errorf("got %+v, want %+v..%+v", r, tc.from, tc.to)
			}
		})
	}
}

func FuzzParseFrameRange(f *testing.F) {
	for _, s := range []string{"3:7", "12:", "2026-11-25T14:00:05Z:2026-11-25T14:01:00Z", "14:00:05:14:01:00", "::", ""} {
		f.Add(s)
	}
	day := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseFrameRange(s, day)
		if err == nil && r.IsZero() {
			t.Errorf("%q parsed to an empty range without error", s)
		}
	})
}

func FuzzRewriteLLMBody(f *testing.F) {
	for _, s := range []string{`{"stream":true,"max_tokens":5}`, `{"stream_options":3,"stream":true}`, `[]`, `{`, `null`} {
		f.Add([]byte(s), int32(7))
	}
	f.Fuzz(func(t *testing.T, body []byte, out int32) {
		for _, api := range []sse.API{sse.ChatCompletions, sse.Responses, sse.AnthropicMessages} {
			b, _, err := rewriteLLMBody(body, llmRewrite{api: api, pin: true, outputTokens: out, ignoreEOS: true, usage: true})
			if err != nil {
				continue
			}
			rewrote := len(b) > 0 && b[0] == '{' && string(b) != string(body)
			if rewrote && api.TakesIgnoreEOS() && out > 0 && !strings.Contains(string(b), `"ignore_eos":true`) {
				t.Errorf("rewrote %q to %q without ignore_eos", body, b)
			}
			if rewrote && !api.TakesIgnoreEOS() && strings.Contains(string(b), `"ignore_eos"`) && !strings.Contains(string(body), `"ignore_eos"`) {
				t.Errorf("%v: rewrote %q to %q with ignore_eos", api, body, b)
			}
		}
	})
}
