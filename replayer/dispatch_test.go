package replayer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSpinFor(t *testing.T) {
	for _, tc := range []struct {
		window time.Duration
		gap    time.Duration
		want   time.Duration
	}{
		{2 * time.Millisecond, time.Second, 2 * time.Millisecond},              // slow traffic: the full window
		{2 * time.Millisecond, 200 * time.Microsecond, 150 * time.Microsecond}, // 5k req/s: three quarters of the gap
		{2 * time.Millisecond, 0, minSpin},                                     // a burst: never below the timer's error
		{20 * time.Microsecond, time.Second, minSpin},
	} {
		if got := spinFor(tc.window, int64(tc.gap)); got != tc.want {
			t.Errorf("spinFor(%s, %s) = %s, want %s", tc.window, tc.gap, got, tc.want)
		}
	}
}

func TestPace(t *testing.T) {
	const w = DefaultSpinWindow
	for _, tc := range []struct {
		name        string
		gap, avg    time.Duration
		canSleep    bool
		wantWindow  time.Duration
		wantPrecise bool
	}{
		{"5k req/s, Linux: precise sleeps over the whole window", 200 * time.Microsecond, 200 * time.Microsecond, true, w, true},
		{"a burst inside slow traffic stays precise", 0, 300 * time.Microsecond, true, w, true},
		{"20k req/s: the timer alone", 50 * time.Microsecond, 50 * time.Microsecond, true, 0, false},
		{"5k req/s, no precise sleep: spin three quarters of the gap", 200 * time.Microsecond, 200 * time.Microsecond, false, 150 * time.Microsecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			win, precise := pace(w, int64(tc.gap), int64(tc.avg), tc.canSleep)
			if win != tc.wantWindow || precise != tc.wantPrecise {
				t.Errorf("pace = %s, %v; want %s, %v", win, precise, tc.wantWindow, tc.wantPrecise)
			}
		})
	}
}

