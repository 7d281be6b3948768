package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/formatstest"
)

// reelProcessEnv marks a child started by startReel: the test binary then
// runs reel itself instead of its tests.
const reelProcessEnv = "REEL_TEST_RUN_REEL"

// TestReelProcess is not a test of its own: started by startReel (with
// reelProcessEnv set) it runs the reel command line that follows "--", in
// this process, and exits with reel's exit code. That gives tests real reel
// processes without building a binary. Run directly, it skips.
func TestReelProcess(t *testing.T) {
	if os.Getenv(reelProcessEnv) != "1" {
		t.Skip("helper for tests that start reel processes")
	}
	i := slices.Index(os.Args, "--")
	if i < 0 {
		fmt.Fprintln(os.Stderr, "reel test process: no -- before the reel command line")
		os.Exit(3)
	}
	os.Exit(dispatch(context.Background(), os.Args[i+1:], os.Stdout, os.Stderr))
}

// startReel starts `reel args...` as a separate process with extra
// environment variables; wait for it with cmd.Wait.
func startReel(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestReelProcess$", "-test.count=1", "--"}, args...)...)
	cmd.Env = append(append(os.Environ(), reelProcessEnv+"=1"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start reel: %v", err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, &out
}

// shardTarget is a deterministic loopback shadow: each request's latency,
// status, output tokens and batch size are functions of the exchange id the
// body carries, so two runs of the same window see the same server. It
// records where and when every request arrived.
type shardTarget struct {
	srv   *httptest.Server
	mu    sync.Mutex        // guards the fields below
	count map[int]int       // exchange id → times received
	conns map[string][]int  // client address → exchange ids in arrival order
	at    map[int]time.Time // exchange id → arrival
}

func shardDelay(id int) time.Duration { return time.Duration(10+(id*7919)%81) * time.Millisecond }
func shardStatus(id int) int {
	if id%37 == 0 {
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

func newShardTarget(t *testing.T) *shardTarget {
	st := &shardTarget{count: map[int]int{}, conns: map[string][]int{}, at: map[int]time.Time{}}
	st.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		var body struct{ Prompt string }
		b, _ := io.ReadAll(r.Body)
		err := json.Unmarshal(b, &body)
		id, errID := strconv.Atoi(strings.TrimPrefix(body.Prompt, "req-"))
		if err != nil || errID != nil {
			http.Error(w, "no exchange id in "+string(b), http.StatusBadRequest)
			return
		}
		st.mu.Lock()
		st.count[id]++
		st.conns[r.RemoteAddr] = append(st.conns[r.RemoteAddr], id)
		st.at[id] = now
		st.mu.Unlock()
		time.Sleep(shardDelay(id))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Batch-Size", strconv.Itoa(id%6+1))
		w.WriteHeader(shardStatus(id))
		fmt.Fprintf(w, `{"usage":{"completion_tokens":%d}}`, id%9+1)
	}))
	t.Cleanup(st.srv.Close)
	return st
}

const (
	shardN     = 480 // exchanges
	shardConns = 24  // recorded connections
	shardEvery = 5 * time.Millisecond
)

// writeShardDataset records shardN exchanges, one every shardEvery, on
// shardConns keep-alive connections; exchange i (1-based) is seq i and
// carries "req-i" as its prompt.
func writeShardDataset(t *testing.T, dir string) time.Time {
	t.Helper()
	t0 := time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC)
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: dir, Recorder: "gw-1", Source: "test", NoSpool: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= shardN; i++ {
		ts := t0.Add(time.Duration(i-1) * shardEvery)
		path, model, prompt := "/v1/completions", "small", int32(300)
		if i%3 == 0 {
			path, model, prompt = "/v1/chat/completions", "big", 4000
		}
		x := formats.Exchange{Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "gw-1", Seq: int64(i),
			ConnID: int64((i-1)%shardConns + 1), ConnSeq: int32((i - 1) / shardConns),
			Method: "POST", Host: "gateway.prod.example", Path: path, ReqContentType: "application/json",
			ReqBody: fmt.Appendf(nil, `{"model":%q,"prompt":"req-%d","max_tokens":16}`, model, i),
			Model:   model, PromptTokens: prompt, Status: 200}
		if err := w.Write(&x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return t0
}

// readResults reads every result row under dir, by exchange seq.
func readResults(t *testing.T, dir string) map[int64]*formats.Result {
	t.Helper()
	rows := map[int64]*formats.Result{}
	for _, res := range formatstest.Read[formats.Result](t, dir) {
		if prev, ok := rows[res.Seq]; ok {
			t.Fatalf("exchange %d replayed twice (shards %d and %d)", res.Seq, prev.Shard, res.Shard)
		}
		rows[res.Seq] = res
	}
	return rows
}

// reportJSON runs `reel report --json` over dirs.
func reportJSON(t *testing.T, dirs ...string) *analysis.Summary {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := append([]string{"--json", "--frame", "500ms"}, dirs...)
	if err := runReport(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("reel report %v: %v\n%s", args, err, stderr.String())
	}
	var s analysis.Summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("report JSON: %v", err)
	}
	return &s
}

// nearestRank is the p-quantile of vals by the nearest-rank definition the
// analysis documents, computed here independently of it.
func nearestRank(vals []int64, p float64) time.Duration {
	s := slices.Clone(vals)
	slices.Sort(s)
	k := int(p*float64(len(s))+0.999999999) - 1
	return time.Duration(s[min(max(k, 0), len(s)-1)])
}

// TestShardProcesses is issue 9's acceptance test: a window replayed by 4
// reel processes (wired as a Kubernetes Indexed Job wires them: --shards 4
// --shard-from-env JOB_COMPLETION_INDEX, one --start-at) against one
// loopback server, then by one process. Every exchange is sent exactly
// once, each recorded connection stays one ordered connection, the union of
// send times follows the single-process schedule within the lag bound, and
// `reel report` over the shard directory equals the single run's report.
func TestShardProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 5 reel processes and replays 2.4 s twice")
	}
	const (
		shards   = 4
		lagBound = 100 * time.Millisecond // generous: 5 processes share 2 busy cores
		lead     = 3 * time.Second        // process start-up before --start-at
	)
	data := t.TempDir()
	t0 := writeShardDataset(t, data)

	replay := func(out string, n int) (startAt time.Time, logs []string) {
		st := newShardTarget(t)
		startAt = time.Now().Add(lead).Truncate(time.Millisecond).UTC()
		args := []string{"replay", data, "--target", st.srv.URL, "--out", out, "--conn", "recorded", "--frame", "500ms",
			"--run-id", "nightly-1", "--start-at", startAt.Format(time.RFC3339Nano), "--allow-recorded-host", "--quiet"}
		if n > 1 {
			args = append(args, "--shards", strconv.Itoa(n), "--shard-from-env", "JOB_COMPLETION_INDEX")
		}
		cmds := make([]*exec.Cmd, n)
		outs := make([]*bytes.Buffer, n)
		for i := range n {
			cmds[i], outs[i] = startReel(t, []string{"JOB_COMPLETION_INDEX=" + strconv.Itoa(i)}, args...)
		}
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("process %d of %d: %v\n%s", i, n, err, outs[i])
			}
			logs = append(logs, outs[i].String())
		}
		checkTarget(t, st, n)
		return startAt, logs
	}

	shardDir, singleDir := t.TempDir(), t.TempDir()
	shardStart, logs := replay(shardDir, shards)
	for i, l := range logs {
		if want := fmt.Sprintf("shard %d/%d  sent ", i, shards); !strings.Contains(l, want) {
			t.Errorf("process %d summary lacks %q:\n%s", i, want, l)
		}
		if strings.Contains(l, "late by") {
			t.Logf("process %d reached --start-at late (a loaded machine): %s", i, l)
		}
	}
	replay(singleDir, 1)

	// Each shard wrote its own files, named by shard.
	for i := range shards {
		m, _ := filepath.Glob(filepath.Join(shardDir, "dt=*", "hour=*", fmt.Sprintf("replay-shard-%d-of-%d-*.parquet", i, shards)))
		if len(m) == 0 {
			t.Errorf("no result file of shard %d under %s", i, shardDir)
		}
	}

	sharded, single := readResults(t, shardDir), readResults(t, singleDir)
	if len(sharded) != shardN || len(single) != shardN {
		t.Fatalf("%d sharded and %d single result rows, want %d each", len(sharded), len(single), shardN)
	}
	connShard := map[int64]int32{}
	late := 0
	for seq, r := range sharded {
		conn := (seq-1)%shardConns + 1
		if s, ok := connShard[conn]; ok && s != r.Shard {
			t.Fatalf("recorded connection %d split across shards %d and %d", conn, s, r.Shard)
		}
		connShard[conn] = r.Shard
		// Same schedule as one process: the shards share the window's origin.
		if s := single[seq]; s.ScheduledNs != r.ScheduledNs {
			t.Fatalf("exchange %d scheduled at +%s in its shard, +%s in the single run", seq, time.Duration(r.ScheduledNs), time.Duration(s.ScheduledNs))
		}
		due := shardStart.Add(r.OrigTs.Sub(t0))
		if d := time.Duration(r.SentUnixNs - due.UnixNano()); d < -time.Millisecond || d > lagBound {
			late++
		}
		if s := single[seq]; s.Status != r.Status || s.OutputTokens != r.OutputTokens || s.BatchSize != r.BatchSize {
			t.Fatalf("exchange %d: sharded %d/%d tokens/batch %d, single %d/%d/%d", seq, r.Status, r.OutputTokens, r.BatchSize, s.Status, s.OutputTokens, s.BatchSize)
		}
	}
	if len(connShard) != shardConns {
		t.Errorf("%d recorded connections in the results, want %d", len(connShard), shardConns)
	}
	if late > shardN/50 {
		t.Errorf("%d of %d sends outside [−1ms, %s] of the shared schedule (start-at %s)", late, shardN, lagBound, shardStart)
	}

	merged, one := reportJSON(t, shardDir), reportJSON(t, singleDir)
	checkExactMerge(t, merged, sharded)
	checkSameReport(t, merged, one)
}

