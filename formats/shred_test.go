package formats

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// TestShredMatchesReflection writes the same rows through the hand-written
// shredder and through parquet-go's reflective GenericWriter.Write, with the
// writer's own options, and requires byte-identical files: same schema, same
// values and levels, same pages, same statistics and metadata. The rows cover
// empty and nil maps, lists and bodies, zero times, map keys inserted in
// every order, and bodies large enough to split columns into several pages
// and row groups.
func TestShredMatchesReflection(t *testing.T) {
	t.Parallel()
	t.Run("exchange", func(t *testing.T) { t.Parallel(); shredMatches(t, shredExchanges()) })
	t.Run("result", func(t *testing.T) { t.Parallel(); shredMatches(t, shredResults()) })
	t.Run("metric", func(t *testing.T) { t.Parallel(); shredMatches(t, shredMetrics()) })
}

func shredMatches[T Record](t *testing.T, rows []T) {
	t.Helper()
	cfg := fileConfig{
		codec:        &zstd.Codec{Level: zstd.SpeedFastest},
		rowGroupRows: 700, // several row groups, one not a multiple of shredBatch
		meta:         map[string]string{MetaSchema: schemaName[T](), MetaRecorder: "r"},
	}
	opts := parquetOptions[T](cfg, t0)

	var want bytes.Buffer
	ref := parquet.NewGenericWriter[T](&want, opts...)
	var got bytes.Buffer
	pw := parquet.NewGenericWriter[T](&got, opts...)
	s := newShredder(pw.ColumnWriters())
	for start := 0; start < len(rows); start += cfg.rowGroupRows {
		group := rows[start:min(start+cfg.rowGroupRows, len(rows))]
		if _, err := ref.Write(group); err != nil {
			t.Fatal(err)
		}
		if err := ref.Flush(); err != nil {
			t.Fatal(err)
		}
		var buf rowBuffer[T]
		for i := range group {
			buf.add(&group[i])
		}
		if err := writeRows(s, &buf, nil); err != nil {
			t.Fatal(err)
		}
		if err := pw.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ref.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("shredded file (%d B) differs from reflective one (%d B) at byte %d",
			got.Len(), want.Len(), firstDiff(got.Bytes(), want.Bytes()))
	}
	f, err := parquet.OpenFile(bytes.NewReader(got.Bytes()), int64(got.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if n := f.NumRows(); n != int64(len(rows)) {
		t.Fatalf("file holds %d rows, wrote %d", n, len(rows))
	}
	if len(f.RowGroups()) < 2 {
		t.Fatalf("want several row groups, got %d", len(f.RowGroups()))
	}
	// The rows read back are the rows written (reflect.DeepEqual up to
	// nil-vs-empty and time zones, which Parquet does not keep).
	back := make([]T, len(rows))
	r := parquet.NewGenericReader[T](bytes.NewReader(got.Bytes()))
	if n, err := r.Read(back); n != len(rows) {
		t.Fatalf("read %d rows: %v", n, err)
	}
	for i := range rows {
		if a, b := showRow(normalize(rows[i])), showRow(normalize(back[i])); a != b {
			t.Fatalf("row %d:\n got %s\nwant %s", i, b, a)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// normalize maps nil to empty and times to UTC µs, what a file keeps. Like
// parquet-go's reader, it goes through int64 nanoseconds, so the zero time
// wraps around (to 1754) on both sides.
func normalize[T Record](r T) T {
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Slice, reflect.Map:
			if f.Len() == 0 {
				f.SetZero()
			}
		case reflect.Struct:
			if tm, ok := f.Interface().(time.Time); ok {
				f.Set(reflect.ValueOf(time.UnixMicro(time.Unix(0, tm.UnixMicro()*1000).UnixMicro()).UTC()))
			}
		}
	}
	return r
}

// showRow prints a row with its optional columns' values, not their
// addresses.
func showRow[T Record](r T) string {
	v := reflect.ValueOf(r)
	var b strings.Builder
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer {
			if f.IsNil() {
				b.WriteString(" <nil>")
			} else {
				fmt.Fprintf(&b, " &%v", f.Elem())
			}
			continue
		}
		fmt.Fprintf(&b, " %v", f)
	}
	return b.String()
}

func shredExchanges() []Exchange {
	rng := rand.New(rand.NewPCG(7, 7))
	var rows []Exchange
	var every Exchange
	fillAll(reflect.ValueOf(&every).Elem())
	rows = append(rows, every, Exchange{}) // every field set; every field zero
	for i := range 2000 {
		x := testExchange(int64(i), time.Duration(i)*time.Millisecond)
		switch i % 7 {
		case 0:
			x.ReqHeaders, x.RespHeaders, x.Context = nil, map[string]string{}, nil
			x.PrefixHashes, x.EventGapsUs = nil, []int32{}
			x.ReqBody, x.RespBody = nil, []byte{}
		case 1:
			// Many keys, inserted in a random order.
			x.ReqHeaders = map[string]string{}
			for _, k := range rng.Perm(20) {
				x.ReqHeaders[fmt.Sprintf("x-h%02d", k)] = strings.Repeat("v", k)
			}
			x.ReqHeaders[""] = "empty key"
			x.ReqHeaders["É"] = "non-ascii key"
		case 2:
			// Large bodies: the body columns span several pages per group.
			x.ReqBody = bytes.Repeat([]byte{byte('a' + i%26)}, 4096+rng.IntN(8192))
			x.RespBody = []byte(strings.Repeat("data: {}\n\n", 500))
			x.EventGapsUs = make([]int32, 300)
			for j := range x.EventGapsUs {
				x.EventGapsUs[j] = rng.Int32()
			}
		case 3:
			x.Ts = time.Time{} // zero time: year 1, far before the epoch
			x.Model, x.Topic, x.Upstream = "", "", ""
			x.Error, x.RedactErr = "dial: refused", "bad json"
			x.PrefixHashes = []int64{math.MinInt64, math.MaxInt64, 0}
		case 4:
			x.Ts = x.Ts.In(time.FixedZone("x", 3600))
			x.Stream, x.Complete, x.ReqBodyTrunc = false, false, true
		case 5:
			cached := int32(i)
			x.CachedTokens = &cached // reported; the other rows leave it NULL
		}
		rows = append(rows, x)
	}
	return rows
}

func shredResults() []Result {
	var rows []Result
	var every Result
	fillAll(reflect.ValueOf(&every).Elem())
	rows = append(rows, every, Result{})
	for i := range 1500 {
		r := testResult(int64(i), time.Duration(i)*time.Millisecond)
		switch i % 3 {
		case 0:
			r.ITLUs = nil
		case 1:
			r.ITLUs = make([]int32, 1000+i)
			r.Error = "timeout"
		}
		rows = append(rows, r)
	}
	return rows
}

func shredMetrics() []Metric {
	var rows []Metric
	for i := range 1500 {
		m := Metric{
			Ts: t0.Add(time.Duration(i) * time.Second), TsUnixNs: t0.UnixNano() + int64(i),
			Source: "http://127.0.0.1:9/metrics", Name: fmt.Sprintf("m%d", i%5), Value: float64(i) / 3,
		}
		switch i % 4 {
		case 0:
			m.Labels = map[string]string{"le": "+Inf", "a": "1", "model": "x"}
			m.Value = math.Inf(1)
		case 1:
			m.Value = math.NaN()
		case 2:
			m.Labels = map[string]string{}
		}
		rows = append(rows, m)
	}
	return rows
}

// TestWrittenSchema opens files written by the dataset Writer and checks
// their schema is parquet-go's schema of the row type, column for column,
// and that they carry reel's metadata.
func TestWrittenSchema(t *testing.T) {
	t.Parallel()
	t.Run("exchange", func(t *testing.T) {
		t.Parallel()
		writtenSchema(t, []Exchange{testExchange(1, 0), {TsUnixNs: t0.UnixNano()}}, parquet.SchemaOf(Exchange{}))
	})
	t.Run("result", func(t *testing.T) {
		t.Parallel()
		writtenSchema(t, []Result{testResult(1, 0), {OrigTs: t0}}, parquet.SchemaOf(Result{}))
	})
	t.Run("metric", func(t *testing.T) {
		t.Parallel()
		writtenSchema(t, []Metric{{Ts: t0, TsUnixNs: t0.UnixNano(), Name: "up", Value: 1}}, parquet.SchemaOf(Metric{}))
	})
}

func writtenSchema[T Record](t *testing.T, rows []T, want *parquet.Schema) {
	dir := t.TempDir()
	writeAll(t, WriterOptions{Dir: dir, Recorder: "r", Source: "test"}, rows)
	files, err := filepath.Glob(filepath.Join(dir, "*", "*", "*.parquet"))
	if err != nil || len(files) != 1 {
		t.Fatalf("files %v, %v", files, err)
	}
	f, pf, err := openParquet(files[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := pf.Schema(); !parquet.EqualNodes(got, want) || got.String() != want.String() {
		t.Fatalf("schema:\n%s\nwant:\n%s", got, want)
	}
	if v, ok := pf.Lookup(MetaSchema); !ok || v != schemaName[T]() {
		t.Fatalf("%s = %q, want %q", MetaSchema, v, schemaName[T]())
	}
	if n := pf.NumRows(); n != int64(len(rows)) {
		t.Fatalf("%d rows, want %d", n, len(rows))
	}
	// Min/max only where they mean something: the time column always (the
	// reader prunes row groups on it), bodies and header maps never.
	boundless := map[string]bool{}
	for _, p := range boundlessColumns[T]() {
		boundless[strings.Join(p, ".")] = true
	}
	for _, cc := range pf.Metadata().RowGroups[0].Columns {
		path := strings.Join(cc.MetaData.PathInSchema, ".")
		hasBounds := cc.MetaData.Statistics.MinValue != nil
		if path == timeColumn[T]() && !hasBounds {
			t.Errorf("time column %s has no min/max", path)
		}
		if boundless[path] && hasBounds {
			t.Errorf("column %s has min/max %q/%q", path, cc.MetaData.Statistics.MinValue, cc.MetaData.Statistics.MaxValue)
		}
		delete(boundless, path)
	}
	if len(boundless) > 0 {
		t.Errorf("boundless columns not in the schema: %v", boundless)
	}
}
