// Package accesslog imports gateway access logs that already carry request
// bodies — nginx `log_format … escape=json` lines with `$request_body` — as
// exchange/1 records, through the same recorder.Recorder as the proxy and
// passive capture, so they are enriched and redacted the same way.
//
// Each line is one JSON object. Which field holds what is configurable
// (Mapping); the defaults are nginx's variable names. A line that is not
// JSON or lacks the request or its time is counted and reported with its
// line number, never fatal.
//
// An nginx configuration that produces what the defaults expect:
//
//	log_format reel escape=json '{"msec":"$msec","request_time":"$request_time",'
//	    '"upstream_response_time":"$upstream_response_time",'
//	    '"upstream_header_time":"$upstream_header_time",'
//	    '"remote_addr":"$remote_addr","host":"$host","request_method":"$request_method",'
//	    '"request_uri":"$request_uri","status":"$status","content_type":"$content_type",'
//	    '"request_length":"$request_length","content_length":"$content_length",'
//	    '"body_bytes_sent":"$body_bytes_sent","upstream_addr":"$upstream_addr",'
//	    '"upstream_http_x_batch_size":"$upstream_http_x_batch_size",'
//	    '"upstream_http_x_queue_depth":"$upstream_http_x_queue_depth",'
//	    '"request_body":"$request_body"}';
package accesslog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
)

// Mapping names the JSON field of a log line that holds each value. Empty
// fields take the nginx default written in the comment; "-" disables one.
type Mapping struct {
	Time                 string // "msec": when the request ended, Unix seconds with a fraction, or RFC 3339 ($time_iso8601)
	RequestTime          string // "request_time": seconds from the first request byte to the log write
	UpstreamResponseTime string // "upstream_response_time": seconds; the last of a comma-separated list counts
	UpstreamHeaderTime   string // "upstream_header_time": seconds to the upstream's response header (TTFB)
	Request              string // "request": the request line, used when Method or URI is missing
	Method               string // "request_method"
	URI                  string // "request_uri": path and query
	Host                 string // "host"
	Client               string // "remote_addr"
	Status               string // "status"
	ContentType          string // "content_type": the request's
	ContentLength        string // "content_length": the request body's declared length
	RequestBody          string // "request_body"
	ResponseBody         string // "-": nginx cannot log response bodies; set it for gateways that do
	ResponseBytes        string // "body_bytes_sent"
	Upstream             string // "upstream_addr"
	// Headers maps a header name (recorded as batch context or request
	// header) to its field. Default: x-batch-size from
	// upstream_http_x_batch_size and x-queue-depth from
	// upstream_http_x_queue_depth.
	Headers map[string]string
}

func (m *Mapping) defaults() {
	set := func(p *string, def string) {
		if *p == "" {
			*p = def
		} else if *p == "-" {
			*p = ""
		}
	}
	set(&m.Time, "msec")
	set(&m.RequestTime, "request_time")
	set(&m.UpstreamResponseTime, "upstream_response_time")
	set(&m.UpstreamHeaderTime, "upstream_header_time")
	set(&m.Request, "request")
	set(&m.Method, "request_method")
	set(&m.URI, "request_uri")
	set(&m.Host, "host")
	set(&m.Client, "remote_addr")
	set(&m.Status, "status")
	set(&m.ContentType, "content_type")
	set(&m.ContentLength, "content_length")
	set(&m.RequestBody, "request_body")
	set(&m.ResponseBody, "-")
	set(&m.ResponseBytes, "body_bytes_sent")
	set(&m.Upstream, "upstream_addr")
	if m.Headers == nil {
		m.Headers = map[string]string{
			recorder.HeaderBatchSize:  "upstream_http_x_batch_size",
			recorder.HeaderQueueDepth: "upstream_http_x_queue_depth",
		}
	}
}

// ParseMapping parses "column=field" pairs (as given to --log-field) into
// m: column is a Mapping field name in snake case (time, request_time,
// method, uri, request_body, …) or "header:NAME" for a context header.
func ParseMapping(pairs []string) (Mapping, error) {
	var m Mapping
	fields := map[string]*string{
		"time": &m.Time, "request_time": &m.RequestTime, "upstream_response_time": &m.UpstreamResponseTime,
		"upstream_header_time": &m.UpstreamHeaderTime, "request": &m.Request, "method": &m.Method,
		"uri": &m.URI, "host": &m.Host, "client": &m.Client, "status": &m.Status,
		"content_type": &m.ContentType, "content_length": &m.ContentLength, "request_body": &m.RequestBody,
		"response_body": &m.ResponseBody, "response_bytes": &m.ResponseBytes, "upstream": &m.Upstream,
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.TrimSpace(v) == "" {
			return m, fmt.Errorf("field mapping %q: want column=field", p)
		}
		if h, isHeader := strings.CutPrefix(k, "header:"); isHeader {
			if m.Headers == nil {
				m.Headers = map[string]string{}
			}
			m.Headers[strings.ToLower(h)] = strings.TrimSpace(v)
			continue
		}
		dst, known := fields[k]
		if !known {
			return m, fmt.Errorf("field mapping %q: unknown column %q", p, k)
		}
		*dst = strings.TrimSpace(v)
	}
	return m, nil
}

