package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reelkit/reel/analysis/analysistest"
)

// analysisFixtures writes a recording with a long-prompt burst, a baseline
// run, a noisy rerun of it and a 40 % slower candidate.
func analysisFixtures(t *testing.T) (recording, base, noise, slow string) {
	t.Helper()
	dir := t.TempDir()
	recording, base, noise, slow = filepath.Join(dir, "rec"), filepath.Join(dir, "base"), filepath.Join(dir, "noise"), filepath.Join(dir, "slow")
	analysistest.WriteDataset(t, recording, analysistest.WeeklyIncident(7))
	analysistest.WriteDataset(t, base, analysistest.Run(1, 3000, 1))
	analysistest.WriteDataset(t, noise, analysistest.Run(2, 3000, 1.02))
	analysistest.WriteDataset(t, slow, analysistest.Run(3, 3000, 1.4))
	return
}

func TestAnalysisCommands(t *testing.T) {
	rec, base, noise, slow := analysisFixtures(t)
	queued := filepath.Join(t.TempDir(), "queued")
	analysistest.WriteDataset(t, queued, analysistest.WeeklyIncidentQueued(7))
	html := filepath.Join(t.TempDir(), "out.html")
	rules := "p99>+10%,ttft.p99>+15%,goodput<-5%"
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   []string
		stderr   []string
		htmlWant string
	}{
		{name: "stats names the burst", args: []string{"stats", rec, "--html", html}, code: 0,
			stdout:   []string{"frames 14:01:00–14:02:00", "likely cause: long prompts", "batch_size r="},
			htmlWant: "likely cause: long prompts"},
		{name: "stats names the cause, not the queue", args: []string{"stats", queued}, code: 0,
			stdout: []string{"frames 14:01:00–14:02:05", "likely cause: long prompts", "server state moving with it: queue depth", "per-frame TTFT p99 moves with"}},
		{name: "stats prompt filter", args: []string{"stats", rec, "--prompt-tokens", ":1599"}, code: 0,
			stdout: []string{"filter: prompt tokens ≤ 1599 (", "requests left out)", "prompt tokens: p50 "}},
		{name: "report prompt filter", args: []string{"report", rec, "--prompt-tokens", "1600:", "--json"}, code: 0,
			stdout: []string{`"filter": "prompt tokens ≥ 1600"`, `"filtered": `}},
		{name: "report model and path filters", args: []string{"report", base, "--model", "llama-3-8b", "--path", "/v1/chat/completions,/v1/completions"}, code: 0,
			stdout: []string{"replay: 3000 requests", "filter: path /v1/chat/completions or /v1/completions, model llama-3-8b (0 requests left out)"}},
		{name: "report filter leaves nothing", args: []string{"report", base, "--model", "absent"}, code: 0,
			stdout: []string{"replay: 0 requests", "filter: model absent (3000 requests left out)", "no requests"}},
		{name: "bad prompt range", args: []string{"report", base, "--prompt-tokens", "3000:100"}, code: 2,
			stderr: []string{"--prompt-tokens", "MIN above MAX"}},
		{name: "compare with a prompt filter", args: []string{"compare", base, slow, "--prompt-tokens", ":499", "--fail-on", "p99>+10%"}, code: 1,
			stdout: []string{"filter: prompt tokens ≤ 499 (left out: ", "REGRESSION: e2e.p99 +"}},
		{name: "compare improvement rule trips as FAIL", args: []string{"compare", slow, base, "--fail-on", "ttft.p99<-20%"}, code: 1,
			stdout: []string{"FAIL: ttft.p99 -", ", better, trips rule ttft.p99<-20%"}},
		{name: "report text", args: []string{"report", base, "--slo", "e2e=1s"}, code: 0,
			stdout: []string{"replay: 3000 requests", "goodput", "by model:"}},
		{name: "report json", args: []string{"report", base, "--json"}, code: 0, stdout: []string{`"e2e": {`, `"p99_ns"`}},
		{name: "report html", args: []string{"report", base, "--html", html}, code: 0, htmlWant: "<svg"},
		{name: "compare identical", args: []string{"compare", base, base, "--fail-on", rules, "--slo", "e2e=1s"}, code: 0,
			stdout: []string{"OK: none of "}},
		{name: "compare noise", args: []string{"compare", base, noise, "--fail-on", rules, "--slo", "e2e=1s"}, code: 0,
			stdout: []string{"OK: none of "}},
		{name: "compare regression", args: []string{"compare", base, slow, "--fail-on", rules, "--slo", "e2e=1s", "--html", html}, code: 1,
			stdout: []string{"REGRESSION: e2e.p99 +", ", worse, trips rule p99>+10%"}, htmlWant: "REGRESSION"},
		{name: "compare regression json", args: []string{"compare", base, slow, "--fail-on", "p99>+10%", "--json"}, code: 1,
			stdout: []string{`"failed": true`, `"regression": true`}, stderr: []string{"REGRESSION: e2e.p99"}},
		{name: "compare recording vs replay", args: []string{"compare", rec, base}, code: 0, stdout: []string{"A: " + rec}},
		{name: "compare needs two runs", args: []string{"compare", base}, code: 2, stderr: []string{"want two runs", "try: reel compare"}},
		{name: "bad rule", args: []string{"compare", base, slow, "--fail-on", "p98>+1%"}, code: 2, stderr: []string{"unknown metric"}},
		{name: "unitless latency rule", args: []string{"compare", base, slow, "--fail-on", "p99>10"}, code: 2, stderr: []string{"needs % or a unit"}},
		{name: "bad slo", args: []string{"report", base, "--slo", "speed=1s"}, code: 2, stderr: []string{"unknown metric"}},
		{name: "no dataset", args: []string{"stats"}, code: 2, stderr: []string{"no dataset given"}},
		{name: "missing dataset", args: []string{"report", filepath.Join(t.TempDir(), "nothing")}, code: 1, stderr: []string{"reel report:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(html)
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), tt.args, &stdout, &stderr)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout.String(), stderr.String())
			}
			for _, want := range tt.stdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
				}
			}
			for _, want := range tt.stderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
			if tt.htmlWant != "" {
				b, err := os.ReadFile(html)
				if err != nil {
					t.Fatal(err)
				}
				// Self-contained: nothing to fetch, no script (the SVG
				// namespace is a name, not a fetch).
				page := strings.ReplaceAll(string(b), `xmlns="http://www.w3.org/2000/svg"`, "")
				for _, bad := range []string{"<script", "http://", "https://", "src=", "url(", "@import"} {
					if strings.Contains(page, bad) {
						t.Errorf("html report is not self-contained: contains %q", bad)
					}
				}
				if !strings.Contains(string(b), tt.htmlWant) {
					t.Errorf("html lacks %q", tt.htmlWant)
				}
			}
			if strings.HasSuffix(tt.name, "json") {
				var v map[string]any
				if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
					t.Errorf("stdout is not JSON: %v", err)
				}
			}
		})
	}
}
