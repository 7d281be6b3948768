// Package analysistest builds synthetic recordings and result sets with
// known shapes for tests of reel's analysis and its commands, and writes
// them as datasets.
package analysistest

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/formatstest"
)

// Start is when every synthetic dataset begins: Wednesday 2026-03-04 14:00 UTC.
var Start = time.Date(2026, 3, 4, 14, 0, 0, 0, time.UTC)

// Burst is the long-prompt burst of WeeklyIncident: [BurstFrom, BurstTo).
var (
	BurstFrom = Start.Add(time.Minute)
	BurstTo   = Start.Add(2 * time.Minute)
)

// WeeklyIncident returns five minutes of chat traffic at 4 req/s, prompts of
// about 500 tokens (3 % long), with a one-minute burst (14:01:00–14:02:00)
// in which 62 % of prompts are 4× longer. Long prompts stall the batch, so
// every request in a burst frame is slower; batch size grows a little.
// Streams with TTFT and event gaps; deterministic per seed.
func WeeklyIncident(seed uint64) []*formats.Exchange {
	rng := rand.New(rand.NewPCG(seed, 1))
	var xs []*formats.Exchange
	var seq int64
	for frame := range 60 {
		at0 := Start.Add(time.Duration(frame) * 5 * time.Second)
		burst := !at0.Before(BurstFrom) && at0.Before(BurstTo)
		longP := 0.03
		if burst {
			longP = 0.62
		}
		var rows []*formats.Exchange
		longN := 0
		for i := range 20 {
			at := at0.Add(time.Duration(i)*250*time.Millisecond + time.Duration(rng.IntN(200))*time.Millisecond)
			prompt := int32(400 + rng.IntN(200))
			if rng.Float64() < longP {
				prompt *= 4
				longN++
			}
			seq++
			rows = append(rows, &formats.Exchange{
				Ts: at, TsUnixNs: at.UnixNano(), Recorder: "test", Seq: seq, Method: "POST", Host: "gw",
				Path: "/v1/chat/completions", Model: "llama-3-8b", Stream: true, PromptTokens: prompt,
				PromptTokensSource: formats.TokensFromUsage, ReqBodyBytes: int64(prompt) * 4, Status: 200,
				PrefixHashes: []int64{1, 2, seq * 100, seq*100 + 1}, Complete: true,
			})
		}
		// Prefill of the frame's long prompts stalls every request in it;
		// how much varies from frame to frame.
		stall := time.Duration(longN) * time.Duration(40+rng.IntN(40)) * time.Millisecond
		for _, x := range rows {
			ttft := 40*time.Millisecond + time.Duration(x.PromptTokens)*50*time.Microsecond + stall + time.Duration(rng.IntN(30))*time.Millisecond
			out := int32(20 + rng.IntN(20))
			gaps := make([]int32, out-1)
			last := ttft
			for j := range gaps {
				g := int32(8000 + rng.IntN(4000) + longN*300)
				gaps[j] = g
				last += time.Duration(g) * time.Microsecond
			}
			x.TTFBNs, x.TTFTNs, x.EventGapsUs, x.OutputTokens = int64(ttft), int64(ttft), gaps, out
			x.Events = out + 1
			x.DurationNs = int64(last + time.Millisecond)
			x.BatchSize = int32(8 + rng.IntN(4) + longN/4)
			x.QueueDepth = int32(rng.IntN(3))
			xs = append(xs, x)
		}
	}
	return xs
}

// WeeklyIncidentQueued is WeeklyIncident on a server that reports its
// queue: the long prompts' prefill backs up a queue that drains over the
// following frames, so every request waits its backlog and queue depth
// tracks the tail more closely than the long-prompt share does (the
// symptom correlates better than the cause). Deterministic per seed.
func WeeklyIncidentQueued(seed uint64) []*formats.Exchange {
	xs := WeeklyIncident(seed)
	frame := func(x *formats.Exchange) int { return int(x.Ts.Sub(Start) / (5 * time.Second)) }
	longN := map[int]int{}
	for _, x := range xs {
		if x.PromptTokens >= 1600 {
			longN[frame(x)]++
		}
	}
	// Backlog in long-prompt prefills: each frame's arrivals plus half of
	// the previous frame's backlog.
	backlog := make([]float64, frame(xs[len(xs)-1])+1)
	for f := range backlog {
		backlog[f] = float64(longN[f])
		if f > 0 {
			backlog[f] += backlog[f-1] / 2
		}
	}
	for _, x := range xs {
		b := backlog[frame(x)]
		x.QueueDepth = int32(math.Round(b * 1.5))
		wait := time.Duration(b * float64(60*time.Millisecond))
		x.TTFBNs += int64(wait)
		x.TTFTNs += int64(wait)
		x.DurationNs += int64(wait)
	}
	return xs
}

