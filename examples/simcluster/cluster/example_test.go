package cluster_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/reelkit/reel/examples/simcluster/cluster"
)

// Start a simulated server on a loopback port, ten times faster than real
// time, and stop it by cancelling ctx (or calling Close).
func ExampleStart() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := cluster.Start(ctx, "127.0.0.1:0", cluster.Options{TimeScale: 10, LongPromptThreshold: 4096})
	if err != nil {
		panic(err)
	}
	defer srv.Close(context.Background())
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"messages":[{"role":"user","content":"hello"}],"max_tokens":5,"ignore_eos":true}`))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.Status, resp.Header.Get("x-batch-size"), resp.Header.Get("x-queue-depth"))
	// Output: 200 OK 1 0
}

// Ask what a burst would do, in simulated time and without HTTP.
func ExampleSimulate() {
	var reqs []cluster.SimRequest
	for i := range 4 {
		reqs = append(reqs, cluster.SimRequest{Arrival: time.Duration(i) * time.Millisecond, PromptTokens: 6000, OutputTokens: 100})
	}
	res, err := cluster.Simulate(context.Background(), cluster.Options{}, reqs)
	if err != nil {
		panic(err)
	}
	for i, r := range res {
		fmt.Printf("request %d: queue depth %d, TTFT %v\n", i, r.QueueDepth, r.TTFT.Round(time.Millisecond))
	}
	// Output:
	// request 0: queue depth 0, TTFT 543ms
	// request 1: queue depth 0, TTFT 1.086s
	// request 2: queue depth 1, TTFT 1.63s
	// request 3: queue depth 2, TTFT 2.127s
}
