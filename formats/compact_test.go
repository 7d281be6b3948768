package formats

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go/compress/zstd"
)

// testCompactLevel keeps the compaction tests' CPU low: what they check
// does not depend on the zstd level.
const testCompactLevel = zstd.SpeedFastest

// compactFixture writes three recorders' small files over two hours (t0 is
// 09:58, so the records straddle 10:00) and returns the dataset's records
// as "recorder/seq" keys.
func compactFixture(t *testing.T, dir string) map[string]bool {
	t.Helper()
	want := map[string]bool{}
	for r, rec := range []string{"gw-a", "gw-b", "gw-c"} {
		var recs []Exchange
		for i := range 200 {
			x := testExchange(int64(i+1), time.Duration(i*3+r)*time.Second/2) // interleaved in time across recorders
			x.Recorder = rec
			recs = append(recs, x)
			want[fmt.Sprintf("%s/%d", rec, i+1)] = true
		}
		writeAll(t, WriterOptions{Dir: dir, Recorder: rec, RotateSize: 12 << 10, NoSpool: true}, recs)
	}
	return want
}

// checkDataset reads the dataset the way every reel command does and
// checks it holds exactly want, each once, in time order.
func checkDataset(t *testing.T, dir string, want map[string]bool) {
	t.Helper()
	got := readAll[Exchange](t, []string{dir}, ReaderOptions{})
	seen := map[string]int{}
	for i, x := range got {
		seen[fmt.Sprintf("%s/%d", x.Recorder, x.Seq)]++
		if i > 0 && x.TsUnixNs < got[i-1].TsUnixNs {
			t.Fatalf("row %d out of time order", i)
		}
	}
	for k, n := range seen {
		if n != 1 || !want[k] {
			t.Fatalf("record %s seen %d times (wanted: %v)", k, n, want[k])
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("%d records read, want %d", len(seen), len(want))
	}
}

func partitionFiles(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, f := range mustList(t, dir) {
		rel, _ := filepath.Rel(dir, f)
		out[filepath.ToSlash(filepath.Dir(rel))] = append(out[filepath.ToSlash(filepath.Dir(rel))], filepath.Base(f))
	}
	return out
}

func TestCompactMerges(t *testing.T) {
	dir := t.TempDir()
	want := compactFixture(t, dir)
	before := partitionFiles(t, dir)
	if len(before) != 2 || len(before["dt=2025-03-14/hour=09"]) < 3 || len(before["dt=2025-03-14/hour=10"]) < 3 {
		t.Fatalf("fixture: want two hours of several files each, have %v", before)
	}
	hours, err := Compact(context.Background(), dir, CompactOptions{MinAge: -1, Level: testCompactLevel})
	if err != nil {
		t.Fatal(err)
	}
	if len(hours) != 2 || hours[0].Action != "compacted" || hours[1].Action != "compacted" {
		t.Fatalf("compact: %+v", hours)
	}
	after := partitionFiles(t, dir)
	for part, files := range after {
		if !slices.Equal(files, []string{compactName(1, 1, 1)}) {
			t.Errorf("%s: after compaction %v, want one compacted file", part, files)
		}
	}
	checkDataset(t, dir, want)
	// The merged file is one time-sorted run: row groups in order, not
	// overlapping.
	for part := range after {
		fi, err := StatFile(filepath.Join(dir, filepath.FromSlash(part), compactName(1, 1, 1)))
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(fi.RowGroups); i++ {
			if fi.RowGroups[i].Min < fi.RowGroups[i-1].Max {
				t.Errorf("%s: row group %d starts before %d ends", part, i, i-1)
			}
		}
		if got := fi.Meta[MetaRecorder]; got != "gw-a,gw-b,gw-c" {
			t.Errorf("%s: recorder metadata %q", part, got)
		}
		if len(strings.Split(fi.Meta[MetaReplaces], ",")) != len(before[part]) {
			t.Errorf("%s: replaces %q, want the %d sources", part, fi.Meta[MetaReplaces], len(before[part]))
		}
	}
	// Idempotent: a second run changes nothing.
	hours, err = Compact(context.Background(), dir, CompactOptions{MinAge: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hours {
		if h.Action != "done" {
			t.Errorf("rerun: %+v", h)
		}
	}
	// Late files (a recorder recovering its spool into an old hour) are
	// merged with the set by the next run.
	late := testExchange(9999, 30*time.Second)
	late.Recorder = "gw-late"
	writeAll(t, WriterOptions{Dir: dir, Recorder: "gw-late", NoSpool: true}, []Exchange{late})
	want["gw-late/9999"] = true
	if _, err := Compact(context.Background(), dir, CompactOptions{MinAge: -1}); err != nil {
		t.Fatal(err)
	}
	if files := partitionFiles(t, dir)["dt=2025-03-14/hour=09"]; !slices.Equal(files, []string{compactName(2, 1, 1)}) {
		t.Errorf("after the late file: %v", files)
	}
	checkDataset(t, dir, want)
}

func TestCompactMinAge(t *testing.T) {
	dir := t.TempDir()
	compactFixture(t, dir)
	now := t0.Add(30 * time.Minute) // 10:28: the 10:00 hour is still being written
	hours, err := Compact(context.Background(), dir, CompactOptions{Now: func() time.Time { return now }, MinAge: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(hours) != 1 || hours[0].Partition != "dt=2025-03-14/hour=09" {
		t.Fatalf("compacted %+v, want only the 09:00 hour", hours)
	}
}

// TestCompactCrash kills a compaction (a crash hook that stops it, leaving
// what was written, as SIGKILL would) at every step it takes, with several
// parts per set, and checks after each: the dataset reads exactly the
// original records, and a rerun finishes the work.
func TestCompactCrash(t *testing.T) {
	errKilled := errors.New("killed")
	opts := CompactOptions{MinAge: -1, FileSize: 16 << 10, RowGroupRows: 64, Level: testCompactLevel}
	// List the steps of an uninterrupted run first; kill at the first and
	// last of each kind.
	ref := t.TempDir()
	want := compactFixture(t, ref)
	var steps []string
	o := opts
	o.crash = func(step string) error { steps = append(steps, step); return nil }
	if _, err := Compact(context.Background(), ref, o); err != nil {
		t.Fatal(err)
	}
	refFiles := partitionFiles(t, ref)
	if n := len(refFiles["dt=2025-03-14/hour=09"]); n < 2 {
		t.Fatalf("want several parts per set for this test, got %v", refFiles)
	}
	var kills []int
	for i, s := range steps {
		if i == 0 || i == len(steps)-1 || steps[i-1] != s || i+1 < len(steps) && steps[i+1] != s {
			kills = append(kills, i+1)
		}
	}
	for _, kill := range kills {
		t.Run(fmt.Sprintf("kill-at-step-%d-of-%d", kill, len(steps)), func(t *testing.T) {
			dir := t.TempDir()
			compactFixture(t, dir)
			n := 0
			var at string
			o := opts
			o.crash = func(step string) error {
				n++
				if n == kill {
					at = step
					return errKilled
				}
				return nil
			}
			if _, err := Compact(context.Background(), dir, o); !errors.Is(err, errKilled) {
				t.Fatalf("compact: %v, want the kill", err)
			}
			checkDataset(t, dir, want) // mid-compaction: readable, no row twice
			hours, err := Compact(context.Background(), dir, opts)
			if err != nil {
				t.Fatalf("rerun after a kill at %s: %v", at, err)
			}
			checkDataset(t, dir, want)
			for part, files := range partitionFiles(t, dir) {
				for _, f := range files {
					if _, ok := parseCompactName(f); !ok {
						t.Errorf("after the rerun, %s still holds %s (killed at %s; rerun %+v)", part, f, at, hours)
					}
				}
			}
			hours, err = Compact(context.Background(), dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range hours {
				if h.Action != "done" {
					t.Errorf("third run: %+v", h)
				}
			}
		})
	}
}

func TestViewPartition(t *testing.T) {
	replaces := map[string][]string{
		"compact.g1-1of2.parquet": {"a.parquet", "b.parquet"},
		"compact.g2-1of1.parquet": {"compact.g1-1of2.parquet", "compact.g1-2of2.parquet", "a.parquet", "b.parquet", "c.parquet"},
	}
	lookup := func(base string) ([]string, error) { return replaces[base], nil }
	for _, tc := range []struct {
		name  string
		files []string
		want  []string
	}{
		{"no compaction", []string{"a.parquet", "b.parquet"}, []string{"a.parquet", "b.parquet"}},
		{"incomplete set hidden", []string{"a.parquet", "b.parquet", "compact.g1-1of2.parquet"}, []string{"a.parquet", "b.parquet"}},
		{"complete set hides sources", []string{"a.parquet", "b.parquet", "compact.g1-1of2.parquet", "compact.g1-2of2.parquet"},
			[]string{"compact.g1-1of2.parquet", "compact.g1-2of2.parquet"}},
		{"new file beside a set", []string{"c.parquet", "compact.g1-1of2.parquet", "compact.g1-2of2.parquet"},
			[]string{"c.parquet", "compact.g1-1of2.parquet", "compact.g1-2of2.parquet"}},
		{"newer set hides older set and what it hid", []string{"a.parquet", "c.parquet", "compact.g1-1of2.parquet", "compact.g1-2of2.parquet", "compact.g2-1of1.parquet"},
			[]string{"compact.g2-1of1.parquet"}},
		{"parts disagreeing on n never complete", []string{"a.parquet", "compact.g1-1of2.parquet", "compact.g1-2of3.parquet"}, []string{"a.parquet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := viewPartition(tc.files, lookup)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(v.visible, tc.want) {
				t.Errorf("visible %v, want %v", v.visible, tc.want)
			}
		})
	}
}

func TestRecorderIDNotACompactionName(t *testing.T) {
	_, err := NewWriter[Exchange](context.Background(), WriterOptions{Dir: t.TempDir(), Recorder: "compact.x"})
	if err == nil {
		t.Fatal("recorder id compact.x accepted")
	}
}

func TestGlobRegexp(t *testing.T) {
	for _, tc := range []struct {
		glob, path string
		want       bool
	}{
		{"**/*.parquet", "dt=x/hour=01/a.parquet", true},
		{"**/*.parquet", "a.parquet", true},
		{"dt=*/hour=1?/*.parquet", "dt=x/hour=12/a.parquet", true},
		{"dt=*/hour=1?/*.parquet", "dt=x/hour=02/a.parquet", false},
		{"*.parquet", "dt=x/a.parquet", false},
		{"dt=[!y]/**", "dt=x/hour=01/a.parquet", true},
	} {
		re, err := globRegexp(tc.glob)
		if err != nil {
			t.Fatal(err)
		}
		if re.MatchString(tc.path) != tc.want {
			t.Errorf("%s ~ %s: %v", tc.glob, tc.path, !tc.want)
		}
	}
}
