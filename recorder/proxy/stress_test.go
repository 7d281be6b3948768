package proxy

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/reelkit/reel/recorder"
)

// TestManyStreams runs concurrent SSE requests with bodies through the
// proxy. It guards against golang/go#40747: the HTTP/1 server closing the
// request body once response headers go out, which made the transport tear
// down the upstream connection mid-stream (clients saw "unexpected EOF").
func TestManyStreams(t *testing.T) {
	chunkB := []byte("data: " + chunk("token ") + "\n\n")
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range 16 {
			w.Write(chunkB)
			w.(http.Flusher).Flush()
		}
	})
	r := newRig(t, upstream, nil, recorder.Options{Pipeline: recorder.PipelineOptions{Queue: 4096}}, nil)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var wg sync.WaitGroup
	var errs, done atomic.Int64
	for range 16 {
		wg.Go(func() {
			for range 60 {
				resp, err := c.Post(r.proxyURL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
				if err == nil {
					var b []byte
					b, err = io.ReadAll(resp.Body)
					resp.Body.Close()
					if err == nil && strings.Count(string(b), "data: ") != 16 {
						err = io.ErrUnexpectedEOF
					}
				}
				if err != nil {
					if errs.Add(1) == 1 {
						t.Errorf("stream failed: %v", err)
					}
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	xs := r.recorded(t)
	if errs.Load() > 0 {
		t.Fatalf("%d of %d streams failed", errs.Load(), done.Load())
	}
	for _, x := range xs {
		if !x.Complete || x.Events != 16 || x.Error != "" {
			t.Fatalf("recorded an incomplete stream: events %d error %q", x.Events, x.Error)
		}
	}
	if len(xs) != int(done.Load()) {
		t.Fatalf("recorded %d of %d", len(xs), done.Load())
	}
}