// DefaultMaxLine bounds one log line when Options.MaxLine is zero.
const DefaultMaxLine = 16 << 20

// Options configure Import. A Recorder (or Emit) is required; the zero
// value of every other field works.
type Options struct {
	Mapping Mapping // which log field holds what (default: nginx's variable names)
	// Recorder builds the exchanges and takes each one (Recorder.Record:
	// filter, sampling, queue; build it with Options.Wait for an import).
	// Required unless Emit is set.
	Recorder *recorder.Recorder
	// Emit, when set, receives each exchange instead of Recorder.Record,
	// raw (not yet enriched or redacted): for tests and programs that store
	// exchanges themselves. Without a Recorder the exchanges are built with
	// a zero recorder.Config.
	Emit      func(*formats.Exchange)
	MaxLine   int // longer lines are bad lines (default DefaultMaxLine)
	MaxErrors int // bad lines kept in Report.Errors (default 100); all are counted

	begin func(time.Time, recorder.ConnInfo) *recorder.Recording // the Recorder's Begin, or a zero-Config Assembler's
}

// LineError is a line that could not be imported.
type LineError struct {
	Line int   // 1-based line number
	Err  error // what was wrong with it
}

// Error names the line and what was wrong with it.
func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns the line's error (ErrNoTime, ErrLineTooBig, a JSON error).
func (e *LineError) Unwrap() error { return e.Err }

// Report summarises an import.
type Report struct {
	Lines    int          // lines read, blank ones included
	Imported int          // exchanges emitted
	Bad      int          // lines that could not be imported
	Errors   []*LineError // the first MaxErrors bad lines
}

// Errors a bad line can report (wrapped in a LineError).
var (
	ErrNotJSON    = errors.New("not a JSON object")
	ErrNoRequest  = errors.New("no request method and URI")
	ErrNoTime     = errors.New("no parseable time")
	ErrLineTooBig = errors.New("line too long")
)

// Import reads r line by line and emits one exchange per good line, in
// file order. It returns an error only when reading fails or ctx ends; bad
// lines are in the Report.
func Import(ctx context.Context, r io.Reader, opts Options) (Report, error) {
	var rep Report
	switch {
	case opts.Recorder != nil:
		opts.begin = opts.Recorder.Begin
		if opts.Emit == nil {
			opts.Emit = opts.Recorder.Record
		}
	case opts.Emit != nil:
		opts.begin = recorder.NewAssembler(recorder.Config{}).Begin
	default:
		return rep, errors.New("accesslog: Options.Recorder is nil")
	}
	opts.Mapping.defaults()
	if opts.MaxLine <= 0 {
		opts.MaxLine = DefaultMaxLine
	}
	if opts.MaxErrors <= 0 {
		opts.MaxErrors = 100
	}
	bad := func(err error) {
		rep.Bad++
		if len(rep.Errors) < opts.MaxErrors {
			rep.Errors = append(rep.Errors, &LineError{Line: rep.Lines, Err: err})
		}
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	tooLong := false
	for {
		if rep.Lines%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return rep, err
			}
		}
		chunk, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if !tooLong && len(long)+len(chunk) <= opts.MaxLine {
				long = append(long, chunk...)
			} else {
				tooLong, long = true, long[:0]
			}
			continue
		}
		if err != nil && err != io.EOF {
			return rep, fmt.Errorf("read access log: %w", err)
		}
		line := chunk
		if len(long) > 0 || tooLong {
			if !tooLong && len(long)+len(chunk) <= opts.MaxLine {
				line = append(long, chunk...)
			} else {
				tooLong = true
			}
		}
		if len(line) > opts.MaxLine {
			tooLong = true
		}
		if len(line) > 0 || tooLong {
			rep.Lines++
			switch {
			case tooLong:
				bad(ErrLineTooBig)
			case len(bytes.TrimSpace(line)) > 0:
				x, lerr := parseLine(line, &opts)
				if lerr != nil {
					bad(lerr)
				} else {
					rep.Imported++
					opts.Emit(x)
				}
			}
		}
		long, tooLong = long[:0], false
		if err == io.EOF {
			return rep, nil
		}
	}
}

