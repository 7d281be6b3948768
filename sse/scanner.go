// Package sse scans Server-Sent Events streams incrementally and classifies
// OpenAI-style streaming chunks.
//
// A Scanner is fed the bytes of a response body as they arrive, each slice
// with its arrival time, and returns complete events; it never buffers more
// than one unfinished event (bounded by Options.MaxEvent). Classify decides
// whether an event's data carries tokens and extracts `usage`, and Timeline
// accumulates the per-response figures reel records: event count, the time
// of the first token-bearing event, gaps between token-bearing events and
// output tokens. The recorder and the replayer's client both use this
// package, so recorded and replayed timings mean the same thing.
// ParseRequest reads the fields of an LLM API request body that the
// recorder's enrichment and the turn links read, in one pass.
//
// The scanner follows the WHATWG event-stream rules that matter for timing:
// lines end in "\n", "\r\n" or "\r"; an empty line dispatches the event;
// "data" lines are joined with "\n"; lines starting with ":" are comments and
// do not dispatch anything on their own; an event with no data lines is not
// dispatched.
package sse

import (
	"bytes"
	"time"
)

// DefaultMaxEvent bounds the bytes buffered for one event when
// Options.MaxEvent is zero.
const DefaultMaxEvent = 1 << 20

// maxName bounds an event's name; longer names are cut (to Options.MaxEvent
// where that is smaller, so that a name line never outgrows the carried line).
const maxName = 256

// Options configure a Scanner. The zero value works.
type Options struct {
	// MaxEvent bounds the data kept for one event (default DefaultMaxEvent).
	// Longer data is truncated and the event is flagged Truncated; scanning
	// stays in step with the stream.
	MaxEvent int
}

// Event is one dispatched event. Data and Name alias the Scanner's buffer
// (or, for an event whose one data line lay whole in the bytes fed, those
// bytes): they are valid only during the call to emit and must not be
// modified.
type Event struct {
	Time      time.Time // arrival time of the bytes that completed the event
	Name      []byte    // the "event:" field, empty for the default "message"
	Data      []byte    // "data:" lines joined with "\n"
	Truncated bool      // Data was cut at Options.MaxEvent
}

// Scanner splits an event stream into events. It is not safe for concurrent
// use. The zero value is not usable; call NewScanner.
type Scanner struct {
	max  int
	line []byte // the unfinished line carried over from the previous Feed
	data []byte // data of the event being built
	// line1 is the event's first data line while it is the only one and
	// lies whole in the p being fed: the common event is then handed to
	// emit without a copy. It is copied into data before another data line
	// is added and before Feed returns, which does not retain p. Non-nil
	// exactly while it holds the data instead of data.
	line1   []byte
	name    []byte // event name of the event being built
	hasData bool   // a data line was seen for the event being built
	trunc   bool   // data was truncated
	lineCut bool   // the carried line overflowed max and is being discarded
	skipLF  bool   // the previous chunk ended in '\r': a leading '\n' belongs to it
	ev      Event  // handed to emit; kept here so that Feed does not allocate it
}

// NewScanner returns a Scanner with the given options.
func NewScanner(opts Options) *Scanner {
	if opts.MaxEvent <= 0 {
		opts.MaxEvent = DefaultMaxEvent
	}
	return &Scanner{max: opts.MaxEvent}
}

// Feed scans p, which arrived at time at, and calls emit for every event it
// completes, in order. The Event passed to emit is only valid during the
// call. Feed does not retain p.
func (s *Scanner) Feed(p []byte, at time.Time, emit func(*Event)) {
	ev := &s.ev
	*ev = Event{Time: at}
	if s.skipLF && len(p) > 0 {
		s.skipLF = false
		if p[0] == '\n' {
			p = p[1:]
		}
	}
	for len(p) > 0 {
		i := IndexLineEnd(p)
		if i < 0 {
			s.own()
			s.carry(p)
			return
		}
		var line []byte
		inP := false
		if len(s.line) > 0 || s.lineCut {
			s.carry(p[:i])
			line = s.line
		} else {
			line, inP = p[:i], true
		}
		cut := s.lineCut
		if p[i] == '\r' {
			if i+1 < len(p) {
				if p[i+1] == '\n' {
					i++
				}
			} else {
				s.skipLF = true
			}
		}
		p = p[i+1:]
		s.processLine(line, cut, inP, ev, emit)
		s.line = s.line[:0]
		s.lineCut = false
	}
	s.own()
}

