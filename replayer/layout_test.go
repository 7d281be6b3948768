package replayer

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/formatstest"
)

// writeRun writes one result file of run id, shard s, into dir.
func writeRun(t *testing.T, dir, id string, s Shard) {
	t.Helper()
	o := Options{RunID: id, Selection: Selection{Shard: s}}
	row := &formats.Result{RunID: id, Seq: 1, OrigTs: time.Unix(1_780_000_000, 0).UTC()}
	formatstest.Write(t, dir, formats.WriterOptions{Recorder: "replay", Meta: ResultMeta(o, 1, []string{"data"})}, []*formats.Result{row})
}

func TestCheckResultsDirKeepsRunsApart(t *testing.T) {
	one, two := Shard{Index: 0, Count: 2}, Shard{Index: 1, Count: 2}
	for _, tc := range []struct {
		name     string
		existing []string // run ids already in the directory (shard one)
		runID    string
		explicit bool
		shard    Shard
		appendTo bool
		wantID   string // "" when refused
	}{
		{"empty location", nil, "r2", false, Shard{}, false, "r2"},
		{"another run is refused", []string{"r1"}, "r2", false, Shard{}, false, ""},
		{"the same shard again is refused", []string{"r1"}, "r1", true, one, false, ""},
		{"another shard of the same run lands beside it", []string{"r1"}, "r1", true, two, false, "r1"},
		{"--append joins the run there", []string{"r1"}, "r2", false, Shard{}, true, "r1"},
		{"--append with another explicit id is refused", []string{"r1"}, "r2", true, Shard{}, true, ""},
		{"--append to two runs is refused", []string{"r1", "r3"}, "r2", false, Shard{}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, id := range tc.existing {
				writeRun(t, dir+"/"+string(rune('a'+i)), id, one)
			}
			got, err := CheckResultsDir(dir, tc.runID, tc.explicit, tc.shard, tc.appendTo)
			if tc.wantID == "" {
				if !errors.Is(err, ErrOtherRun) {
					t.Fatalf("got id %q, err %v; want ErrOtherRun", got, err)
				}
				return
			}
			if err != nil || got != tc.wantID {
				t.Fatalf("got id %q, err %v; want %q", got, err, tc.wantID)
			}
		})
	}
}

func TestCheckResultsDirRefusesARecording(t *testing.T) {
	dir := t.TempDir()
	formatstest.Write(t, dir, formats.WriterOptions{}, []*formats.Exchange{{Ts: time.Unix(1_780_000_000, 0).UTC(), Seq: 1}})
	if _, err := CheckResultsDir(dir, "r1", false, Shard{}, false); !errors.Is(err, ErrOtherRun) {
		t.Fatalf("err %v, want ErrOtherRun for a recording", err)
	}
}

// resultRows makes n result rows of a streaming replay (four tokens, three
// gaps), in time order, as the collector hands them to the writer.
func resultRows(n int) []formats.Result {
	t0 := time.Unix(1_780_000_000, 0).UTC()
	rows := make([]formats.Result, n)
	for i := range rows {
		at := t0.Add(time.Duration(i) * 200 * time.Microsecond)
		rows[i] = formats.Result{RunID: "run-1", Recorder: "gw-1", Seq: int64(i), OrigTs: at, Frame: at.Truncate(5 * time.Second),
			ScheduledNs: int64(i) * 100_000, SentUnixNs: at.UnixNano(), LagNs: int64(i % 977), Status: 200,
			TTFBNs: 300_000 + int64(i%1013), TTFTNs: 300_000 + int64(i%1013), E2ENs: 900_000 + int64(i%4099), E2ESchedNs: 910_000 + int64(i%4099),
			Events: 5, OutputTokens: 4, ITLUs: []int32{int32(i % 97), int32(i % 89), int32(i % 83)}, BytesSent: 180, BytesRecv: 640,
			BatchSize: -1, QueueDepth: -1, Method: "POST", Path: "/v1/chat/completions", Model: "m", PromptTokens: int32(i%500 + 10)}
	}
	return rows
}

// TestResultWriterMemory: the heap a run's result writer holds while it
// writes (the open row group's column buffers, its time-ordering buffer,
// the compressor) stays within a bound the first row group of a file
// already reaches, and the files' row groups are ResultRowGroupRows long.
// With formats' default 1 MiB pages it held 47 MB.
func TestResultWriterMemory(t *testing.T) {
	const bound = 32 << 20
	rows := resultRows(2*ResultRowGroupRows + 1000)
	dir := t.TempDir()
	o := Options{RunID: "run-1"}
	wo := ResultWriterOptions(dir, o, 1, []string{"data"})
	wo.NoSpool = true // the spool's buffers are the same whatever the file shape
	var ms runtime.MemStats
	live := func() int64 {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	base := live()
	w, err := formats.NewWriter[formats.Result](context.Background(), wo)
	if err != nil {
		t.Fatal(err)
	}
	var peak int64
	for i := range rows {
		r := rows[i]
		r.ITLUs = slices.Clone(r.ITLUs) // the writer owns what it is given
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
		if i%2048 == 2047 {
			peak = max(peak, live()-base)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if peak > bound {
		t.Errorf("the result writer held %.1f MB at its peak, want at most %d MB", float64(peak)/1e6, bound>>20)
	}
	files, err := formats.ListFiles([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var groups, got int64
	for _, path := range files {
		fi, err := formats.StatFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range fi.RowGroups {
			groups++
			got += g.Rows
			if g.Rows > ResultRowGroupRows {
				t.Errorf("%s: a row group of %d rows, want at most %d", path, g.Rows, ResultRowGroupRows)
			}
		}
	}
	if got != int64(len(rows)) || groups < 3 {
		t.Errorf("%d rows in %d row groups, want %d in at least 3", got, groups, len(rows))
	}
	t.Logf("peak %.1f MB over %d rows in %d row groups", float64(peak)/1e6, got, groups)
}
