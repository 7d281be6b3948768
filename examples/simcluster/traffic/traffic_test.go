package traffic

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reelkit/reel/examples/simcluster/cluster"
)

func loadTrace(t *testing.T) []TraceRow {
	t.Helper()
	f, err := os.Open("testdata/azure-llm-conv-2023-head600.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := ReadAzureTrace(f)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestReadAzureTrace(t *testing.T) {
	rows := loadTrace(t)
	if len(rows) != 600 {
		t.Fatalf("%d rows, want 600", len(rows))
	}
	want := TraceRow{time.Date(2023, 11, 16, 18, 15, 46, 680590000, time.UTC), 374, 44}
	if rows[0] != want {
		t.Errorf("first row %+v, want %+v", rows[0], want)
	}
	bad := []struct{ name, in string }{
		{"empty", ""},
		{"wrong header", "a,b,c\n"},
		{"no rows", "TIMESTAMP,ContextTokens,GeneratedTokens\n"},
		{"bad time", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,2\n"},
		{"bad count", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,x,2\n"},
		{"negative", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,-1,2\n"},
		{"short row", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,1\n"},
		{"backwards", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:47,1,2\n2023-11-16 18:15:46,1,2\n"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ReadAzureTrace(strings.NewReader(tt.in)); !errors.Is(err, ErrTrace) {
				t.Errorf("err = %v, want ErrTrace", err)
			}
		})
	}
}

func FuzzReadAzureTrace(f *testing.F) {
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"))
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,1,2\n2023-11-16 18:15:45,1,2\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		rows, err := ReadAzureTrace(strings.NewReader(string(in)))
		if err == nil && len(rows) == 0 {
			t.Fatal("no error and no rows")
		}
	})
}

// renderedTokens is the simulator's prompt_tokens for a chat body (its
// default tokenizer, o200k_base).
func renderedTokens(t *testing.T, body []byte) (int, chatBody) {
	t.Helper()
	var b chatBody
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	n, err := cluster.Options{}.PromptTokens("/v1/chat/completions", body)
	if err != nil {
		t.Fatal(err)
	}
	return n, b
}

func TestPlanFollowsTrace(t *testing.T) {
	rows := loadTrace(t)
	plan, err := Plan(Options{Trace: rows, Speed: 2, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) < 100 {
		t.Fatalf("only %d requests in a minute at twice the trace's rate", len(plan))
	}
	for i, r := range plan {
		wantOffset := rows[i].Time.Sub(rows[0].Time) / 2
		if r.Offset != wantOffset {
			t.Fatalf("request %d at %v, want %v", i, r.Offset, wantOffset)
		}
		if r.MaxTokens != max(1, rows[i].GeneratedTokens) || r.Long {
			t.Errorf("request %d: max_tokens %d long %v, want %d", i, r.MaxTokens, r.Long, rows[i].GeneratedTokens)
		}
		got, b := renderedTokens(t, r.Body)
		if want := max(8, rows[i].ContextTokens); math.Abs(float64(got-want)) > 0.02*float64(want)+16 {
			t.Errorf("request %d renders to %d tokens, want ≈ %d", i, got, want)
		}
		if !b.Stream || !b.IgnoreEOS || b.Messages[0].Role != "system" || b.Messages[len(b.Messages)-1].Role != "user" {
			t.Errorf("request %d body shape: %s", i, r.Body[:min(200, len(r.Body))])
		}
	}
}

func TestPlanWrapsTheTrace(t *testing.T) {
	rows := loadTrace(t)[:50]
	plan, err := Plan(Options{Trace: rows, MaxRequests: 120, Duration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 120 {
		t.Fatalf("%d requests, want MaxRequests 120", len(plan))
	}
	for i := 1; i < len(plan); i++ {
		if plan[i].Offset < plan[i-1].Offset {
			t.Fatalf("offset goes back at %d: %v < %v", i, plan[i].Offset, plan[i-1].Offset)
		}
	}
}

func TestIncidentWindow(t *testing.T) {
	in := Incident{At: 20 * time.Second, For: 10 * time.Second, Every: 60 * time.Second}
	plan, err := Plan(Options{Rate: 20, Duration: 3 * time.Minute, Incident: in, MaxPromptTokens: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var inside, long int
	var ratio float64
	for _, r := range plan {
		window := (r.Offset-in.At)%in.Every < in.For && r.Offset >= in.At
		if r.Long && !window {
			t.Errorf("long request at %v outside the windows", r.Offset)
		}
		if window {
			inside++
		}
		if r.Long {
			long++
			got, _ := renderedTokens(t, r.Body)
			ratio += float64(got) / float64(r.PromptTokens)
		}
	}
	if share := float64(long) / float64(inside); share < 0.35 || share > 0.65 {
		t.Errorf("%d of %d requests in the windows are long, want about half", long, inside)
	}
	if m := ratio / float64(long); m < 0.95 || m > 1.05 {
		t.Errorf("long bodies render to %.2f× their planned length", m)
	}
	// The long prompts are ~4× the others.
	var sumLong, sumShort float64
	var nShort int
	for _, r := range plan {
		if r.Long {
			sumLong += float64(r.PromptTokens)
		} else {
			sumShort += float64(r.PromptTokens)
			nShort++
		}
	}
	if f := (sumLong / float64(long)) / (sumShort / float64(nShort)); f < 3 || f > 5.5 {
		t.Errorf("long prompts are %.1f× the others on average, want ≈ 4×", f)
	}
}

func TestSystemPromptsAreShared(t *testing.T) {
	plan, err := Plan(Options{Duration: time.Minute, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range plan {
		_, b := renderedTokens(t, r.Body)
		seen[b.Messages[0].Content]++
	}
	if len(seen) > 5 {
		t.Errorf("%d distinct system prompts, want ≤ 4 shared ones (+1 short)", len(seen))
	}
	for s, n := range seen {
		if len(s) > 500 && n < len(plan)/10 {
			t.Errorf("system prompt shared by only %d of %d requests", n, len(plan))
		}
	}
}

func TestPlanIsReproducibleAndBursty(t *testing.T) {
	o := Options{Duration: 10 * time.Minute, Seed: 1}
	a, err := Plan(o)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Plan(o)
	o.Seed = 2
	c, _ := Plan(o)
	if len(a) != len(b) || string(a[len(a)/2].Body) != string(b[len(b)/2].Body) {
		t.Error("the same seed gave different plans")
	}
	if len(a) == len(c) && string(a[len(a)/2].Body) == string(c[len(a)/2].Body) {
		t.Error("different seeds gave the same plan")
	}
	if rate := float64(len(a)) / 600; rate < 4 || rate > 7 {
		t.Errorf("mean rate %.1f req/s, want ≈ 5.5", rate)
	}
	// Counts per 5 s vary far more than a Poisson process's (CV ≈ 0.19),
	// at any speed.
	for _, speed := range []float64{1, 10} {
		plan, err := Plan(Options{Duration: time.Duration(float64(10*time.Minute) / speed), Seed: 1, Speed: speed})
		if err != nil {
			t.Fatal(err)
		}
		bin := time.Duration(float64(5*time.Second) / speed)
		counts := make([]float64, 120)
		for _, r := range plan {
			counts[int(r.Offset/bin)]++
		}
		var mean, sq float64
		for _, n := range counts {
			mean += n / 120
		}
		for _, n := range counts {
			sq += (n - mean) * (n - mean) / 120
		}
		if cv := math.Sqrt(sq) / mean; cv < 0.3 || mean < 20 || mean > 35 {
			t.Errorf("speed %g: %.1f requests per 5-s bin (want ≈ 27.5), coefficient of variation %.2f (want bursty, > 0.3)", speed, mean, cv)
		}
	}
}

func TestOptionsErrors(t *testing.T) {
	for _, o := range []Options{
		{Speed: -1}, {Incident: Incident{Factor: 0.5}}, {Incident: Incident{Share: 2}},
		{Trace: []TraceRow{{}}, TraceOffset: time.Hour},
	} {
		if _, err := NewPlanner(o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	if _, err := Run(context.Background(), Options{}); !errors.Is(err, ErrNoTarget) {
		t.Errorf("Run without target: %v", err)
	}
}

func TestRunAgainstSimulator(t *testing.T) {
	srv, err := cluster.Start(context.Background(), "127.0.0.1:0", cluster.Options{TimeScale: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	rows := loadTrace(t)
	var mu sync.Mutex
	var results []*Result
	sum, err := Run(context.Background(), Options{
		Target: srv.URL, Trace: rows, Speed: 20, Duration: 3 * time.Second,
		Incident: Incident{At: time.Second, For: time.Second},
		OnResult: func(r *Result) { mu.Lock(); results = append(results, r); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := Plan(Options{Trace: rows, Speed: 20, Duration: 3 * time.Second, Incident: Incident{At: time.Second, For: time.Second}})
	var wantTokens int64
	for _, r := range plan {
		wantTokens += int64(r.MaxTokens)
	}
	if sum.Planned != len(plan) || sum.OK != len(plan) || sum.Failed != 0 || sum.Skipped != 0 {
		t.Fatalf("summary %+v, want all %d OK", sum, len(plan))
	}
	if sum.OutputTokens != wantTokens || sum.Long == 0 {
		t.Errorf("output tokens %d (want %d), long %d", sum.OutputTokens, wantTokens, sum.Long)
	}
	if len(results) != len(plan) {
		t.Fatalf("%d results for %d requests", len(results), len(plan))
	}
	for _, r := range results {
		if r.TTFT <= 0 || r.E2E < r.TTFT || r.BatchSize < 1 || r.QueueDepth < 0 {
			t.Errorf("result %+v", *r)
			break
		}
	}
}

func TestRunIsOpenLoop(t *testing.T) {
	tests := []struct {
		name        string
		maxInFlight int
		skipped     bool
	}{
		{"uncapped", 0, false},
		{"capped at 2", 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(400 * time.Millisecond)
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"usage":{"completion_tokens":3}}`))
			}))
			defer slow.Close()
			start := time.Now()
			sum, err := Run(context.Background(), Options{
				Target: slow.URL, Rate: 40, Duration: time.Second, NoStream: true, MaxInFlight: tt.maxInFlight,
			})
			if err != nil {
				t.Fatal(err)
			}
			// 40 req/s of 400 ms requests: sequential sending would take
			// ~16 s; open loop takes about 1.4 s.
			if el := time.Since(start); el > 6*time.Second {
				t.Errorf("run took %v: sends waited for responses", el)
			}
			if (sum.Skipped > 0) != tt.skipped || sum.Sent+sum.Skipped != sum.Planned {
				t.Errorf("summary %+v", sum)
			}
			if !tt.skipped && (sum.OK != sum.Planned || sum.OutputTokens != int64(3*sum.Planned)) {
				t.Errorf("summary %+v", sum)
			}
		})
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // lets the server notice the client leaving
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer hang.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	sum, err := Run(ctx, Options{Target: hang.URL, Rate: 20, Duration: time.Minute})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Run returned %v after cancel", el)
	}
	if sum == nil || sum.Sent == 0 || sum.OK != 0 {
		t.Errorf("summary %+v", sum)
	}
}
