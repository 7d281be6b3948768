package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// writeFilterDataset writes 40 exchanges 10 ms apart over four paths, two
// models and prompt lengths 100…3900, every fifth of unknown length (0).
func writeFilterDataset(t *testing.T, dir string) {
	t.Helper()
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: dir, Recorder: "gw", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/chat/completions/extra"}
	t0 := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	for i := range 40 {
		ts := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		prompt := int32(i * 100)
		if i%5 == 0 {
			prompt = 0
		}
		model := []string{"a", "b"}[i/4%2]
		x := formats.Exchange{Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "gw", Seq: int64(i + 1), ConnID: int64(i%4 + 1),
			Method: "POST", Host: "gw.prod.example", Path: paths[i%4], ReqContentType: "application/json",
			ReqBody: fmt.Appendf(nil, `{"model":%q,"prompt":"p"}`, model), Model: model, PromptTokens: prompt,
			OutputTokens: 3, Status: 200, TTFBNs: int64(time.Millisecond), DurationNs: int64(2 * time.Millisecond)}
		if err := w.Write(&x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestFilterFlagsSelectTheSameRequests: --path, --model and --prompt-tokens
// mean one thing in replay, stats, report and compare (and in a report
// over a replay's results): each selects the same requests everywhere.
func TestFilterFlagsSelectTheSameRequests(t *testing.T) {
	data := t.TempDir()
	writeFilterDataset(t, data)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"completion_tokens":3}}`)
	}))
	defer srv.Close()
	all := filepath.Join(t.TempDir(), "all")
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := dispatch(context.Background(), args, &stdout, &stderr); code != 0 {
			t.Fatalf("reel %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	run(t, "replay", data, "--target", srv.URL, "--out", all, "--speed", "20", "--quiet")

	requests := func(t *testing.T, js string, path ...string) int64 {
		t.Helper()
		var v any
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Fatalf("json: %v\n%s", err, js)
		}
		for _, k := range path {
			v = v.(map[string]any)[k]
		}
		return int64(v.(map[string]any)["requests"].(float64))
	}
	tests := []struct {
		name  string
		flags []string
		want  int64
	}{
		{"path prefix", []string{"--path", "/v1/chat/"}, 20},
		{"path whole is a prefix too", []string{"--path", "/v1/chat/completions"}, 20},
		{"path glob", []string{"--path", "/v1/*/completions"}, 10},
		{"two paths", []string{"--path", "/v1/embeddings", "--path", "/v1/completions"}, 20},
		{"model", []string{"--model", "a"}, 20},
		{"short prompts leave unknown lengths out", []string{"--prompt-tokens", ":999"}, 8},
		{"long prompts", []string{"--prompt-tokens", "1000:"}, 24},
		{"all three", []string{"--path", "/v1/chat/", "--model", "b", "--prompt-tokens", "1000:"}, 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "res")
			run(t, append([]string{"replay", data, "--target", srv.URL, "--out", out, "--speed", "20", "--quiet"}, tc.flags...)...)
			rows, err := formats.OpenReader[formats.Result](context.Background(), []string{out}, formats.ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var replayed int64
			for {
				if _, err := rows.Next(); err != nil {
					break
				}
				replayed++
			}
			rows.Close()
			got := map[string]int64{
				"replay":           replayed,
				"stats":            requests(t, run(t, append([]string{"stats", data, "--json"}, tc.flags...)...), "summary"),
				"report":           requests(t, run(t, append([]string{"report", data, "--json"}, tc.flags...)...)),
				"report (results)": requests(t, run(t, append([]string{"report", all, "--json"}, tc.flags...)...)),
				"compare":          requests(t, run(t, append([]string{"compare", data, all, "--json", "--resamples", "10"}, tc.flags...)...), "a"),
				"compare (B)":      requests(t, run(t, append([]string{"compare", data, all, "--json", "--resamples", "10"}, tc.flags...)...), "b"),
			}
			for cmd, n := range got {
				if n != tc.want {
					t.Errorf("%s selected %d requests, want %d (all: %v)", cmd, n, tc.want, got)
				}
			}
		})
	}
}

func TestListFlagsAddToDefaults(t *testing.T) {
	defaults := []string{"Content-Type", "Accept"}
	tests := []struct {
		name string
		sets []string
		want string
	}{
		{"defaults", nil, "Content-Type,Accept"},
		{"adds", []string{"X-Gpu-Id"}, "Content-Type,Accept,X-Gpu-Id"},
		{"adds a list, once each", []string{"x-a,x-b", "X-A", "accept"}, "Content-Type,Accept,x-a,x-b"},
		{"empty clears", []string{"", "X-Only"}, "X-Only"},
		{"cleared stays empty", []string{""}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			v := newListValue(defaults, &got, true)
			for _, s := range tc.sets {
				if err := v.Set(s); err != nil {
					t.Fatal(err)
				}
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("got %q, want %q", strings.Join(got, ","), tc.want)
			}
			if strings.Join(defaults, ",") != "Content-Type,Accept" {
				t.Fatalf("defaults changed: %v", defaults)
			}
		})
	}
}

func TestSizeValue(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  bool
	}{
		{"1048576", 1 << 20, false}, {"512KiB", 512 << 10, false}, {"128MiB", 128 << 20, false},
		{"1.5GiB", 3 << 29, false}, {"2MB", 2e6, false}, {"500kb", 5e5, false}, {"64k", 64 << 10, false},
		{"0", 0, false}, {"-1MiB", 0, true}, {"12 parsecs", 0, true}, {"", 0, true}, {"99999999TiB", 0, true},
	}
	for _, tc := range tests {
		var n int64
		v := newSizeValue(7, &n)
		err := v.Set(tc.in)
		if (err != nil) != tc.err || (!tc.err && n != tc.want) {
			t.Errorf("Set(%q) = %d, %v; want %d, error %v", tc.in, n, err, tc.want, tc.err)
		}
	}
	var n int64
	if v := newSizeValue(128<<20, &n); v.String() != "128MiB" {
		t.Errorf("default shows as %q, want 128MiB", v.String())
	}
}

func TestTimeValue(t *testing.T) {
	from := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
		err  string
	}{
		{in: "2026-11-25T14:10:00Z", want: from.Add(10 * time.Minute)},
		{in: "2026-11-25T15:10:00+01:00", want: from.Add(10 * time.Minute)},
		{in: "2026-11-25 14:10:00", want: from.Add(10 * time.Minute)},
		{in: "+10m", want: from.Add(10 * time.Minute)},
		{in: "-30s", want: from.Add(-30 * time.Second)},
		{in: "yesterday", err: "want RFC 3339"},
	}
	for _, tc := range tests {
		var v timeValue
		err := v.Set(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Set(%q): %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		got, err := v.resolve("--to", from, "--from")
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("%q → %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	var v timeValue
	v.Set("+5m")
	if _, err := v.resolve("--to", time.Time{}, "--from"); err == nil || !strings.Contains(err.Error(), "give --from too") {
		t.Errorf("relative --to without --from: %v", err)
	}
}
