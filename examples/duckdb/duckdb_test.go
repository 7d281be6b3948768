package main

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

var t0 = time.Date(2025, 3, 14, 9, 55, 0, 0, time.UTC)

// openDuckDB opens an in-memory DuckDB, closed when the test ends.
func openDuckDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// writeAll writes recs with a reel writer of opts and closes it.
func writeAll[T formats.Record](t *testing.T, opts formats.WriterOptions, recs []T) {
	t.Helper()
	w, err := formats.NewWriter[T](context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// writeExchanges writes n exchanges 1 s apart from t0 (crossing 10:00, so
// two hour partitions) in several files, and returns their durations.
func writeExchanges(t *testing.T, dir string, n int) []float64 {
	t.Helper()
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{
		Dir: dir, Recorder: "edge-1", Source: "proxy", RowGroupRows: 50, RotateSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var durs []float64
	for i := range n {
		ts := t0.Add(time.Duration(i)*time.Second + 123456789) // sub-µs digits, dropped by ts
		d := int64(i%97+1) * 1_000_000
		x := formats.Exchange{
			Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "edge-1", Seq: int64(i + 1), Method: "POST",
			Path: "/v1/chat/completions", Status: 200, DurationNs: d, Model: "m",
			ReqBody:      []byte(fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"q%d"}]}`, i)),
			PrefixHashes: []int64{7, int64(i)}, EventGapsUs: []int32{int32(i), 5, 6},
			Context:   map[string]string{"x-tenant": fmt.Sprintf("t%d", i%3)},
			BatchSize: -1, QueueDepth: -1, Complete: true,
		}
		if err := w.Write(&x); err != nil {
			t.Fatal(err)
		}
		durs = append(durs, float64(d)/1e6)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return durs
}

// quantileCont is DuckDB's quantile_cont: linear interpolation between ranks.
func quantileCont(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	pos := q * float64(len(s)-1)
	lo := math.Floor(pos)
	return s[int(lo)] + (pos-lo)*(s[int(math.Ceil(pos))]-s[int(lo)])
}

func queryRow(t *testing.T, db *sql.DB, query string, dest ...any) {
	t.Helper()
	if err := db.QueryRow(query).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func TestDuckDBReadsExchanges(t *testing.T) {
	dir := t.TempDir()
	const n = 600
	durs := writeExchanges(t, dir, n)
	// A writer still open leaves a temporary file and a spool: DuckDB's glob
	// must not see them.
	open, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{
		Dir: dir, Recorder: "still-open", RowGroupRows: 1})
	if err != nil {
		t.Fatal(err)
	}
	x := formats.Exchange{Ts: t0, TsUnixNs: t0.UnixNano()}
	if err := open.Write(&x); err != nil {
		t.Fatal(err)
	}
	defer open.Close(context.Background())

	db := openDuckDB(t)
	src := fmt.Sprintf("read_parquet('%s', hive_partitioning = true)", datasetGlob(dir))

	var rows, hours, files int64
	queryRow(t, db, "SELECT count(*), count(DISTINCT hour), count(DISTINCT filename) FROM read_parquet('"+
		datasetGlob(dir)+"', hive_partitioning = true, filename = true)", &rows, &hours, &files)
	if rows != n || hours != 2 || files < 3 {
		t.Errorf("rows, hours, files = %d, %d, %d; want %d, 2, several", rows, hours, files, n)
	}

	var first, last time.Time
	var badTs int64
	queryRow(t, db, "SELECT min(ts), max(ts), count(*) FILTER (WHERE epoch_us(ts) != ts_unix_ns // 1000) FROM "+src,
		&first, &last, &badTs)
	wantFirst := t0.Add(123456 * time.Microsecond)
	wantLast := wantFirst.Add((n - 1) * time.Second)
	if !first.Equal(wantFirst) || !last.Equal(wantLast) || badTs != 0 {
		t.Errorf("ts range %v .. %v (%d rows disagree with ts_unix_ns); want %v .. %v", first, last, badTs, wantFirst, wantLast)
	}

	var p99 float64
	queryRow(t, db, "SELECT quantile_cont(duration_ns / 1e6, 0.99) FROM "+src, &p99)
	if want := quantileCont(durs, 0.99); math.Abs(p99-want) > 1e-9 {
		t.Errorf("quantile_cont p99 = %v ms, want %v", p99, want)
	}

	var hashes, gapSum, gapFirst int64
	queryRow(t, db, "SELECT sum(len(prefix_hashes)), sum(list_sum(event_gaps_us)), max(event_gaps_us[1]) FROM "+src,
		&hashes, &gapSum, &gapFirst)
	if hashes != 2*n || gapSum != int64(n*(n-1)/2+11*n) || gapFirst != n-1 {
		t.Errorf("lists: %d hashes, gap sum %d, max first gap %d", hashes, gapSum, gapFirst)
	}

	var tenant1 int64
	queryRow(t, db, "SELECT count(*) FROM "+src+" WHERE list_extract(map_extract(context, 'x-tenant'), 1) = 't1'", &tenant1)
	if tenant1 != n/3 {
		t.Errorf("map column: %d rows with x-tenant=t1, want %d", tenant1, n/3)
	}

	var perMinute int
	r, err := db.Query(fmt.Sprintf(perMinuteSQL, datasetGlob(dir)))
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		perMinute++
	}
	r.Close()
	if perMinute != 10 {
		t.Errorf("per-minute query gave %d minutes, want 10", perMinute)
	}
}

func TestDuckDBReadsResults(t *testing.T) {
	dir := t.TempDir()
	results := make([]formats.Result, 100)
	for i := range results {
		ts := t0.Add(time.Duration(i) * time.Second)
		results[i] = formats.Result{RunID: "run-1", Seq: int64(i), OrigTs: ts, Frame: ts.Truncate(5 * time.Second),
			E2ENs: int64(i) * 1e6, ITLUs: []int32{1, 2, 3, int32(i)}, Status: 200}
	}
	writeAll(t, formats.WriterOptions{Dir: dir, Recorder: "replay-1"}, results)
	db := openDuckDB(t)
	var n, frames, itl int64
	var median float64
	queryRow(t, db, fmt.Sprintf("SELECT count(*), count(DISTINCT frame), sum(len(itl_us)), quantile_cont(e2e_ns / 1e6, 0.5) FROM read_parquet('%s', hive_partitioning = true)",
		datasetGlob(dir)), &n, &frames, &itl, &median)
	if n != 100 || frames != 20 || itl != 400 || median != 49.5 {
		t.Errorf("results: %d rows, %d frames, %d ITL values, median e2e %v ms", n, frames, itl, median)
	}
}
