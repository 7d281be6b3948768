package formats

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/parquet-go/parquet-go"
)

// Row shredding: records are split into column values here, by hand, and
// handed to the file's column writers, instead of going through parquet-go's
// reflective GenericWriter.Write (which walks every field with reflect and
// sorts each map through a reflect swapper). The values, their order and
// their repetition/definition levels are exactly what GenericWriter writes
// for the same rows: TestShredMatchesReflection writes the same records both
// ways and compares the files byte for byte.
//
// Columns are filled in schema order (depth first, field declaration order):
// each scalar field is one column, a list one (its element), a
// map<string,string> two (key, value). A non-empty list or map writes its
// first element at repetition level 0 and the others at 1, all at definition
// level 1; an empty (or nil) one writes a single null at levels 0/0. Map
// entries go in ascending key order, as parquet-go writes them.

// shredBatch is how many rows go to the column writers at a time. A column
// writer starts a new page only between calls, once its buffer passes the
// page size; GenericWriter.Write uses the same batch, so pages break at the
// same rows.
const shredBatch = 64

// shredder fills per-column value buffers for a batch of rows and writes
// them to the column writers of the current row group.
type shredder struct {
	cols  []*parquet.ColumnWriter
	vals  [][]parquet.Value // per column: the batch's values, in row order
	col   int               // next column of the row being shredded
	pairs []kv              // scratch: one map's entries, sorted by key

	// lastKeys[c], for the key column c of a map, holds the sorted keys of
	// the last map whose keys differed from the one before.
	lastKeys [][]string
}

type kv struct{ k, v string }

func newShredder(cols []*parquet.ColumnWriter) *shredder {
	return &shredder{cols: cols, vals: make([][]parquet.Value, len(cols)), lastKeys: make([][]string, len(cols))}
}

// writeRows shreds rows (in the order given by order, or as they are when order
// is nil) into the column writers, shredBatch rows at a time.
func writeRows[T Record](s *shredder, rows *rowBuffer[T], order []int32) error {
	return writeFirst(s, rows, order, rows.n)
}

// writeFirst shreds the first n rows of order (of rows when order is nil)
// into the column writers, shredBatch rows at a time.
func writeFirst[T Record](s *shredder, rows *rowBuffer[T], order []int32, n int) error {
	for start := 0; start < n; start += shredBatch {
		end := min(start+shredBatch, n)
		for i := start; i < end; i++ {
			j := i
			if order != nil {
				j = int(order[i])
			}
			switch r := any(rows.at(j)).(type) {
			case *Exchange:
				s.exchange(r)
			case *Result:
				s.result(r)
			case *Metric:
				s.metric(r)
			}
			if s.col != len(s.cols) {
				// The shredders below and the schema of T disagree: a
				// programming error that TestShredMatchesReflection catches.
				return fmt.Errorf("shred row: filled %d of %d columns", s.col, len(s.cols))
			}
			s.col = 0
		}
		if err := s.flush(); err != nil {
			return err
		}
	}
	for i := range s.vals {
		clear(s.vals[i][:cap(s.vals[i])]) // drop references to the rows' bodies
	}
	return nil
}

// flush hands the buffered values to the column writers.
func (s *shredder) flush() error {
	for i, c := range s.cols {
		if _, err := c.WriteRowValues(s.vals[i]); err != nil {
			return fmt.Errorf("write column %d: %w", i, err)
		}
		s.vals[i] = s.vals[i][:0]
	}
	return nil
}

func (s *shredder) exchange(x *Exchange) {
	s.timestamp(x.Ts)
	s.int64(x.TsUnixNs)
	s.string(x.Recorder)
	s.int64(x.Seq)
	s.int64(x.ConnID)
	s.int32(x.ConnSeq)
	s.string(x.Session)
	s.string(x.Client)
	s.string(x.Method)
	s.string(x.Host)
	s.string(x.Path)
	s.string(x.Query)
	s.stringMap(x.ReqHeaders)
	s.string(x.ReqContentType)
	s.bytes(x.ReqBody)
	s.int64(x.ReqBodyBytes)
	s.bool(x.ReqBodyTrunc)
	s.string(x.Model)
	s.bool(x.Stream)
	s.int32(x.MaxTokens)
	s.int32(x.PromptTokens)
	s.string(x.PromptTokensSource)
	s.int64List(x.PrefixHashes)
	s.string(x.Topic)
	s.int32(x.Status)
	s.stringMap(x.RespHeaders)
	s.string(x.RespContentType)
	s.bytes(x.RespBody)
	s.int64(x.RespBodyBytes)
	s.int64(x.TTFBNs)
	s.int64(x.DurationNs)
	s.int32(x.Events)
	s.int64(x.TTFTNs)
	s.int32List(x.EventGapsUs)
	s.int32(x.OutputTokens)
	s.int32(x.BatchSize)
	s.int32(x.QueueDepth)
	s.string(x.Upstream)
	s.stringMap(x.Context)
	s.bool(x.Complete)
	s.string(x.Error)
	s.string(x.RedactErr)
	s.int64(x.TurnKey)
	s.int64(x.ParentTurnKey)
	s.optInt32(x.CachedTokens)
}

