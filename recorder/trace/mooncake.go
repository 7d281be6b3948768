package trace

import (
	"bufio"
	"io"
	"strconv"
)

// maxLine bounds one JSONL line (a row with a few hundred thousand hash ids).
const maxLine = 16 << 20

// MooncakeMapping is the Mooncake trace's JSONL (kvcache-ai/Mooncake,
// FAST25-release): "timestamp" in ms from the trace start, "input_length"
// and "output_length" in tokens, "hash_ids" of 512-token prompt blocks.
var MooncakeMapping = Mapping{Time: "timestamp", TimeUnit: UnitMilliseconds,
	Input: "input_length", Output: "output_length", HashIDs: "hash_ids"}

// NewMooncakeReader reads a Mooncake JSONL trace (MooncakeMapping). Blank
// lines are skipped.
func NewMooncakeReader(r io.Reader) Reader {
	return NewJSONLReader(r, MooncakeMapping)
}

func newLineScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	return sc
}

// mooncakeEncoder writes Mooncake JSONL (also what AIPerf's mooncake_trace
// reads; see aiperf.go for its extra fields).
type mooncakeEncoder struct {
	w   *bufio.Writer
	buf []byte
}

func (e *mooncakeEncoder) encode(r *ExportRow) error {
	b := e.buf[:0]
	b = append(b, `{"timestamp":`...)
	b = strconv.AppendInt(b, r.Offset.Milliseconds(), 10)
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

func appendHashIDs(b []byte, ids []int64) []byte {
	b = append(b, `,"hash_ids":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return append(b, ']')
}
