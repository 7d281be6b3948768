// Command shards-bench supports bench/shards/run.sh, which measures the
// aggregate rate of n `reel replay` shard processes on one machine. It
// writes the synthetic window they replay; the trivial target they replay
// it against is bench/replay's server:
//
//	shards-bench dataset -out DIR -n 200000 -rate 100000 -conns 1024
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/reelkit/reel/formats"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: shards-bench dataset [flags]   (the target is bench/replay's server)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "dataset":
		err = dataset(context.Background(), os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "shards-bench:", err)
		os.Exit(1)
	}
}

// dataset writes n small GET exchanges at a constant rate, spread round
// robin over conns recorded connections (the unit reel shards by).
func dataset(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("dataset", flag.ContinueOnError)
	out := fs.String("out", "", "dataset directory (required)")
	n := fs.Int("n", 200000, "exchanges")
	rate := fs.Float64("rate", 100000, "recorded arrival rate, exchanges/s")
	conns := fs.Int("conns", 1024, "recorded connections")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *n < 1 || *rate <= 0 || *conns < 1 {
		return fmt.Errorf("want -out DIR, -n ≥ 1, -rate > 0, -conns ≥ 1")
	}
	w, err := formats.NewWriter[formats.Exchange](ctx, formats.WriterOptions{Dir: *out, Recorder: "bench", Source: "bench/shards", NoSpool: true})
	if err != nil {
		return fmt.Errorf("open dataset: %w", err)
	}
	t0 := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	gap := time.Duration(float64(time.Second) / *rate)
	for i := range *n {
		ts := t0.Add(time.Duration(i) * gap)
		x := formats.Exchange{Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "bench", Seq: int64(i + 1),
			ConnID: int64(i%*conns + 1), ConnSeq: int32(i / *conns), Method: "GET", Host: "prod.example",
			Path: "/", Query: "i=" + strconv.Itoa(i+1), Status: 200}
		if err := w.Write(&x); err != nil {
			w.Close(context.Background())
			return fmt.Errorf("write: %w", err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		return fmt.Errorf("close dataset: %w", err)
	}
	return nil
}

// server answers every request with a short body.
