package formats

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"time"
)

// The spool's record encoding: every field in declaration order, integers as
// varints, strings and byte slices length-prefixed, maps and lists
// count-prefixed, times as Unix seconds plus nanoseconds. It is about ten
// times cheaper than JSON for exchanges with bodies, which matters because
// every record is encoded on the writer's hot path. codecVersion goes into the
// spool header; bump it with any change here.
const codecVersion = 3 // 2: turn_key, parent_turn_key, session_delay_ns; 3: cached_tokens

var errCodec = errors.New("malformed spooled record")

func encodeJSON(v any) ([]byte, error) { return json.Marshal(v) }

// appendRecord appends the encoding of rec to b.
func appendRecord[T Record](b []byte, rec *T) []byte {
	switch r := any(rec).(type) {
	case *Exchange:
		return appendExchange(b, r)
	case *Result:
		return appendResult(b, r)
	case *Metric:
		return appendMetric(b, r)
	}
	return b
}

// decodeRecord decodes one record encoded by appendRecord; the result does
// not alias data.
func decodeRecord[T Record](data []byte, rec *T) error {
	d := decoder{b: data}
	switch r := any(rec).(type) {
	case *Exchange:
		d.exchange(r)
	case *Result:
		d.result(r)
	case *Metric:
		d.metric(r)
	}
	if d.bad || len(d.b) != 0 {
		return errCodec
	}
	return nil
}

func appendExchange(b []byte, x *Exchange) []byte {
	b = appendTime(b, x.Ts)
	b = binary.AppendVarint(b, x.TsUnixNs)
	b = appendString(b, x.Recorder)
	b = binary.AppendVarint(b, x.Seq)
	b = binary.AppendVarint(b, x.ConnID)
	b = binary.AppendVarint(b, int64(x.ConnSeq))
	b = appendString(b, x.Session)
	b = appendString(b, x.Client)
	b = appendString(b, x.Method)
	b = appendString(b, x.Host)
	b = appendString(b, x.Path)
	b = appendString(b, x.Query)
	b = appendMap(b, x.ReqHeaders)
	b = appendString(b, x.ReqContentType)
	b = appendBytes(b, x.ReqBody)
	b = binary.AppendVarint(b, x.ReqBodyBytes)
	b = appendBool(b, x.ReqBodyTrunc)
	b = appendString(b, x.Model)
	b = appendBool(b, x.Stream)
	b = binary.AppendVarint(b, int64(x.MaxTokens))
	b = binary.AppendVarint(b, int64(x.PromptTokens))
	b = appendString(b, x.PromptTokensSource)
	b = binary.AppendUvarint(b, uint64(len(x.PrefixHashes)))
	for _, v := range x.PrefixHashes {
		b = binary.LittleEndian.AppendUint64(b, uint64(v)) // hashes are dense: fixed width
	}
	b = appendString(b, x.Topic)
	b = binary.AppendVarint(b, int64(x.Status))
	b = appendMap(b, x.RespHeaders)
	b = appendString(b, x.RespContentType)
	b = appendBytes(b, x.RespBody)
	b = binary.AppendVarint(b, x.RespBodyBytes)
	b = binary.AppendVarint(b, x.TTFBNs)
	b = binary.AppendVarint(b, x.DurationNs)
	b = binary.AppendVarint(b, int64(x.Events))
	b = binary.AppendVarint(b, x.TTFTNs)
	b = appendInt32s(b, x.EventGapsUs)
	b = binary.AppendVarint(b, int64(x.OutputTokens))
	b = binary.AppendVarint(b, int64(x.BatchSize))
	b = binary.AppendVarint(b, int64(x.QueueDepth))
	b = appendString(b, x.Upstream)
	b = appendMap(b, x.Context)
	b = appendBool(b, x.Complete)
	b = appendString(b, x.Error)
	b = appendString(b, x.RedactErr)
	b = binary.AppendVarint(b, x.TurnKey)
	b = binary.AppendVarint(b, x.ParentTurnKey)
	b = appendOptInt32(b, x.CachedTokens)
	return b
}

func (d *decoder) exchange(x *Exchange) {
	x.Ts = d.time()
	x.TsUnixNs = d.varint()
	x.Recorder = d.string()
	x.Seq = d.varint()
	x.ConnID = d.varint()
	x.ConnSeq = d.int32()
	x.Session = d.string()
	x.Client = d.string()
	x.Method = d.string()
	x.Host = d.string()
	x.Path = d.string()
	x.Query = d.string()
	x.ReqHeaders = d.stringMap()
	x.ReqContentType = d.string()
	x.ReqBody = d.bytes()
	x.ReqBodyBytes = d.varint()
	x.ReqBodyTrunc = d.bool()
	x.Model = d.string()
	x.Stream = d.bool()
	x.MaxTokens = d.int32()
	x.PromptTokens = d.int32()
	x.PromptTokensSource = d.string()
	if n := d.count(8); n > 0 {
		x.PrefixHashes = make([]int64, n)
		for i := range x.PrefixHashes {
			x.PrefixHashes[i] = int64(binary.LittleEndian.Uint64(d.b))
			d.b = d.b[8:]
		}
	}
	x.Topic = d.string()
	x.Status = d.int32()
	x.RespHeaders = d.stringMap()
	x.RespContentType = d.string()
	x.RespBody = d.bytes()
	x.RespBodyBytes = d.varint()
	x.TTFBNs = d.varint()
	x.DurationNs = d.varint()
	x.Events = d.int32()
	x.TTFTNs = d.varint()
	x.EventGapsUs = d.int32s()
	x.OutputTokens = d.int32()
	x.BatchSize = d.int32()
	x.QueueDepth = d.int32()
	x.Upstream = d.string()
	x.Context = d.stringMap()
	x.Complete = d.bool()
	x.Error = d.string()
	x.RedactErr = d.string()
	x.TurnKey = d.varint()
	x.ParentTurnKey = d.varint()
	x.CachedTokens = d.optInt32()
}

