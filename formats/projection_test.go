package formats

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// keepColumns is rec with every field outside columns (and the time column)
// set to zero: what a projected read must return.
func keepColumns[T Record](rec T, columns []string) T {
	keep := map[string]bool{timeColumn[T](): true}
	for _, c := range columns {
		keep[c] = true
	}
	v := reflect.ValueOf(&rec).Elem()
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("parquet"), ",")
		if !keep[name] {
			v.Field(i).SetZero()
		}
	}
	return rec
}

func TestReaderColumns(t *testing.T) {
	dir := t.TempDir()
	// Two files whose row groups overlap in time, so the merge and the
	// window are exercised with projected rows.
	var a, b []Exchange
	for i := range 300 {
		x := testExchange(int64(i+1), time.Duration(i)*time.Millisecond)
		if i%3 == 0 {
			x.Recorder = "rec-b"
			b = append(b, x)
		} else {
			a = append(a, x)
		}
	}
	writeAll(t, WriterOptions{Dir: dir, Recorder: "rec-a", RowGroupRows: 32, NoSpool: true}, a)
	writeAll(t, WriterOptions{Dir: dir, Recorder: "rec-b", RowGroupRows: 32, NoSpool: true}, b)

	cases := []struct {
		name     string
		columns  []string
		from, to time.Time
	}{
		{name: "empty list reads only time", columns: []string{}},
		{name: "scalars", columns: []string{"recorder", "seq", "method", "path", "status"}},
		{name: "maps and lists", columns: []string{"req_headers", "prefix_hashes", "context", "event_gaps_us"}},
		{name: "bodies", columns: []string{"req_body", "resp_body", "ts"}},
		{name: "window", columns: []string{"model", "req_body"}, from: t0.Add(50 * time.Millisecond), to: t0.Add(120 * time.Millisecond)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			window := ReaderOptions{From: tc.from, To: tc.to}
			full := readAll[Exchange](t, []string{dir}, window)
			window.Columns = tc.columns
			got := readAll[Exchange](t, []string{dir}, window)
			if len(got) != len(full) || len(full) == 0 {
				t.Fatalf("projected read returned %d records, full read %d", len(got), len(full))
			}
			for i := range full {
				if want := keepColumns(full[i], tc.columns); !reflect.DeepEqual(got[i], want) {
					t.Fatalf("record %d:\n got %+v\nwant %+v", i, got[i], want)
				}
			}
		})
	}

	t.Run("results", func(t *testing.T) {
		rdir := t.TempDir()
		var rs []Result
		for i := range 100 {
			rs = append(rs, testResult(int64(i+1), time.Duration(i)*time.Millisecond))
		}
		writeAll(t, WriterOptions{Dir: rdir, RowGroupRows: 16, NoSpool: true}, rs)
		cols := []string{"seq", "itl_us", "model"}
		full := readAll[Result](t, []string{rdir}, ReaderOptions{})
		got := readAll[Result](t, []string{rdir}, ReaderOptions{Columns: cols})
		if len(got) != len(full) {
			t.Fatalf("projected read returned %d records, full read %d", len(got), len(full))
		}
		for i := range full {
			if want := keepColumns(full[i], cols); !reflect.DeepEqual(got[i], want) {
				t.Fatalf("record %d:\n got %+v\nwant %+v", i, got[i], want)
			}
		}
	})
}

func TestReaderUnknownColumn(t *testing.T) {
	dir := t.TempDir()
	writeAll(t, WriterOptions{Dir: dir, NoSpool: true}, []Exchange{testExchange(1, 0)})
	for _, cols := range [][]string{{"method", "no_such"}, {"Method"}, {"req_headers.key"}} {
		_, err := OpenReader[Exchange](t.Context(), []string{dir}, ReaderOptions{Columns: cols})
		if err == nil || !strings.Contains(err.Error(), "exchange/1 has no column") {
			t.Errorf("Columns %q: got error %v, want one naming the unknown column", cols, err)
		}
	}
}