// checkTarget: the server saw every exchange exactly once, and each client
// connection carried the requests of one recorded connection, in order.
func checkTarget(t *testing.T, st *shardTarget, procs int) {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	for id := 1; id <= shardN; id++ {
		if c := st.count[id]; c != 1 {
			t.Errorf("%d processes: exchange %d arrived %d times", procs, id, c)
		}
	}
	if len(st.count) != shardN {
		t.Errorf("%d processes: server saw %d distinct exchanges, want %d", procs, len(st.count), shardN)
	}
	last := map[int]int{} // recorded connection → last id seen on it
	for addr, ids := range st.conns {
		for k, id := range ids {
			if (id-1)%shardConns != (ids[0]-1)%shardConns {
				t.Fatalf("%d processes: client connection %s carried exchanges %v of different recorded connections", procs, addr, ids)
			}
			if k > 0 && id <= ids[k-1] {
				t.Fatalf("%d processes: connection %s carried %v out of order", procs, addr, ids)
			}
		}
	}
	ids := make([]int, 0, len(st.at))
	for id := range st.at {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b int) int { return st.at[a].Compare(st.at[b]) })
	for _, id := range ids { // arrival order within each recorded connection
		c := (id - 1) % shardConns
		if id < last[c] {
			t.Fatalf("%d processes: exchange %d of recorded connection %d arrived after %d", procs, id, c+1, last[c])
		}
		last[c] = id
	}
}

