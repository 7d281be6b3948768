package trace

import (
	"bufio"
	"strconv"
)

// vllmEncoder writes the JSONL of vLLM's timed_trace dataset
// (vllm bench serve --dataset-name timed_trace) in its defaults:
// "timestamp" in seconds (--timed-trace-sec-multiplier 1), "input_length",
// "output_length", and "hash_ids" of 16-token chunks
// (--timed-trace-chunk-hash-size 16). Other block sizes need that flag.
type vllmEncoder struct {
	w   *bufio.Writer
	buf []byte
}

func (e *vllmEncoder) encode(r *ExportRow) error {
	b := e.buf[:0]
	b = append(b, `{"timestamp":`...)
	b = strconv.AppendFloat(b, float64(r.Offset.Milliseconds())/1000, 'f', -1, 64)
	b = append(b, `,"input_length":`...)
	b = strconv.AppendInt(b, r.Input, 10)
	b = append(b, `,"output_length":`...)
	b = strconv.AppendInt(b, r.Output, 10)
	b = appendHashIDs(b, r.HashIDs)
	b = append(b, "}\n"...)
	e.buf = b
	_, err := e.w.Write(b)
	return err
}
