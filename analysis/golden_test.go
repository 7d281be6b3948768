package analysis

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis/analysistest"
	"github.com/reelkit/reel/formats"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata")

// golden compares v's indented JSON with testdata/name, or rewrites it
// with -update.
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; if the change is intended, run go test -run %s -update and review the diff.\ngot:\n%s", path, t.Name(), got)
	}
}

// goldenRows is a small run: two frames, an empty one, streaming and
// non-streaming requests, a timeout, a 503, two models and routes.
func goldenRows() []*formats.Result {
	rows := []*formats.Result{
		res(0, ms(400), ms(100), 10, 50_000, 30_000, 30_000),
		res(ms(500), ms(900), ms(350), 4, 200_000, 200_000),
		res(time.Second, ms(120), 0, 1),
		res(2*time.Second, ms(250), ms(60), 6, 40_000, 40_000, 40_000),
	}
	rows[2].Path, rows[2].Model, rows[2].PromptTokens = "/v1/embeddings", "embed", 12
	rows[0].PromptTokens, rows[1].PromptTokens, rows[3].PromptTokens = 300, 3000, 700
	rows[1].BatchSize, rows[3].BatchSize, rows[3].QueueDepth = 12, 8, 2
	timeout := res(12*time.Second, 0, 0, 0)
	timeout.Status, timeout.Error, timeout.E2ENs, timeout.TTFTNs, timeout.ITLUs = 0, "context deadline exceeded", 0, 0, nil
	unavailable := res(13*time.Second, ms(5), 0, 0)
	unavailable.Status, unavailable.TTFTNs, unavailable.ITLUs = 503, 0, nil
	ok := res(14*time.Second, ms(300), ms(80), 3, 60_000, 60_000)
	ok.LagNs = int64(ms(1.5))
	return append(rows, timeout, unavailable, ok)
}

func TestSummaryJSONGolden(t *testing.T) {
	slo, err := ParseSLO("ttft=300ms,e2e=1s")
	if err != nil {
		t.Fatal(err)
	}
	a := New(Options{SLO: slo})
	for _, r := range goldenRows() {
		a.AddResult(r)
	}
	golden(t, "summary.golden.json", a.Summary())
}

func TestCompareJSONGolden(t *testing.T) {
	a, b := New(Options{}), New(Options{})
	for _, r := range analysistest.Run(1, 300, 1) {
		a.AddResult(r)
	}
	for _, r := range analysistest.Run(2, 300, 1.3) {
		b.AddResult(r)
	}
	c := Compare(a, b, CompareOptions{Resamples: 200, Seed: 5})
	rules, err := ParseRules("p99>+10%,ttft.p50>+50%")
	if err != nil {
		t.Fatal(err)
	}
	// Summaries are covered by the summary golden file; keep this one to
	// the comparison itself.
	golden(t, "compare.golden.json", struct {
		Metrics []Delta      `json:"metrics"`
		Frames  []FrameDelta `json:"frames"`
		Verdict Verdict      `json:"verdict"`
	}{c.Metrics, c.Frames, c.Judge(rules)})
}
