package sse

import "github.com/reelkit/reel/internal/jsonstr"

// frame remembers the latest walked event of a stream and the content span
// of the one string whose text its look-alike successors may differ in
// (the token): Timeline's classification and ChatDeltas' answer reading
// reuse the walk's answer for such an event instead of walking it again.
// Equal framing around a well-formed string content means an equal walk
// (see jsonstr.Splice); only what the reader took from that string can
// differ, and the caller accounts for it.
type frame struct {
	data     []byte // the walked event's data, copied (a Scanner reuses its buffer)
	from, to int    // data[from:to] is the string's content, between its quotes
	set      bool
}

// remember makes data, whose variable string's content is data[from:to],
// the frame.
func (f *frame) remember(data []byte, from, to int) {
	f.data = append(f.data[:0], data...)
	f.from, f.to, f.set = from, to, true
}

// match reports whether data is the framed event with only the variable
// string's content changed, to a well-formed content; inner is that
// content in data.
func (f *frame) match(data []byte) (inner []byte, ok bool) {
	if !f.set {
		return nil, false
	}
	p, s := jsonstr.Splice(f.data, data)
	if p == len(f.data) && p == len(data) { // the same bytes
		return data[f.from:f.to], true
	}
	if p < f.from || len(f.data)-s > f.to {
		return nil, false // a difference outside the string
	}
	inner = data[f.from : f.to+len(data)-len(f.data)]
	if !jsonstr.ValidContent(inner) {
		return nil, false
	}
	return inner, true
}
