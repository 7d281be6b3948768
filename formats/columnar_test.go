package formats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// columnarColumns are the top-level columns of T the columnar path decodes
// (every one but the maps and byte slices).
func columnarColumns[T Record]() []string {
	var cols []string
	rt := reflect.TypeFor[T]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("parquet"), ",")
		if _, ok := columnarFields[T]([]string{name}); ok {
			cols = append(cols, name)
		}
	}
	return cols
}

// readBoth reads paths projected to columns through the row path and the
// columnar path, and fails unless both return the same records and the
// same kind of error.
func readBoth[T Record](t *testing.T, paths []string, opts ReaderOptions) []T {
	t.Helper()
	rows, _, rowErr := readPath[T](t, paths, opts, true)
	cols, _, colErr := readPath[T](t, paths, opts, false)
	if (rowErr == nil) != (colErr == nil) || (rowErr != nil && errors.Is(rowErr, ErrBadFile) != errors.Is(colErr, ErrBadFile)) {
		t.Fatalf("row path error %v, columnar path error %v", rowErr, colErr)
	}
	sameRecords(t, cols, rows, len(rows))
	return cols
}

// readPath reads paths through one path; warned counts SkipBad's warnings.
func readPath[T Record](t *testing.T, paths []string, opts ReaderOptions, rowPath bool) (out []T, warned int, err error) {
	t.Helper()
	opts.RowPath = rowPath
	opts.Warn = func(error) { warned++ }
	r, err := OpenReader[T](context.Background(), paths, opts)
	if err != nil {
		return nil, warned, err
	}
	defer r.Close()
	if !rowPath && r.fields == nil {
		t.Fatalf("columns %q: columnar path not taken", opts.Columns)
	}
	for n := 0; n < 1<<20; n++ {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, warned, nil
		}
		if err != nil {
			return out, warned, err
		}
		out = append(out, *rec)
	}
	t.Fatal("reader does not end")
	return nil, 0, nil
}

// sameRecords fails unless got has n records equal to want's first n.
func sameRecords[T any](t *testing.T, got, want []T, n int) {
	t.Helper()
	if len(got) != n || len(want) < n {
		t.Fatalf("columnar path read %d records, row path %d (want %d alike)", len(got), len(want), n)
	}
	for i := range n {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("record %d:\ncolumnar %+v\nrows     %+v", i, got[i], want[i])
		}
	}
}

