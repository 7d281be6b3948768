package replayer_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/replayer"
)

// memory is a dataset of three exchanges, 100 ms apart.
type memory struct{ xs []*formats.Exchange }

func (m *memory) Next() (*formats.Exchange, error) {
	if len(m.xs) == 0 {
		return nil, io.EOF
	}
	x := m.xs[0]
	m.xs = m.xs[1:]
	return x, nil
}
func (m *memory) Close() error { return nil }

type rows struct{ ok int }

func (r *rows) Write(res *formats.Result) error {
	if res.Status == 200 {
		r.ok++
	}
	return nil
}

func ExamplePlan_Run() {
	shadow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer shadow.Close()
	target, _ := url.Parse(shadow.URL)

	t0 := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	open := func(ctx context.Context, from, to time.Time) (replayer.Source, error) {
		// A recorded dataset: replayer.OpenDataset(paths, formats.ReaderOptions{}).
		m := &memory{}
		for i := range 3 {
			ts := t0.Add(time.Duration(i) * 100 * time.Millisecond)
			m.xs = append(m.xs, &formats.Exchange{Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "gw", Seq: int64(i + 1),
				Method: "GET", Host: "gateway.prod", Path: "/healthz"})
		}
		return m, nil
	}
	plan, err := replayer.NewPlan(context.Background(), open, replayer.Options{Target: target})
	if err != nil {
		fmt.Println(err)
		return
	}
	sink := &rows{}                                     // in reel: formats.NewWriter[formats.Result]
	rep, err := plan.Run(context.Background(), sink, 2) // twice as fast: 50 ms apart
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("sent", rep.Sent, "ok", sink.ok, "requests in summary", rep.Summary.Requests)
	// Output: sent 3 ok 3 requests in summary 3
}
