package replayer

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// TestAbsurdClocks: a window spanning 1970 → 2100 and a --start-at decades
// away are refused with the numbers before anything is sent; a long but
// bounded quiet spell is announced.
func TestAbsurdClocks(t *testing.T) {
	var sent atomic.Int64
	srv := newArrivals(t, func(w http.ResponseWriter, r *http.Request, id int64) {
		sent.Add(1)
		w.Write([]byte("ok"))
	})
	u := srv.url(t)
	now := time.Now()
	epoch := []*formats.Exchange{
		exchangeAt(time.Date(1970, 1, 1, 0, 0, 1, 0, time.UTC), 1, 1),
		exchangeAt(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), 2, 1),
	}
	short := []*formats.Exchange{exchangeAt(now, 1, 1), exchangeAt(now.Add(2*time.Hour), 2, 1)}
	tests := []struct {
		name  string
		xs    []*formats.Exchange
		opts  Options
		speed float64
		want  []string // empty: allowed
	}{
		{"1970 to 2100", epoch, Options{}, 1, []string{"gap of 130y", "1970-01-01T00:00:01Z → 2100-01-01T00:00:00Z", "--max-wait"}},
		{"start-at in 2100", short[:1], Options{StartAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}, 1, []string{"--start-at 2100-01-01T00:00:00Z is 7", "from now"}},
		{"start-at in 2000", short[:1], Options{StartAt: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}, 1, []string{"--start-at 2000-01-01T00:00:00Z was 2", "ago", "late by at least that"}},
		{"two hours at speed 1", short, Options{}, 1, []string{"gap of 2h0m0s", "idle for 2h0m0s"}},
		{"two hours at speed 1000", short, Options{}, 1000, nil},
		{"two hours with --max-wait 3h", short, Options{MaxWait: 3 * time.Hour}, 1, nil},
		{"no bound", epoch, Options{MaxWait: -1}, 1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Target = u
			p, err := NewPlan(context.Background(), sliceOpener(tc.xs), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			err = p.CheckClock(time.Now(), tc.speed)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrLongWait) {
				t.Fatalf("err %v, want ErrLongWait", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			before := sent.Load()
			if _, err := p.Run(context.Background(), &memSink{}, tc.speed); !errors.Is(err, ErrLongWait) {
				t.Errorf("Run: %v, want ErrLongWait", err)
			}
			if sent.Load() != before {
				t.Errorf("a refused run sent %d requests", sent.Load()-before)
			}
		})
	}
	t.Run("a quiet spell is announced", func(t *testing.T) {
		defer func(d time.Duration) { announceAfter = d }(announceAfter)
		announceAfter = 100 * time.Millisecond
		xs := []*formats.Exchange{exchangeAt(now, 1, 1), exchangeAt(now.Add(400*time.Millisecond), 2, 1)}
		var progress bytes.Buffer
		run(t, xs, Options{Target: u, Progress: &progress}, 1)
		if !strings.Contains(progress.String(), "replay: next request due at ") || !strings.Contains(progress.String(), "(recorded at ") {
			t.Errorf("no announcement of the wait:\n%s", progress.String())
		}
	})
}
