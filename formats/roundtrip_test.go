package formats

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 14, 9, 58, 0, 0, time.UTC)

// testExchange is a fully populated exchange at t0+offset.
func testExchange(seq int64, offset time.Duration) Exchange {
	ts := t0.Add(offset)
	body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hello %d"}],"stream":true}`, seq)
	return Exchange{
		Ts: ts.Truncate(time.Microsecond), TsUnixNs: ts.UnixNano(), Recorder: "rec-a", Seq: seq,
		ConnID: seq % 7, ConnSeq: int32(seq % 3), Session: "s1", Client: "10.0.0.1:5000",
		Method: "POST", Host: "gw", Path: "/v1/chat/completions", Query: "a=1",
		ReqHeaders:     map[string]string{"content-type": "application/json", "x-n": fmt.Sprint(seq)},
		ReqContentType: "application/json", ReqBody: []byte(body), ReqBodyBytes: int64(len(body)),
		Model: "m", Stream: true, MaxTokens: 64, PromptTokens: 12, PromptTokensSource: TokensFromUsage,
		PrefixHashes: []int64{-1, seq, 1 << 62}, Topic: "t",
		Status: 200, RespHeaders: map[string]string{"content-type": "text/event-stream"},
		RespContentType: "text/event-stream", RespBody: []byte("data: {}\n\n"), RespBodyBytes: 10,
		TTFBNs: 1000, DurationNs: 5_000_000 + seq, Events: 3, TTFTNs: 2000, EventGapsUs: []int32{5, 7},
		OutputTokens: 2, BatchSize: -1, QueueDepth: 4, Upstream: "u1",
		Context: map[string]string{"x-tenant": "t1"}, Complete: true, Error: "", RedactErr: "",
	}
}

func testResult(seq int64, offset time.Duration) Result {
	ts := t0.Add(offset).Truncate(time.Microsecond)
	return Result{
		RunID: "run1", Shard: 1, Recorder: "rec-a", Seq: seq, OrigTs: ts, Frame: ts.Truncate(5 * time.Second),
		ScheduledNs: int64(offset), SentUnixNs: ts.UnixNano() + 10, LagNs: 10, Status: 200,
		TTFBNs: 1, TTFTNs: 2, TTSTNs: 3, E2ENs: 4, E2ESchedNs: 5, Events: 6, OutputTokens: 7,
		ITLUs: []int32{1, 2, 3}, BytesSent: 100, BytesRecv: 200, BatchSize: -1, QueueDepth: -1,
		Method: "POST", Path: "/v1/completions", Model: "m", PromptTokens: 9,
	}
}

// writeAll writes recs with a fresh writer and closes it.
func writeAll[T Record](t testing.TB, opts WriterOptions, recs []T) Stats {
	t.Helper()
	w, err := NewWriter[T](context.Background(), opts)
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
	return w.Stats()
}

func readAll[T Record](t testing.TB, paths []string, opts ReaderOptions) []T {
	t.Helper()
	r, err := OpenReader[T](context.Background(), paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []T
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *rec)
	}
}

// shuffleNear swaps neighbours, as completion order does to start order.
func shuffleNear[T any](s []T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := 1; i < len(s); i++ {
		if rng.IntN(3) == 0 {
			s[i-1], s[i] = s[i], s[i-1]
		}
	}
}

