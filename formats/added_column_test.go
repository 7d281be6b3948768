package formats

import (
	"context"
	"io"
	"testing"
)

// TestAddedColumnReadsAsNull reads an exchange/1 file written before
// cached_tokens was added (redact/testdata/scheme1, reel of 2026-12-01
// morning): it opens, every other column reads as written, and the added
// column reads as NULL, whole and projected.
func TestAddedColumnReadsAsNull(t *testing.T) {
	const old = "../redact/testdata/scheme1"
	for _, cols := range [][]string{nil, {"model", "cached_tokens"}} {
		r, err := OpenReader[Exchange](context.Background(), []string{old}, ReaderOptions{Columns: cols})
		if err != nil {
			t.Fatalf("columns %v: %v", cols, err)
		}
		n := 0
		for {
			x, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			n++
			if x.Model != "sim-7b" || x.CachedTokens != nil {
				t.Errorf("columns %v: row %d: model %q cached_tokens %v, want sim-7b and NULL", cols, n, x.Model, x.CachedTokens)
			}
		}
		r.Close()
		if n != 6 {
			t.Errorf("columns %v: %d rows, want 6", cols, n)
		}
	}
}
