package formats

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// crash abandons a writer as a SIGKILL would after its last sync: nothing is
// flushed, closed or renamed; the spool lock is released.
func crash[T Record](w *Writer[T]) {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	for _, fw := range w.files {
		fw.f.Close()
	}
	if w.sess.f != nil {
		w.sess.f.Close()
	}
	w.sess.lock.Close()
}

func TestRecoverAfterCrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := WriterOptions{Dir: dir, Recorder: "rec-a", RotateSize: 32 << 10, RowGroupRows: 40, SyncEvery: time.Hour}
	w, err := NewWriter[Exchange](context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	const synced, unsynced = 1500, 37
	for i := range synced {
		x := testExchange(int64(i+1), time.Duration(i)*100*time.Millisecond) // crosses 10:00
		if err := w.Write(&x); err != nil {
			t.Fatal(err)
		}
	}
	w.mu.Lock()
	if err := w.sess.sync(); err != nil {
		t.Fatal(err)
	}
	closedBefore := w.stats.FilesClosed
	w.mu.Unlock()
	for i := synced; i < synced+unsynced; i++ { // buffered, never synced: lost by the crash
		x := testExchange(int64(i+1), time.Duration(i)*100*time.Millisecond)
		w.Write(&x)
	}
	crash(w)
	if closedBefore == 0 {
		t.Fatal("test needs files renamed before the crash")
	}

	w2, err := NewWriter[Exchange](context.Background(), WriterOptions{Dir: dir, Recorder: "rec-b"})
	if err != nil {
		t.Fatal(err)
	}
	if st := w2.Stats(); st.Recovered == 0 {
		t.Errorf("Stats.Recovered = 0 after a crash")
	}
	if err := w2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkPrefix(t, dir, synced, synced+unsynced)
	// Recovery is complete: a further writer finds nothing to do.
	w3, err := NewWriter[Exchange](context.Background(), WriterOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if st := w3.Stats(); st.Recovered != 0 {
		t.Errorf("second recovery recovered %d records again", st.Recovered)
	}
	w3.Close(context.Background())
	checkPrefix(t, dir, synced, synced+unsynced)
}

// checkPrefix asserts the dataset holds exactly seqs 1..n for some n in
// [atLeast, atMost], every file opens, and no temporary file is left.
func checkPrefix(t *testing.T, dir string, atLeast, atMost int) int {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "_") {
			t.Errorf("temporary file left behind: %s", path)
		}
		return nil
	})
	files, err := ListFiles([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, err := StatFile(f); err != nil {
			t.Errorf("file does not open: %v", err)
		}
	}
	got := readAll[Exchange](t, []string{dir}, ReaderOptions{})
	seen := map[int64]bool{}
	for _, x := range got {
		if seen[x.Seq] {
			t.Fatalf("seq %d stored twice", x.Seq)
		}
		seen[x.Seq] = true
	}
	for i := 1; i <= len(got); i++ {
		if !seen[int64(i)] {
			t.Fatalf("seq %d missing among %d records: not a prefix", i, len(got))
		}
	}
	if len(got) < atLeast || len(got) > atMost {
		t.Fatalf("recovered %d records, want between %d and %d", len(got), atLeast, atMost)
	}
	return len(got)
}

const childEnv = "REEL_FORMATS_KILL_CHILD"

// TestMain lets TestSIGKILL re-execute the test binary as a writer child.
func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		killChild(dir)
		return
	}
	os.Exit(m.Run())
}

