package traffic_test

import (
	"context"
	"fmt"
	"time"

	"github.com/reelkit/reel/examples/simcluster/cluster"
	"github.com/reelkit/reel/examples/simcluster/traffic"
)

// Look at a plan without sending it: the built-in bursty process with a
// 10-s window of 4× prompts.
func ExamplePlan() {
	plan, err := traffic.Plan(traffic.Options{
		Duration: 30 * time.Second, Seed: 1,
		Incident: traffic.Incident{At: 10 * time.Second, For: 10 * time.Second},
	})
	if err != nil {
		panic(err)
	}
	long := 0
	for _, r := range plan {
		if r.Long {
			long++
		}
	}
	fmt.Println(len(plan) > 50, long > 5, plan[0].Path)
	// Output: true true /v1/chat/completions
}

// Send generated traffic to an in-process simulated cluster, both running
// twenty times faster than real time.
func ExampleRun() {
	ctx := context.Background()
	srv, err := cluster.Start(ctx, "127.0.0.1:0", cluster.Options{TimeScale: 20})
	if err != nil {
		panic(err)
	}
	defer srv.Close(context.Background())
	sum, err := traffic.Run(ctx, traffic.Options{Target: srv.URL, Speed: 20, Duration: 2 * time.Second, Seed: 3})
	if err != nil {
		panic(err)
	}
	fmt.Println(sum.Sent == sum.Planned, sum.Failed)
	// Output: true 0
}
