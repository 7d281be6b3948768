package htmlreport

import (
	"bytes"
	"strings"
	"testing"

	"github.com/reelkit/reel/analysis"
)

// withSignals attaches a server-side series that follows the frames' p99.
func withSignals(s *analysis.Summary) *analysis.Summary {
	ss := analysis.SignalSeries{Name: "vllm:num_requests_waiting", Label: "waiting-queue depth"}
	for _, f := range s.Frames {
		v := float64(f.E2E.P99) / 1e8
		ss.Frames = append(ss.Frames, analysis.SignalFrame{Start: f.Start, N: 5, Mean: v, Max: v})
	}
	s.Signals = &analysis.Signals{Series: []analysis.SignalSeries{ss}, Mover: ss.Name,
		Explanation: "server side: waiting-queue depth (vllm:num_requests_waiting) moves with the tail <r=0.9>"}
	return s
}

func TestSignalOverlay(t *testing.T) {
	t.Parallel()
	base, fix := incident(t, 4), incident(t, 1)
	tests := []struct {
		name  string
		write func(*bytes.Buffer) error
		want  []string
	}{
		{"report", func(b *bytes.Buffer) error { return WriteReport(b, "r", withSignals(base.Summary())) },
			[]string{"E2E p99 per frame, with waiting-queue depth: vllm:num_requests_waiting", "moves with the tail &lt;r=0.9&gt;"}},
		{"compare", func(b *bytes.Buffer) error {
			c := analysis.Compare(base, fix, analysis.CompareOptions{Resamples: 50})
			withSignals(c.A)
			withSignals(c.B)
			return WriteCompare(b, "base", "fix", c, nil)
		}, []string{"with vllm:num_requests_waiting: A vs B", "A server side: waiting-queue depth", "B vllm:num_requests_waiting"}},
		{"no signals", func(b *bytes.Buffer) error { return WriteReport(b, "r", base.Summary()) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.write(&b); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("page lacks %q", w)
				}
			}
			if tt.want == nil && strings.Contains(b.String(), "server side") {
				t.Error("a run without signals shows a server-side section")
			}
		})
	}
}