// killChild writes exchanges stamped with the current time until killed,
// printing "seq unix_ns" after each Write returns.
func killChild(dir string) {
	w, err := NewWriter[Exchange](context.Background(), WriterOptions{
		Dir: dir, Recorder: "child", RotateSize: 128 << 10, RowGroupRows: 100, SyncEvery: 100 * time.Millisecond,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	out := os.Stdout
	for seq := int64(1); seq < 10_000_000; seq++ {
		x := testExchange(seq, 0)
		now := time.Now()
		x.Ts, x.TsUnixNs = now.UTC().Truncate(time.Microsecond), now.UnixNano()
		if err := w.Write(&x); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		fmt.Fprintf(out, "%d %d\n", seq, now.UnixNano())
		if seq%20 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	os.Exit(5)
}

// TestSIGKILL kills a writing child mid-stream: the directory reopens, every
// file in it reads cleanly, and only records written in about the last sync
// interval before the kill are lost.
func TestSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	written := map[int64]int64{} // seq → time Write returned
	sc := bufio.NewScanner(stdout)
	var killedAt time.Time
	started := time.Now()
	deadline := started.Add(60 * time.Second)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		seq, _ := strconv.ParseInt(f[0], 10, 64)
		ns, _ := strconv.ParseInt(f[1], 10, 64)
		written[seq] = ns
		if killedAt.IsZero() && (seq >= 3000 && time.Since(started) > 1500*time.Millisecond || time.Now().After(deadline)) {
			killedAt = time.Now()
			cmd.Process.Kill() // SIGKILL
		}
	}
	cmd.Wait()
	if killedAt.IsZero() {
		t.Fatalf("child stopped before the kill after %d records: %s", len(written), stderr.String())
	}
	const syncEvery, slack = 100 * time.Millisecond, 2 * time.Second // slack: a loaded 2-core machine
	w, err := NewWriter[Exchange](context.Background(), WriterOptions{Dir: dir, Recorder: "after"})
	if err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := checkPrefix(t, dir, 1, len(written))
	lostFrom, ok := written[int64(n+1)]
	if ok {
		lostWindow := killedAt.Sub(time.Unix(0, lostFrom))
		t.Logf("kill after %d records; %d stored (%d recovered from the spool); lost the last %v",
			len(written), n, st.Recovered, lostWindow)
		if lostWindow > syncEvery+slack {
			t.Errorf("lost records written %v before the kill; want at most SyncEvery (%v) + %v", lostWindow, syncEvery, slack)
		}
	}
}

func TestFrameReaderTornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _, err := openSession(dir, "r", t0, ExchangeSchema, map[string]string{"k": "v"}, true, osDisk{})
	if err != nil {
		t.Fatal(err)
	}
	var payloads [][]byte
	for i := range 5 {
		x := testExchange(int64(i), 0)
		p := appendRecord(nil, &x)
		payloads = append(payloads, p)
		if err := s.appendRecord(uint32(i), func(b []byte) []byte { return append(b, p...) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.sync(); err != nil {
		t.Fatal(err)
	}
	seg, err := os.ReadFile(filepath.Join(s.dir, segName(s.seg)))
	if err != nil {
		t.Fatal(err)
	}
	s.remove()
	for cut := 0; cut <= len(seg); cut++ {
		fr := newFrameReader(bytes.NewReader(seg[:cut]), int64(cut))
		n := 0
		var err error
		for {
			var kind byte
			var payload []byte
			kind, _, payload, err = fr.next()
			if err != nil {
				break
			}
			if kind == frameRecord {
				if !bytes.Equal(payload, payloads[n]) {
					t.Fatalf("cut %d: frame %d differs", cut, n)
				}
				n++
			}
		}
		if cut == len(seg) && (n != 5 || err != io.EOF) {
			t.Fatalf("whole segment: %d frames, %v", n, err)
		}
		if err != io.EOF && !errors.Is(err, errTorn) {
			t.Fatalf("cut %d: error %v", cut, err)
		}
	}
}

// FuzzFrameReader: any bytes give frames or an error, never a panic, and
// the reader ends within the input.
func FuzzFrameReader(f *testing.F) {
	x := testExchange(1, 0)
	var seg bytes.Buffer
	for _, p := range [][]byte{appendRecord(nil, &x), []byte("dt=2025/x.parquet")} {
		var fr []byte
		fr = append(fr, 0, 0, 0, 0, 0, 0, 0, 0, frameRecord, 3)
		fr = append(fr, p...)
		putFrameHeader(fr)
		seg.Write(fr)
	}
	f.Add(seg.Bytes())
	f.Add([]byte{})
	f.Add([]byte{255, 255, 255, 255, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		fr := newFrameReader(bytes.NewReader(data), int64(len(data)))
		for i := 0; ; i++ {
			if i > len(data) {
				t.Fatal("more frames than bytes")
			}
			kind, _, payload, err := fr.next()
			if err != nil {
				return
			}
			if kind == frameRecord {
				var x Exchange
				decodeRecord(payload, &x) // must not panic
				var r Result
				decodeRecord(payload, &r)
			}
		}
	})
}

func putFrameHeader(fr []byte) {
	body := fr[8:]
	fr[0], fr[1], fr[2], fr[3] = byte(len(body)), byte(len(body)>>8), byte(len(body)>>16), byte(len(body)>>24)
	c := crc32Castagnoli(body)
	fr[4], fr[5], fr[6], fr[7] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
}

// TestCodecEveryField fills every field of both types with non-zero values
// and checks the spool codec returns them: a field added to a type but not to
// the codec fails here.
func TestCodecEveryField(t *testing.T) {
	t.Parallel()
	t.Run("exchange", func(t *testing.T) {
		var x Exchange
		fillAll(reflect.ValueOf(&x).Elem())
		var got Exchange
		if err := decodeRecord(appendRecord(nil, &x), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, x) {
			t.Fatalf("got %+v\nwant %+v", got, x)
		}
	})
	t.Run("result", func(t *testing.T) {
		var r Result
		fillAll(reflect.ValueOf(&r).Elem())
		var got Result
		if err := decodeRecord(appendRecord(nil, &r), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("got %+v\nwant %+v", got, r)
		}
	})
}

func fillAll(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("s" + strconv.Itoa(i))
		case reflect.Int64, reflect.Int32:
			f.SetInt(int64(-1000 - i))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			s := reflect.MakeSlice(f.Type(), 2, 2)
			for j := range 2 {
				switch s.Index(j).Kind() {
				case reflect.Uint8:
					s.Index(j).SetUint(uint64(i + j))
				default:
					s.Index(j).SetInt(int64(-i - j))
				}
			}
			f.Set(s)
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]string{"k" + strconv.Itoa(i): "v"}))
		case reflect.Struct: // time.Time
			f.Set(reflect.ValueOf(time.Unix(1700000000+int64(i), 123456789).UTC()))
		case reflect.Pointer: // optional column
			p := reflect.New(f.Type().Elem())
			p.Elem().SetInt(int64(-1000 - i))
			f.Set(p)
		default:
			panic("fillAll: unhandled kind " + f.Kind().String())
		}
	}
}