// TestWaitUntil: every way of waiting returns at or after the due time,
// and not absurdly later (generous bound for a loaded machine).
func TestWaitUntil(t *testing.T) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for _, tc := range []struct {
		name    string
		spin    time.Duration
		precise bool
	}{
		{"timer only", 0, false},
		{"spin", DefaultSpinWindow, false},
		{"precise sleep", DefaultSpinWindow, canSleepPrecise()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, d := range []time.Duration{0, 30 * time.Microsecond, 300 * time.Microsecond, 3 * time.Millisecond} {
				due := mono() + int64(d)
				if err := waitUntil(context.Background(), due, tc.spin, timer, tc.precise); err != nil {
					t.Fatal(err)
				}
				now := mono()
				if now < due {
					t.Errorf("wait for %s returned %s early", d, time.Duration(due-now))
				}
				if late := time.Duration(now - due); late > 500*time.Millisecond {
					t.Errorf("wait for %s returned %s late", d, late)
				}
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitUntil(ctx, mono()+int64(time.Hour), DefaultSpinWindow, timer, true); err == nil {
		t.Error("a cancelled wait returned no error")
	}
}

// TestSenderSaturated: with no idle sender, an on-time job gets a new
// sender (open loop). A job the dispatcher hands out late waits for a
// running sender instead while senders are turning over (the client is
// CPU-bound), but not when none has finished for saturatedLag: then they
// wait on a stalled target, and queueing would make the replay a closed
// loop. Every job runs.
func TestSenderSaturated(t *testing.T) {
	release := make(chan struct{})
	var ran atomic.Int64
	s := newSender(context.Background(), nil, 0, 0, false, func(j *job) {
		<-release
		ran.Add(1)
	})
	workers := func() (n, queued int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.workers, len(s.queue)
	}
	late := func() *job { return &job{due: mono() - int64(time.Second)} }
	s.dispatch(&job{due: mono()}) // on time, none idle: a sender

	// A sender finished "just now": pinned ahead of the clock, so that a
	// preempted test cannot age it past saturatedLag.
	s.lastDone.Store(mono() + int64(time.Hour))
	s.dispatch(late())
	s.dispatch(late())
	if n, q := workers(); n != 1 || q != 2 {
		t.Fatalf("turning over: %d senders, %d queued after 1 on-time and 2 late jobs, want 1 and 2", n, q)
	}
	s.dispatch(&job{due: mono()}) // on time again: a sender for it
	if n, _ := workers(); n != 2 {
		t.Fatalf("%d senders after another on-time job, want 2", n)
	}

	// No sender has finished for longer than saturatedLag: the senders are
	// held by the target. A late job gets a sender, and so does the queue's head.
	s.lastDone.Store(mono() - int64(time.Second))
	s.dispatch(late())
	if n, q := workers(); n != 4 || q != 1 {
		t.Fatalf("stalled target: %d senders, %d queued, want 4 (one for the late job, one for the queue's head) and 1", n, q)
	}
	s.dispatch(late())
	if n, q := workers(); n != 6 || q != 0 {
		t.Fatalf("stalled target: %d senders, %d queued, want 6 and 0", n, q)
	}
	close(release)
	s.wait()
	s.stop()
	if ran.Load() != 6 {
		t.Errorf("%d jobs ran, want 6", ran.Load())
	}
}

// TestSenderQueueBound: a fixed pool that is busy queues at most maxQueued
// jobs; then the dispatcher waits for a sender, so memory stays bounded.
func TestSenderQueueBound(t *testing.T) {
	release := make(chan struct{})
	var ran atomic.Int64
	s := newSender(context.Background(), nil, 1, 0, false, func(j *job) {
		<-release
		ran.Add(1)
	})
	dispatched := make(chan int, 1)
	go func() {
		n := 0
		for range maxQueued + 2 { // one running, maxQueued queued, one more
			s.dispatch(&job{due: mono()})
			n++
		}
		dispatched <- n
	}()
	select {
	case n := <-dispatched:
		t.Fatalf("all %d jobs handed out with one busy sender and a queue of %d", n, maxQueued)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-dispatched:
	case <-time.After(10 * time.Second):
		t.Fatal("the dispatcher stayed blocked after the sender was released")
	}
	s.wait()
	s.stop()
	if ran.Load() != maxQueued+2 {
		t.Errorf("%d jobs ran, want %d", ran.Load(), maxQueued+2)
	}
}

// TestSenderPoolBound: when every connection the pool allows is busy, an
// on-time job waits in the queue rather than in a new sender goroutine
// (which could only wait for a connection); past maxQueued the dispatcher
// waits for room. Every job runs, in order, on the one sender.
func TestSenderPoolBound(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var order []int64
	c := &client{pooled: &pool{max: 1}}
	s := newSender(context.Background(), c, 0, 0, false, func(j *job) {
		<-release
		mu.Lock()
		order = append(order, j.off)
		mu.Unlock()
	})
	workers := func() (n, queued int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.workers, len(s.queue)
	}
	s.dispatch(&job{due: mono(), off: 0}) // the pool has room: a sender
	c.pooled.mu.Lock()
	c.pooled.open = 1 // its connection is busy: the pool is full
	c.pooled.mu.Unlock()
	for i := int64(1); i <= 3; i++ {
		s.dispatch(&job{due: mono(), off: i})
	}
	if n, q := workers(); n != 1 || q != 3 {
		t.Fatalf("pool full: %d senders, %d queued after 4 on-time jobs, want 1 and 3", n, q)
	}

	// The queue fills; the dispatcher waits for room.
	for i := int64(4); i <= maxQueued; i++ {
		s.dispatch(&job{due: mono(), off: i})
	}
	dispatched := make(chan struct{})
	go func() {
		s.dispatch(&job{due: mono(), off: maxQueued + 1})
		s.dispatch(&job{due: mono(), off: maxQueued + 2})
		close(dispatched)
	}()
	time.Sleep(2 * saturatedLag)
	select {
	case <-dispatched:
		t.Fatal("the dispatcher queued past maxQueued")
	default:
	}
	close(release)
	<-dispatched
	s.wait()
	s.stop()
	if n, _ := workers(); n != 1 {
		t.Errorf("%d senders ran the jobs, want 1", n)
	}
	if len(order) != maxQueued+3 {
		t.Fatalf("%d jobs ran, want %d", len(order), maxQueued+3)
	}
	for i, off := range order {
		if off != int64(i) {
			t.Fatalf("job %d ran %dth: the queue is not first in, first out", off, i)
		}
	}
}
