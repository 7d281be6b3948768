package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNightlyRecipe runs the nightly recipe of README "Using reel in CI" —
// reel replay into a fresh directory, then reel compare against the
// baseline with --fail-on — against broken shadows: each step that cannot
// be trusted exits non-zero and names the cause; a healthy shadow passes.
func TestNightlyRecipe(t *testing.T) {
	data := t.TempDir()
	writeFilterDataset(t, data)
	// The healthy shadow takes 20 ms, as an engine would: with answers in
	// microseconds, the scheduler's noise on a busy CI machine alone moved
	// p99 by more than the +300 % the rule allows.
	healthy := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(20 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"completion_tokens":3}}`)
	}
	serve := func(h http.HandlerFunc) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	reel := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := dispatch(context.Background(), args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	root := t.TempDir()
	base := filepath.Join(root, "baseline")
	if code, out, errs := reel("replay", data, "--target", serve(healthy), "--out", base, "--speed", "20", "--quiet"); code != 0 {
		t.Fatalf("baseline replay: exit %d\n%s%s", code, out, errs)
	}
	tests := []struct {
		name        string
		target      string
		replayCode  int
		replayCause []string
		compareCode int
		compareWhy  string
	}{
		{"dead target", "http://127.0.0.1:1", exitNoMeasurement, []string{"none of 40 requests completed", "connection", "refused"}, 1, "no data in B"},
		{"shadow answering 500", serve(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			http.Error(w, "overloaded", http.StatusInternalServerError)
		}), exitNoMeasurement, []string{"none of 40 requests completed", "HTTP 500"}, 1, "no data in B"},
		{"shadow closing every stream after the headers", serve(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the connection closes mid-stream
		}), exitNoMeasurement, []string{"none of 40 requests completed", "read response"}, 1, "no data in B"},
		{"healthy shadow", serve(healthy), 0, nil, 0, "OK: none of 1 rule(s) tripped"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cand := filepath.Join(root, "cand", strings.Repeat("x", i+1))
			code, out, errs := reel("replay", data, "--target", tc.target, "--out", cand, "--speed", "20", "--quiet", "--timeout", "5s")
			if code != tc.replayCode {
				t.Fatalf("replay exit %d, want %d\n%s%s", code, tc.replayCode, out, errs)
			}
			for _, want := range tc.replayCause {
				if !strings.Contains(errs, want) {
					t.Errorf("replay's stderr lacks %q:\n%s", want, errs)
				}
			}
			code, out, errs = reel("compare", base, cand, "--fail-on", "p99>+300%", "--resamples", "50")
			if code != tc.compareCode {
				t.Fatalf("compare exit %d, want %d\n%s%s", code, tc.compareCode, out, errs)
			}
			if !strings.Contains(out, tc.compareWhy) {
				t.Errorf("compare lacks %q:\n%s", tc.compareWhy, out)
			}
		})
	}
}
