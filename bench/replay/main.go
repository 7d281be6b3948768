// Command replay-bench measures reel's replay dispatcher on loopback: the
// lag of each send behind its due time at fixed rates, and the highest rate
// it sustains, against a trivial HTTP server running in its own process.
// run.sh drives it and measures wrk and vegeta against the same server in the
// same run.
//
//	replay-bench server -addr 127.0.0.1:18080
//	replay-bench lag -target http://127.0.0.1:18080 -rate 5000 -duration 10s
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/internal/cputime"
	"github.com/reelkit/reel/replayer"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: replay-bench server|lag [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = server(os.Args[2:])
	case "lag":
		err = lag(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "replay-bench:", err)
		os.Exit(1)
	}
}

// server answers every request with a short body, like wrk's usual target.
func server(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:18080", "listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	body := []byte("ok\n")
	return http.ListenAndServe(*addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if us, err := strconv.Atoi(r.URL.Query().Get("sleep")); err == nil && us > 0 {
			time.Sleep(time.Duration(us) * time.Microsecond) // a shadow slower than the recording
		}
		w.Header().Set("Content-Length", "3")
		w.Write(body)
	}))
}

// synthetic yields n exchanges at a constant rate. With sessions > 0,
// exchange i is turn i/sessions of session i%sessions (so that many
// sessions are open at once), linked by turn keys, recorded as answered in
// 1 ms; sleep (µs) asks the server to take that long on each.
type synthetic struct {
	t0       time.Time
	gap      time.Duration
	i, n     int
	sessions int
	sleep    time.Duration
}

func (s *synthetic) Next() (*formats.Exchange, error) {
	if s.i >= s.n {
		return nil, io.EOF
	}
	s.i++
	ts := s.t0.Add(time.Duration(s.i-1) * s.gap)
	x := &formats.Exchange{Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "bench", Seq: int64(s.i),
		Method: "GET", Host: "prod.example", Path: "/", Query: "i=" + strconv.Itoa(s.i)}
	if s.sleep > 0 {
		x.Query += "&sleep=" + strconv.FormatInt(s.sleep.Microseconds(), 10)
	}
	if s.sessions > 0 {
		x.DurationNs = int64(time.Millisecond)
		x.TurnKey = int64(s.i)
		if prev := s.i - s.sessions; prev > 0 {
			x.ParentTurnKey = int64(prev)
		}
	}
	return x, nil
}

func (s *synthetic) Close() error { return nil }

// countSink counts rows and errors.
type countSink struct{ rows, errs int64 }

func (c *countSink) Write(r *formats.Result) error {
	c.rows++
	if r.Error != "" || r.Status != 200 {
		c.errs++
	}
	return nil
}

// lagResult is one line of output (JSON).
type lagResult struct {
	Tool      string  `json:"tool"`
	Rate      float64 `json:"rate"`
	Achieved  float64 `json:"achieved"` // completed requests/s over the run
	Requests  int64   `json:"requests"`
	Errors    int64   `json:"errors"`
	LagP50Us  float64 `json:"lag_p50_us"`
	LagP99Us  float64 `json:"lag_p99_us"`
	LagMaxUs  float64 `json:"lag_max_us"`
	E2EP99Us  float64 `json:"e2e_p99_us"`
	Workers   int     `json:"workers"`
	Conns     int     `json:"conns"`
	CPUPerReq float64 `json:"cpu_us_per_req"` // process CPU (user+system) during the run ÷ requests
	Sessions  int     `json:"sessions"`
	Delayed   int64   `json:"delayed"` // turns that waited for their predecessor (session delay > 0)
	DelayP50  float64 `json:"session_delay_p50_us"`
	Sustained bool    `json:"sustained"` // achieved ≥ 95 % of rate, errors ≤ 1 %
}

func lag(args []string) error {
	fs := flag.NewFlagSet("lag", flag.ContinueOnError)
	target := fs.String("target", "http://127.0.0.1:18080", "server URL")
	rate := fs.Float64("rate", 5000, "requests per second")
	dur := fs.Duration("duration", 10*time.Second, "run length")
	workers := fs.Int("workers", 0, "fixed sender pool (0: reel's default elastic pool)")
	inflight := fs.Int("max-inflight", 0, "cap on requests in flight (0: none)")
	cpuprof := fs.String("cpuprofile", "", "write a CPU profile here")
	conns := fs.Int("conns", 0, "pooled connections at most (0: reel's default, -1: no limit)")
	spin := fs.Duration("spin", 0, "precise-wait window before each due time (0: reel's default)")
	sessions := fs.Int("sessions", 0, "replay as this many concurrent sessions (--sessions infer), each turn waiting for the previous (0: single-turn traffic)")
	sleep := fs.Duration("shadow-delay", 0, "the server takes this long per request (the recording says 1 ms): with -sessions, later turns wait for it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*target)
	if err != nil {
		return err
	}
	n := int(*rate * dur.Seconds())
	gap := time.Duration(float64(time.Second) / *rate)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	open := func(context.Context, time.Time, time.Time) (replayer.Source, error) {
		return &synthetic{t0: t0, gap: gap, n: n, sessions: *sessions, sleep: *sleep}, nil
	}
	var so replayer.SessionOptions
	if *sessions > 0 {
		so.Mode = analysis.SessionsInferred
	}
	ctx := context.Background()
	plan, err := replayer.NewPlan(ctx, open, replayer.Options{Target: u, Workers: *workers, MaxInflight: *inflight, PoolConns: *conns, SpinWindow: *spin,
		Timeout: 10 * time.Second, Selection: replayer.Selection{Frame: time.Hour}, Sessions: so})
	if err != nil {
		return err
	}
	sink := &countSink{}
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	cpu0 := cputime.Process()
	rep, err := plan.Run(ctx, sink, 1)
	cpu := cputime.Process() - cpu0
	if err != nil {
		return err
	}
	s := rep.Summary
	r := lagResult{Tool: "reel", Rate: *rate, Requests: sink.rows, Errors: sink.errs, Workers: *workers, Conns: *conns,
		LagP50Us: us(s.Lag.P50), LagP99Us: us(s.Lag.P99), LagMaxUs: us(s.Lag.Max), E2EP99Us: us(s.E2E.P99),
		Sessions: *sessions, Delayed: s.SessionDelay.N, DelayP50: us(s.SessionDelay.P50)}
	if sink.rows > 0 {
		r.CPUPerReq = us(cpu) / float64(sink.rows)
	}
	if s.Duration > 0 {
		r.Achieved = float64(s.OK) / s.Duration.Seconds()
	}
	r.Sustained = r.Achieved >= 0.95**rate && float64(r.Errors) <= 0.01*float64(r.Requests)
	return json.NewEncoder(os.Stdout).Encode(r)
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }
