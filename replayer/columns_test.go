package replayer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// fullExchange is a recorded exchange with every exchange/1 field set, and
// the fields a replay can select on varied, so that a replay reading a
// column that Columns leaves out behaves differently on a projected read.
func fullExchange(t time.Time, seq int64) *formats.Exchange {
	x := exchangeAt(t, seq, seq%5+1)
	x.Ts = t.Truncate(time.Microsecond)
	x.ConnSeq = int32(seq % 3)
	x.Session = fmt.Sprintf("sess-%d", seq%17)
	x.Client = "10.0.0.9:4000"
	x.ReqHeaders = map[string]string{"Content-Type": "application/json", "X-Tenant": fmt.Sprintf("t%d", seq%3),
		"Accept": "text/event-stream", "Authorization": "Bearer prod-secret"}
	x.ReqBody = fmt.Appendf(nil, `{"model":"m%d","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"q %d"}]}`, seq%2, seq)
	x.ReqBodyBytes = int64(len(x.ReqBody))
	x.Model = fmt.Sprintf("m%d", seq%2)
	x.Stream = true
	x.MaxTokens = 64
	x.PromptTokens = int32(50 + seq%100)
	x.PromptTokensSource = formats.TokensFromUsage
	x.PrefixHashes = []int64{seq, -seq}
	x.Topic = "topic"
	x.Status = 200
	x.RespHeaders = map[string]string{"Content-Type": "text/event-stream", "X-Batch-Size": "7"}
	x.RespContentType = "text/event-stream"
	x.RespBody = []byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n")
	x.RespBodyBytes = int64(len(x.RespBody))
	x.TTFBNs, x.DurationNs, x.Events, x.TTFTNs = 1e6, 9e6, 2, 2e6
	x.EventGapsUs = []int32{100, 200}
	x.OutputTokens = int32(1 + seq%40)
	x.BatchSize, x.QueueDepth = 7, 3
	x.Upstream = "up-1"
	x.Context = map[string]string{"x-region": "eu"}
	x.Complete = true
	x.Error = "upstream reset"
	x.RedactErr = "none"
	return x
}

// sentRequest is what the target saw of one replayed request.
type sentRequest struct {
	Method, URI, Body string
	Header            http.Header
}

// replay is what one replay did that does not depend on timing.
type replay struct {
	sent      map[string]sentRequest   // requests the target received, by recorded seq
	rows      map[int64]formats.Result // the deterministic part of the result rows
	exchanges int64
	conns     []string // with ConnRecorded: the seqs each connection carried
	err       error    // from NewPlan
}

