package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/replayer"
)

// writeReplayDataset writes the first span of the Azure conversation trace
// (../../shared/traces) as a dataset recorded from host.
func writeReplayDataset(t *testing.T, dir, host string, span time.Duration) int {
	t.Helper()
	f, err := os.Open("../../../shared/traces/azure-llm-conv-2023.csv")
	if err != nil {
		t.Skipf("azure trace not available: %v", err)
	}
	defer f.Close()
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: dir, Recorder: "gw-1", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Scan()
	var first time.Time
	n := 0
	for sc.Scan() {
		p := strings.Split(sc.Text(), ",")
		ts, err := time.Parse("2006-01-02 15:04:05.9999999", p[0])
		if err != nil {
			t.Fatal(err)
		}
		if first.IsZero() {
			first = ts
		}
		if ts.Sub(first) >= span {
			break
		}
		in, _ := strconv.Atoi(p[1])
		out, _ := strconv.Atoi(p[2])
		n++
		x := formats.Exchange{Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "gw-1", Seq: int64(n), ConnID: int64(n%16 + 1),
			Method: "POST", Host: host, Path: "/v1/completions", ReqContentType: "application/json",
			ReqHeaders: map[string]string{"Authorization": "Bearer prod"},
			ReqBody:    []byte(`{"model":"m","prompt":"p","max_tokens":4096}`),
			Model:      "m", PromptTokens: int32(in), OutputTokens: int32(out), Status: 200}
		if n%2 == 0 { // the server's usage said so; the others' counts are reel's own
			x.PromptTokensSource = formats.TokensFromUsage
		}
		if err := w.Write(&x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return n
}

// withModelsProbe answers reel replay's one GET /v1/models (the ignore_eos
// probe of pinned runs) with 404, as a server that is not vLLM would, so h
// sees only the replayed requests.
func withModelsProbe(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	})
}

func TestReplayCommand(t *testing.T) {
	data := t.TempDir()
	n := writeReplayDataset(t, data, "gateway.prod.example", 30*time.Second)
	var got, pinned atomic.Int64
	var auth atomic.Value
	srv := httptest.NewServer(withModelsProbe(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		auth.Store(r.Header.Get("Authorization"))
		var req struct {
			MaxTokens int `json:"max_tokens"`
		}
		if json.NewDecoder(r.Body).Decode(&req) == nil && req.MaxTokens != 4096 {
			pinned.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Batch-Size", "4")
		io.WriteString(w, `{"usage":{"completion_tokens":5}}`)
	}))
	defer srv.Close()
	out := t.TempDir()
	t.Setenv("REEL_TEST_SHADOW_AUTH", "Bearer shadow")
	var stdout, stderr bytes.Buffer
	args := []string{data, "--target", srv.URL, "--out", out, "--speed", "10", "--frame", "10s", "--run-id", "t1",
		"--header-from-env", "Authorization=REEL_TEST_SHADOW_AUTH"}
	if err := runReplay(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr.String())
	}
	if int(got.Load()) != n {
		t.Errorf("target got %d requests, want %d", got.Load(), n)
	}
	if a := auth.Load(); a != "Bearer shadow" {
		t.Errorf("Authorization %q: want the value from the environment", a)
	}
	r, err := formats.OpenReader[formats.Result](context.Background(), []string{out}, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rows := 0
	for {
		res, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rows++
		if res.RunID != "t1" || res.Status != 200 || res.BatchSize != 4 || res.OutputTokens != 5 || res.Frame.IsZero() {
			t.Fatalf("row %+v", res)
		}
	}
	if rows != n {
		t.Errorf("%d result rows, want %d", rows, n)
	}
	// Output is pinned by default where the count is the server's: half
	// the dataset; the target's GET /v1/models said nothing, so no
	// ignore_eos, with a note.
	if want := int64(n / 2); pinned.Load() != want {
		t.Errorf("%d requests arrived with max_tokens pinned, want %d", pinned.Load(), want)
	}
	for _, want := range []string{"run t1  speed 10  shard 0/1  sent " + strconv.Itoa(n),
		fmt.Sprintf("output pinned to the recording (--pin-output=server): %d of %d requests; not pinned: %d output count counted from stream events", n/2, n, n-n/2)} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "did not say which server it is on GET /v1/models: outputs are capped at the recorded count without ignore_eos") {
		t.Errorf("no note on the ignore_eos probe:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "2023-11-16 18:15:50  req") {
		t.Errorf("no per-frame progress line:\n%s", stderr.String())
	}
}