func TestRoundTripExchange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts WriterOptions
		n    int
	}{
		{"one file", WriterOptions{}, 500},
		{"small row groups", WriterOptions{RowGroupRows: 17}, 500},
		{"rotation by size", WriterOptions{RotateSize: 16 << 10, RowGroupBytes: 8 << 10}, 2000},
		{"no spool", WriterOptions{NoSpool: true, RowGroupRows: 100}, 700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			want := make([]Exchange, tt.n)
			for i := range want {
				// 4 minutes across the 10:00 hour boundary: two partitions.
				want[i] = testExchange(int64(i+1), time.Duration(i)*240*time.Second/time.Duration(tt.n))
			}
			in := append([]Exchange(nil), want...)
			shuffleNear(in, 1)
			opts := tt.opts
			opts.Dir = dir
			opts.Recorder = "rec-a"
			st := writeAll(t, opts, in)
			if st.Records != int64(tt.n) {
				t.Errorf("Stats.Records = %d, want %d", st.Records, tt.n)
			}
			got := readAll[Exchange](t, []string{dir}, ReaderOptions{})
			if len(got) != len(want) {
				t.Fatalf("read %d records, want %d", len(got), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("record %d differs:\n got %+v\nwant %+v", i, got[i], want[i])
				}
			}
			files, _ := ListFiles([]string{dir})
			parts := map[string]bool{}
			for _, f := range files {
				parts[filepath.Base(filepath.Dir(filepath.Dir(f)))+"/"+filepath.Base(filepath.Dir(f))] = true
			}
			if !parts["dt=2025-03-14/hour=09"] || !parts["dt=2025-03-14/hour=10"] || len(parts) != 2 {
				t.Errorf("partitions = %v, want dt=2025-03-14/hour=09 and hour=10", parts)
			}
			if tt.opts.RotateSize > 0 && len(files) < 4 {
				t.Errorf("%d files, want rotation to produce more", len(files))
			}
			if _, err := os.Stat(filepath.Join(dir, spoolDirName)); err == nil {
				ents, _ := os.ReadDir(filepath.Join(dir, spoolDirName))
				if len(ents) != 1 || ents[0].Name() != sessionMarkName("rec-a") {
					t.Errorf("spool not removed on Close: %v (want only the session mark)", ents)
				}
			}
		})
	}
}

func TestRoundTripResult(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want := make([]Result, 300)
	for i := range want {
		want[i] = testResult(int64(i+1), time.Duration(i)*time.Second)
	}
	in := append([]Result(nil), want...)
	shuffleNear(in, 2)
	writeAll(t, WriterOptions{Dir: dir, Recorder: "replay-1", RowGroupRows: 50, RotateSize: 8 << 10}, in)
	if files, _ := ListFiles([]string{dir}); len(files) < 3 {
		t.Errorf("%d result files, want rotation to produce several", len(files))
	}
	got := readAll[Result](t, []string{filepath.Join(dir, "dt=*", "hour=*", "*.parquet")}, ReaderOptions{})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("results differ after round trip (%d vs %d records)", len(got), len(want))
	}
}

// TestMergeAcrossWriters: two recorders interleaved in time come back as one
// time-ordered stream, and a window selects [From, To).
func TestMergeAcrossWriters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var a, b []Exchange
	for i := range 1000 {
		x := testExchange(int64(i), time.Duration(i)*time.Millisecond)
		if i%3 == 0 {
			x.Recorder = "b"
			b = append(b, x)
		} else {
			x.Recorder = "a"
			a = append(a, x)
		}
	}
	writeAll(t, WriterOptions{Dir: dir, Recorder: "a", RowGroupRows: 64}, a)
	writeAll(t, WriterOptions{Dir: dir, Recorder: "b", RowGroupRows: 50}, b)
	got := readAll[Exchange](t, []string{dir}, ReaderOptions{BatchRows: 7})
	if len(got) != 1000 {
		t.Fatalf("read %d, want 1000", len(got))
	}
	for i, x := range got {
		if x.Seq != int64(i) {
			t.Fatalf("position %d holds seq %d: not in time order", i, x.Seq)
		}
	}
	from, to := t0.Add(100*time.Millisecond), t0.Add(250*time.Millisecond)
	got = readAll[Exchange](t, []string{dir}, ReaderOptions{From: from, To: to})
	if len(got) != 150 || got[0].Seq != 100 || got[149].Seq != 249 {
		t.Fatalf("window read %d records (first %d), want 150 from seq 100", len(got), got[0].Seq)
	}
}

func TestReaderBadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	recs := []Exchange{testExchange(1, 0), testExchange(2, time.Second)}
	writeAll(t, WriterOptions{Dir: dir, Recorder: "good"}, recs)
	files, err := ListFiles([]string{dir})
	if err != nil || len(files) != 1 {
		t.Fatalf("ListFiles = %v, %v", files, err)
	}
	good, _ := os.ReadFile(files[0])
	bad := filepath.Join(dir, "dt=2025-03-14", "hour=09", "zz-truncated.parquet")
	if err := os.WriteFile(bad, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = OpenReader[Exchange](context.Background(), []string{dir}, ReaderOptions{})
	if !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), "zz-truncated.parquet") {
		t.Fatalf("OpenReader on a truncated file: %v, want ErrBadFile naming it", err)
	}
	var warned []error
	got := readAll[Exchange](t, []string{dir}, ReaderOptions{SkipBad: true, Warn: func(err error) { warned = append(warned, err) }})
	if len(got) != 2 || len(warned) != 1 {
		t.Fatalf("SkipBad: read %d records with %d warnings, want 2 and 1", len(got), len(warned))
	}
	// A result reader on an exchange dataset names the schema.
	_, err = OpenReader[Result](context.Background(), files, ReaderOptions{})
	if err == nil || !strings.Contains(err.Error(), "exchange/1") {
		t.Fatalf("result reader on exchanges: %v", err)
	}
}

