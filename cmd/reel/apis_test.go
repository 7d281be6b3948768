package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reelkit/reel/examples/simcluster/cluster"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/formatstest"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/proxy"
	"github.com/reelkit/reel/redact"
	"github.com/reelkit/reel/sse"
)

// apiCase is one API the end-to-end test drives: a request body of about
// n prompt words, and where the server's usage is in its answer.
type apiCase struct {
	name, path string
	body       func(i, maxOut int) string
	stream     bool
}

func words(i, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "request %d:", i) // distinct from the first block: no prefix-cache hits
	for k := range n {
		fmt.Fprintf(&b, " word%d", (i*7+k)%50)
	}
	return b.String()
}

var apiCases = []apiCase{
	{"chat", "/v1/chat/completions", func(i, m int) string {
		return fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true}}`, words(i, 60), m)
	}, true},
	{"completions", "/v1/completions", func(i, m int) string {
		return fmt.Sprintf(`{"model":"m","prompt":%q,"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true}}`, words(i, 60), m)
	}, true},
	{"responses", "/v1/responses", func(i, m int) string {
		return fmt.Sprintf(`{"model":"m","instructions":"Answer briefly.","input":[{"role":"user","content":[{"type":"input_text","text":%q}]}],"max_output_tokens":%d,"stream":true}`, words(i, 60), m)
	}, true},
	{"messages", "/v1/messages", func(i, m int) string {
		// The same prompt as the Responses request just before: the
		// simulator's prefix cache serves most of it (cache_read_input_tokens).
		return fmt.Sprintf(`{"model":"claude-sim","system":"Answer briefly.","messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":true}`, words(i, 60), m)
	}, true},
	{"embeddings", "/v1/embeddings", func(i, _ int) string {
		return fmt.Sprintf(`{"model":"e","input":[%q]}`, words(i, 60))
	}, false},
}