// checkExactMerge: the report over the shard directory has exact quantiles
// over the union of the shards' rows, not a blend of per-shard figures.
func checkExactMerge(t *testing.T, s *analysis.Summary, rows map[int64]*formats.Result) {
	t.Helper()
	var e2e, lag []int64
	for _, r := range rows {
		lag = append(lag, r.LagNs)
		if r.Status/100 == 2 && r.Error == "" && r.E2ENs > 0 {
			e2e = append(e2e, r.E2ENs)
		}
	}
	for _, c := range []struct {
		name string
		q    analysis.Quantiles
		vals []int64
	}{{"e2e", s.E2E, e2e}, {"lag", s.Lag, lag}} {
		if c.q.N != int64(len(c.vals)) {
			t.Errorf("merged %s n=%d, the shards hold %d", c.name, c.q.N, len(c.vals))
			continue
		}
		for _, p := range []float64{0.5, 0.9, 0.99, 1} {
			got, _ := c.q.At(p)
			if want := nearestRank(c.vals, p); got != want {
				t.Errorf("merged %s p%g = %s, the union of the shards' rows gives %s", c.name, 100*p, got, want)
			}
		}
	}
}

// checkSameReport: the merged shard report and the single-process report
// agree exactly on everything the deterministic target fixes (counts,
// statuses, tokens, batch sizes, frames, breakdowns) and on latency within
// what scheduling noise allows; every latency is at least the target's.
func checkSameReport(t *testing.T, got, want *analysis.Summary) {
	t.Helper()
	eq := func(what string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: sharded %v, single %v", what, a, b)
		}
	}
	eq("requests/ok/errors", []int64{got.Requests, got.OK, got.Errors}, []int64{want.Requests, want.OK, want.Errors})
	eq("classes", got.Classes, want.Classes)
	eq("output tokens", got.OutputTokens, want.OutputTokens)
	eq("mean batch size", got.MeanBatchSize, want.MeanBatchSize)
	eq("long prompt", got.LongPrompt, want.LongPrompt)
	eq("e2e n", got.E2E.N, want.E2E.N)
	if len(got.Frames) != len(want.Frames) || len(got.Frames) < 4 {
		t.Fatalf("%d sharded frames, %d single (want ≥ 4 of 500ms)", len(got.Frames), len(want.Frames))
	}
	for i := range got.Frames {
		g, w := got.Frames[i], want.Frames[i]
		eq(fmt.Sprintf("frame %d", i),
			[]any{g.Start.UTC(), g.Requests, g.OK, g.Errors, g.OutputTokens, g.MeanBatchSize, g.MeanPrompt, g.LongPromptShare},
			[]any{w.Start.UTC(), w.Requests, w.OK, w.Errors, w.OutputTokens, w.MeanBatchSize, w.MeanPrompt, w.LongPromptShare})
	}
	groups := func(gs []analysis.Group) string {
		var b strings.Builder
		for _, g := range gs {
			fmt.Fprintf(&b, "%s:%d/%d/%d ", g.Key, g.Requests, g.OK, g.Errors)
		}
		return b.String()
	}
	eq("routes", groups(got.Routes), groups(want.Routes))
	eq("models", groups(got.Models), groups(want.Models))
	eq("prompt buckets", groups(got.PromptBuckets), groups(want.PromptBuckets))
	eq("status classes", groups(got.StatusClasses), groups(want.StatusClasses))
	if got.Errors == 0 || len(got.Models) != 2 {
		t.Errorf("the deterministic target should give some 503s and two models: %d errors, %d models", got.Errors, len(got.Models))
	}

	// Latency: the target's delays are a floor, the noise of 5 processes on
	// 2 cores a generous ceiling.
	var floor []int64
	for id := 1; id <= shardN; id++ {
		if shardStatus(id) == http.StatusOK {
			floor = append(floor, int64(shardDelay(id)))
		}
	}
	const noise = 50 * time.Millisecond
	for _, p := range []float64{0.5, 0.9} {
		min := nearestRank(floor, p)
		g, _ := got.E2E.At(p)
		w, _ := want.E2E.At(p)
		if g < min || w < min {
			t.Errorf("e2e p%g sharded %s, single %s: below the target's own %s", 100*p, g, w, min)
		}
		if (g - w).Abs() > noise {
			t.Errorf("e2e p%g sharded %s, single %s: differ by more than %s", 100*p, g, w, noise)
		}
	}
}