// TestSameSecondWriters: writers with the same recorder id opened in the
// same second never overwrite each other's files.
func TestSameSecondWriters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	now := func() time.Time { return t0 }
	for i := range 3 {
		writeAll(t, WriterOptions{Dir: dir, Recorder: "same", Now: now}, []Exchange{testExchange(int64(i), time.Duration(i))})
	}
	if got := readAll[Exchange](t, []string{dir}, ReaderOptions{}); len(got) != 3 {
		t.Fatalf("read %d records, want 3", len(got))
	}
}

// TestRotateByAge: an idle file is closed (renamed, readable) once it is
// RotateAge old, while writes go on around the background sync.
func TestRotateByAge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	w, err := NewWriter[Exchange](context.Background(), WriterOptions{
		Dir: dir, Recorder: "aged", RotateAge: time.Minute, SyncEvery: 5 * time.Millisecond, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		x := testExchange(int64(i+1), time.Duration(i)*time.Millisecond)
		if err := w.Write(&x); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(int64(2 * time.Minute))
	deadline := time.Now().Add(20 * time.Second)
	for w.Stats().FilesClosed == 0 {
		if time.Now().After(deadline) {
			t.Fatal("file not rotated by age within 20 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if files, _ := ListFiles([]string{dir}); len(files) != 1 {
		t.Fatalf("after rotation by age: %d complete files, want 1", len(files))
	}
	for i := 200; i < 300; i++ {
		x := testExchange(int64(i+1), time.Duration(i)*time.Millisecond)
		if err := w.Write(&x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.FilesClosed != 2 || st.Syncs == 0 {
		t.Errorf("Stats = %+v, want 2 files closed and some syncs", st)
	}
	if got := readAll[Exchange](t, []string{dir}, ReaderOptions{}); len(got) != 300 {
		t.Fatalf("read %d records, want 300", len(got))
	}
}

// TestReaderMemoryFlat: reading many files one after another keeps only the
// row groups overlapping the current time open, and a window opens only the
// row groups it overlaps.
func TestReaderMemoryFlat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const files, perFile = 30, 100
	for f := range files {
		recs := make([]Exchange, perFile)
		for i := range recs {
			recs[i] = testExchange(int64(f*perFile+i), time.Duration(f*perFile+i)*time.Second)
		}
		shuffleNear(recs, uint64(f))
		writeAll(t, WriterOptions{Dir: dir, Recorder: fmt.Sprintf("r%d", f), RowGroupRows: 25}, recs)
	}
	count := func(opts ReaderOptions) (n int, r *Reader[Exchange]) {
		r, err := OpenReader[Exchange](context.Background(), []string{dir}, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for {
			_, err := r.Next()
			if err == io.EOF {
				return n, r
			}
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	n, r := count(ReaderOptions{})
	if n != files*perFile {
		t.Fatalf("read %d records, want %d", n, files*perFile)
	}
	if r.maxOpen > 3 {
		t.Errorf("%d row groups open at once reading %d sequential files; want at most 3", r.maxOpen, files)
	}
	list, err := ListFiles([]string{dir}) // 30 recorders, one crossing an hour: 31 files
	if err != nil {
		t.Fatal(err)
	}
	if r.opened != len(list) || r.maxFiles > 3 || len(r.files) != 0 {
		t.Errorf("opened %d files (want each of %d once: one footer parse for all its row groups), at most %d at once (want ≤ 3), %d still open at the end",
			r.opened, len(list), r.maxFiles, len(r.files))
	}
	// 100 s in the middle: 4 or 5 row groups of 25 s, not all 120.
	n, r = count(ReaderOptions{From: t0.Add(1000 * time.Second), To: t0.Add(1100 * time.Second)})
	if n != 100 || r.started > 6 {
		t.Errorf("window: %d records from %d row groups; want 100 from at most 6", n, r.started)
	}
	if r.opened > 3 || len(r.files) != 0 {
		t.Errorf("window: opened %d files (want at most 3), %d still open at the end", r.opened, len(r.files))
	}
}
