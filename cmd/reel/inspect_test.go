package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

func writeInspectDataset(t *testing.T, dir string, n int) {
	t.Helper()
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{
		Dir: dir, Recorder: "edge-1", Source: "proxy", RedactionFingerprint: "fp1", RowGroupRows: 10})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
	for i := range n {
		ts := t0.Add(time.Duration(i) * time.Second)
		x := formats.Exchange{Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "edge-1", Seq: int64(i + 1),
			Method: "POST", Path: "/v1/chat/completions", ReqBody: bytes.Repeat([]byte(`{"a":1}`), 20)}
		if err := w.Write(&x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	writeInspectDataset(t, dir, 95)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"text", []string{dir}, []string{"rows         95", "files        1 (10 row groups)", "exchange/1", "edge-1", "proxy",
			"2025-03-14T09:00:00Z .. 2025-03-14T09:01:34Z (1m34s)", "bytes/record", "compression"}},
		{"files", []string{dir, "--files"}, []string{"FILE", "edge-1", "dt=2025-03-14/hour=09"}},
		{"glob", []string{filepath.Join(dir, "dt=*", "hour=09")}, []string{"rows         95"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if err := runInspect(context.Background(), tt.args, &out, &errb); err != nil {
				t.Fatalf("%v: %s", err, errb.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		var out bytes.Buffer
		if err := runInspect(context.Background(), []string{"--json", dir}, &out, &out); err != nil {
			t.Fatal(err)
		}
		var s inspectSummary
		if err := json.Unmarshal(out.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		if s.Rows != 95 || s.Files != 1 || s.Schemas["exchange/1"] != 1 || s.CompressionRatio <= 1 || s.BytesPerRecord <= 0 {
			t.Errorf("summary = %+v", s)
		}
	})
	t.Run("bad file", func(t *testing.T) {
		bad := filepath.Join(dir, "foreign.parquet")
		os.WriteFile(bad, []byte("PAR1 not really"), 0o644)
		defer os.Remove(bad)
		var out, errb bytes.Buffer
		err := runInspect(context.Background(), []string{dir}, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), "foreign.parquet") {
			t.Fatalf("err = %v, want one naming foreign.parquet", err)
		}
		if err := runInspect(context.Background(), []string{dir, "--skip-bad"}, &out, &errb); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(errb.String(), "foreign.parquet") || !strings.Contains(out.String(), "unreadable") {
			t.Errorf("skip-bad output:\n%s\n%s", out.String(), errb.String())
		}
	})
	t.Run("misuse", func(t *testing.T) {
		err := runInspect(context.Background(), nil, &bytes.Buffer{}, &bytes.Buffer{})
		if _, ok := err.(*usageError); !ok {
			t.Fatalf("no args: %v, want a usage error", err)
		}
	})
}
