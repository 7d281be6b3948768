package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/examples/simcluster/cluster"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/formatstest"
)

// promptTokensServed reads the simulator's own count of prompt tokens
// (vllm:prompt_tokens_total) from its /metrics.
func promptTokensServed(t *testing.T, url string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "vllm:prompt_tokens_total{"); ok {
			v, err := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatal("no vllm:prompt_tokens_total in the simulator's metrics")
	return 0
}

// TestImportedTracesReplay is the import's Done-when: the public traces
// (their heads, in testdata), imported and replayed against the simulator
// tokenizing with o200k_base, arrive on the trace's clock (lag as any
// replay's) and cost the simulator the trace's prompt tokens, within ±1 %.
func TestImportedTracesReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("replays two traces through the simulator")
	}
	testdata := filepath.Join("..", "..", "recorder", "trace", "testdata")
	for _, c := range []struct {
		name, file, speed string
		extra             []string
	}{
		{"mooncake", "mooncake-synthetic-head150.jsonl", "2", []string{"--max-rows", "60"}},
		{"azure", "azure-llm-conv-2023-head300.csv", "10", []string{"--api", "completions"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			data, out := t.TempDir(), t.TempDir()
			var stdout, stderr bytes.Buffer
			if err := runImport(context.Background(), append([]string{filepath.Join(testdata, c.file), "--out", data}, c.extra...), &stdout, &stderr); err != nil {
				t.Fatalf("import: %v\n%s", err, stderr.String())
			}
			rows := formatstest.Read[formats.Exchange](t, data)
			var traceTokens float64
			for _, x := range rows {
				traceTokens += float64(x.PromptTokens)
			}
			sim, err := cluster.Start(context.Background(), "127.0.0.1:0", cluster.Options{TimeScale: 50, Tokenizer: cluster.TokenizerO200k,
				MaxModelLen: 1 << 20, KVCapacityTokens: 1 << 24, MaxBatchedTokens: 1 << 16, MaxBodyBytes: 64 << 20, MaxLag: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer sim.Close(context.Background())
			before := promptTokensServed(t, sim.URL)
			if err := runReplay(context.Background(), []string{data, "--target", sim.URL, "--out", out, "--speed", c.speed, "--pin-output", "--quiet"}, &stdout, &stderr); err != nil {
				t.Fatalf("replay: %v\n%s", err, stderr.String())
			}
			served := promptTokensServed(t, sim.URL) - before
			results := formatstest.Read[formats.Result](t, out)
			if len(results) != len(rows) {
				t.Fatalf("%d results for %d requests", len(results), len(rows))
			}
			var lags []time.Duration
			for _, r := range results {
				if r.Status != 200 {
					t.Fatalf("seq %d: status %d %s", r.Seq, r.Status, r.Error)
				}
				lags = append(lags, time.Duration(r.LagNs))
			}
			slices.Sort(lags)
			p50, p99 := lags[len(lags)/2], lags[len(lags)*99/100]
			diff := (served - traceTokens) / traceTokens
			t.Logf("%s: %d requests, prompt tokens: trace %.0f, simulator %.0f (%+.3f%%); lag p50 %v p99 %v", c.name, len(rows), traceTokens, served, 100*diff, p50, p99)
			if diff < -0.01 || diff > 0.01 {
				t.Errorf("the simulator counted %.0f prompt tokens for the trace's %.0f (%+.2f%%, want within ±1%%)", served, traceTokens, 100*diff)
			}
			if p50 > 20*time.Millisecond {
				t.Errorf("lag p50 %v: the replay did not keep the trace's clock", p50)
			}
		})
	}
}
