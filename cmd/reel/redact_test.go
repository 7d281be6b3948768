package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/redact/redacttest"
)

// writeRawDataset writes one raw exchange per corpus value, as
// 'reel record --raw' would.
func writeRawDataset(t *testing.T, dir string) int {
	t.Helper()
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: dir, Recorder: "raw", RedactionFingerprint: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)
	corpus := redacttest.Corpus()
	for i, e := range corpus {
		v, _ := json.Marshal(e.Value)
		ts := start.Add(time.Duration(i) * time.Second)
		x := &formats.Exchange{
			Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "raw", Seq: int64(i + 1), Method: "POST",
			Path: "/v1/chat/completions", Query: "user=" + e.Value, Client: e.Value,
			ReqHeaders:     map[string]string{"Authorization": "Bearer " + e.Value, "X-Request-Id": e.Value},
			ReqContentType: "application/json",
			ReqBody:        []byte(`{"model":"gpt-4o","stop":[` + string(v) + `],"messages":[{"role":"user","content":` + string(v) + `}]}`),
			Status:         200, RespContentType: "application/json",
			RespBody: []byte(`{"choices":[{"message":{"role":"assistant","content":` + string(v) + `}}]}`),
		}
		if err := w.Write(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return len(corpus)
}

func TestRedactDataset(t *testing.T) {
	raw, out := t.TempDir(), t.TempDir()
	n := writeRawDataset(t, raw)
	if leaks, _ := redacttest.ScanDir(t, raw); len(leaks) == 0 {
		t.Fatal("raw dataset shows no seeded values: the scan proves nothing")
	}
	t.Setenv("REEL_REDACT_KEY", strings.Repeat("ab", 32))
	var stdout, stderr bytes.Buffer
	if err := runRedact(context.Background(), []string{raw, out}, &stdout, &stderr); err != nil {
		t.Fatalf("reel redact: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "random") {
		t.Errorf("warned about a random key although REEL_REDACT_KEY is set: %s", stderr.String())
	}
	leaks, _ := redacttest.ScanDir(t, out)
	for _, l := range leaks {
		t.Errorf("output leaks %s %q in %s", l.Type, l.Value, l.Where)
	}
	rd, err := formats.OpenReader[formats.Exchange](context.Background(), []string{out}, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rows := 0
	for {
		x, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rows++
		if len(x.PrefixHashes) == 0 || !json.Valid(x.ReqBody) || x.Model != "" && x.Model != "gpt-4o" {
			t.Errorf("row %d: hashes %v body %s", x.Seq, x.PrefixHashes, x.ReqBody)
		}
	}
	if rows != n {
		t.Errorf("%d rows out, %d in", rows, n)
	}
	if !strings.Contains(stdout.String(), "redacted 17") && !strings.Contains(stdout.String(), "redacted") {
		t.Errorf("stdout: %s", stdout.String())
	}
}

func TestRedactExplain(t *testing.T) {
	dir := t.TempDir()
	body := filepath.Join(dir, "req.json")
	os.WriteFile(body, []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"Email me at bob@example.com"}],"stop":["bob@example.com"]}`), 0o600)
	var stdout, stderr bytes.Buffer
	if err := runRedact(context.Background(), []string{"--explain", "--body", body}, &stdout, &stderr); err != nil {
		t.Fatalf("explain: %v", err)
	}
	out := stdout.String()
	for _, want := range []string{"messages[0].content", "synthetic", "model", "kept by rule model", "stop", "detect", "prefix_hashes:"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "random") {
		t.Errorf("no random-key warning without a key: %q", stderr.String())
	}
	stdout.Reset()
	if err := runRedact(context.Background(), []string{"--explain", "--body", body, "--json"}, &stdout, io.Discard); err != nil || !json.Valid(stdout.Bytes()) {
		t.Errorf("--json: %v\n%s", err, stdout.String())
	}
}

func TestRedactUsage(t *testing.T) {
	tests := [][]string{{}, {"only-one"}, {"--explain"}, {"--nope"}}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Setenv("REEL_REDACT_KEY", strings.Repeat("ab", 32))
			err := runRedact(context.Background(), args, io.Discard, io.Discard)
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Errorf("err = %v, want a usage error", err)
			}
		})
	}
	t.Setenv("REEL_REDACT_KEY", "short")
	if err := runRedact(context.Background(), []string{"a", "b"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "REEL_REDACT_KEY") {
		t.Errorf("short key: %v", err)
	}
}
