// Package recordertest has helpers for tests of recording sources: a
// Recorder over an in-memory sink.
package recordertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
)

// Sink is a recorder.Sink that keeps every exchange written to it. It is
// safe for concurrent use.
type Sink struct {
	mu     sync.Mutex // guards xs and closed
	xs     []*formats.Exchange
	closed bool
}

// Write keeps x.
func (s *Sink) Write(x *formats.Exchange) error {
	s.mu.Lock()
	s.xs = append(s.xs, x)
	s.mu.Unlock()
	return nil
}

// Close marks the sink closed.
func (s *Sink) Close(context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// Exchanges returns what was written so far, in write order.
func (s *Sink) Exchanges() []*formats.Exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*formats.Exchange(nil), s.xs...)
}

// Closed reports whether the recorder closed the sink.
func (s *Sink) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// New returns a Recorder with opts writing raw (unredacted) exchanges to a
// new Sink. The recorder is closed when the test ends, if the test did not
// close it.
func New(tb testing.TB, opts recorder.Options) (*recorder.Recorder, *Sink) {
	tb.Helper()
	sink := &Sink{}
	rec := recorder.New(sink, nil, opts)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rec.Close(ctx)
	})
	return rec, sink
}