func appendResult(b []byte, r *Result) []byte {
	b = appendString(b, r.RunID)
	b = binary.AppendVarint(b, int64(r.Shard))
	b = appendString(b, r.Recorder)
	b = binary.AppendVarint(b, r.Seq)
	b = appendTime(b, r.OrigTs)
	b = appendTime(b, r.Frame)
	b = binary.AppendVarint(b, r.ScheduledNs)
	b = binary.AppendVarint(b, r.SentUnixNs)
	b = binary.AppendVarint(b, r.LagNs)
	b = binary.AppendVarint(b, int64(r.Status))
	b = appendString(b, r.Error)
	b = binary.AppendVarint(b, r.TTFBNs)
	b = binary.AppendVarint(b, r.TTFTNs)
	b = binary.AppendVarint(b, r.TTSTNs)
	b = binary.AppendVarint(b, r.E2ENs)
	b = binary.AppendVarint(b, r.E2ESchedNs)
	b = binary.AppendVarint(b, int64(r.Events))
	b = binary.AppendVarint(b, int64(r.OutputTokens))
	b = appendInt32s(b, r.ITLUs)
	b = binary.AppendVarint(b, r.BytesSent)
	b = binary.AppendVarint(b, r.BytesRecv)
	b = binary.AppendVarint(b, int64(r.BatchSize))
	b = binary.AppendVarint(b, int64(r.QueueDepth))
	b = appendString(b, r.Method)
	b = appendString(b, r.Path)
	b = appendString(b, r.Model)
	b = binary.AppendVarint(b, int64(r.PromptTokens))
	b = binary.AppendVarint(b, r.SessionDelayNs)
	b = appendOptInt32(b, r.CachedTokens)
	return b
}

func (d *decoder) result(r *Result) {
	r.RunID = d.string()
	r.Shard = d.int32()
	r.Recorder = d.string()
	r.Seq = d.varint()
	r.OrigTs = d.time()
	r.Frame = d.time()
	r.ScheduledNs = d.varint()
	r.SentUnixNs = d.varint()
	r.LagNs = d.varint()
	r.Status = d.int32()
	r.Error = d.string()
	r.TTFBNs = d.varint()
	r.TTFTNs = d.varint()
	r.TTSTNs = d.varint()
	r.E2ENs = d.varint()
	r.E2ESchedNs = d.varint()
	r.Events = d.int32()
	r.OutputTokens = d.int32()
	r.ITLUs = d.int32s()
	r.BytesSent = d.varint()
	r.BytesRecv = d.varint()
	r.BatchSize = d.int32()
	r.QueueDepth = d.int32()
	r.Method = d.string()
	r.Path = d.string()
	r.Model = d.string()
	r.PromptTokens = d.int32()
	r.SessionDelayNs = d.varint()
	r.CachedTokens = d.optInt32()
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendBytes distinguishes nil from empty: 0 is nil, n+1 is n bytes.
func appendBytes(b []byte, p []byte) []byte {
	if p == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(p))+1)
	return append(b, p...)
}

// appendOptInt32 distinguishes nil from a value: 0 is nil, 1 then the
// varint is a value.
func appendOptInt32(b []byte, v *int32) []byte {
	if v == nil {
		return append(b, 0)
	}
	return binary.AppendVarint(append(b, 1), int64(*v))
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

func appendMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(m))+1)
	for k, v := range m {
		b = appendString(b, k)
		b = appendString(b, v)
	}
	return b
}

func appendInt32s(b []byte, s []int32) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	for _, v := range s {
		b = binary.AppendVarint(b, int64(v))
	}
	return b
}

// decoder reads what the append functions wrote; bad is set, and zero values
// returned, once the input is short or malformed.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	if d.bad {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.bad {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int32() int32 {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.bad = true
		return 0
	}
	return int32(v)
}

func (d *decoder) optInt32() *int32 {
	switch d.uvarint() {
	case 0:
		return nil
	case 1:
		v := d.int32()
		return &v
	}
	d.bad = true
	return nil
}

// count reads a length whose elements take at least elem bytes each.
func (d *decoder) count(elem int) int {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)/elem) {
		d.bad = true
		return 0
	}
	return int(n)
}

func (d *decoder) take(n int) []byte {
	if d.bad || n > len(d.b) {
		d.bad = true
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) string() string { return string(d.take(d.count(1))) }

func (d *decoder) bool() bool {
	p := d.take(1)
	if d.bad {
		return false
	}
	if p[0] > 1 {
		d.bad = true
	}
	return p[0] == 1
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.bad || n == 0 {
		return nil
	}
	if n-1 > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	return slices.Clone(d.take(int(n - 1)))[: n-1 : n-1]
}

func (d *decoder) time() time.Time {
	if !d.bool() {
		return time.Time{}
	}
	sec := d.varint()
	nsec := d.uvarint()
	if nsec >= 1e9 {
		d.bad = true
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

func (d *decoder) stringMap() map[string]string {
	n := d.uvarint()
	if d.bad || n == 0 {
		return nil
	}
	n--
	if n > uint64(len(d.b)/2) {
		d.bad = true
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := d.string()
		m[k] = d.string()
	}
	return m
}

func (d *decoder) int32s() []int32 {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	s := make([]int32, n)
	for i := range s {
		s[i] = d.int32()
	}
	return s
}
