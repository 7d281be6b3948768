package trace

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/reelkit/reel/formats"
)

// FuzzMooncakeReader: any input gives rows, row errors or an error — never
// a panic — and every row an import accepts becomes a well-formed exchange.
func FuzzMooncakeReader(f *testing.F) {
	f.Add([]byte(`{"timestamp": 0, "input_length": 655, "output_length": 52, "hash_ids": [0, 1]}` + "\n"))
	f.Add([]byte(`{"timestamp": 1.5, "input_length": "7", "hash_ids": "3 4"}` + "\n{}\n"))
	f.Add([]byte("{\"timestamp\":1e300,\"input_length\":-1}\n[1,2]\nnull\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzImport(t, NewMooncakeReader(bytes.NewReader(data)))
	})
}

// FuzzCSVReader does the same for CSV traces (the Azure, BurstGPT and
// mapped readers share it).
func FuzzCSVReader(f *testing.F) {
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"))
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009930+00:00,2162,5\nx,\"1\n"))
	f.Add([]byte("TIMESTAMP,ContextTokens\n,,,\n2023-11-16 18:15:46,1e9\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewAzureReader(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("header error %v does not wrap ErrFormat", err)
			}
			return
		}
		fuzzImport(t, r)
	})
}

func fuzzImport(t *testing.T, r Reader) {
	n := 0
	_, err := Import(context.Background(), r, ImportOptions{Shape: ShapeCompletions, MaxRows: 50}, func(x *formats.Exchange) error {
		n++
		if x.PromptTokens < 0 || x.PromptTokens > maxTokens || len(x.PrefixHashes) != (int(x.PromptTokens)+PrefixBlockTokens-1)/PrefixBlockTokens {
			t.Fatalf("exchange with %d prompt tokens and %d prefix hashes", x.PromptTokens, len(x.PrefixHashes))
		}
		if x.PromptTokens > 1<<16 {
			return io.EOF // keep the fuzzer fast: long prompts are tested elsewhere
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrFormat) && !errors.Is(err, io.EOF) {
		t.Fatalf("import error %v wraps neither ErrFormat nor the emit error", err)
	}
}
