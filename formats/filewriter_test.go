package formats

import (
	"bytes"
	"cmp"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// TestEagerShredMatchesReflection: rows that arrive in time order are
// shredded while their row group fills (fileWriter.shredOldest) and
// compressed by the writer's kept encoder (keepEncoder), yet the file is byte
// for byte the one parquet-go's reflective writer and its own zstd codec make
// from the same row groups: spreading the work changed no page boundary and
// no compressed byte.
func TestEagerShredMatchesReflection(t *testing.T) {
	t.Parallel()
	rows := shredExchanges()
	slices.SortStableFunc(rows, func(a, b Exchange) int { return cmp.Compare(a.TsUnixNs, b.TsUnixNs) })
	cfg := fileConfig{
		codec:         &zstd.Codec{Level: zstd.SpeedFastest},
		rowGroupRows:  700, // several row groups, none a multiple of shredBatch
		rowGroupBytes: 1 << 40,
		rotateSize:    1 << 40,
		meta:          map[string]string{MetaSchema: schemaName[Exchange](), MetaRecorder: "r"},
		disk:          osDisk{},
	}
	var want bytes.Buffer
	ref := parquet.NewGenericWriter[Exchange](&want, parquetOptions[Exchange](cfg, t0)...)
	for start := 0; start < len(rows); start += cfg.rowGroupRows {
		if _, err := ref.Write(rows[start:min(start+cfg.rowGroupRows, len(rows))]); err != nil {
			t.Fatal(err)
		}
		if err := ref.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ref.Close(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	final, temp := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "_a.parquet.tmp")
	codec, err := pageCodec(WriterOptions{Level: zstd.SpeedFastest}) // as NewWriter does: the same bytes
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := codec.(keptEncoderCodec); !ok {
		t.Fatalf("pageCodec kept no encoder: %T", codec)
	}
	cfg.codec = codec
	fw, err := newFileWriter[Exchange](final, temp, 1, 0, t0, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	eager := false
	for i := range rows {
		if err := fw.add(&rows[i]); err != nil {
			t.Fatal(err)
		}
		eager = eager || fw.shredded > 0 && fw.buf.n > 0
	}
	if !eager {
		t.Fatal("no row was shredded before its row group closed")
	}
	if _, err := fw.close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(final)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("file (%d B) differs from the reflective one (%d B) at byte %d", len(got), want.Len(), firstDiff(got, want.Bytes()))
	}
}

// TestRowGroupsStayTimeOrdered: rows that arrive far out of time order (an
// exchange that outlasts hundreds of later ones) move to the next row group
// rather than break the order of the one being filled; every row group is
// sorted, every row is stored once, and the reader returns them in order.
func TestRowGroupsStayTimeOrdered(t *testing.T) {
	t.Parallel()
	const n = 3000
	for _, tc := range []struct {
		name string
		opts WriterOptions
	}{
		{"rows bound", WriterOptions{RowGroupRows: 700}},
		{"bytes bound", WriterOptions{RowGroupBytes: 64 << 10}},
		{"one group", WriterOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Start order 0..n-1; every 37th exchange arrives 500 places
			// late, every 11th 150 places late (within the hold-back).
			var in []Exchange
			var delayed []struct {
				at int
				x  Exchange
			}
			for i := range n {
				x := testExchange(int64(i), time.Duration(i)*time.Millisecond)
				switch {
				case i%37 == 0:
					delayed = append(delayed, struct {
						at int
						x  Exchange
					}{i + 500, x})
				case i%11 == 0:
					delayed = append(delayed, struct {
						at int
						x  Exchange
					}{i + 150, x})
				default:
					in = append(in, x)
				}
				for j := 0; j < len(delayed); j++ {
					if delayed[j].at <= i {
						in = append(in, delayed[j].x)
						delayed = slices.Delete(delayed, j, j+1)
						j--
					}
				}
			}
			for _, d := range delayed {
				in = append(in, d.x)
			}
			dir := t.TempDir()
			opts := tc.opts
			opts.Dir, opts.Recorder, opts.NoSpool = dir, "ooo", true
			st := writeAll(t, opts, in)
			paths, _ := filepath.Glob(filepath.Join(dir, "*", "*", "*.parquet"))
			if len(paths) == 0 {
				t.Fatal("no file written")
			}
			seen := map[int64]bool{}
			groups := 0
			for _, p := range paths {
				for _, keys := range rowGroupKeys(t, p) {
					groups++
					if !slices.IsSorted(keys) {
						t.Fatalf("%s: a row group is not in time order", p)
					}
					for _, k := range keys {
						if seen[k] {
							t.Fatalf("row at %d stored twice", k)
						}
						seen[k] = true
					}
				}
			}
			if len(seen) != n || int64(groups) != st.RowGroups {
				t.Fatalf("%d distinct rows in %d row groups, want %d rows in %d groups", len(seen), groups, n, st.RowGroups)
			}
			out := readAll[Exchange](t, []string{dir}, ReaderOptions{})
			if len(out) != n {
				t.Fatalf("read %d rows, want %d", len(out), n)
			}
			for i := 1; i < len(out); i++ {
				if out[i].TsUnixNs < out[i-1].TsUnixNs {
					t.Fatalf("row %d out of time order", i)
				}
			}
		})
	}
}

// rowGroupKeys returns the ts_unix_ns values of each row group of a file.
func rowGroupKeys(t *testing.T, path string) [][]int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	var out [][]int64
	for _, rg := range pf.RowGroups() {
		rows := make([]Exchange, rg.NumRows())
		r := parquet.NewGenericRowGroupReader[Exchange](rg)
		n, _ := r.Read(rows)
		r.Close()
		if n != len(rows) {
			t.Fatalf("read %d of %d rows of a row group", n, len(rows))
		}
		keys := make([]int64, n)
		for i := range rows {
			keys[i] = rows[i].TsUnixNs
		}
		out = append(out, keys)
	}
	return out
}

