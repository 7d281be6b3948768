package analysis

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParsePromptRange(t *testing.T) {
	tests := []struct {
		in      string
		lo, hi  int32
		wantErr string
	}{
		{in: ":2999", hi: 2999},
		{in: "3000:", lo: 3000},
		{in: " 100 : 200 ", lo: 100, hi: 200},
		{in: "5:5", lo: 5, hi: 5},
		{in: ":", wantErr: "give MIN, MAX or both"},
		{in: "3000", wantErr: "want MIN:MAX"},
		{in: "200:100", wantErr: "MIN above MAX"},
		{in: "-1:", wantErr: "not a positive token count"},
		{in: "x:10", wantErr: "not a positive token count"},
		{in: ":99999999999", wantErr: "not a positive token count"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var f Filter
			err := f.ParsePromptRange(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || f.MinPromptTokens != tt.lo || f.MaxPromptTokens != tt.hi {
				t.Fatalf("got %d:%d err %v, want %d:%d", f.MinPromptTokens, f.MaxPromptTokens, err, tt.lo, tt.hi)
			}
		})
	}
}

// TestFilter: short prompts are fast and long ones slow; a prompt-length
// filter shows each side's tail alone, path and model filters select rows,
// and frames keep the alignment of the unfiltered run.
func TestFilter(t *testing.T) {
	build := func(f Filter) *Summary {
		a := New(Options{Filter: f})
		for i := range 200 {
			prompt, dur := int32(500), 100*time.Millisecond
			if i%4 == 0 {
				prompt, dur = 4000, 2*time.Second
			}
			x := exch(time.Duration(i)*100*time.Millisecond+3*time.Second, dur, prompt)
			if i%10 == 1 {
				x.Model, x.Path = "other", "/v1/completions"
			}
			if i == 2 {
				x.PromptTokens = 0 // unknown length
			}
			a.AddExchange(x)
		}
		return a.Summary()
	}
	all := build(Filter{})
	if all.Requests != 200 || all.Filtered != 0 || all.FilterText != "" || all.E2E.P99 != 2*time.Second {
		t.Fatalf("unfiltered: %d requests, %d filtered %q, p99 %s", all.Requests, all.Filtered, all.FilterText, all.E2E.P99)
	}
	tests := []struct {
		name     string
		f        Filter
		requests int64
		p99      time.Duration
		text     string
	}{
		{"short prompts", Filter{MaxPromptTokens: 2999}, 149, 100 * time.Millisecond, "prompt tokens ≤ 2999"},
		{"long prompts", Filter{MinPromptTokens: 3000}, 50, 2 * time.Second, "prompt tokens ≥ 3000"},
		{"exact range", Filter{MinPromptTokens: 500, MaxPromptTokens: 500}, 149, 100 * time.Millisecond, "prompt tokens 500–500"},
		{"model", Filter{Models: []string{"other"}}, 20, 100 * time.Millisecond, "model other"},
		{"path", Filter{Paths: []string{"/v1/chat/completions", "/nope"}}, 180, 2 * time.Second, "path /v1/chat/completions or /nope"},
		{"nothing matches", Filter{Models: []string{"absent"}}, 0, 0, "model absent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := build(tt.f)
			if s.Requests != tt.requests || s.Filtered != 200-tt.requests || s.E2E.P99 != tt.p99 || s.FilterText != tt.text {
				t.Fatalf("%d requests (%d filtered), p99 %s, filter %q; want %d, p99 %s, %q",
					s.Requests, s.Filtered, s.E2E.P99, s.FilterText, tt.requests, tt.p99, tt.text)
			}
			if s.Requests > 0 && !s.Frames[0].Start.Equal(all.Frames[0].Start) {
				t.Errorf("first frame %s, want %s as unfiltered", s.Frames[0].Start, all.Frames[0].Start)
			}
			var b bytes.Buffer
			if err := s.WriteText(&b); err != nil || !strings.Contains(b.String(), "filter: "+tt.text) {
				t.Errorf("text lacks the filter (%v):\n%s", err, b.String())
			}
		})
	}
}
