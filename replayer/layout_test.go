package replayer

import (
	"errors"
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
