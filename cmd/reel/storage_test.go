package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/store/storetest"
)

func setEnv(t *testing.T, env []string) {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// TestRecordToS3Kill records through the sidecar proxy into a real S3
// server (versitygw) whose uploads are throttled, sends SIGKILL while an
// upload is in flight, restarts the recorder on the same spool directory
// and checks that every exchange acknowledged before the last sync
// interval reached the bucket exactly once; then inspects and replays the
// recording straight from s3:// and writes the results to s3:// too.
func TestRecordToS3Kill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts recorder processes and an S3 server")
	}
	s3 := storetest.Start(t)
	bucket := s3.Bucket(t, "traffic")
	s3.Bucket(t, "results")
	direct := s3.Env()
	s3.Throttle(t, 256<<10) // uploads crawl, so the kill lands in one
	setEnv(t, s3.Env())

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"choices":[{"text":"ok"}],"usage":{"completion_tokens":1}}`))
	}))
	defer upstream.Close()
	url := bucket + "/gw"
	spool := t.TempDir()
	listen, metrics := freeAddr(t), freeAddr(t)
	const syncEvery = 100 * time.Millisecond
	args := []string{"record", "--listen", listen, "--upstream", upstream.URL, "--out", url, "--spool-dir", spool, "--raw",
		"--sync-every", syncEvery.String(), "--rotate-age", "500ms", "--metrics-listen", metrics, "--recorder-id", "s3kill", "--path", "/v1"}

	child := startRecorder(t, listen, args)
	acked := map[int]time.Time{}
	client := &http.Client{Timeout: 5 * time.Second}
	rng := rand.New(rand.NewPCG(7, 7))
	body := make([]byte, 2048) // incompressible: files of some size, uploads that take a while
	stop := time.Now().Add(6 * time.Second)
	inFlight := false
	for i := 0; time.Now().Before(stop) && i < 100000; i++ {
		for j := range body {
			body[j] = "abcdefghijklmnopqrstuvwxyz012345"[rng.IntN(32)]
		}
		req := fmt.Sprintf(`{"model":"m","prompt":%q}`, body)
		resp, err := client.Post("http://"+listen+"/v1/completions?i="+strconv.Itoa(i), "application/json", strings.NewReader(req))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		acked[i] = time.Now()
		if i%50 == 0 {
			m := "http://" + metrics + "/metrics"
			if scrapeSum(t, m, "reel_storage_uploads_total") >= 1 && scrapeSum(t, m, "reel_storage_upload_pending_files") >= 1 {
				inFlight = true
				break // one file is in the bucket, the next is being uploaded: kill now
			}
		}
		time.Sleep(500 * time.Microsecond)
	}
	if !inFlight {
		t.Fatal("no upload finished with another pending while traffic ran: the kill would not land mid-upload")
	}
	uploadedBefore := scrapeSum(t, "http://"+metrics+"/metrics", "reel_storage_uploads_total")
	dropped := scrapeSum(t, "http://"+metrics+"/metrics", "reel_recorder_dropped_total")
	killedAt := time.Now()
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	child.Wait()

	// Restart against the server directly (no throttle) and stop it: it
	// recovers the spool and uploads what the killed one left.
	setEnv(t, direct)
	child = startRecorder(t, listen, args)
	stopRecorder(t, child, "restarted recorder", 60*time.Second)
	filepath.WalkDir(spool, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			t.Errorf("%s left in the spool directory after a clean stop", p)
		}
		return nil
	})

	registerStores(envGetter(direct)) // this process reads the bucket too
	r, err := formats.OpenReader[formats.Exchange](context.Background(), []string{url}, formats.ReaderOptions{Columns: []string{"query"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]int{}
	for {
		x, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		i, err := strconv.Atoi(strings.TrimPrefix(x.Query, "i="))
		if err != nil {
			t.Fatalf("unexpected exchange ?%s", x.Query)
		}
		seen[i]++
	}
	r.Close()
	cutoff := killedAt.Add(-2 * syncEvery)
	lost, old := 0, 0
	for i, at := range acked {
		if seen[i] > 1 {
			t.Errorf("exchange %d recorded %d times", i, seen[i])
		}
		if at.Before(cutoff) {
			old++
			if seen[i] == 0 {
				lost++
			}
		}
	}
	t.Logf("%d acknowledged, %d before the cutoff, %d in the bucket, %v uploaded before the kill, %v dropped by the queue", len(acked), old, len(seen), uploadedBefore, dropped)
	if float64(lost) > dropped {
		t.Fatalf("%d of %d exchanges acknowledged before the cutoff are not in the bucket (%v dropped by the fail-open queue)", lost, old, dropped)
	}

	inspectAndReplay(t, url, "s3://results/run1", len(seen))
}

// inspectAndReplay runs reel inspect on a recording at a storage URL and
// replays it from there against a shadow, writing the results to another
// URL; both must see the recording's want exchanges.
func inspectAndReplay(t *testing.T, url, results string, want int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"inspect", url, "--json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("inspect %s: exit %d\n%s", url, code, stderr.String())
	}
	var sum inspectSummary
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Rows != int64(want) {
		t.Errorf("inspect says %d rows, want %d", sum.Rows, want)
	}
	var hits atomic.Int64 // handlers run concurrently
	shadow := httptest.NewServer(withModelsProbe(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"usage":{"completion_tokens":1}}`))
	}))
	defer shadow.Close()
	stdout.Reset()
	stderr.Reset()
	if code := dispatch(context.Background(), []string{"replay", url, "--target", shadow.URL, "--out", results, "--speed", "20",
		"--run-id", "storerun", "--quiet", "--allow-recorded-host"}, &stdout, &stderr); code != 0 {
		t.Fatalf("replay from %s: exit %d\n%s", url, code, stderr.String())
	}
	res, err := formats.ListFiles([]string{results})
	if err != nil || len(res) == 0 {
		t.Fatalf("no result files in %s: %v", results, err)
	}
	rr, err := formats.OpenReader[formats.Result](context.Background(), []string{results}, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rr.Close()
	rows := 0
	for {
		if _, err := rr.Next(); err != nil {
			break
		}
		rows++
	}
	if rows != want || int(hits.Load()) != want {
		t.Errorf("replay: %d result rows and %d requests, want %d", rows, hits.Load(), want)
	}
}