// startAPISim serves a simulator whose outputs always run to the cap
// (natural EOS far away), so a pinned replay must generate what the
// recording did.
func startAPISim(t *testing.T) *cluster.Server {
	t.Helper()
	srv, err := cluster.Start(context.Background(), "127.0.0.1:0", cluster.Options{TimeScale: 10, MeanOutputTokens: 100000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	return srv
}

// TestAPIsRecordReplayReport: every API the recorder knows, through the
// redacting sidecar into the simulator, replayed with --pin-output against
// a fresh simulator, then reported. The recording holds the server's usage
// (prompt and output tokens), TTFT and token events of each stream; the
// replay generates the same output tokens with its own TTFT; the report
// reads them per route.
func TestAPIsRecordReplayReport(t *testing.T) {
	if testing.Short() {
		t.Skip("records and replays through the simulator")
	}
	prod := startAPISim(t)
	dir := t.TempDir()
	key, _ := redact.NewRandomKey()
	red, err := redact.New(redact.DefaultPolicy(), key)
	if err != nil {
		t.Fatal(err)
	}
	upstream, _ := url.Parse(prod.URL)
	rec, _, err := recorder.OpenDataset(context.Background(), formats.WriterOptions{Dir: dir, Recorder: "sidecar"}, red, recorder.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := proxy.New(proxy.Options{Upstream: upstream, Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := proxy.NewServer(ln.Addr().String(), p)
	go srv.Serve(ln)
	sidecar := "http://" + ln.Addr().String()

	type seen = served
	want := map[string][]seen{} // per path, the server's usage as the client saw it
	const perAPI = 4
	for i := range perAPI {
		for _, c := range apiCases {
			maxOut := 5 + i*3
			resp, err := http.Post(sidecar+c.path, "application/json", strings.NewReader(c.body(i, maxOut)))
			if err != nil {
				t.Fatal(err)
			}
			u := clientUsage(t, c, resp)
			want[c.path] = append(want[c.path], u)
			if c.name != "embeddings" && u.output != maxOut {
				t.Fatalf("%s: the server generated %d tokens, want the cap %d", c.name, u.output, maxOut)
			}
		}
	}
	hits := 0
	for _, u := range want["/v1/messages"] {
		hits += max(u.cached, 0)
	}
	if hits == 0 {
		t.Fatal("the Messages requests read nothing from the prefix cache: the test does not see cache_read_input_tokens")
	}
	srv.Shutdown(context.Background())
	if err := rec.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The recording: the server's usage, TTFT and events per API.
	rows := formatstest.Read[formats.Exchange](t, dir)
	if len(rows) != perAPI*len(apiCases) {
		t.Fatalf("%d rows recorded, want %d", len(rows), perAPI*len(apiCases))
	}
	got := map[string][]formats.Exchange{}
	for _, x := range rows {
		got[x.Path] = append(got[x.Path], *x)
	}
	for _, c := range apiCases {
		for i, x := range got[c.path] {
			w := want[c.path][i]
			if x.PromptTokensSource != formats.TokensFromUsage || int(x.PromptTokens) != w.prompt || int(x.OutputTokens) != w.output {
				t.Errorf("%s #%d recorded prompt %d (%s) output %d, the server said %d and %d", c.name, i, x.PromptTokens, x.PromptTokensSource, x.OutputTokens, w.prompt, w.output)
			}
			if got := cachedOf(x.CachedTokens); got != w.cached {
				t.Errorf("%s #%d recorded cached tokens %d, the server said %d", c.name, i, got, w.cached)
			}
			if c.stream && (x.TTFTNs <= 0 || x.TTFTNs > x.DurationNs || int(x.Events) < w.output || len(x.EventGapsUs) != w.output-1) {
				t.Errorf("%s #%d: ttft %d of %d ns, %d events, %d gaps for %d tokens", c.name, i, x.TTFTNs, x.DurationNs, x.Events, len(x.EventGapsUs), w.output)
			}
			if x.RedactErr != "" || x.Status != 200 {
				t.Errorf("%s #%d: status %d, redaction %q", c.name, i, x.Status, x.RedactErr)
			}
		}
	}

	// Replay the redacted recording against a fresh simulator, pinned.
	shadow := startAPISim(t)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := runReplay(context.Background(), []string{dir, "--target", shadow.URL, "--out", out, "--speed", "4", "--pin-output", "--quiet", "--allow-recorded-host"}, &stdout, &stderr); err != nil {
		t.Fatalf("replay: %v\n%s", err, stderr.String())
	}
	results := formatstest.Read[formats.Result](t, out)
	if len(results) != len(rows) {
		t.Fatalf("%d results for %d exchanges", len(results), len(rows))
	}
	recorded := map[int64]formats.Exchange{}
	for _, x := range rows {
		recorded[x.Seq] = *x
	}
	for _, r := range results {
		x := recorded[r.Seq]
		c := caseForPath(x.Path)
		if r.Status != 200 || r.Error != "" {
			t.Errorf("%s seq %d: replay status %d %q", c.name, r.Seq, r.Status, r.Error)
			continue
		}
		if c.stream && (r.OutputTokens != x.OutputTokens || r.TTFTNs <= 0 || r.TTFTNs > r.E2ENs) {
			t.Errorf("%s seq %d: replay output %d (recorded %d), ttft %d of %d ns", c.name, r.Seq, r.OutputTokens, x.OutputTokens, r.TTFTNs, r.E2ENs)
		}
	}

	// The report reads every route.
	stdout.Reset()
	if err := runReport(context.Background(), []string{out}, &stdout, &stderr); err != nil {
		t.Fatalf("report: %v\n%s", err, stderr.String())
	}
	for _, c := range apiCases {
		if !strings.Contains(stdout.String(), c.path) {
			t.Errorf("the report does not name %s:\n%s", c.path, stdout.String())
		}
	}
}

// cachedOf reads the cached_tokens column, -1 for NULL.
func cachedOf(v *int32) int {
	if v == nil {
		return -1
	}
	return int(*v)
}

func caseForPath(path string) apiCase {
	for _, c := range apiCases {
		if c.path == path {
			return c
		}
	}
	return apiCase{}
}

// clientUsage reads an answer as a client would and returns the usage the
// server reported: the last usage of a stream, or the body's.
// served is what a server's usage said: prompt, output and cached tokens
// (cached -1 when not reported).
type served struct{ prompt, output, cached int }

func clientUsage(t *testing.T, c apiCase, resp *http.Response) (u served) {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d", c.name, resp.StatusCode)
	}
	u.cached = -1
	apply := func(raw []byte) {
		var v struct {
			Usage   *map[string]any `json:"usage"`
			Message *struct {
				Usage *map[string]any `json:"usage"`
			} `json:"message"`
			Response *struct {
				Usage *map[string]any `json:"usage"`
			} `json:"response"`
		}
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		m := v.Usage
		if m == nil && v.Message != nil {
			m = v.Message.Usage
		}
		if m == nil && v.Response != nil {
			m = v.Response.Usage
		}
		if m == nil || *m == nil {
			return
		}
		n := func(k string) int { f, _ := (*m)[k].(float64); return int(f) }
		if p := n("prompt_tokens") + n("input_tokens") + n("cache_read_input_tokens"); p > 0 {
			u.prompt = p
		}
		if o := n("completion_tokens") + n("output_tokens"); o > 0 {
			u.output = o
		}
		for _, details := range []string{"prompt_tokens_details", "input_tokens_details"} {
			if d, ok := (*m)[details].(map[string]any); ok {
				if f, ok := d["cached_tokens"].(float64); ok {
					u.cached = int(f)
				}
			}
		}
		if f, ok := (*m)["cache_read_input_tokens"].(float64); ok {
			u.cached = int(f)
		}
	}
	if !c.stream {
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		apply(buf.Bytes())
		return u
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			apply([]byte(data))
		}
	}
	return u
}

// TestPromptEstimateAgainstServerUsage measures the prompt-token estimate
// against a server's own usage.prompt_tokens: the simulator tokenizing
// with o200k_base (its chat template is "role: content\n" per message).
// docs/performance.md reports the numbers (go test ./cmd/reel -run
// TestPromptEstimateAgainstServerUsage -v).
func TestPromptEstimateAgainstServerUsage(t *testing.T) {
	if testing.Short() {
		t.Skip("sends requests to the simulator")
	}
	sim, err := cluster.Start(context.Background(), "127.0.0.1:0", cluster.Options{TimeScale: 50, Tokenizer: cluster.TokenizerO200k})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close(context.Background())
	tok, err := recorder.NewTokenizer(recorder.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	corpus := map[string][]string{}
	for kind, files := range map[string][]string{"chat": {"chat_en.json", "chat_code.json"}, "cjk": {"chat_zh.json", "chat_zh2.json"}} {
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join("..", "..", "redact", "testdata", f))
			if err != nil {
				t.Fatal(err)
			}
			corpus[kind] = append(corpus[kind], string(b))
		}
	}
	for _, kind := range []string{"chat", "cjk"} {
		var bpeErr, approxErr []float64
		for _, body := range corpus[kind] {
			var req map[string]any
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			req["stream"], req["max_tokens"] = false, 1
			b, _ := json.Marshal(req)
			resp, err := http.Post(sim.URL+"/v1/chat/completions", "application/json", bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			u := clientUsage(t, apiCase{name: kind}, resp)
			bpe, _ := recorder.EstimatePrompt(sse.ChatCompletions, b, tok)
			approx, _ := recorder.EstimatePrompt(sse.ChatCompletions, b, recorder.ApproxTokens)
			bpeErr = append(bpeErr, float64(bpe.Tokens-u.prompt)/float64(u.prompt))
			approxErr = append(approxErr, float64(approx.Tokens-u.prompt)/float64(u.prompt))
			t.Logf("%s: server %d, BPE estimate %d (%+.1f%%), approx %d (%+.1f%%)", kind, u.prompt, bpe.Tokens, 100*bpeErr[len(bpeErr)-1], approx.Tokens, 100*approxErr[len(approxErr)-1])
		}
		for _, e := range bpeErr {
			if e < -0.05 || e > 0.05 {
				t.Errorf("%s: the BPE estimate is %+.1f%% off the server's usage (want within 5%%: the templates differ by a few tokens a message)", kind, 100*e)
			}
		}
	}
}
