package formats_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/reelkit/reel/formats"
)

// Write a few exchanges out of order, then read them back in time order.
func Example() {
	dir, err := os.MkdirTemp("", "reel-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	w, err := formats.NewWriter[formats.Exchange](ctx, formats.WriterOptions{Dir: dir, Recorder: "edge-1", Source: "proxy"})
	if err != nil {
		log.Fatal(err)
	}
	start := time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
	for _, sec := range []int{2, 0, 1} { // completion order, not start order
		ts := start.Add(time.Duration(sec) * time.Second)
		x := formats.Exchange{Ts: ts, TsUnixNs: ts.UnixNano(), Seq: int64(sec + 1), Method: "POST", Path: "/v1/completions"}
		if err := w.Write(&x); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		log.Fatal(err)
	}

	r, err := formats.OpenReader[formats.Exchange](ctx, []string{dir}, formats.ReaderOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for {
		x, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(x.Seq, x.Time().Format(time.TimeOnly))
	}
	// Output:
	// 1 09:00:00
	// 2 09:00:01
	// 3 09:00:02
}
