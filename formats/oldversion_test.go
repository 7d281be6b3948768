package formats

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// TestReadFilesWithoutLaterColumns reads files written before the columns
// added within exchange/1 and result/1 (AddedColumns) existed: the rows
// come back with those columns zero and every other column intact.
func TestReadFilesWithoutLaterColumns(t *testing.T) {
	dir := t.TempDir()
	x := testExchange(7, time.Second)
	x.TurnKey, x.ParentTurnKey = 11, 12
	writeWithout(t, filepath.Join(dir, "x", "old.parquet"), ExchangeSchema, x, AddedColumns)
	r := Result{RunID: "run", Seq: 7, OrigTs: t0, Frame: t0, ScheduledNs: 42, LagNs: 3, SessionDelayNs: 9, Path: "/v1/chat/completions", ITLUs: []int32{5, 6}}
	writeWithout(t, filepath.Join(dir, "r", "old.parquet"), ResultSchema, r, AddedColumns)

	want := x
	want.TurnKey, want.ParentTurnKey = 0, 0
	xs := readAll[Exchange](t, []string{filepath.Join(dir, "x")}, ReaderOptions{})
	if len(xs) != 1 || !reflect.DeepEqual(xs[0], want) {
		t.Fatalf("old exchange read as\n%+v\nwant\n%+v", xs, want)
	}
	rs := readAll[Result](t, []string{filepath.Join(dir, "r")}, ReaderOptions{})
	wantR := r
	wantR.SessionDelayNs = 0
	if len(rs) != 1 || !reflect.DeepEqual(rs[0], wantR) {
		t.Fatalf("old result read as\n%+v\nwant\n%+v", rs, wantR)
	}
	// A file missing a column that was there from the start stays refused.
	writeWithout(t, filepath.Join(dir, "bad", "old.parquet"), ResultSchema, r, map[string]bool{"lag_ns": true})
	if _, err := OpenReader[Result](t.Context(), []string{filepath.Join(dir, "bad")}, ReaderOptions{}); err == nil || !strings.Contains(err.Error(), "no column lag_ns") {
		t.Fatalf("file without lag_ns: err = %v", err)
	}
}

// writeWithout writes rec as a one-row file of schema whose columns lack
// those named in drop: a file from before they were added.
func writeWithout[T any](t *testing.T, path, schema string, rec T, drop map[string]bool) {
	t.Helper()
	v := reflect.ValueOf(rec)
	var fields []reflect.StructField
	var keep []int
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		if !drop[name] {
			fields = append(fields, f)
			keep = append(keep, i)
		}
	}
	old := reflect.New(reflect.StructOf(fields)).Elem()
	for j, i := range keep {
		old.Field(j).Set(v.Field(i))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewWriter(f, parquet.SchemaOf(old.Interface()), parquet.KeyValueMetadata(MetaSchema, schema))
	if err := w.Write(old.Interface()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
