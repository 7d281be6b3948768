package analysis

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis/analysistest"
)

// TestGroupsShareTheRunsSketch: a group that holds every value of the run
// stands for its sketch by the run's (groupAcc.whole) until a request of
// another group has a value. The stats must be those of groups that keep
// their own distributions: at every budget (sketched at once, a budget
// that sheds often, the default), with Summary called along the way, for
// one route throughout, a second route from the middle on, and a status
// class (3xx) with latencies appearing late.
func TestGroupsShareTheRunsSketch(t *testing.T) {
	rows := analysistest.Run(9, 60_000, 1)
	for i, r := range rows {
		if i >= len(rows)/2 && i%3 == 0 {
			r.Path = "/v1/completions"
		}
		if i >= 2*len(rows)/3 && i%50 == 0 {
			r.Status = 304
		}
		if i%97 == 0 {
			r.Status, r.Error = 0, "connection refused"
		}
		if i%7 == 0 {
			r.PromptTokens = 3000
		}
	}
	for _, budget := range []int{-1, 2000, 20_000, 0} {
		t.Run(fmt.Sprint("budget ", budget), func(t *testing.T) {
			shared, own := New(Options{ExactValues: budget, Frame: time.Minute}), New(Options{ExactValues: budget, Frame: time.Minute})
			for _, gs := range []*groupSet{&own.byRoute, &own.byModel, &own.byClass, &own.byBucket} {
				gs.own = true
			}
			var whole int
			for i, r := range rows {
				shared.AddResult(r)
				own.AddResult(r)
				if i%7919 == 0 {
					shared.Summary()
					own.Summary()
				}
				if i == len(rows)/2-1 {
					whole = countWhole(shared)
				}
			}
			if budget != 0 && whole == 0 { // the default budget holds every value of this run
				t.Fatalf("no group shared the run's sketch at budget %d", budget)
			}
			got, _ := json.Marshal(shared.Stats())
			want, _ := json.Marshal(own.Stats())
			if string(got) != string(want) {
				t.Fatalf("stats differ from groups with their own distributions:\n got %s\nwant %s", got, want)
			}
			if shared.budget.held != own.budget.held || shared.budget.next != own.budget.next {
				t.Fatalf("budget held %d (next %d), want %d (%d)", shared.budget.held, shared.budget.next, own.budget.held, own.budget.next)
			}
		})
	}
}

func countWhole(a *Analyzer) int {
	n := 0
	for _, gs := range []*groupSet{&a.byRoute, &a.byModel, &a.byClass, &a.byBucket} {
		for _, w := range gs.whole {
			if w != nil {
				n++
			}
		}
	}
	return n
}