// TestColumnarMatchesRows: the columnar path returns exactly what
// parquet-go's row reconstruction does — every decodable column, across
// overlapping files and row groups, windows, empty and absent lists, NULL
// optionals, results and recordings.
func TestColumnarMatchesRows(t *testing.T) {
	dir := t.TempDir()
	var a, b []Exchange
	for i := range 700 {
		x := testExchange(int64(i+1), time.Duration(i)*time.Millisecond)
		switch i % 4 {
		case 0:
			x.EventGapsUs, x.PrefixHashes = nil, nil
		case 1:
			v := int32(i)
			x.CachedTokens = &v
			x.EventGapsUs = make([]int32, i%300) // lists longer than a batch's worth
		case 2:
			x.Error, x.Model = "", "" // repeated empties next to values
		}
		if i%3 == 0 {
			x.Recorder = "rec-b"
			b = append(b, x)
		} else {
			a = append(a, x)
		}
	}
	writeAll(t, WriterOptions{Dir: dir, Recorder: "rec-a", RowGroupRows: 100, NoSpool: true}, a)
	writeAll(t, WriterOptions{Dir: dir, Recorder: "rec-b", RowGroupRows: 64, NoSpool: true}, b)
	all := columnarColumns[Exchange]()
	for _, want := range []string{"ts", "ts_unix_ns", "status", "error", "event_gaps_us", "prefix_hashes", "cached_tokens", "model", "complete"} {
		if !strings.Contains(" "+strings.Join(all, " ")+" ", " "+want+" ") {
			t.Fatalf("columnar path does not decode %s (decodes %q)", want, all)
		}
	}
	for _, tc := range []struct {
		name  string
		opts  ReaderOptions
		least int
	}{
		{"every decodable column", ReaderOptions{Columns: all}, 700},
		{"small batches", ReaderOptions{Columns: all, BatchRows: 7}, 700},
		{"a window", ReaderOptions{Columns: []string{"event_gaps_us", "model", "cached_tokens"}, From: t0.Add(100 * time.Millisecond), To: t0.Add(333 * time.Millisecond)}, 233},
		{"time only", ReaderOptions{Columns: []string{}}, 700},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readBoth[Exchange](t, []string{dir}, tc.opts); len(got) != tc.least {
				t.Fatalf("read %d records, want %d", len(got), tc.least)
			}
		})
	}
	t.Run("small pages", func(t *testing.T) { // lists and batches across page boundaries
		pdir := t.TempDir()
		writeAll(t, WriterOptions{Dir: pdir, Recorder: "rec-a", RowGroupRows: 1000, PageBytes: 700, NoSpool: true}, append(a, b...))
		pagesOf(t, pdir, "event_gaps_us", 5)
		for _, batch := range []int{0, 7} {
			if got := readBoth[Exchange](t, []string{pdir}, ReaderOptions{Columns: all, BatchRows: batch}); len(got) != 700 {
				t.Fatalf("batches of %d: read %d records, want 700", batch, len(got))
			}
		}
	})
	t.Run("results", func(t *testing.T) {
		rdir := t.TempDir()
		var rs []Result
		for i := range 300 {
			r := testResult(int64(i+1), time.Duration(i)*time.Millisecond)
			if i%2 == 0 {
				r.ITLUs = nil
			}
			rs = append(rs, r)
		}
		writeAll(t, WriterOptions{Dir: rdir, RowGroupRows: 50, NoSpool: true}, rs)
		for _, cols := range [][]string{nil, columnarColumns[Result](), {"itl_us", "model"}} {
			if got := readBoth[Result](t, []string{rdir}, ReaderOptions{Columns: cols}); len(got) != 300 {
				t.Fatalf("read %d results", len(got))
			}
		}
	})
	t.Run("read ahead and reused slices", func(t *testing.T) {
		pdir := t.TempDir() // lists and batches across page boundaries
		writeAll(t, WriterOptions{Dir: pdir, Recorder: "rec-a", RowGroupRows: 1000, PageBytes: 700, NoSpool: true}, append(a, b...))
		window := ReaderOptions{Columns: []string{"event_gaps_us", "model", "cached_tokens"}, From: t0.Add(100 * time.Millisecond), To: t0.Add(333 * time.Millisecond)}
		for _, tc := range []struct {
			name string
			base ReaderOptions // what is read, compared with the row path without these options
			dirs []string
		}{
			{"overlapping files", ReaderOptions{Columns: all}, []string{dir}},
			{"small pages", ReaderOptions{Columns: all}, []string{pdir}},
			{"a window", window, []string{dir}},
		} {
			want, _, err := readPath[Exchange](t, tc.dirs, tc.base, true)
			if err != nil || len(want) == 0 {
				t.Fatalf("%s: row path read %d records: %v", tc.name, len(want), err)
			}
			for _, batch := range []int{0, 7} {
				for _, o := range []struct{ ahead, reuse bool }{{true, false}, {false, true}, {true, true}} {
					opts := tc.base
					opts.BatchRows, opts.ReadAhead, opts.ReuseSlices = batch, o.ahead, o.reuse
					t.Run(fmt.Sprintf("%s/batch %d/ahead %v/reuse %v", tc.name, batch, o.ahead, o.reuse), func(t *testing.T) {
						scanMatches(t, tc.dirs, opts, want)
						if !o.reuse { // Next's copies are whole: the row path too, ahead
							readBoth[Exchange](t, tc.dirs, opts)
						}
					})
				}
			}
		}
	})
	t.Run("maps and bodies take the row path", func(t *testing.T) {
		r, err := OpenReader[Exchange](context.Background(), []string{dir}, ReaderOptions{Columns: []string{"model", "req_headers"}})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.fields != nil {
			t.Fatal("columnar path chosen for a map column")
		}
	})
}