func (s *shredder) result(r *Result) {
	s.string(r.RunID)
	s.int32(r.Shard)
	s.string(r.Recorder)
	s.int64(r.Seq)
	s.timestamp(r.OrigTs)
	s.timestamp(r.Frame)
	s.int64(r.ScheduledNs)
	s.int64(r.SentUnixNs)
	s.int64(r.LagNs)
	s.int32(r.Status)
	s.string(r.Error)
	s.int64(r.TTFBNs)
	s.int64(r.TTFTNs)
	s.int64(r.TTSTNs)
	s.int64(r.E2ENs)
	s.int64(r.E2ESchedNs)
	s.int32(r.Events)
	s.int32(r.OutputTokens)
	s.int32List(r.ITLUs)
	s.int64(r.BytesSent)
	s.int64(r.BytesRecv)
	s.int32(r.BatchSize)
	s.int32(r.QueueDepth)
	s.string(r.Method)
	s.string(r.Path)
	s.string(r.Model)
	s.int32(r.PromptTokens)
	s.int64(r.SessionDelayNs)
	s.optInt32(r.CachedTokens)
}

func (s *shredder) metric(m *Metric) {
	s.timestamp(m.Ts)
	s.int64(m.TsUnixNs)
	s.string(m.Source)
	s.string(m.Name)
	s.stringMap(m.Labels)
	s.put(parquet.DoubleValue(m.Value))
}

// put appends a required, non-repeated column's value.
func (s *shredder) put(v parquet.Value) {
	s.vals[s.col] = append(s.vals[s.col], v)
	s.col++
}

// optInt32 is an optional column: a value at definition level 1, or a null
// at level 0.
func (s *shredder) optInt32(v *int32) {
	if v == nil {
		s.put(parquet.NullValue())
		return
	}
	v32 := parquet.Int32Value(*v)
	v32.SetDefinitionLevel(1)
	s.put(v32)
}

func (s *shredder) int64(v int64)   { s.put(parquet.Int64Value(v)) }
func (s *shredder) int32(v int32)   { s.put(parquet.Int32Value(v)) }
func (s *shredder) bool(v bool)     { s.put(parquet.BooleanValue(v)) }
func (s *shredder) bytes(b []byte)  { s.put(parquet.ByteArrayValue(b)) }
func (s *shredder) string(v string) { s.put(parquet.ByteArrayValue(stringBytes(v))) }

// timestamp is a TIMESTAMP(MICROS) column: microseconds since the epoch, as
// parquet-go converts a time.Time (a zero time is year 1, not 1970).
func (s *shredder) timestamp(t time.Time) { s.int64(t.UnixMicro()) }

// stringBytes views s as bytes without copying; the column buffers copy
// what they keep and never write through it.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// element appends the i-th element of a repeated column c: definition
// level 1, repetition level 0 for the first element of a row, 1 after.
// (The in-place setters inline; Value.Level does not.)
func (s *shredder) element(c, i int, v parquet.Value) {
	s.vals[c] = append(s.vals[c], v)
	p := &s.vals[c][len(s.vals[c])-1]
	p.SetDefinitionLevel(1)
	if i > 0 {
		p.SetRepetitionLevel(1)
	}
}

// empty appends the null that stands for an empty list or map in column c
// (levels 0/0).
func (s *shredder) empty(c int) {
	s.vals[c] = append(s.vals[c], parquet.NullValue())
}

func (s *shredder) int64List(l []int64) {
	c := s.col
	s.col++
	if len(l) == 0 {
		s.empty(c)
		return
	}
	s.vals[c] = slices.Grow(s.vals[c], len(l))
	for i, v := range l {
		s.element(c, i, parquet.Int64Value(v))
	}
}

func (s *shredder) int32List(l []int32) {
	c := s.col
	s.col++
	if len(l) == 0 {
		s.empty(c)
		return
	}
	s.vals[c] = slices.Grow(s.vals[c], len(l))
	for i, v := range l {
		s.element(c, i, parquet.Int32Value(v))
	}
}

// stringMap fills a map<string,string>'s key and value columns, in key order.
// Consecutive rows mostly carry the same keys (one client's headers), so the
// previous row's sorted keys are tried first: looking each one up is cheaper
// than iterating the map and sorting its entries.
func (s *shredder) stringMap(m map[string]string) {
	kc, vc := s.col, s.col+1
	s.col += 2
	if len(m) == 0 {
		s.empty(kc)
		s.empty(vc)
		return
	}
	pairs := s.pairs[:0]
	if prev := s.lastKeys[kc]; len(prev) == len(m) {
		for _, k := range prev {
			v, ok := m[k]
			if !ok {
				break
			}
			pairs = append(pairs, kv{k, v})
		}
	}
	if len(pairs) != len(m) {
		pairs = pairs[:0]
		for k, v := range m {
			pairs = append(pairs, kv{k, v})
		}
		slices.SortFunc(pairs, func(a, b kv) int { return strings.Compare(a.k, b.k) })
		keys := s.lastKeys[kc][:0]
		for _, p := range pairs {
			keys = append(keys, p.k)
		}
		s.lastKeys[kc] = keys
	}
	for i, p := range pairs {
		s.element(kc, i, parquet.ByteArrayValue(stringBytes(p.k)))
		s.element(vc, i, parquet.ByteArrayValue(stringBytes(p.v)))
	}
	clear(pairs)
	s.pairs = pairs[:0]
}
