package formats_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/formatstest"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/proxy"
)

// TestDiskFullNothingLostUncounted records through the sidecar onto a disk
// that fills up (a quota on the writer's files, no privileges needed) and
// restarts on the same directory once there is space again. Every exchange
// the proxy answered must end up either in a file or in
// dropped_total{reason}; the spool never holds an empty segment, and its
// size gauge matches the bytes on disk.
func TestDiskFullNothingLostUncounted(t *testing.T) {
	tests := []struct {
		name            string
		freeBeforeClose bool // space comes back while recording (else only for the restart)
	}{
		{"full until shutdown", false},
		{"space freed while recording", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"text":"`+randomHex(512)+`"}`)
			}))
			defer upstream.Close()

			wopts, quota := formats.WithDiskQuota(formats.WriterOptions{
				Dir: dir, Recorder: "full", RotateSize: 48 << 10, RowGroupRows: 40, SyncEvery: 20 * time.Millisecond,
			}, 256<<10)
			m := recorder.NewMetrics(nil)
			rec, w, err := recorder.OpenDataset(context.Background(), wopts, nil, recorder.Options{
				Pipeline: recorder.PipelineOptions{Metrics: m, Queue: 4096, QueueBytes: 1 << 30},
			})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(upstream.URL)
			p, err := proxy.New(proxy.Options{Upstream: u, Recorder: rec})
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(p)
			defer front.Close()

			const sent = 500
			answered := 0
			for i := range sent {
				resp, err := http.Post(front.URL+"/v1/embed?i="+strings.Repeat("x", i%3), "application/json",
					strings.NewReader(`{"input":"`+randomHex(1024)+`"}`))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					answered++
				}
			}
			if answered != sent {
				t.Fatalf("the proxy answered %d of %d: recording must never fail a request", answered, sent)
			}
			handled := func() float64 { return counter(m.Recorded) + droppedTotal(m) }
			waitUntil(t, func() bool { return handled() == float64(answered) })

			// The spool gauge reads bytes on disk, not frames waiting in
			// memory for a full disk; a sync may land between the two reads.
			waitUntil(t, func() bool { return w.Stats().SpoolBytes == spoolOnDisk(t, dir) })
			if n := emptySegments(t, dir); n > 0 {
				t.Errorf("%d empty spool segments", n)
			}
			if tt.freeBeforeClose {
				quota.SetLimit(1 << 40)
				waitUntil(t, func() bool { return w.Stats().SpoolBytes == spoolOnDisk(t, dir) && w.Stats().SpoolBytes > 0 })
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			closeErr := rec.Close(ctx) // fails while the disk is full: the spool stays
			if n := emptySegments(t, dir); n > 0 {
				t.Errorf("%d empty spool segments after Close", n)
			}
			recorded, lost := counter(m.Recorded), counter(m.Dropped.WithLabelValues(recorder.DropLost))
			dropped := droppedTotal(m)

			// Restart with space: recovery rebuilds what the spool holds.
			quota.SetLimit(1 << 40)
			w2, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: dir, Recorder: "restart"})
			if err != nil {
				t.Fatal(err)
			}
			recovered := w2.Stats().Recovered
			if err := w2.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			rows := countRows(t, dir)
			t.Logf("answered %d: recorded %v, dropped %v (lost %v, write errors %v); close: %v; after restart %d rows (%d recovered from the spool)",
				answered, recorded, dropped, lost, counter(m.Dropped.WithLabelValues(recorder.DropWrite)), closeErr, rows, recovered)
			if float64(rows)+dropped != float64(answered) {
				t.Errorf("answered %d = %d rows + %v counted drops? %v exchanges unaccounted for", answered, rows, dropped, float64(answered)-float64(rows)-dropped)
			}
			if float64(rows) != recorded-lost {
				t.Errorf("%d rows on disk, but exchanges_total %v − dropped{lost} %v = %v", rows, recorded, lost, recorded-lost)
			}
			if dropped+float64(recovered) == 0 {
				t.Fatal("nothing was dropped or recovered: the disk never filled, the test proved nothing")
			}
		})
	}
}

func counter(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func randomHex(n int) string {
	b := make([]byte, n/2)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func droppedTotal(m *recorder.Metrics) float64 {
	var n float64
	for _, r := range []string{recorder.DropQueueFull, recorder.DropQueueBytes, recorder.DropWrite, recorder.DropClosed, recorder.DropLost} {
		n += counter(m.Dropped.WithLabelValues(r))
	}
	return n
}

// waitUntil polls ok for up to 10 s.
func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	for range 1000 {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not reached within 10 s")
}

// spoolSegments calls f for every spool segment under dir.
func spoolSegments(t *testing.T, dir string, f func(fs.FileInfo)) {
	t.Helper()
	filepath.WalkDir(filepath.Join(dir, "_spool"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".wal") {
			if fi, err := d.Info(); err == nil {
				f(fi)
			}
		}
		return nil
	})
}

func spoolOnDisk(t *testing.T, dir string) int64 {
	var n int64
	spoolSegments(t, dir, func(fi fs.FileInfo) { n += fi.Size() })
	return n
}

func emptySegments(t *testing.T, dir string) int {
	n := 0
	spoolSegments(t, dir, func(fi fs.FileInfo) {
		if fi.Size() == 0 {
			n++
		}
	})
	return n
}

// countRows reads the dataset, failing on a duplicated (recorder, seq).
func countRows(t *testing.T, dir string) int {
	t.Helper()
	seen := map[int64]bool{}
	for _, x := range formatstest.Read[formats.Exchange](t, dir) {
		if seen[x.Seq] {
			t.Fatalf("seq %d stored twice", x.Seq)
		}
		seen[x.Seq] = true
	}
	return len(seen)
}

// TestSpoolRemovedWhileRecording removes the spool directory under a
// running recorder: it must be made again (counted, and said in the log),
// recording must go on into it, and every exchange must still end up in a
// file or be counted — now, and after a restart.
func TestSpoolRemovedWhileRecording(t *testing.T) {
	dir := t.TempDir()
	var warnings syncList
	m := recorder.NewMetrics(nil)
	rec, w, err := recorder.OpenDataset(context.Background(), formats.WriterOptions{
		Dir: dir, Recorder: "rm", SyncEvery: 20 * time.Millisecond,
	}, nil, recorder.Options{Pipeline: recorder.PipelineOptions{Metrics: m, Queue: 4096, Warn: warnings.add}})
	if err != nil {
		t.Fatal(err)
	}
	submit := func(n int) {
		for range n {
			r := rec.Begin(time.Now(), recorder.ConnInfo{ID: 1})
			r.SetRequest(recorder.Request{Method: "POST", Host: "gw", Path: "/v1/embed", Header: http.Header{}})
			r.RequestBody([]byte(`{"input":"` + randomHex(256) + `"}`))
			r.SetResponse(time.Now(), 200, http.Header{})
			rec.Submit(r.Finish(time.Now(), true))
		}
	}
	submit(200)
	waitUntil(t, func() bool { return counter(m.Recorded) == 200 && w.Stats().SpoolBytes > 0 })
	if err := os.RemoveAll(filepath.Join(dir, "_spool")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool { return w.Stats().SpoolRecreated == 1 })
	submit(200)
	waitUntil(t, func() bool { return counter(m.Recorded)+droppedTotal(m) == 400 })
	waitUntil(t, func() bool { return w.Stats().SpoolBytes > 0 && w.Stats().SpoolBytes == spoolOnDisk(t, dir) })
	if !warnings.contains("spool directory") || !warnings.contains("removed") {
		t.Errorf("no warning said the spool was removed and recreated: %q", warnings.all())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rec.Close(ctx); err != nil {
		t.Fatal(err)
	}
	w2, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: dir, Recorder: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, dropped := countRows(t, dir), droppedTotal(m)
	t.Logf("400 submitted: %d rows, %v dropped; warnings: %q", rows, dropped, warnings.all())
	if float64(rows)+dropped != 400 {
		t.Errorf("400 submitted = %d rows + %v counted drops? %v unaccounted for", rows, dropped, 400-float64(rows)-dropped)
	}
}

// syncList collects warnings from several goroutines.
type syncList struct {
	mu   sync.Mutex
	msgs []string
}

func (l *syncList) add(err error) {
	l.mu.Lock()
	l.msgs = append(l.msgs, err.Error())
	l.mu.Unlock()
}

func (l *syncList) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

func (l *syncList) contains(s string) bool {
	for _, m := range l.all() {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