// envGetter looks keys up in a KEY=VALUE list, as registerStores reads
// the environment.
func envGetter(env []string) func(string) string {
	return func(k string) string {
		for _, kv := range env {
			if key, v, _ := strings.Cut(kv, "="); key == k {
				return v
			}
		}
		return ""
	}
}

// TestRecordToAzure records through the sidecar proxy into Azure Blob
// Storage (Azurite, a real server), configured the way a user does it
// (AZURE_STORAGE_CONNECTION_STRING), stops the recorder with SIGTERM, and
// reads, inspects and replays the recording from azblob://, with the
// results written to azblob:// too. (Crash safety is the same code above
// every backend: TestRecordToS3Kill.)
func TestRecordToAzure(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a recorder process and Azurite")
	}
	az := storetest.StartAzurite(t)
	container := az.Container(t, "traffic")
	az.Container(t, "results")
	setEnv(t, az.Env())
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"choices":[{"text":"ok"}],"usage":{"completion_tokens":1}}`))
	}))
	defer upstream.Close()
	url := container + "/gw"
	spool := t.TempDir()
	listen := freeAddr(t)
	child := startRecorder(t, listen, []string{"record", "--listen", listen, "--upstream", upstream.URL, "--out", url,
		"--spool-dir", spool, "--raw", "--sync-every", "100ms", "--rotate-age", "300ms", "--recorder-id", "az", "--path", "/v1"})
	client := &http.Client{Timeout: 5 * time.Second}
	const n = 300
	for i := range n {
		resp, err := client.Post("http://"+listen+"/v1/completions?i="+strconv.Itoa(i), "application/json",
			strings.NewReader(`{"model":"m","prompt":"hello"}`))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if i%100 == 99 {
			time.Sleep(400 * time.Millisecond) // a rotation, so the recording is several files
		}
	}
	stopRecorder(t, child, "recorder", 60*time.Second)

	registerStores(envGetter(az.Env()))
	files, err := formats.ListFiles([]string{url})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 || !strings.HasPrefix(files[0], url+"/dt=") {
		t.Fatalf("files in %s: %v, want several in the Hive layout", url, files)
	}
	got := 0
	r, err := formats.OpenReader[formats.Exchange](context.Background(), []string{url}, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := r.Next(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			break
		}
		got++
	}
	r.Close()
	if got != n {
		t.Fatalf("read %d exchanges from %s, recorded %d", got, url, n)
	}
	inspectAndReplay(t, url, "azblob://results/run1", n)
}