// A zstd level the encoder refuses is NewWriter's error, not a panic later.
func TestWriterRefusesBadLevel(t *testing.T) {
	_, err := NewWriter[Exchange](context.Background(), WriterOptions{Dir: t.TempDir(), NoSpool: true, Level: 99})
	if err == nil || !strings.Contains(err.Error(), "zstd level 99") {
		t.Fatalf("NewWriter with level 99: %v, want a zstd level error", err)
	}
}

// TestKeptEncoderSameBytes: the writer's kept encoder (low-memory buffers)
// compresses every page to the bytes parquet-go's own zstd codec makes, at
// every level, across one encoder's successive pages and at sizes around
// the single-block (128 KiB), 1 MiB and window (8 MiB) bounds.
func TestKeptEncoderSameBytes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 5))
	words := []string{`{"role":"user","content":"`, "token ", "weather ", "mountains ", `"},`, "\n\n", "data: ", `{"choices":[{"delta":{"content":"`}
	page := func(n int) []byte {
		b := make([]byte, 0, n)
		for len(b) < n {
			if rng.IntN(8) == 0 {
				b = append(b, byte(rng.IntN(256)))
			} else {
				b = append(b, words[rng.IntN(len(words))]...)
			}
		}
		return b[:n]
	}
	sizes := []int{0, 1, 700, 1500, 128 << 10, 128<<10 + 1, 1 << 20, 3<<20 + 17}
	for _, level := range []zstd.Level{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression, zstd.SpeedBestCompression} {
		kept, err := newKeptEncoderCodec(level)
		if err != nil {
			t.Fatal(err)
		}
		ref := &zstd.Codec{Level: level}
		ss := sizes
		if level == zstd.SpeedFastest {
			ss = append(ss, 9<<20) // beyond the window: a frame of several segments
		}
		for _, n := range ss {
			src := page(n)
			got, err := kept.Encode(nil, src)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ref.Encode(nil, src)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("level %v, %d-byte page: kept encoder made %d bytes, parquet-go's codec %d, not the same", level, n, len(got), len(want))
			}
		}
	}
}
