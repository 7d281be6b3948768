package redact

import (
	"bytes"

	"github.com/reelkit/reel/internal/jsonstr"
)

// A streamed response repeats one event's framing with another token in
// it: redactSSE walks an event's JSON once and redacts each following
// event that differs from its predecessor only inside one synthesized
// string (jsonstr.Splice) by reusing the walk — the edits, kept values
// and detector results stay, that string's text is replaced, and the
// chain runs over every segment again in order — so the bytes written
// are the walk's own (TestReframeMatchesWalk, FuzzReframeMatchesWalk).

// reframable reports whether the job's state after redactJSON describes
// its input well enough to redact a look-alike successor with reframe:
// response text (every string chained, none synthesized by its own value
// during the walk, no topics), a clean parse, no explanations.
func (j *job) reframable() bool {
	return j.allPrompt && !j.explain && j.errPos < 0 && !j.r.walkEveryEvent
}

// reframe redacts in, the event after j.in, by reusing j.in's walk when
// in differs from it only inside one synthesized string's content, and
// appends the result to out; ok is false (nothing appended) when it does
// not, and redactJSON must walk in. j must be reframable.
func (j *job) reframe(out, in []byte) ([]byte, bool) {
	prev := j.in
	if !bytes.Equal(in, prev) {
		p, s := jsonstr.Splice(prev, in)
		i := j.editHolding(p, len(prev)-s)
		if i < 0 {
			return out, false
		}
		e := &j.edits[i]
		delta := len(in) - len(prev)
		inner := in[e.start+1 : e.end-1+delta]
		if !jsonstr.ValidContent(inner) {
			return out, false
		}
		text := inner
		if bytes.IndexByte(inner, '\\') >= 0 {
			a := len(j.doc)
			var ok bool
			if j.doc, ok = appendDecoded(j.doc, inner); !ok {
				j.doc = j.doc[:a]
				return out, false
			}
			text = j.doc[a:]
		}
		seg := j.segmentOf(i)
		if seg < 0 {
			return out, false
		}
		j.segs[seg].text = text
		e.end += delta
		for k := i + 1; k < len(j.edits); k++ {
			j.edits[k].start += delta
			j.edits[k].end += delta
		}
	}
	j.in = in
	j.synth = j.synth[:0]
	j.runChain(nil)
	return j.write(out), true
}

// editHolding returns the index of the synthesized string edit whose
// content (between its quotes) holds j.in[from:to], or -1.
func (j *job) editHolding(from, to int) int {
	for i := range j.edits {
		e := &j.edits[i]
		if e.start >= from {
			break // edits are in document order
		}
		if e.kind == editSynth && to <= e.end-1 {
			return i
		}
	}
	return -1
}

// segmentOf returns the index of the segment that fills edit i, or -1.
func (j *job) segmentOf(i int) int {
	for k := range j.segs {
		if j.segs[k].edit == i {
			return k
		}
	}
	return -1
}