// parseLine turns one JSON log line into an exchange.
func parseLine(line []byte, o *Options) (*formats.Exchange, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return nil, ErrNotJSON
	}
	m := &o.Mapping
	get := func(field string) string {
		if field == "" {
			return ""
		}
		raw, ok := obj[field]
		if !ok {
			return ""
		}
		var s string
		if len(raw) > 0 && raw[0] == '"' {
			if json.Unmarshal(raw, &s) != nil {
				return ""
			}
		} else {
			s = string(raw)
			if s == "null" {
				s = ""
			}
		}
		if s == "-" {
			return ""
		}
		return s
	}
	method, uri := get(m.Method), get(m.URI)
	if method == "" || uri == "" {
		// "POST /v1/chat/completions HTTP/1.1"
		if parts := strings.Fields(get(m.Request)); len(parts) >= 2 {
			method, uri = parts[0], parts[1]
		}
	}
	if method == "" || uri == "" {
		return nil, ErrNoRequest
	}
	end, ok := parseTime(get(m.Time))
	if !ok {
		return nil, ErrNoTime
	}
	total := seconds(get(m.RequestTime))
	start := end.Add(-total)

	reqHeader := http.Header{}
	if ct := get(m.ContentType); ct != "" {
		reqHeader.Set("Content-Type", ct)
	}
	respHeader := http.Header{}
	for name, field := range m.Headers {
		if v := get(field); v != "" {
			// Upstream response headers are what nginx's upstream_http_
			// variables hold; other mapped headers count as request headers.
			if strings.HasPrefix(field, "upstream_http_") || strings.HasPrefix(field, "sent_http_") {
				respHeader.Set(name, v)
			} else {
				reqHeader.Set(name, v)
			}
		}
	}
	path, query, _ := strings.Cut(uri, "?")
	host := get(m.Host)
	if host != "" {
		reqHeader.Set("Host", host)
	}
	rec := o.begin(start, recorder.ConnInfo{Client: get(m.Client)})
	rec.SetRequest(recorder.Request{Method: method, Host: host, Path: path, RawQuery: query, Header: reqHeader})
	body := get(m.RequestBody)
	if body != "" {
		rec.RequestBody([]byte(body))
	}
	status, _ := strconv.Atoi(get(m.Status))
	ttfb := end
	if h := get(m.UpstreamHeaderTime); h != "" {
		// The upstream's header time is measured from connecting to it;
		// the request's own time before that is not logged, so TTFB is
		// approximated as the request time minus the upstream's body time.
		if up := seconds(get(m.UpstreamResponseTime)); up > 0 {
			ttfb = end.Add(-(up - seconds(h)))
		}
	}
	var complete = true
	var reason string
	if status > 0 {
		rec.SetResponse(ttfb, status, respHeader)
		if rb := get(m.ResponseBody); rb != "" {
			rec.ResponseBody(end, []byte(rb))
		}
	} else {
		complete, reason = false, "no status"
	}
	if cl, err := strconv.ParseInt(get(m.ContentLength), 10, 64); err == nil && cl > int64(len(body)) {
		// nginx logs $request_body empty when the body went to a temporary
		// file (client_body_buffer_size): the row says so.
		complete, reason = false, "request body not logged"
	}
	if reason != "" {
		rec.Fail(errors.New("incomplete: " + reason))
	}
	x := rec.Finish(end, complete)
	x.DurationNs = int64(total) // the log's request time, whatever the bodies
	if x.RespBodyBytes == 0 {
		if n, err := strconv.ParseInt(get(m.ResponseBytes), 10, 64); err == nil {
			x.RespBodyBytes = n
		}
	}
	if x.ReqBodyBytes == 0 {
		if n, err := strconv.ParseInt(get(m.ContentLength), 10, 64); err == nil {
			x.ReqBodyBytes = n
		}
	}
	if up := get(m.Upstream); up != "" {
		x.Upstream = up
	}
	return x, nil
}

// parseTime reads $msec ("1712345678.123") or an RFC 3339 time.
func parseTime(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f <= 0 || f > 1e11 {
			return time.Time{}, false
		}
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(math.Round(frac*1e3))*1e6).UTC(), true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), true
	}
	return time.Time{}, false
}

// seconds reads an nginx duration ("0.123"; the last of "0.010, 0.120").
func seconds(s string) time.Duration {
	if i := strings.LastIndexAny(s, ",:"); i >= 0 {
		s = s[i+1:]
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 || f > 1e7 {
		return 0
	}
	return time.Duration(math.Round(f * 1e9))
}
