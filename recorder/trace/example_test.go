package trace_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder/trace"
)

func ExampleImport() {
	const mooncake = `{"timestamp": 0, "input_length": 1200, "output_length": 52, "hash_ids": [0, 1, 2]}
{"timestamp": 105, "input_length": 1800, "output_length": 26, "hash_ids": [0, 1, 3, 4]}
`
	var xs []*formats.Exchange
	rep, err := trace.Import(context.Background(), trace.NewMooncakeReader(strings.NewReader(mooncake)),
		trace.ImportOptions{Shape: trace.ShapeCompletions}, func(x *formats.Exchange) error {
			xs = append(xs, x)
			return nil
		})
	if err != nil {
		panic(err)
	}
	shared := 0
	for shared < len(xs[0].PrefixHashes) && xs[0].PrefixHashes[shared] == xs[1].PrefixHashes[shared] {
		shared++
	}
	fmt.Println(rep.Rows, "requests;", xs[1].Ts.Sub(xs[0].Ts), "apart;", xs[1].PromptTokens, "prompt tokens")
	fmt.Println(shared*trace.PrefixBlockTokens, "leading prompt tokens shared")
	// Output:
	// 2 requests; 105ms apart; 1800 prompt tokens
	// 1024 leading prompt tokens shared
}

func ExampleNewExporter() {
	e, err := trace.NewExporter(os.Stdout, trace.ExportOptions{Format: trace.Mooncake, PrefixBlockTokens: 16})
	if err != nil {
		panic(err)
	}
	chain := []int64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43}
	for i, n := range []int{520, 530} { // the same first 512 tokens, then apart
		x := &formats.Exchange{TsUnixNs: int64(i) * 250e6, PromptTokens: int32(n), OutputTokens: 9,
			PrefixHashes: append(chain[:32:32], int64(100+i))}
		if err := e.Write(x); err != nil {
			panic(err)
		}
	}
	e.Close()
	// Output:
	// {"timestamp":0,"input_length":520,"output_length":9,"hash_ids":[0,1]}
	// {"timestamp":250,"input_length":530,"output_length":9,"hash_ids":[0,2]}
}
