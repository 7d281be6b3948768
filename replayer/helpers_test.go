package replayer

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/formatstest"
)

// sliceSource replays in-memory exchanges (already in time order).
type sliceSource struct {
	xs []*formats.Exchange
	i  int
}

func (s *sliceSource) Next() (*formats.Exchange, error) {
	if s.i >= len(s.xs) {
		return nil, io.EOF
	}
	s.i++
	return s.xs[s.i-1], nil
}
func (s *sliceSource) Close() error { return nil }

// sliceOpener opens xs as a dataset, honouring the window like formats.Reader.
func sliceOpener(xs []*formats.Exchange) Opener {
	return func(_ context.Context, from, to time.Time) (Source, error) {
		var out []*formats.Exchange
		for _, x := range xs {
			if (!from.IsZero() && x.TsUnixNs < from.UnixNano()) || (!to.IsZero() && x.TsUnixNs >= to.UnixNano()) {
				continue
			}
			out = append(out, x)
		}
		return &sliceSource{xs: out}, nil
	}
}

// exchangeAt builds a recorded completion request at t with id seq.
func exchangeAt(t time.Time, seq int64, conn int64) *formats.Exchange {
	return &formats.Exchange{
		Ts: t, TsUnixNs: t.UnixNano(), Recorder: "gw-1", Seq: seq, ConnID: conn,
		Method: "POST", Host: "gateway.prod.example", Path: "/v1/completions", Query: "i=" + strconv.FormatInt(seq, 10),
		ReqHeaders:     map[string]string{"Content-Type": "application/json", "Authorization": "Bearer prod-secret"},
		ReqContentType: "application/json",
		ReqBody:        []byte(`{"model":"m","prompt":"hi","max_tokens":16}`),
		Model:          "m", PromptTokens: 100, OutputTokens: 16, Status: 200,
	}
}

// evenTrace is n exchanges every gap from start, on conns connections.
func evenTrace(start time.Time, n int, gap time.Duration, conns int64) []*formats.Exchange {
	xs := make([]*formats.Exchange, n)
	for i := range xs {
		xs[i] = exchangeAt(start.Add(time.Duration(i)*gap), int64(i+1), int64(i)%conns+1)
	}
	return xs
}

// azureTrace reads the first span of ../shared/traces/azure-llm-conv-2023.csv
// as exchanges (ContextTokens → prompt, GeneratedTokens → output).
func azureTrace(tb testing.TB, span time.Duration) []*formats.Exchange {
	tb.Helper()
	f, err := os.Open("../../shared/traces/azure-llm-conv-2023.csv")
	if err != nil {
		tb.Skipf("azure trace not available: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	var xs []*formats.Exchange
	var first time.Time
	for sc.Scan() {
		parts := strings.Split(sc.Text(), ",")
		if len(parts) != 3 {
			continue
		}
		t, err := time.Parse("2006-01-02 15:04:05.9999999", parts[0])
		if err != nil {
			tb.Fatalf("trace time %q: %v", parts[0], err)
		}
		if first.IsZero() {
			first = t
		}
		if t.Sub(first) >= span {
			break
		}
		in, _ := strconv.Atoi(parts[1])
		out, _ := strconv.Atoi(parts[2])
		x := exchangeAt(t.UTC(), int64(len(xs)+1), int64(len(xs))%64+1)
		x.PromptTokens, x.OutputTokens = int32(in), int32(out)
		x.ReqBody = fmt.Appendf(nil, `{"model":"m","prompt":"p","max_tokens":%d}`, out)
		xs = append(xs, x)
	}
	return xs
}

// arrivals is a loopback target that timestamps each request (mono ns) by
// the id in its query.
type arrivals struct {
	mu    sync.Mutex // guards at, conns
	at    map[int64]int64
	conns map[string][]int64 // remote address → ids in arrival order
	srv   *httptest.Server
	// handle, when set, runs after the arrival is recorded.
	handle func(w http.ResponseWriter, r *http.Request, id int64)
}

func newArrivals(tb testing.TB, handle func(w http.ResponseWriter, r *http.Request, id int64)) *arrivals {
	a := &arrivals{at: map[int64]int64{}, conns: map[string][]int64{}, handle: handle}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := mono()
		id, _ := strconv.ParseInt(r.URL.Query().Get("i"), 10, 64)
		a.mu.Lock()
		if _, dup := a.at[id]; dup {
			a.at[-id] = now // marks a duplicate
		}
		a.at[id] = now
		a.conns[r.RemoteAddr] = append(a.conns[r.RemoteAddr], id)
		a.mu.Unlock()
		io.Copy(io.Discard, r.Body)
		if a.handle != nil {
			a.handle(w, r, id)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Batch-Size", "3")
		io.WriteString(w, `{"usage":{"completion_tokens":16}}`)
	}))
	tb.Cleanup(a.srv.Close)
	return a
}

func (a *arrivals) url(tb testing.TB) *url.URL {
	u, err := url.Parse(a.srv.URL)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// memSink keeps result rows.
type memSink struct {
	mu   sync.Mutex
	rows []*formats.Result
}

func (m *memSink) Write(r *formats.Result) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows = append(m.rows, r)
	return nil
}

func (m *memSink) byID() map[int64]*formats.Result {
	out := map[int64]*formats.Result{}
	for _, r := range m.rows {
		out[r.Seq] = r
	}
	return out
}

// datasetOpener writes xs as a real dataset with the formats writer and
// opens it with OpenDataset, as reel replay does.
func datasetOpener(tb testing.TB, xs []*formats.Exchange) Opener {
	tb.Helper()
	dir := writeDataset(tb, xs)
	return OpenDataset([]string{dir}, formats.ReaderOptions{})
}

// writeDataset writes xs as an exchange/1 dataset of several row groups and
// returns its directory.
func writeDataset(tb testing.TB, xs []*formats.Exchange) string {
	tb.Helper()
	dir := tb.TempDir()
	formatstest.Write(tb, dir, formats.WriterOptions{Recorder: "gw-1", Source: "test", RowGroupRows: 64}, xs)
	return dir
}