// Line scans one whole line of a stream, its end ("\n", "\r\n" or "\r")
// left off, as Feed scans each line it finds, and calls emit when the line
// completes an event: a reader that splits the stream into lines for its
// own use (the redactor's walk) hands them on instead of having the
// stream scanned again. The lines must be consecutive and stay unchanged
// until the stream's Flush (an event's one data line is passed on without
// a copy). A Scanner is fed by Feed or by Line, not both.
func (s *Scanner) Line(line []byte, emit func(*Event)) {
	ev := &s.ev
	*ev = Event{}
	s.processLine(line, false, true, ev, emit)
}

// own copies an aliased first data line into the Scanner's buffer.
func (s *Scanner) own() {
	if s.line1 != nil {
		s.data = append(s.data[:0], s.line1...)
		s.line1 = nil
	}
}

// Flush dispatches an event left unterminated at the end of the stream, as
// some servers omit the final blank line. at is the time the stream ended.
func (s *Scanner) Flush(at time.Time, emit func(*Event)) {
	ev := &s.ev
	*ev = Event{Time: at}
	if len(s.line) > 0 || s.lineCut {
		s.processLine(s.line, s.lineCut, false, ev, emit)
		s.line = s.line[:0]
		s.lineCut = false
	}
	s.dispatch(ev, emit)
}

// carry appends part of an unfinished line, bounded by max plus the longest
// field prefix whose value is kept, so that a line cut here keeps at least
// what processLine keeps of the same line seen whole.
func (s *Scanner) carry(p []byte) {
	room := s.max + len("event: ") - len(s.line)
	if len(p) > room {
		p = p[:max(room, 0)]
		s.lineCut = true
	}
	s.line = append(s.line, p...)
}

// processLine handles one line; inP says that it lies in the p being fed
// (not in the carried line), so that it may be aliased.
func (s *Scanner) processLine(line []byte, cut, inP bool, ev *Event, emit func(*Event)) {
	if len(line) == 0 {
		s.dispatch(ev, emit)
		return
	}
	if line[0] == ':' {
		return // comment
	}
	field, value := line, []byte(nil)
	if c := bytes.IndexByte(line, ':'); c >= 0 {
		field, value = line[:c], line[c+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "data":
		// The "\n" joining data lines counts against the bound too: a full
		// event that gets another data line is truncated, not one byte over.
		if s.hasData {
			s.own()
			if len(s.data) < s.max {
				s.data = append(s.data, '\n')
			} else {
				cut = true
			}
		}
		room := s.max - len(s.data)
		if len(value) > room {
			value = value[:max(room, 0)]
			cut = true
		}
		if !s.hasData && inP && len(s.data) == 0 {
			s.line1 = value
		} else {
			s.data = append(s.data, value...)
		}
		s.hasData = true
		if cut {
			s.trunc = true
		}
	case "event":
		if n := min(maxName, s.max); len(value) > n {
			value = value[:n]
		}
		s.name = append(s.name[:0], value...)
	}
}

func (s *Scanner) dispatch(ev *Event, emit func(*Event)) {
	if !s.hasData {
		s.name = s.name[:0]
		return
	}
	ev.Name, ev.Data, ev.Truncated = s.name, s.data, s.trunc
	if s.line1 != nil {
		ev.Data = s.line1
	}
	emit(ev)
	s.data, s.name = s.data[:0], s.name[:0]
	s.line1 = nil
	s.hasData, s.trunc = false, false
}

// IndexLineEnd returns the index of the first '\r' or '\n' in p, or -1:
// where an event-stream line ends. Two vectorised byte searches are several
// times faster than bytes.IndexAny's byte loop over lines of JSON.
func IndexLineEnd(p []byte) int {
	i := bytes.IndexByte(p, '\n')
	head := p
	if i >= 0 {
		head = p[:i]
	}
	if j := bytes.IndexByte(head, '\r'); j >= 0 {
		return j
	}
	return i
}