// replayOnce replays the dataset in dir, decoding only columns (nil: all).
func replayOnce(t *testing.T, dir string, columns []string, opts Options) replay {
	t.Helper()
	var mu sync.Mutex
	sent := map[string]sentRequest{}
	byConn := map[string][]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := r.Header.Clone()
		h.Del("Content-Length")
		mu.Lock()
		sent[r.URL.Query().Get("i")] = sentRequest{Method: r.Method, URI: r.URL.RequestURI(), Body: string(body), Header: h}
		byConn[r.RemoteAddr] = append(byConn[r.RemoteAddr], r.URL.Query().Get("i"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"usage":{"completion_tokens":3}}`)
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	opts.Target, opts.RunID = u, "cols"
	open := func(ctx context.Context, from, to time.Time) (Source, error) {
		return formats.OpenReader[formats.Exchange](ctx, []string{dir}, formats.ReaderOptions{From: from, To: to, Columns: columns})
	}
	p, err := NewPlan(context.Background(), open, opts)
	if err != nil {
		return replay{err: err}
	}
	sink := &memSink{}
	if _, err := p.Run(context.Background(), sink, 50); err != nil {
		t.Fatal(err)
	}
	rows := map[int64]formats.Result{}
	for _, r := range sink.rows {
		rows[r.Seq] = formats.Result{RunID: r.RunID, Shard: r.Shard, Recorder: r.Recorder, Seq: r.Seq, OrigTs: r.OrigTs,
			Frame: r.Frame, ScheduledNs: r.ScheduledNs, Status: r.Status, Method: r.Method, Path: r.Path,
			Model: r.Model, PromptTokens: r.PromptTokens, Error: r.Error}
	}
	var conns []string
	if opts.Conn == ConnRecorded {
		for _, ids := range byConn {
			sort.Strings(ids)
			conns = append(conns, strings.Join(ids, ","))
		}
		sort.Strings(conns)
	}
	return replay{sent: sent, rows: rows, exchanges: p.Exchanges(), conns: conns}
}

// TestColumnsCoverReplay replays a dataset whose every field is set, once
// reading all columns and once only Columns(), with options that reach
// every field the replayer reads; the requests sent and the result rows
// must be the same. A replayer change that reads a field missing from
// Columns makes the projected replay see zero there and differ.
func TestColumnsCoverReplay(t *testing.T) {
	start := columnsStart
	var xs []*formats.Exchange
	for i := range 200 {
		x := fullExchange(start.Add(time.Duration(i)*5*time.Millisecond), int64(i+1))
		if i%11 == 0 {
			x.Method = "PUT"
		}
		if i%13 == 0 {
			x.Path = "/v1/embeddings"
		}
		xs = append(xs, x)
	}
	dir := writeDataset(t, xs)
	for _, tc := range columnsCases {
		t.Run(tc.name, func(t *testing.T) {
			full := replayOnce(t, dir, nil, tc.opts)
			got := replayOnce(t, dir, Columns(), tc.opts)
			if full.err != nil || got.err != nil {
				t.Fatalf("NewPlan: full read %v, projected read %v", full.err, got.err)
			}
			if full.exchanges == 0 || len(full.sent) == 0 {
				t.Fatalf("the full replay sent nothing (%d exchanges): the case tests nothing", full.exchanges)
			}
			if got.exchanges != full.exchanges {
				t.Errorf("projected replay selected %d exchanges, full %d", got.exchanges, full.exchanges)
			}
			if !reflect.DeepEqual(got.sent, full.sent) {
				t.Errorf("requests differ:%s", diffKeys(got.sent, full.sent))
			}
			if !reflect.DeepEqual(got.rows, full.rows) {
				t.Errorf("result rows differ:%s", diffKeys(got.rows, full.rows))
			}
			if !reflect.DeepEqual(got.conns, full.conns) {
				t.Errorf("requests per connection differ:\n got %q\nwant %q", got.conns, full.conns)
			}
		})
	}

	// The recorded-host guard reads the host column: a dataset recorded
	// against the target's own host is refused either way.
	t.Run("recorded host", func(t *testing.T) {
		same := make([]*formats.Exchange, len(xs))
		for i, x := range xs {
			c := *x
			c.Host = "127.0.0.1:8080"
			same[i] = &c
		}
		dir := writeDataset(t, same)
		var rh *RecordedHostError
		for _, cols := range [][]string{nil, Columns()} {
			if r := replayOnce(t, dir, cols, Options{}); !errors.As(r.err, &rh) {
				t.Errorf("columns %q: NewPlan returned %v, want a RecordedHostError", cols, r.err)
			}
		}
	})
}

var columnsStart = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// columnsCases are replay options that between them read every field the
// replayer reads.
var columnsCases = []struct {
	name string
	opts Options
}{
	{name: "defaults", opts: Options{}},
	{name: "pin output and usage", opts: Options{PinOutput: PinAll, IncludeUsage: true, ForwardHeaders: []string{"Content-Type", "Accept", "X-Tenant"}}},
	{name: "selection", opts: Options{Selection: Selection{
		Paths: []string{"/v1/chat*", "/v1/completions"}, Models: []string{"m1"}, Methods: []string{"post"},
		Headers: []HeaderMatch{{Name: "X-Tenant", Value: "t1"}}, MinPromptTokens: 60, MaxPromptTokens: 140,
	}}},
	{name: "sample and shard", opts: Options{Selection: Selection{Sample: 0.7, Shard: Shard{Index: 1, Count: 2},
		From: columnsStart.Add(100 * time.Millisecond), To: columnsStart.Add(800 * time.Millisecond)}}},
	{name: "recorded connections", opts: Options{Conn: ConnRecorded}},
}

// diffKeys describes the first few entries that differ between two maps.
func diffKeys[K comparable, V any](got, want map[K]V) string {
	var out []string
	for k, w := range want {
		if g, ok := got[k]; !ok || !reflect.DeepEqual(g, w) {
			out = append(out, fmt.Sprintf("\n%v: got %+v\n   want %+v", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			out = append(out, fmt.Sprintf("\n%v: got %+v, not in the full replay", k, g))
		}
	}
	sort.Strings(out)
	return strings.Join(out[:min(len(out), 3)], "")
}
