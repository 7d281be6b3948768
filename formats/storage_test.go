package formats

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reelkit/reel/formats/store"
	"github.com/reelkit/reel/formats/store/s3store"
	"github.com/reelkit/reel/formats/store/storetest"
)

// countingTransport counts the response bytes of GET requests: what the
// reader fetched from the bucket.
type countingTransport struct {
	base http.RoundTripper
	got  atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil && r.Method == http.MethodGet {
		resp.Body = countingBody{resp.Body, &c.got}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func exchangesOver(n int, span time.Duration) []Exchange {
	recs := make([]Exchange, n)
	for i := range recs {
		recs[i] = testExchange(int64(i+1), time.Duration(i)*span/time.Duration(n))
	}
	return recs
}

// TestS3Dataset writes a dataset to a real S3 server, lists and reads it
// back by URL in the Hive layout, checks that a column projection fetches
// only part of the objects, and compacts it in place.
func TestS3Dataset(t *testing.T) {
	s := storetest.Start(t)
	bucket := s.Bucket(t, "traffic")
	ct := &countingTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
	o := s.Options()
	o.Transport = ct
	store.Register("s3", s3store.Opener(o))
	t.Cleanup(func() { store.Refuse("s3", "test over") })

	url := bucket + "/gw1"
	spool := t.TempDir()
	recs := exchangesOver(3000, 20*time.Minute) // 09:58 → 10:18: two hours
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range recs { // bodies that do not compress away, so a file is much more than its footer
		b := make([]byte, 1024)
		for j := range b {
			b[j] = "0123456789abcdef"[rng.IntN(16)]
		}
		recs[i].RespBody = b
	}
	st := writeAll(t, WriterOptions{Dir: url, SpoolDir: spool, Recorder: "gw1", RotateSize: 512 << 10}, recs)
	if st.FilesClosed < 4 || st.Uploaded != st.FilesClosed || st.UploadPending != 0 || st.UploadErrors != 0 {
		t.Fatalf("stats %+v: want every closed file uploaded", st)
	}
	filepath.WalkDir(spool, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			t.Errorf("%s still in the spool directory after its upload", p)
		}
		return nil
	})
	files, err := ListFiles([]string{url})
	if err != nil {
		t.Fatal(err)
	}
	hive := regexp.MustCompile(`^s3://traffic/gw1/dt=2025-03-14/hour=(09|10)/gw1-[0-9TZ.]+-[0-9]+\.parquet$`)
	for _, f := range files {
		if !hive.MatchString(f) {
			t.Errorf("listed %s: not the Hive layout under the URL", f)
		}
	}
	if int64(len(files)) != st.FilesClosed {
		t.Fatalf("listed %d files, %d were uploaded", len(files), st.FilesClosed)
	}
	globbed, err := ListFiles([]string{url + "/**/*.parquet"})
	if err != nil || len(globbed) != len(files) {
		t.Fatalf("glob listed %d files (%v), want %d", len(globbed), err, len(files))
	}
	var total int64
	for _, f := range files {
		fi, err := StatFile(f)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size
	}

	got := readAll[Exchange](t, []string{url}, ReaderOptions{})
	if len(got) != len(recs) {
		t.Fatalf("read %d records back, wrote %d", len(got), len(recs))
	}
	for i := range got {
		if got[i].Seq != recs[i].Seq || string(got[i].ReqBody) != string(recs[i].ReqBody) {
			t.Fatalf("record %d: seq %d, want %d", i, got[i].Seq, recs[i].Seq)
		}
	}

	ct.got.Store(0)
	proj := readAll[Exchange](t, []string{url}, ReaderOptions{Columns: []string{"method"}})
	if len(proj) != len(recs) {
		t.Fatalf("projection read %d records", len(proj))
	}
	if fetched := ct.got.Load(); fetched*3 > total {
		t.Errorf("reading one column fetched %d of the objects' %d bytes: want ranged reads of the needed chunks", fetched, total)
	} else {
		t.Logf("reading one column fetched %d of %d bytes", fetched, total)
	}

	hours, err := Compact(context.Background(), url, CompactOptions{MinAge: -1, Level: testCompactLevel, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(hours) != 2 || hours[0].Action != "compacted" {
		t.Fatalf("compact: %+v", hours)
	}
	files, err = ListFiles([]string{url})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || !strings.HasSuffix(files[0], "/"+compactName(1, 1, 1)) {
		t.Fatalf("after compaction: %v", files)
	}
	if got := readAll[Exchange](t, []string{url}, ReaderOptions{}); len(got) != len(recs) {
		t.Fatalf("after compaction: %d records, want %d", len(got), len(recs))
	}
}

// TestS3UploadRetryAndRestart: a bucket that does not exist yet fails
// every upload (counted, retried, never failing Write); Close gives up
// after UploadWait and leaves the files in the spool directory; once the
// bucket exists, the next writer on that directory uploads them.
func TestS3UploadRetryAndRestart(t *testing.T) {
	s := storetest.Start(t)
	s.Register(t)
	url := "s3://late/gw"
	spool := t.TempDir()
	recs := exchangesOver(500, 5*time.Minute)
	w, err := NewWriter[Exchange](context.Background(), WriterOptions{Dir: url, SpoolDir: spool, Recorder: "gw",
		RotateSize: 16 << 10, UploadWait: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			t.Fatalf("write %d: %v (a failing bucket must not fail Write)", i, err)
		}
	}
	err = w.Close(context.Background())
	st := w.Stats()
	if err == nil || !strings.Contains(err.Error(), "not uploaded") {
		t.Fatalf("close: %v, want the files not uploaded reported", err)
	}
	if st.UploadErrors == 0 || st.Uploaded != 0 || st.UploadPending != st.FilesClosed {
		t.Fatalf("stats %+v: want failed attempts counted and every file pending", st)
	}
	s.Bucket(t, "late")
	w2, err := NewWriter[Exchange](context.Background(), WriterOptions{Dir: url, SpoolDir: spool, Recorder: "gw"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st2 := w2.Stats(); st2.Uploaded != st.FilesClosed {
		t.Fatalf("restarted writer uploaded %d files, the first left %d", st2.Uploaded, st.FilesClosed)
	}
	if got := readAll[Exchange](t, []string{url}, ReaderOptions{}); len(got) != len(recs) {
		t.Fatalf("read %d records, wrote %d", len(got), len(recs))
	}
}

// TestUnsupportedURL: a URL no backend serves is a clear error, never a
// local directory named after the scheme.
func TestUnsupportedURL(t *testing.T) {
	dir := t.TempDir()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	store.Refuse("azblob", "not in this build")
	for _, u := range []string{"azblob://container/prefix", "nosuch://bucket/p"} {
		if _, err := NewWriter[Exchange](context.Background(), WriterOptions{Dir: u}); !errors.Is(err, store.ErrUnsupported) {
			t.Errorf("NewWriter(%s): %v, want ErrUnsupported", u, err)
		}
		if _, err := ListFiles([]string{u}); !errors.Is(err, store.ErrUnsupported) {
			t.Errorf("ListFiles(%s): %v, want ErrUnsupported", u, err)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("left %s in the working directory", e.Name())
	}
}

// TestS3RestartSameInstant: a recorder restarted within the same
// millisecond as its predecessor (here: a clock that stands still, then
// steps back) names its files apart from the ones already uploaded, so no
// upload overwrites another.
func TestS3RestartSameInstant(t *testing.T) {
	s := storetest.Start(t)
	s.Register(t)
	url := s.Bucket(t, "restart") + "/gw"
	spool := t.TempDir()
	recs := exchangesOver(600, 3*time.Minute)
	start := time.Date(2025, 3, 14, 10, 30, 0, 0, time.UTC)
	for i, now := range []time.Time{start, start, start.Add(-time.Minute)} {
		part := recs[i*200 : (i+1)*200]
		st := writeAll(t, WriterOptions{Dir: url, SpoolDir: spool, Recorder: "gw", Now: func() time.Time { return now }}, part)
		if st.Uploaded != st.FilesClosed || st.FilesClosed == 0 {
			t.Fatalf("writer %d: stats %+v, want every file uploaded", i, st)
		}
	}
	files, err := ListFiles([]string{url})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Errorf("bucket holds %v, want one file per writer", files)
	}
	if got := readAll[Exchange](t, []string{url}, ReaderOptions{}); len(got) != len(recs) {
		t.Fatalf("read %d records back, the three writers wrote %d: an upload overwrote another", len(got), len(recs))
	}
}

// TestAzureDataset writes a dataset to Azure Blob Storage (Azurite), reads
// it back by URL in the Hive layout, compacts it in place and reads it
// again.
func TestAzureDataset(t *testing.T) {
	a := storetest.StartAzurite(t)
	a.Register(t)
	url := a.Container(t, "traffic") + "/gw1"
	recs := exchangesOver(2000, 20*time.Minute) // 09:58 → 10:18: two hours
	st := writeAll(t, WriterOptions{Dir: url, SpoolDir: t.TempDir(), Recorder: "gw1", RotateSize: 64 << 10}, recs)
	if st.FilesClosed < 3 || st.Uploaded != st.FilesClosed || st.UploadErrors != 0 {
		t.Fatalf("stats %+v: want every closed file uploaded", st)
	}
	files, err := ListFiles([]string{url + "/**/*.parquet"})
	if err != nil {
		t.Fatal(err)
	}
	hive := regexp.MustCompile(`^azblob://traffic/gw1/dt=2025-03-14/hour=(09|10)/gw1-[0-9TZ.]+-[0-9]+\.parquet$`)
	for _, f := range files {
		if !hive.MatchString(f) {
			t.Errorf("listed %s: not the Hive layout under the URL", f)
		}
	}
	if int64(len(files)) != st.FilesClosed {
		t.Fatalf("listed %d files, %d were uploaded", len(files), st.FilesClosed)
	}
	check := func(when string) {
		t.Helper()
		got := readAll[Exchange](t, []string{url}, ReaderOptions{})
		if len(got) != len(recs) {
			t.Fatalf("%s: read %d records, wrote %d", when, len(got), len(recs))
		}
		for i := range got {
			if got[i].Seq != recs[i].Seq || string(got[i].ReqBody) != string(recs[i].ReqBody) {
				t.Fatalf("%s: record %d is seq %d, want %d", when, i, got[i].Seq, recs[i].Seq)
			}
		}
	}
	check("written")
	hours, err := Compact(context.Background(), url, CompactOptions{MinAge: -1, Level: testCompactLevel, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(hours) != 2 || hours[0].Action != "compacted" {
		t.Fatalf("compact: %+v", hours)
	}
	if files, err = ListFiles([]string{url}); err != nil || len(files) != 2 {
		t.Fatalf("after compaction: %v, %v", files, err)
	}
	check("compacted")
}
