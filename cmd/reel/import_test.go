package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder/trace"
)

// TestImportExportCommands runs reel import on the test traces, checks the
// dataset's provenance and rows, and reel export back to Mooncake gives the
// trace again.
func TestImportExportCommands(t *testing.T) {
	mooncake := filepath.Join("..", "..", "recorder", "trace", "testdata", "mooncake-synthetic-head150.jsonl")
	azure := filepath.Join("..", "..", "recorder", "trace", "testdata", "azure-llm-conv-2023-head300.csv")
	for _, c := range []struct {
		name, file, source string
		rows               int64
		extra              []string
	}{
		{"mooncake", mooncake, "trace:mooncake:mooncake-synthetic-head150.jsonl", 150, nil},
		{"azure", azure, "trace:azure:azure-llm-conv-2023-head300.csv", 300, []string{"--api", "completions"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var out, errb bytes.Buffer
			args := append([]string{c.file, "--out", dir}, c.extra...)
			if err := runImport(context.Background(), args, &out, &errb); err != nil {
				t.Fatalf("import: %v\n%s", err, errb.String())
			}
			if !strings.Contains(out.String(), "imported ") {
				t.Fatalf("output %q", out.String())
			}
			files, err := formats.ListFiles([]string{dir})
			if err != nil || len(files) == 0 {
				t.Fatalf("files %v, %v", files, err)
			}
			fi, err := formats.StatFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Meta[formats.MetaSource]; got != c.source {
				t.Errorf("source %q, want %q", got, c.source)
			}
			if fi.Meta[formats.MetaUserPrefix+trace.MetaPrefixBlockTokens] != "16" {
				t.Errorf("metadata %v lacks the prefix block size", fi.Meta)
			}
			var rows int64
			for _, f := range files {
				fi, _ := formats.StatFile(f)
				rows += fi.Rows
			}
			if rows != c.rows {
				t.Fatalf("%d rows, want %d", rows, c.rows)
			}
			if c.name != "mooncake" {
				return
			}
			exported := filepath.Join(t.TempDir(), "back.jsonl")
			errb.Reset()
			if err := runExport(context.Background(), []string{dir, "--format", "mooncake", "--out", exported}, &out, &errb); err != nil {
				t.Fatalf("export: %v\n%s", err, errb.String())
			}
			got, _ := os.ReadFile(exported)
			want, _ := os.ReadFile(mooncake)
			if g, w := normalizeJSONL(t, got), normalizeJSONL(t, want); g != w {
				t.Fatalf("exported trace differs from the original:\n%.400s\nwant\n%.400s", g, w)
			}
		})
	}
}

// normalizeJSONL drops the spaces of the published file so lines compare.
func normalizeJSONL(t *testing.T, b []byte) string {
	t.Helper()
	return strings.TrimSpace(strings.ReplaceAll(string(b), " ", ""))
}

func TestImportExportMisuse(t *testing.T) {
	for _, c := range []struct {
		run  func(context.Context, []string, *bytes.Buffer, *bytes.Buffer) error
		args []string
		want string
	}{
		{importCmd, []string{}, "give one trace file"},
		{importCmd, []string{"x.jsonl"}, "--out is required"},
		{importCmd, []string{"x.jsonl", "--out", "d", "--api", "embeddings"}, "--api"},
		{importCmd, []string{"x.jsonl", "--out", "d", "--tokenizer", "gpt2"}, "unknown tokenizer"},
		{exportCmd, []string{}, "no dataset given"},
		{exportCmd, []string{"d"}, "--format is required"},
		{exportCmd, []string{"d", "--format", "sharegpt"}, "want mooncake, aiperf or vllm"},
	} {
		var out, errb bytes.Buffer
		err := c.run(context.Background(), c.args, &out, &errb)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
		if _, ok := err.(*usageError); !ok {
			t.Errorf("%v: %T is not a usage error", c.args, err)
		}
	}
}

func importCmd(ctx context.Context, args []string, o, e *bytes.Buffer) error {
	return runImport(ctx, args, o, e)
}
func exportCmd(ctx context.Context, args []string, o, e *bytes.Buffer) error {
	return runExport(ctx, args, o, e)
}
