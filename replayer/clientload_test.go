package replayer

import (
	"strings"
	"testing"
	"time"
)

func TestClientLoad(t *testing.T) {
	for _, tc := range []struct {
		name  string
		c     ClientLoad
		bound bool
		want  string
	}{
		{"kept up", ClientLoad{Sent: 100_000, LateSends: 900, CPU: time.Second, Wall: 10 * time.Second, Cores: 2}, false, ""},
		{"nothing sent", ClientLoad{}, false, ""},
		{"saturated", ClientLoad{Sent: 100_000, LateSends: 38_200, CPU: 11 * time.Second, Wall: 10 * time.Second, Cores: 2}, true,
			"client CPU-bound: 38.2 % of sends left ≥ 5ms late; reel used 1.10 of 2 cores"},
		{"starved", ClientLoad{Sent: 1000, LateSends: 500, CPU: time.Second, Wall: 10 * time.Second, Cores: 2}, true,
			"client CPU-bound: 50.0 % of sends left ≥ 5ms late; reel used 0.10 of 2 cores (the machine is busy with other work)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.CPUBound(); got != tc.bound {
				t.Errorf("CPUBound %v, want %v", got, tc.bound)
			}
			if got := tc.c.String(); !strings.HasPrefix(got, tc.want) || (tc.want == "") != (got == "") {
				t.Errorf("String %q, want it to start %q", got, tc.want)
			}
		})
	}
}