// Run returns n replay results 20 ms apart from Start whose E2E is
// lognormal around 200 ms × factor, streaming 20 tokens with TTFT a tenth
// of E2E; deterministic per seed.
func Run(seed uint64, n int, factor float64) []*formats.Result {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]*formats.Result, 0, n)
	for i := range n {
		at := Start.Add(time.Duration(i) * 20 * time.Millisecond)
		e2e := time.Duration(factor * float64(200*time.Millisecond) * math.Exp(0.5*rng.NormFloat64()))
		ttft := e2e / 10
		gap := int32((e2e - ttft) / 19 / time.Microsecond)
		itl := make([]int32, 19)
		for j := range itl {
			itl[j] = gap
		}
		lag := int64(50_000 + rng.IntN(100_000))
		out = append(out, &formats.Result{
			RunID: "run", Recorder: "test", Seq: int64(i + 1), OrigTs: at, Frame: at.Truncate(5 * time.Second),
			ScheduledNs: int64(at.Sub(Start)), SentUnixNs: at.UnixNano() + lag, LagNs: lag, Status: 200,
			TTFBNs: int64(ttft), TTFTNs: int64(ttft), TTSTNs: int64(gap) * 1000, E2ENs: int64(e2e), E2ESchedNs: int64(e2e) + lag,
			Events: 21, OutputTokens: 20, ITLUs: itl, BatchSize: int32(8 + i%5), QueueDepth: -1,
			Method: "POST", Path: "/v1/chat/completions", Model: "llama-3-8b", PromptTokens: int32(300 + rng.IntN(400)),
		})
	}
	return out
}

// WriteDataset writes rows as a reel dataset under dir (formatstest.Write
// with the default options).
func WriteDataset[T formats.Exchange | formats.Result](tb testing.TB, dir string, rows []*T) {
	tb.Helper()
	formatstest.Write(tb, dir, formats.WriterOptions{}, rows)
}

// Replayed turns a recording into the results of replaying it at speed 1
// with the given lag, every latency multiplied by scale(x) (1 reproduces the
// recording; the long-queue fix of the weekly incident is a scale below 1
// for burst requests).
func Replayed(xs []*formats.Exchange, lag time.Duration, scale func(x *formats.Exchange) float64) []*formats.Result {
	out := make([]*formats.Result, 0, len(xs))
	if len(xs) == 0 {
		return out
	}
	t0 := xs[0].TsUnixNs
	for _, x := range xs {
		f := scale(x)
		mul := func(ns int64) int64 { return int64(float64(ns) * f) }
		itl := make([]int32, len(x.EventGapsUs))
		var last int64 = mul(x.TTFTNs)
		for i, g := range x.EventGapsUs {
			itl[i] = int32(float64(g) * f)
			last += int64(itl[i]) * 1000
		}
		var ttst int64
		if len(itl) > 0 {
			ttst = int64(itl[0]) * 1000
		}
		out = append(out, &formats.Result{
			RunID: "replay", Recorder: x.Recorder, Seq: x.Seq, OrigTs: x.Time(), Frame: x.Time().Truncate(5 * time.Second),
			ScheduledNs: x.TsUnixNs - t0, SentUnixNs: x.TsUnixNs + int64(lag), LagNs: int64(lag), Status: x.Status,
			TTFBNs: mul(x.TTFBNs), TTFTNs: mul(x.TTFTNs), TTSTNs: ttst, E2ENs: last, E2ESchedNs: last + int64(lag),
			Events: x.Events, OutputTokens: x.OutputTokens, ITLUs: itl, BatchSize: x.BatchSize, QueueDepth: x.QueueDepth,
			Method: x.Method, Path: x.Path, Model: x.Model, PromptTokens: x.PromptTokens,
		})
	}
	return out
}
