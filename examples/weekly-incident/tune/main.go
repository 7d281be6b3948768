package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reelkit/reel/examples/simcluster/cluster"
	"github.com/reelkit/reel/examples/simcluster/traffic"
)

func q(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func main() {
	rate := flag.Float64("rate", 3, "")
	dur := flag.Duration("dur", 10*time.Minute, "")
	at := flag.Duration("at", 5*time.Minute, "")
	forD := flag.Duration("for", 2*time.Minute, "")
	share := flag.Float64("share", 0.5, "")
	factor := flag.Float64("factor", 4, "")
	seed := flag.Uint64("seed", 1, "")
	kv := flag.Int("kv", 0, "")
	thr := flag.Int("thr", 3000, "")
	flag.Parse()
	plan, err := traffic.Plan(traffic.Options{Rate: *rate, Duration: *dur, Seed: *seed,
		Incident: traffic.Incident{At: *at, For: *forD, Share: *share, Factor: *factor}})
	if err != nil {
		panic(err)
	}
	reqs := make([]cluster.SimRequest, len(plan))
	for i, p := range plan {
		var b struct {
			Messages []struct{ Role, Content string }
		}
		json.Unmarshal(p.Body, &b)
		var sb strings.Builder
		for _, m := range b.Messages {
			sb.WriteString(m.Role + ": " + m.Content + "\n")
		}
		reqs[i] = cluster.SimRequest{Arrival: p.Offset, Prompt: sb.String(), OutputTokens: p.MaxTokens}
	}
	for _, fix := range []bool{false, true} {
		o := cluster.Options{KVCapacityTokens: *kv}
		if fix {
			o.LongPromptThreshold = *thr
		}
		res, err := cluster.Simulate(context.Background(), o, reqs)
		if err != nil {
			panic(err)
		}
		var inT, outT, inE, outE, inQ []time.Duration
		var longT []time.Duration
		frames := map[int][]time.Duration{}
		for i, r := range res {
			p := plan[i]
			if r.Err != nil {
				continue
			}
			if r.PromptTokens >= *thr {
				longT = append(longT, r.TTFT)
				continue
			}
			in := p.Offset >= *at && p.Offset < *at+*forD
			frames[int(p.Offset/(30*time.Second))] = append(frames[int(p.Offset/(30*time.Second))], r.TTFT)
			if in {
				inT, inE = append(inT, r.TTFT), append(inE, r.E2E)
				inQ = append(inQ, r.Queue)
				if r.TTFT > 2*time.Second {
					fmt.Printf("   slow short at %v: ttft %v queue %v prompt %d cached %d preempt %d qdepth %d batch %d\n", p.Offset, r.TTFT, r.Queue, r.PromptTokens, r.CachedTokens, r.Preemptions, r.QueueDepth, r.BatchAtAdmit)
				}
			} else {
				outT, outE = append(outT, r.TTFT), append(outE, r.E2E)
			}
		}
		fmt.Printf("fix=%v n=%d in: ttft p50 %v p99 %v e2e p99 %v | out: ttft p50 %v p99 %v e2e p99 %v\n", fix, len(plan),
			q(inT, .5), q(inT, .99), q(inE, .99), q(outT, .5), q(outT, .99), q(outE, .99))
		fmt.Printf("  in queue p99 %v  long ttft p50 %v p99 %v\n", q(inQ, .99), q(longT, .5), q(longT, .99))
		var line []string
		for f := 0; f < int(*dur/(30*time.Second)); f++ {
			line = append(line, fmt.Sprintf("%d", q(frames[f], .99).Milliseconds()))
		}
		fmt.Println("  ttft p99/30s frame ms:", strings.Join(line, " "))
	}
}
