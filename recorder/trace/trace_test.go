package trace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
)

// importAll imports r with opts and returns the exchanges.
func importAll(t testing.TB, r Reader, opts ImportOptions) ([]*formats.Exchange, Report) {
	t.Helper()
	var xs []*formats.Exchange
	rep, err := Import(context.Background(), r, opts, func(x *formats.Exchange) error {
		xs = append(xs, x)
		return nil
	})
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	return xs, rep
}

func readMooncakeFile(t testing.TB, path string) []Row {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readRows(t, NewMooncakeReader(f))
}

func readRows(t testing.TB, r Reader) []Row {
	t.Helper()
	var rows []Row
	for {
		row, err := r.Next()
		if err == io.EOF {
			return rows
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		rows = append(rows, row)
	}
}

// prompt returns the prompt text of an imported chat or completion body.
func prompt(t testing.TB, body []byte) string {
	t.Helper()
	var req struct {
		Prompt   string `json:"prompt"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	if len(req.Messages) > 0 {
		return req.Messages[0].Content
	}
	return req.Prompt
}

func sharedIDs(a, b []int64) int {
	k := 0
	for k < len(a) && k < len(b) && a[k] == b[k] {
		k++
	}
	return k
}

func sharedTokens(a, b []uint) int {
	k := 0
	for k < len(a) && k < len(b) && a[k] == b[k] {
		k++
	}
	return k
}

// TestImportMooncakeLengthsAndPrefixes imports the head of the public
// Mooncake trace and checks, under the real tokenizer, that every prompt
// has the trace's length and that rows sharing k leading hash ids share
// exactly k·512 leading prompt tokens and k·32 leading prefix_hashes.
func TestImportMooncakeLengthsAndPrefixes(t *testing.T) {
	rows := readMooncakeFile(t, "testdata/mooncake-synthetic-head150.jsonl")[:80]
	for _, shape := range []string{ShapeCompletions, ShapeChat} {
		t.Run(shape, func(t *testing.T) {
			tok, _ := recorder.NewTokenizer(recorder.O200kBase)
			xs, rep := importAll(t, &sliceReader{rows: rows}, ImportOptions{Shape: shape, Tokenizer: tok})
			if rep.Rows != int64(len(rows)) || rep.Skipped != 0 {
				t.Fatalf("report %+v, want %d rows", rep, len(rows))
			}
			ids := make([][]uint, len(xs))
			for i, x := range xs {
				text := prompt(t, x.ReqBody)
				enc, err := tok.Encode(text)
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = enc
				want := rows[i].Input
				if shape == ShapeChat {
					want -= recorder.ChatOverheadTokens(1)
				}
				if len(enc) != want {
					t.Fatalf("row %d: %d prompt tokens, want %d", i, len(enc), want)
				}
				if x.PromptTokens != int32(rows[i].Input) || x.PromptTokensSource != formats.TokensFromTrace || x.OutputTokens != int32(rows[i].Output) {
					t.Fatalf("row %d: prompt %d (%s) output %d, want %d and %d", i, x.PromptTokens, x.PromptTokensSource, x.OutputTokens, rows[i].Input, rows[i].Output)
				}
				if got, want := len(x.PrefixHashes), (rows[i].Input+PrefixBlockTokens-1)/PrefixBlockTokens; got != want {
					t.Fatalf("row %d: %d prefix hashes, want %d", i, got, want)
				}
			}
			pairs := 0
			for i := range rows {
				for j := range i {
					k := sharedIDs(rows[i].HashIDs, rows[j].HashIDs)
					if k == 0 {
						continue
					}
					pairs++
					wantTok := min(k*DefaultBlockTokens, len(ids[i]), len(ids[j]))
					if got := sharedTokens(ids[i], ids[j]); got != wantTok {
						t.Errorf("rows %d and %d share %d hash ids: %d leading tokens in common, want %d", j, i, k, got, wantTok)
					}
					wantHashes := k * DefaultBlockTokens / PrefixBlockTokens
					if k == min(len(rows[i].HashIDs), len(rows[j].HashIDs)) { // one is a prefix of the other
						wantHashes = min(len(xs[i].PrefixHashes), len(xs[j].PrefixHashes))
						if rows[i].Input != rows[j].Input {
							wantHashes = min(rows[i].Input, rows[j].Input) / PrefixBlockTokens
						}
					}
					if got := sharedIDs(xs[i].PrefixHashes, xs[j].PrefixHashes); got != wantHashes {
						t.Errorf("rows %d and %d share %d hash ids: %d leading prefix hashes in common, want %d", j, i, k, got, wantHashes)
					}
				}
			}
			if pairs < 5 {
				t.Fatalf("only %d row pairs share hash ids: the test sees too little", pairs)
			}
		})
	}
}

// TestImportSharedPrefixBoundaries checks the exact boundary on made-up
// rows: shared prefixes of 0 to 3 blocks, a partial last block, and two
// tokenizers.
func TestImportSharedPrefixBoundaries(t *testing.T) {
	rows := []Row{
		{Relative: true, Input: 1300, Output: 10, HashIDs: []int64{1, 2, 3}},
		{Relative: true, At: time.Unix(0, 5e6), Input: 1800, Output: 10, HashIDs: []int64{1, 2, 4, 5}},
		{Relative: true, At: time.Unix(0, 9e6), Input: 700, Output: 10, HashIDs: []int64{1, 6}},
		{Relative: true, At: time.Unix(0, 9e6), Input: 700, Output: 10, HashIDs: []int64{7, 6}},
		{Relative: true, At: time.Unix(0, 9e6), Input: 100, Output: 10}, // no hash ids
	}
	for _, name := range []string{recorder.O200kBase, recorder.Cl100kBase} {
		t.Run(name, func(t *testing.T) {
			tok, err := recorder.NewTokenizer(name)
			if err != nil {
				t.Fatal(err)
			}
			xs, _ := importAll(t, &sliceReader{rows: rows}, ImportOptions{Shape: ShapeCompletions, Tokenizer: tok})
			enc := make([][]uint, len(xs))
			for i, x := range xs {
				enc[i], _ = tok.Encode(prompt(t, x.ReqBody))
				if len(enc[i]) != rows[i].Input {
					t.Fatalf("row %d: %d tokens, want %d", i, len(enc[i]), rows[i].Input)
				}
			}
			for _, c := range []struct{ a, b, tokens, hashes int }{
				{0, 1, 1024, 64}, {0, 2, 512, 32}, {1, 2, 512, 32}, {2, 3, 0, 0}, {0, 4, 0, 0},
			} {
				if got := sharedTokens(enc[c.a], enc[c.b]); got != c.tokens {
					t.Errorf("rows %d,%d: %d shared tokens, want %d", c.a, c.b, got, c.tokens)
				}
				if got := sharedIDs(xs[c.a].PrefixHashes, xs[c.b].PrefixHashes); got != c.hashes {
					t.Errorf("rows %d,%d: %d shared prefix hashes, want %d", c.a, c.b, got, c.hashes)
				}
			}
		})
	}
}

// TestExportRoundTrip: Mooncake → import → export → read again keeps the
// timestamps (ms), the lengths and the equivalence classes of hash ids, for
// each export format.
func TestExportRoundTrip(t *testing.T) {
	orig := readMooncakeFile(t, "testdata/mooncake-synthetic-head150.jsonl")
	for _, shape := range []string{ShapeChat, ShapeCompletions} {
		xs, _ := importAll(t, &sliceReader{rows: orig}, ImportOptions{Shape: shape})
		for _, format := range []Format{Mooncake, AIPerf, VLLM} {
			t.Run(shape+"/"+string(format), func(t *testing.T) {
				var out bytes.Buffer
				e, err := NewExporter(&out, ExportOptions{Format: format, PrefixBlockTokens: PrefixBlockTokens})
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range xs {
					if err := e.Write(x); err != nil {
						t.Fatal(err)
					}
				}
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				m := MooncakeMapping
				block := DefaultBlockTokens
				if format == VLLM {
					m.TimeUnit = UnitSeconds
					block = DefaultVLLMBlockTokens
				}
				back := readRows(t, NewJSONLReader(&out, m))
				if len(back) != len(orig) {
					t.Fatalf("%d rows back, want %d", len(back), len(orig))
				}
				fwd, rev := map[int64]int64{}, map[int64]int64{}
				for i := range orig {
					o, b := orig[i], back[i]
					if !o.At.Equal(b.At) || o.Input != b.Input || o.Output != b.Output {
						t.Fatalf("row %d: %v %d %d back as %v %d %d", i, o.At, o.Input, o.Output, b.At, b.Input, b.Output)
					}
					if format == VLLM { // 16-token blocks: compare their 512-token grouping
						if len(b.HashIDs) != (o.Input+block-1)/block {
							t.Fatalf("row %d: %d hash ids for %d tokens at %d", i, len(b.HashIDs), o.Input, block)
						}
						b.HashIDs = regroup(b.HashIDs, DefaultBlockTokens/block)
					}
					if len(o.HashIDs) != len(b.HashIDs) {
						t.Fatalf("row %d: %d hash ids back, want %d", i, len(b.HashIDs), len(o.HashIDs))
					}
					for j := range o.HashIDs {
						if f, ok := fwd[o.HashIDs[j]]; ok && f != b.HashIDs[j] {
							t.Fatalf("row %d block %d: id %d exported as %d and %d", i, j, o.HashIDs[j], f, b.HashIDs[j])
						}
						if r, ok := rev[b.HashIDs[j]]; ok && r != o.HashIDs[j] {
							t.Fatalf("row %d block %d: exported id %d stands for %d and %d", i, j, b.HashIDs[j], r, o.HashIDs[j])
						}
						fwd[o.HashIDs[j]], rev[b.HashIDs[j]] = b.HashIDs[j], o.HashIDs[j]
					}
				}
			})
		}
	}
}

// regroup maps fine block ids onto coarse ones: the id of each group's last
// fine block (which, in a chain, stands for the whole group).
func regroup(ids []int64, per int) []int64 {
	var out []int64
	for i := 0; i < len(ids); i += per {
		out = append(out, ids[min(i+per, len(ids))-1])
	}
	return out
}

func TestImportAzure(t *testing.T) {
	f, err := os.Open("testdata/azure-llm-conv-2023-head300.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewAzureReader(f)
	if err != nil {
		t.Fatal(err)
	}
	xs, rep := importAll(t, r, ImportOptions{Model: "m"})
	if rep.Rows != 300 || rep.Skipped != 0 {
		t.Fatalf("report %+v", rep)
	}
	first := time.Date(2023, 11, 16, 18, 15, 46, 680590000, time.UTC)
	if !xs[0].Ts.Equal(first) || xs[0].PromptTokens != 374 || xs[0].OutputTokens != 44 || xs[0].Model != "m" {
		t.Fatalf("first row %v %d %d %q", xs[0].Ts, xs[0].PromptTokens, xs[0].OutputTokens, xs[0].Model)
	}
	// Rows without hash ids share nothing.
	for i := 1; i < len(xs); i++ {
		if k := sharedIDs(xs[i-1].PrefixHashes, xs[i].PrefixHashes); k != 0 {
			t.Fatalf("rows %d and %d share %d prefix hashes", i-1, i, k)
		}
	}
	// Azure 2024 spells the zone; a time scale stretches the gaps.
	const y2024 = "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009930+00:00,2162,5\n2024-05-10 00:00:01.009930+00:00,100,7\n"
	r, err = NewAzureReader(strings.NewReader(y2024))
	if err != nil {
		t.Fatal(err)
	}
	xs, _ = importAll(t, r, ImportOptions{TimeScale: 2})
	if got := time.Duration(xs[1].TsUnixNs - xs[0].TsUnixNs); got != 2*time.Second || xs[0].Ts.Year() != 2024 {
		t.Fatalf("gap %v, first %v", got, xs[0].Ts)
	}
}

func TestImportBurstGPTAndGeneric(t *testing.T) {
	const burst = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n" +
		"5,ChatGPT,472,18,490,Conversation log\n45,GPT-4,1087,0,1087,Conversation log\n"
	r, err := NewBurstGPTReader(strings.NewReader(burst))
	if err != nil {
		t.Fatal(err)
	}
	xs, _ := importAll(t, r, ImportOptions{Shape: ShapeCompletions})
	if len(xs) != 2 || xs[0].Model != "ChatGPT" || xs[1].Model != "GPT-4" || xs[1].TsUnixNs-xs[0].TsUnixNs != 40e9 || !xs[0].Ts.Equal(DefaultStart) {
		t.Fatalf("burstgpt rows %+v", xs)
	}
	if xs[0].Path != "/v1/completions" || xs[1].PromptTokens != 1087 {
		t.Fatalf("path %q prompt %d", xs[0].Path, xs[1].PromptTokens)
	}

	m, err := ParseMapping([]string{"time=t", "unit=ms", "input=in", "output=out", "hash_ids=blocks", "session=conv"})
	if err != nil {
		t.Fatal(err)
	}
	const gen = "t,in,out,blocks,conv\n0,600,3,\"[7, 8]\",a\n250,600,3,7 9,a\n"
	cr, err := NewCSVReader(strings.NewReader(gen), m)
	if err != nil {
		t.Fatal(err)
	}
	const genl = `{"t":0,"in":600,"out":3,"blocks":[7,8],"conv":"a"}` + "\n\n" + `{"t":250,"in":"600","out":3,"blocks":"7;9","conv":"a"}` + "\n"
	for name, rd := range map[string]Reader{"csv": cr, "jsonl": NewJSONLReader(strings.NewReader(genl), m)} {
		xs, _ := importAll(t, rd, ImportOptions{BlockTokens: 512})
		if len(xs) != 2 || xs[1].TsUnixNs-xs[0].TsUnixNs != 250e6 || xs[0].Session != "a" {
			t.Fatalf("%s: rows %+v", name, xs)
		}
		if k := sharedIDs(xs[0].PrefixHashes, xs[1].PrefixHashes); k != 32 {
			t.Fatalf("%s: %d shared prefix hashes, want 32", name, k)
		}
	}
	if _, err := NewCSVReader(strings.NewReader(gen), Mapping{Time: "t", Input: "missing"}); err == nil {
		t.Fatal("a missing column was accepted")
	}
}

func TestImportBadRows(t *testing.T) {
	const in = `{"timestamp": 100, "input_length": 10, "output_length": 1}
not json
{"timestamp": -5, "input_length": 10}
{"timestamp": 10, "input_length": 99999999999}
{"timestamp": 20}
{"timestamp": 1, "input_length": 5, "output_length": 1}
{"timestamp": 30, "input_length": 5, "output_length": 1, "hash_ids": ["x"]}
{"timestamp": 140, "input_length": 5, "output_length": 2}
`
	xs, rep := importAll(t, NewMooncakeReader(strings.NewReader(in)), ImportOptions{})
	if len(xs) != 2 || rep.Skipped != 6 {
		t.Fatalf("%d rows, report %+v", len(xs), rep)
	}
	lines := []int{}
	for _, e := range rep.Errors {
		if !errors.Is(e, ErrFormat) {
			t.Errorf("error %v does not wrap ErrFormat", e)
		}
		lines = append(lines, e.Line)
	}
	if want := []int{2, 3, 4, 5, 6, 7}; !equalInts(lines, want) {
		t.Fatalf("bad lines %v, want %v (the out-of-order row 6 included)", lines, want)
	}
	if _, err := Import(context.Background(), NewMooncakeReader(strings.NewReader("x\ny\n")), ImportOptions{}, func(*formats.Exchange) error { return nil }); !errors.Is(err, ErrFormat) {
		t.Fatalf("a trace with no good row: %v", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sliceReader yields rows from memory.
type sliceReader struct {
	rows []Row
	i    int
}

func (s *sliceReader) Next() (Row, error) {
	if s.i == len(s.rows) {
		return Row{}, io.EOF
	}
	s.i++
	return s.rows[s.i-1], nil
}
