package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/redact"
	"github.com/reelkit/reel/redact/redacttest"
)

// TestNoPIIOnDisk seeds every entity of the redaction leak corpus into
// paths, queries, headers and request and response bodies (JSON and SSE),
// proxies them through a recorder writing a real dataset, and scans every
// byte written (decompressed) for any of them. The upstream must still get
// the original values: redaction is for the dataset, never the traffic.
func TestNoPIIOnDisk(t *testing.T) {
	corpus := redacttest.Corpus()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(b, &req)
		text := ""
		if len(req.Messages) > 0 {
			text = req.Messages[0].Content
		}
		w.Header().Set("X-Echo-User", r.Header.Get("X-User"))
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, word := range strings.SplitAfter(text, " ") {
				fmt.Fprintf(w, "data: %s\n\n", chunk(word))
			}
			fmt.Fprintf(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"echo": text, "header": r.Header.Get("X-User"), "path": r.URL.Path})
	}))
	defer upstream.Close()

	dir := t.TempDir()
	key, err := redact.NewRandomKey()
	if err != nil {
		t.Fatal(err)
	}
	red, err := redact.New(redact.DefaultPolicy(), key)
	if err != nil {
		t.Fatal(err)
	}
	pipe, w, err := recorder.OpenDataset(context.Background(), formats.WriterOptions{Dir: dir, Recorder: "pii"},
		red, recorder.Options{Pipeline: recorder.PipelineOptions{Queue: 4 * len(corpus)}})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(upstream.URL)
	p, err := New(Options{Upstream: u, Recorder: pipe})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer("", p)
	go srv.Serve(ln)
	base := "http://" + ln.Addr().String()

	for i, e := range corpus {
		for _, stream := range []bool{false, true} {
			body, _ := json.Marshal(map[string]any{
				"model": "m", "stream": stream,
				"messages": []map[string]string{{"role": "user", "content": "please contact " + e.Value + " today"}},
				"user":     e.Value,
			})
			target := base + "/v1/users/" + url.PathEscape(e.Value) + "/chat/completions?email=" + url.QueryEscape(e.Value)
			req, _ := http.NewRequest("POST", target, strings.NewReader(string(body)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-User", e.Value)
			req.Header.Set("Authorization", "Bearer "+e.Value)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%d %s: %v", i, e.Type, err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("X-Echo-User") != e.Value {
				t.Fatalf("%s: status %d, upstream saw header %q, want the original value", e.Type, resp.StatusCode, resp.Header.Get("X-Echo-User"))
			}
			if !stream && !strings.Contains(string(got), e.Value[:4]) {
				t.Fatalf("%s: response %q lost the original value", e.Type, got)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pipe.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var written float64
	if st := w.Stats(); st.Records != int64(2*len(corpus)) {
		t.Fatalf("wrote %d records, want %d (dropped: the scan would prove nothing)", st.Records, 2*len(corpus))
	} else {
		written = float64(st.Records)
	}
	leaks, scanned := redacttest.ScanDir(t, dir)
	for _, l := range leaks {
		t.Errorf("leak in %s: %s %q (found %q)", l.Where, l.Type, l.Value, l.Needle)
	}
	t.Logf("%v exchanges, %d bytes scanned, %d leaks", written, scanned, len(leaks))
	if len(leaks) > 0 {
		// Name the columns that leaked, for whoever fixes it.
		r, err := formats.OpenReader[formats.Exchange](ctx, []string{dir}, formats.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for {
			x, err := r.Next()
			if err != nil {
				break
			}
			v := reflect.ValueOf(*x)
			for i := range v.NumField() {
				if l := redacttest.Find(fmt.Appendf(nil, "%v %s", v.Field(i).Interface(), v.Field(i).Interface()), v.Type().Field(i).Name); len(l) > 0 {
					t.Errorf("exchange %d column %s: %+v", x.Seq, v.Type().Field(i).Name, l)
				}
			}
		}
	}
}