func crc32Castagnoli(b []byte) uint32 { return crc32.Checksum(b, crcTable) }

// TestCloseGivesUpAtCtx: a Close whose ctx has ended closes no more files;
// their records stay in the spool, and the next writer on the directory
// recovers every one of them.
func TestCloseGivesUpAtCtx(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := NewWriter[Exchange](context.Background(), WriterOptions{Dir: dir, Recorder: "rec-a"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		x := testExchange(int64(i+1), time.Duration(i)*time.Second) // two hours: two open files
		if err := w.Write(&x); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with an ended ctx = %v, want context.Canceled", err)
	}
	if files, _ := ListFiles([]string{dir}); len(files) != 0 {
		t.Fatalf("%d files closed after the ctx ended", len(files))
	}
	w2, err := NewWriter[Exchange](context.Background(), WriterOptions{Dir: dir, Recorder: "rec-b"})
	if err != nil {
		t.Fatal(err)
	}
	if st := w2.Stats(); st.Recovered != n {
		t.Errorf("recovered %d records, want %d", st.Recovered, n)
	}
	if err := w2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkPrefix(t, dir, n, n)
}

// TestSessionStartAfterPredecessor: the session id (and so every file
// name) and the epoch of a writer are later than its predecessor's on the
// same directory, even when it starts in the same millisecond or after the
// clock stepped back; otherwise a writer to a bucket, whose local files are
// gone once uploaded, would reuse a name and overwrite an upload.
func TestSessionStartAfterPredecessor(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2025, 3, 14, 10, 30, 0, 0, time.UTC)
	var sids []string
	var last time.Time
	for i, now := range []time.Time{at, at, at.Add(-time.Hour), at.Add(time.Second)} {
		w, err := NewWriter[Exchange](context.Background(), WriterOptions{Dir: dir, Recorder: "gw", Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		for _, sid := range sids {
			if w.sid == sid {
				t.Fatalf("writer %d took session id %s again", i, sid)
			}
		}
		if !w.Epoch().After(last) {
			t.Errorf("writer %d: epoch %v, not after its predecessor's %v", i, w.Epoch(), last)
		}
		sids, last = append(sids, w.sid), w.Epoch()
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if want := "gw-20250314T103001.000Z"; sids[3] != want {
		t.Errorf("after the clock caught up: session %s, want %s (the clock's time again)", sids[3], want)
	}
}