func TestReplayCommandErrors(t *testing.T) {
	data := t.TempDir()
	writeReplayDataset(t, data, "127.0.0.1:8000", 2*time.Second)
	garbage := filepath.Join(t.TempDir(), "x.parquet")
	os.WriteFile(garbage, []byte("not parquet at all"), 0o644)
	tests := []struct {
		name  string
		args  []string
		want  string
		usage bool
	}{
		{"recorded host", []string{data, "--target", "http://127.0.0.1:9", "--out", t.TempDir()}, "--allow-recorded-host", true},
		{"bad dataset", []string{garbage, "--target", "http://shadow.test:9", "--out", t.TempDir()}, "x.parquet", false},
		{"missing dataset", []string{filepath.Join(t.TempDir(), "none"), "--target", "http://shadow.test:9", "--out", t.TempDir()}, "none", false},
		{"no target", []string{data, "--out", t.TempDir()}, "--target is required", true},
		{"no out", []string{data, "--target", "http://shadow.test:9"}, "--out is required", true},
		{"missing dataset, no out", []string{filepath.Join(t.TempDir(), "none"), "--target", "http://shadow.test:9"}, "--out is required", true},
		{"sweep without slo", []string{data, "--target", "http://shadow.test:9", "--out", t.TempDir(), "--speed", "1,2"}, "needs --slo", true},
		{"bad frames", []string{data, "--target", "http://shadow.test:9", "--out", t.TempDir(), "--frames", "x:y"}, "--frames", true},
		{"shard env unset", []string{data, "--target", "http://shadow.test:9", "--out", t.TempDir(), "--shards", "4", "--shard-from-env", "REEL_TEST_UNSET_INDEX"}, "not set", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := runReplay(context.Background(), tc.args, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tc.want)
			}
			var ue *usageError
			if errors.As(err, &ue) != tc.usage {
				t.Errorf("usage error %v, want %v", errors.As(err, &ue), tc.usage)
			}
		})
	}
	t.Run("unreachable target", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		err := runReplay(context.Background(), []string{data, "--target", "http://127.0.0.1:1", "--out", t.TempDir(), "--allow-recorded-host", "--speed", "100"}, &stdout, &stderr)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitNoMeasurement {
			t.Fatalf("a run where every request failed is not a measurement (exit 3): %v", err)
		}
		for _, want := range []string{"none of", "completed", "connection", "refused"} {
			if !strings.Contains(ee.msg, want) {
				t.Errorf("message lacks %q: %s", want, ee.msg)
			}
		}
		if !strings.Contains(stdout.String(), "failed requests by cause") || !strings.Contains(stdout.String(), "e.g. ") {
			t.Errorf("summary does not name the causes:\n%s", stdout.String())
		}
	})
}

// TestReplayMemoryLimit: reel replay runs under replayer.DefaultMemoryLimit,
// --memory-limit sets another (0: none), and $GOMEMLIMIT wins over both.
func TestReplayMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	for _, tc := range []struct {
		name, env string
		flags     []string
		want      int64
	}{
		{"default", "", nil, replayer.DefaultMemoryLimit},
		{"flag", "", []string{"--memory-limit", "64MiB"}, 64 << 20},
		{"none", "", []string{"--memory-limit", "0"}, math.MaxInt64},
		{"GOMEMLIMIT wins", "1GiB", nil, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.env)
			debug.SetMemoryLimit(math.MaxInt64) // what the runtime made of $GOMEMLIMIT, here
			// An empty dataset: the run stops at reading it, after the limit is set.
			args := append([]string{t.TempDir(), "--target", "http://127.0.0.1:9", "--out", t.TempDir(), "--quiet"}, tc.flags...)
			if err := runReplay(context.Background(), args, io.Discard, io.Discard); !errors.Is(err, replayer.ErrEmptyWindow) {
				t.Fatalf("replay of an empty dataset: %v, want %v", err, replayer.ErrEmptyWindow)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("memory limit %d, want %d", got, tc.want)
			}
		})
	}
}
