package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/reelkit/reel/formats"
)

// TestReplayOldSchemeDataset replays a dataset redacted under redact/1
// (written by the reel before the per-word chain, kept in
// redact/testdata/scheme1): every request still goes out as recorded, and
// the replay says which scheme redacted it.
func TestReplayOldSchemeDataset(t *testing.T) {
	const data = "../../redact/testdata/scheme1"
	var got atomic.Int64
	var bodyErr atomic.Value
	srv := httptest.NewServer(withModelsProbe(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		b, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []struct{ Role, Content string } `json:"messages"`
		}
		if err := json.Unmarshal(b, &req); err != nil || len(req.Messages) != 2 || req.Messages[0].Role != "system" {
			bodyErr.Store("bad body: " + string(b))
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"prompt_tokens":40,"completion_tokens":5}}`)
	}))
	defer srv.Close()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{data, "--target", srv.URL, "--out", out, "--speed", "10", "--run-id", "old"}
	if err := runReplay(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr.String())
	}
	if e := bodyErr.Load(); e != nil {
		t.Error(e)
	}
	if got.Load() != 6 {
		t.Errorf("target got %d requests, want the dataset's 6", got.Load())
	}
	if !strings.Contains(stderr.String(), "note: 1 file(s) redacted under redact/1") {
		t.Errorf("replay does not say the dataset is redact/1:\n%s", stderr.String())
	}
	files, err := formats.ListFiles([]string{out})
	if err != nil || len(files) == 0 {
		t.Fatalf("no results: %v", err)
	}
}