// scanMatches reads paths with opts through Scan and fails unless each
// record, while it is valid (before the next Scan: its slices may be
// decoded over after that with ReuseSlices), equals want's next.
func scanMatches[T Record](t *testing.T, paths []string, opts ReaderOptions, want []T) {
	t.Helper()
	r, err := OpenReader[T](context.Background(), paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for ; n <= len(want); n++ {
		rec, err := r.Scan()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d records: %v", n, err)
		}
		if n == len(want) || !reflect.DeepEqual(*rec, want[n]) {
			t.Fatalf("record %d:\nscanned %+v\nwant    %+v", n, *rec, want[min(n, len(want)-1)])
		}
	}
	if n != len(want) {
		t.Fatalf("scanned %d records, want %d", n, len(want))
	}
}

// pagesOf fails unless column's first chunk in dir's first file has at
// least least pages.
func pagesOf(t *testing.T, dir, column string, least int) {
	t.Helper()
	list, err := ListFiles([]string{dir})
	if err != nil || len(list) == 0 {
		t.Fatalf("list %s: %v %q", dir, err, list)
	}
	f, pf, err := openParquet(list[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	leaf, ok := leafOf(pf.Schema(), column)
	if !ok {
		t.Fatalf("no column %s", column)
	}
	pages := pf.RowGroups()[0].ColumnChunks()[leaf.ColumnIndex].Pages()
	defer pages.Close()
	n := 0
	for ; n < 1<<20; n++ {
		p, err := pages.ReadPage()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		parquet.Release(p)
	}
	if n < least {
		t.Fatalf("%s: %d pages, want at least %d (the test needs rows across pages)", column, n, least)
	}
}

// TestColumnarOldFiles: a file written before the added columns existed
// reads the same through both paths (the added columns zero, NULL).
func TestColumnarOldFiles(t *testing.T) {
	dir := t.TempDir()
	x := testExchange(7, time.Second)
	x.TurnKey, x.ParentTurnKey = 11, 12
	v := int32(3)
	x.CachedTokens = &v
	writeWithout(t, filepath.Join(dir, "x", "old.parquet"), ExchangeSchema, x, AddedColumns)
	got := readBoth[Exchange](t, []string{filepath.Join(dir, "x")}, ReaderOptions{Columns: columnarColumns[Exchange]()})
	if len(got) != 1 || got[0].TurnKey != 0 || got[0].CachedTokens != nil || got[0].Seq != 7 || len(got[0].EventGapsUs) == 0 {
		t.Fatalf("old exchange read as %+v", got)
	}
}

// TestColumnarDamagedFiles: over single-byte flips of a small file, with
// and without SkipBad, the columnar path never panics or hangs, fails only
// with ErrBadFile, and returns what the row path does, or the true rows:
// it checks the pages' CRC-32, which parquet-go's row reader does not, and
// reports damage the row path decodes into wrong values; it counts values
// from the pages themselves, so a damaged count in a page header that
// fails the row path does not stop it. Either way it never returns fewer
// rows than the row path without saying the file is damaged.
func TestColumnarDamagedFiles(t *testing.T) {
	if raceEnabled {
		t.Skip("see TestDamagedFiles: checkptr turns parquet-go's recovered panics fatal")
	}
	good := validFile(t)
	cols := columnarColumns[Exchange]()
	goodPath := filepath.Join(t.TempDir(), "good.parquet")
	if err := os.WriteFile(goodPath, good, 0o644); err != nil {
		t.Fatal(err)
	}
	truth, _, err := readPath[Exchange](t, []string{goodPath}, ReaderOptions{Columns: cols}, true)
	if err != nil || len(truth) != 3 {
		t.Fatalf("undamaged file: %d rows, %v", len(truth), err)
	}
	var stricter, truer, reads int
	step := max(len(good)/200, 1) // 200 flips, spread over every part of the file (each byte: minutes)
	for pos := 7; pos < len(good); pos += step {
		b := append([]byte(nil), good...)
		b[pos] ^= 0x5a
		path := filepath.Join(t.TempDir(), "x.parquet")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, skip := range []bool{false, true} {
			reads++
			opts := ReaderOptions{Columns: cols, SkipBad: skip}
			rows, rowWarned, rowErr := readPath[Exchange](t, []string{path}, opts, true)
			got, colWarned, colErr := readPath[Exchange](t, []string{path}, opts, false)
			if colErr != nil && !errors.Is(colErr, ErrBadFile) {
				t.Fatalf("flip at %d: columnar error %v, not ErrBadFile", pos, colErr)
			}
			opts.ReadAhead = true // damage found on the read-ahead goroutine: the same rows and errors
			ahead, aheadWarned, aheadErr := readPath[Exchange](t, []string{path}, opts, false)
			if !reflect.DeepEqual(ahead, got) || aheadWarned != colWarned || (aheadErr == nil) != (colErr == nil) || (aheadErr != nil && aheadErr.Error() != colErr.Error()) {
				t.Fatalf("flip at %d (skip %v): read ahead %d rows (warned %d, err %v), without %d rows (warned %d, err %v)",
					pos, skip, len(ahead), aheadWarned, aheadErr, len(got), colWarned, colErr)
			}
			switch reported := colErr != nil || colWarned > 0; {
			case isPrefix(got, rows) && (len(got) == len(rows) || reported):
				if reported && !(rowErr != nil || rowWarned > 0) {
					stricter++
				}
			case isPrefix(got, truth) && (len(got) >= len(rows) || reported):
				truer++
			default:
				t.Fatalf("flip at %d (skip %v): columnar read %d rows (err %v), row path %d (err %v); neither its rows nor the true ones",
					pos, skip, len(got), colErr, len(rows), rowErr)
			}
		}
	}
	t.Logf("%d of %d reads: damage the row path did not notice; %d: the true rows where the row path failed or decoded wrong values", stricter, reads, truer)
}

func isPrefix[T any](a, b []T) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestReadAheadStops: Close ends the read-ahead goroutines of the row
// groups still open, partway through a dataset of overlapping files, and
// each row group's goroutine has ended by the time the merge drops it.
// (A goroutine may end earlier: after decoding its row group's last batch.)
func TestReadAheadStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for f := range 3 {
		recs := make([]Exchange, 200)
		for i := range recs {
			recs[i] = testExchange(int64(i), time.Duration(3*i+f)*time.Millisecond) // the files interleave in time
		}
		writeAll(t, WriterOptions{Dir: dir, Recorder: fmt.Sprintf("r%d", f), RowGroupRows: 50, NoSpool: true}, recs)
	}
	for _, stopAt := range []int{10, 299, 600} {
		r, err := OpenReader[Exchange](context.Background(), []string{dir}, ReaderOptions{Columns: []string{"model", "event_gaps_us"}, ReadAhead: true, BatchRows: 8})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[*readAhead[Exchange]]bool{}
		n := 0
		for ; n < stopAt; n++ {
			if _, err := r.Scan(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			for _, ru := range r.heap {
				if ru.ahead == nil {
					t.Fatal("open row group without its read-ahead")
				}
				seen[ru.ahead] = true
			}
			for ra := range seen {
				open := false
				for _, ru := range r.heap {
					open = open || ru.ahead == ra
				}
				select {
				case <-ra.done: // after its last batch, or stopped
				default:
					if !open {
						t.Fatal("read-ahead still running after its row group was dropped")
					}
				}
			}
		}
		if want := min(stopAt, 600); n != want {
			t.Fatalf("read %d records, want %d", n, want)
		}
		if len(seen) < 2 {
			t.Fatalf("%d row groups read ahead at once; the test wants overlapping ones", len(seen))
		}
		r.Close()
		for ra := range seen {
			select {
			case <-ra.done:
			default:
				t.Fatalf("after %d records: a read-ahead goroutine outlived Close", n)
			}
		}
	}
}
