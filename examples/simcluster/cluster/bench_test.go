package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkConcurrentStreams serves rounds of n concurrent streams of 100
// tokens each at TimeScale 10 and reports how close wall time stays to the
// simulated schedule (wall/sim = 1 means the step loop and the handlers
// kept up) and the SSE events delivered per second.
func BenchmarkConcurrentStreams(b *testing.B) {
	for _, n := range []int{64, 256} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			const tokens, scale = 100, 10.0
			srv, err := Start(context.Background(), "127.0.0.1:0", Options{TimeScale: scale})
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close(context.Background())
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n, DisableCompression: true}}
			body := fmt.Sprintf(`{"prompt":"hi","max_tokens":%d,"ignore_eos":true,"stream":true}`, tokens)
			// Simulated duration of one round: 100 decode steps of the full
			// batch (the 1-token prompts fit in the first step).
			sim := time.Duration(tokens) * (10*time.Millisecond + time.Duration(n)*300*time.Microsecond)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				var wg sync.WaitGroup
				for range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						resp, err := client.Post(srv.URL+"/v1/completions", "application/json", strings.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}()
				}
				wg.Wait()
			}
			wall := time.Since(start)
			b.ReportMetric(float64(wall)/float64(b.N)/(float64(sim)/scale), "wall/sim")
			b.ReportMetric(float64(b.N*n*tokens)/wall.Seconds(), "events/s")
		})
	}
}
