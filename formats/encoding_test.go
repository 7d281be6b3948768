package formats

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// TestColumnEncodings: the files carry the encodings docs/schema.md
// promises for the columns where reel chooses one, as written and after
// compaction.
func TestColumnEncodings(t *testing.T) {
	t.Run("exchange", func(t *testing.T) {
		checkEncodings(t, exchangesOver(500, 10*time.Minute), map[string]format.Encoding{
			"ts":                           format.DeltaBinaryPacked,
			"ts_unix_ns":                   format.DeltaBinaryPacked,
			"seq":                          format.DeltaBinaryPacked,
			"duration_ns":                  format.DeltaBinaryPacked,
			"ttft_ns":                      format.DeltaBinaryPacked,
			"status":                       format.DeltaBinaryPacked,
			"prompt_tokens":                format.DeltaBinaryPacked,
			"event_gaps_us.list.element":   format.DeltaBinaryPacked,
			"req_headers.key_value.key":    format.RLEDictionary,
			"req_headers.key_value.value":  format.RLEDictionary,
			"resp_headers.key_value.value": format.RLEDictionary,
			"session":                      format.RLEDictionary,
			"req_body":                     format.DeltaLengthByteArray,
			"resp_body":                    format.DeltaLengthByteArray,
			"conn_id":                      format.Plain,
			"turn_key":                     format.Plain,
			"prefix_hashes.list.element":   format.Plain,
		})
	})
	t.Run("result", func(t *testing.T) {
		recs := make([]Result, 500)
		for i := range recs {
			recs[i] = testResult(int64(i+1), time.Duration(i)*time.Second)
		}
		checkEncodings(t, recs, map[string]format.Encoding{
			"orig_ts":             format.DeltaBinaryPacked,
			"sent_unix_ns":        format.DeltaBinaryPacked,
			"e2e_ns":              format.DeltaBinaryPacked,
			"ttft_ns":             format.DeltaBinaryPacked,
			"itl_us.list.element": format.DeltaBinaryPacked,
			"run_id":              format.RLEDictionary,
			"error":               format.DeltaLengthByteArray,
		})
	})
}

// checkEncodings writes recs and checks that the first file's columns
// carry want's encodings, as written and after compaction.
func checkEncodings[T Record](t *testing.T, recs []T, want map[string]format.Encoding) {
	dir := t.TempDir()
	writeAll(t, WriterOptions{Dir: dir, Recorder: "enc"}, recs)
	check := func(what string) {
		files, err := ListFiles([]string{dir})
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v %v", what, files, err)
		}
		f, err := os.Open(files[0])
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		pf, err := parquet.OpenFile(f, st.Size())
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, c := range pf.Metadata().RowGroups[0].Columns {
			path := strings.Join(c.MetaData.PathInSchema, ".")
			if enc, ok := want[path]; ok {
				seen[path] = true
				if !slices.Contains(c.MetaData.Encoding, enc) {
					t.Errorf("%s: column %s encoded %v, want %v", what, path, c.MetaData.Encoding, enc)
				}
			}
		}
		for path := range want {
			if !seen[path] {
				t.Errorf("%s: no column %s", what, path)
			}
		}
	}
	check("as written")
	if _, err := Compact(t.Context(), dir, CompactOptions{MinAge: -1, Level: testCompactLevel, TempDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	check("compacted")
}
