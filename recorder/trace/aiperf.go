package trace

import (
	"bufio"
	"strconv"
)

// aiperfEncoder writes the JSONL AIPerf replays with --custom-dataset-type
// mooncake_trace --fixed-schedule (docs/benchmark-modes/trace-replay.md):
// Mooncake's fields — "timestamp" in ms, "input_length", "output_length",
// "hash_ids" of --isl-block-size tokens (512 by default) — plus
// "session_id", which AIPerf uses to keep a conversation's turns on one
// sticky session.
type aiperfEncoder struct {
	w   *bufio.Writer
	buf []byte
}

func (e *aiperfEncoder) encode(r *ExportRow) error {
	b := e.buf[:0]
	b = append(b, `{"timestamp":`...)
	b = strconv.AppendInt(b, r.Offset.Milliseconds(), 10)
	if r.Session != "" {
		b = append(b, `,"session_id":`...)
		b, _ = appendJSONString(b, r.Session)
	}
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
