package replayer

import (
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
