package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis"
)

// TestQuickStory tells the --quick story in process — simulator, sidecar,
// stats, two replays, compare — and asserts its conclusions: reel stats
// flags frames where the long-prompt burst was, and the long-prompt queue
// cuts short requests' TTFT p99 by at least 40 % with a confidence
// interval below zero.
func TestQuickStory(t *testing.T) {
	if testing.Short() {
		t.Skip("the quick story takes about 30 s of wall time; run without -short")
	}
	cfg := quickConfig()
	cfg.Dir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	f, err := runStory(ctx, cfg, &out)
	if err != nil {
		t.Fatalf("story: %v\n%s", err, out.String())
	}
	if err := f.check(); err != nil {
		t.Fatalf("%v\n\nstory output:\n%s", err, out.String())
	}
	if f.Recorded == 0 || int(f.Recorded) != f.Sent {
		t.Errorf("recorded %d exchanges of %d sent", f.Recorded, f.Sent)
	}
	if f.Base.Incident < 2*f.Base.Normal {
		t.Errorf("the baseline replay did not reproduce the spike: incident TTFT p99 %v, normal frames %v", f.Base.Incident, f.Base.Normal)
	}
	for _, name := range []string{"stats.txt", "stats.html", "reproduce.html", "fix.html", "redact.key"} {
		if fi, err := os.Stat(filepath.Join(cfg.Dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s missing or empty (%v)", name, err)
		}
	}
	for _, want := range []string{"$ reel record", "$ reel stats", "$ reel replay", "$ reel compare", "FIX CONFIRMED", "◀ stands out", "prefix-cache reuse (cached ÷ prompt tokens, from usage): production "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestCheck(t *testing.T) {
	cfg := quickConfig()
	t0 := time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC)
	burst := func(f *findings) { f.IncidentStart, f.IncidentEnd = t0.Add(6*time.Second), t0.Add(12*time.Second) }
	flagged := func(from, to time.Duration) analysis.Episode {
		return analysis.Episode{Start: t0.Add(from), End: t0.Add(to)}
	}
	improved := analysis.Delta{Name: "ttft.p99", A: 1e9, B: 1e8, Rel: -0.9, HasCI: true, CILow: -1e9, CIHigh: -8e8, Significant: true}
	tripped := analysis.Verdict{Status: "EXPECTED"} // the fix's expectation held
	tests := []struct {
		name     string
		episodes []analysis.Episode
		delta    analysis.Delta
		verdict  analysis.Verdict
		wantErr  string
	}{
		{"holds", []analysis.Episode{flagged(7*time.Second, 11*time.Second)}, improved, tripped, ""},
		{"episode overlapping the start", []analysis.Episode{flagged(4*time.Second, 7*time.Second)}, improved, tripped, ""},
		{"nothing flagged", nil, improved, tripped, "flagged no frames"},
		{"flagged elsewhere", []analysis.Episode{flagged(0, 5*time.Second), flagged(12*time.Second, 14*time.Second)}, improved, tripped, "flagged no frames"},
		{"small improvement", []analysis.Episode{flagged(7*time.Second, 11*time.Second)},
			analysis.Delta{A: 1e9, B: 8e8, Rel: -0.2, HasCI: true, CILow: -3e8, CIHigh: -1e8, Significant: true}, tripped, "want at most −40%"},
		{"worse", []analysis.Episode{flagged(7*time.Second, 11*time.Second)},
			analysis.Delta{A: 1e9, B: 2e9, Rel: 1}, analysis.Verdict{}, "+100%"},
		{"within noise", []analysis.Episode{flagged(7*time.Second, 11*time.Second)}, improved, analysis.Verdict{Failed: true, Status: "NOT MET"}, "within noise"},
		{"no data", []analysis.Episode{flagged(7*time.Second, 11*time.Second)}, analysis.Delta{}, analysis.Verdict{}, "no TTFT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &findings{cfg: cfg, Episodes: tt.episodes, FixDelta: tt.delta, FixVerdict: tt.verdict}
			burst(f)
			err := f.check()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("check: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("check = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRunRejectsMisuse(t *testing.T) {
	for _, args := range [][]string{
		{"extra"},
		{"--time-scale", "500"},
		{"--no-such-flag"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
				t.Fatal("run accepted bad arguments")
			}
		})
	}
}

func TestOutputDirRefusesNonEmpty(t *testing.T) {
	dir := t.TempDir()
	if got, err := outputDir(filepath.Join(dir, "new")); err != nil || got != filepath.Join(dir, "new") {
		t.Fatalf("new dir: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := outputDir(dir); err == nil {
		t.Fatal("outputDir accepted a non-empty directory")
	}
}

func TestBar(t *testing.T) {
	tests := []struct {
		v, full time.Duration
		want    string
	}{
		{0, time.Second, ""},
		{time.Second, time.Second, "████"},
		{500 * time.Millisecond, time.Second, "██"},
		{time.Millisecond, time.Second, "▏"},
		{2 * time.Second, time.Second, "████"},
	}
	for _, tt := range tests {
		if got := bar(tt.v, tt.full, 4); got != tt.want {
			t.Errorf("bar(%v, %v, 4) = %q, want %q", tt.v, tt.full, got, tt.want)
		}
	}
}

// countingBody records how much of it was read and whether it was closed.
type countingBody struct {
	r      io.Reader
	read   int
	closed bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *countingBody) Close() error { b.closed = true; return nil }

type fixedTransport struct{ body *countingBody }

func (t fixedTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: t.body}, nil
}

// A client that stops at data: [DONE] still lets the rest of the stream
// through before hanging up, so the sidecar sees the stream end.
func TestDrainingTransportReadsTheRestOnClose(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantRead int
	}{
		{"stream tail", "data: {}\n\ndata: [DONE]\n\n", len("data: {}\n\ndata: [DONE]\n\n")},
		{"bounded", strings.Repeat("x", 2*maxDrain), 6 + maxDrain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &countingBody{r: strings.NewReader(tt.body)}
			req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
			resp, err := drainingTransport{fixedTransport{b}}.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.ReadFull(resp.Body, make([]byte, 6)); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if !b.closed || b.read != tt.wantRead {
				t.Fatalf("closed %v after reading %d bytes, want closed after %d", b.closed, b.read, tt.wantRead)
			}
		})
	}
}
