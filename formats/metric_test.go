package formats

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

func testMetric(i int, offset time.Duration, v float64) Metric {
	ts := t0.Add(offset)
	return Metric{Ts: ts.Truncate(time.Microsecond), TsUnixNs: ts.UnixNano(), Source: "http://127.0.0.1:8000/metrics",
		Name: "vllm:num_requests_waiting", Labels: map[string]string{"model_name": "m", "i": string(rune('a' + i%26))}, Value: v}
}

func TestRoundTripMetric(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var recs []Metric
	for i := range 300 {
		v := float64(i)
		switch i {
		case 7:
			v = math.NaN()
		case 8:
			v = math.Inf(1)
		}
		recs = append(recs, testMetric(i, time.Duration(i)*time.Second, v))
	}
	shuffleNear(recs, 3)
	writeAll(t, WriterOptions{Dir: dir, Recorder: "scrape", RowGroupRows: 64}, recs)
	got := readAll[Metric](t, []string{dir}, ReaderOptions{})
	if len(got) != len(recs) {
		t.Fatalf("read %d rows, wrote %d", len(got), len(recs))
	}
	for i := range got {
		if got[i].TsUnixNs != t0.Add(time.Duration(i)*time.Second).UnixNano() {
			t.Fatalf("row %d out of time order: %v", i, got[i].Time())
		}
		want := testMetric(i, time.Duration(i)*time.Second, float64(i))
		switch i {
		case 7:
			if !math.IsNaN(got[i].Value) {
				t.Fatalf("NaN came back as %v", got[i].Value)
			}
			continue
		case 8:
			want.Value = math.Inf(1)
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Fatalf("row %d: got %+v want %+v", i, got[i], want)
		}
	}
	fi, err := StatFile(mustList(t, dir)[0])
	if err != nil {
		t.Fatal(err)
	}
	if fi.Schema != MetricSchema || fi.Min == math.MinInt64 {
		t.Fatalf("schema %q min %d: want %s with time statistics", fi.Schema, fi.Min, MetricSchema)
	}
}

// Metrics kept in DIR.metrics do not disturb the readers of the dataset
// beside them, and each reader refuses the other's files.
func TestMetricsBesideResults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeAll(t, WriterOptions{Dir: dir}, []Result{testResult(1, 0), testResult(2, time.Second)})
	writeAll(t, WriterOptions{Dir: MetricsDir(dir)}, []Metric{testMetric(0, 0, 1)})
	if got := readAll[Result](t, []string{dir}, ReaderOptions{}); len(got) != 2 {
		t.Fatalf("results: got %d rows, want 2", len(got))
	}
	if got := readAll[Metric](t, []string{MetricsDir(dir)}, ReaderOptions{}); len(got) != 1 {
		t.Fatalf("metrics: got %d rows, want 1", len(got))
	}
	_, err := OpenReader[Metric](context.Background(), []string{mustList(t, dir)[0]}, ReaderOptions{})
	if !errors.Is(err, ErrBadFile) {
		t.Fatalf("metrics reader on a result file: got %v, want ErrBadFile", err)
	}
}

func TestCodecMetric(t *testing.T) {
	t.Parallel()
	m := testMetric(3, time.Minute, -0.125)
	var got Metric
	if err := decodeRecord(appendRecord(nil, &m), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("got %+v\nwant %+v", got, m)
	}
	enc := appendRecord(nil, &m)
	if err := decodeRecord(enc[:len(enc)-1], &got); err == nil {
		t.Fatal("truncated record decoded without error")
	}
}

func FuzzDecodeMetric(f *testing.F) {
	m := testMetric(1, 0, 2.5)
	f.Add(appendRecord(nil, &m))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var got Metric
		if decodeRecord(data, &got) != nil {
			return
		}
		again := appendRecord(nil, &got)
		var back Metric
		if err := decodeRecord(again, &back); err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
	})
}

func mustList(t *testing.T, dir string) []string {
	t.Helper()
	files, err := ListFiles([]string{dir})
	if err != nil || len(files) == 0 {
		t.Fatalf("list %s: %v (%d files)", dir, err, len(files))
	}
	return files
}
