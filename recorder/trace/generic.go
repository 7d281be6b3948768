package trace

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Time units of Mapping.TimeUnit.
const (
	UnitSeconds      = "s"        // seconds from the trace start (a fraction allowed)
	UnitMilliseconds = "ms"       // milliseconds from the trace start
	UnitMicroseconds = "us"       // microseconds from the trace start
	UnitNanoseconds  = "ns"       // nanoseconds from the trace start
	UnitUnixSeconds  = "unix"     // seconds since the Unix epoch
	UnitUnixMillis   = "unix_ms"  // milliseconds since the Unix epoch
	UnitDatetime     = "datetime" // RFC 3339, or "2006-01-02 15:04:05.fffffff" in UTC with an optional zone
)

// Mapping names the column (CSV header) or field (JSONL key) holding each
// value of a trace row. Time and Input are required; the others may be
// empty.
type Mapping struct {
	Time     string // arrival time, in TimeUnit
	TimeUnit string // one of the Unit constants; default UnitSeconds
	Input    string // prompt tokens
	Output   string // output tokens
	HashIDs  string // block hash ids: a JSON array, or integers separated by spaces, commas or semicolons
	Model    string // model name
	Session  string // conversation or session id
}

// ParseMapping reads KEY=COLUMN pairs (time, unit, input, output,
// hash_ids, model, session) into a Mapping.
func ParseMapping(pairs []string) (Mapping, error) {
	var m Mapping
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || v == "" {
			return m, fmt.Errorf("mapping %q: want KEY=COLUMN", p)
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "time", "timestamp":
			m.Time = v
		case "unit", "time_unit":
			m.TimeUnit = v
		case "input", "input_length", "prompt":
			m.Input = v
		case "output", "output_length":
			m.Output = v
		case "hash_ids", "hashes":
			m.HashIDs = v
		case "model":
			m.Model = v
		case "session":
			m.Session = v
		default:
			return m, fmt.Errorf("mapping %q: unknown key %q (want time, unit, input, output, hash_ids, model or session)", p, k)
		}
	}
	return m, m.check()
}

func (m *Mapping) check() error {
	if m.Time == "" || m.Input == "" {
		return errors.New("mapping: time and input are required")
	}
	switch m.TimeUnit {
	case "":
		m.TimeUnit = UnitSeconds
	case UnitSeconds, UnitMilliseconds, UnitMicroseconds, UnitNanoseconds, UnitUnixSeconds, UnitUnixMillis, UnitDatetime:
	default:
		return fmt.Errorf("mapping: unknown time unit %q (want s, ms, us, ns, unix, unix_ms or datetime)", m.TimeUnit)
	}
	return nil
}

// AzureMapping is the Azure LLM inference trace's CSV, 2023
// (AzureLLMInferenceTrace_conv.csv, _code.csv) and 2024 (…_1week.csv):
// TIMESTAMP, ContextTokens, GeneratedTokens.
var AzureMapping = Mapping{Time: "TIMESTAMP", TimeUnit: UnitDatetime, Input: "ContextTokens", Output: "GeneratedTokens"}

// BurstGPTMapping is BurstGPT's CSV (HPMLL/BurstGPT): Timestamp (seconds
// from the trace start), Model, Request tokens, Response tokens, Total
// tokens, Log Type.
var BurstGPTMapping = Mapping{Time: "Timestamp", TimeUnit: UnitSeconds, Input: "Request tokens", Output: "Response tokens", Model: "Model"}

// NewAzureReader reads an Azure LLM inference trace CSV (AzureMapping).
func NewAzureReader(r io.Reader) (Reader, error) { return NewCSVReader(r, AzureMapping) }

// NewBurstGPTReader reads a BurstGPT CSV (BurstGPTMapping).
func NewBurstGPTReader(r io.Reader) (Reader, error) { return NewCSVReader(r, BurstGPTMapping) }

// NewCSVReader reads a CSV trace with a header row; m names the columns.
// It fails at once when a mapped column is missing from the header.
func NewCSVReader(r io.Reader, m Mapping) (Reader, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	cr := csv.NewReader(bufio.NewReader(r))
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%w: read header: %v", ErrFormat, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	c := &csvReader{cr: cr, m: m}
	for _, f := range []struct {
		name string
		dst  *int
	}{{m.Time, &c.time}, {m.Input, &c.input}, {m.Output, &c.output}, {m.HashIDs, &c.hashes}, {m.Model, &c.model}, {m.Session, &c.session}} {
		*f.dst = -1
		if f.name == "" {
			continue
		}
		i, ok := col[f.name]
		if !ok {
			return nil, fmt.Errorf("%w: no column %q in the header %q", ErrFormat, f.name, head)
		}
		*f.dst = i
		c.last = max(c.last, i)
	}
	return c, nil
}

type csvReader struct {
	cr                                          *csv.Reader
	m                                           Mapping
	time, input, output, hashes, model, session int // column indexes, -1 when unmapped
	last                                        int // the largest of them: shorter rows are malformed
}

func (c *csvReader) Next() (Row, error) {
	rec, err := c.cr.Read()
	if err == io.EOF {
		return Row{}, io.EOF
	}
	if err != nil {
		// csv.Reader cannot go on past a bad quote: the rest of the file is
		// unreadable, so this ends the import.
		return Row{}, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	line, _ := c.cr.FieldPos(0)
	if len(rec) <= c.last {
		return Row{}, &RowError{Line: line, Err: fmt.Errorf("%w: %d fields, the header maps column %d", ErrFormat, len(rec), c.last+1)}
	}
	field := func(i int) string {
		if i < 0 || i >= len(rec) {
			return ""
		}
		return strings.TrimSpace(rec[i])
	}
	row, err := c.m.row(func(key int) (string, bool) {
		i := [...]int{c.time, c.input, c.output, c.hashes, c.model, c.session}[key]
		return field(i), i >= 0 && i < len(rec)
	})
	if err != nil {
		return Row{}, &RowError{Line: line, Err: err}
	}
	row.Line = line
	return row, nil
}

// NewJSONLReader reads a JSONL trace, one object a line; m names the keys.
func NewJSONLReader(r io.Reader, m Mapping) Reader {
	mm := m
	return &jsonlReader{sc: newLineScanner(r), m: &mm, err: mm.check()}
}

type jsonlReader struct {
	sc   *bufio.Scanner
	m    *Mapping
	err  error // from Mapping.check: returned by the first Next
	line int
}

func (j *jsonlReader) Next() (Row, error) {
	if j.err != nil {
		return Row{}, j.err
	}
	for j.sc.Scan() {
		j.line++
		line := bytes.TrimSpace(j.sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(line, &obj); err != nil || obj == nil {
			return Row{}, &RowError{Line: j.line, Err: fmt.Errorf("%w: not a JSON object", ErrFormat)}
		}
		keys := [...]string{j.m.Time, j.m.Input, j.m.Output, j.m.HashIDs, j.m.Model, j.m.Session}
		row, err := j.m.row(func(key int) (string, bool) {
			if keys[key] == "" {
				return "", false
			}
			raw, ok := obj[keys[key]]
			if !ok {
				return "", false
			}
			raw = bytes.TrimSpace(raw)
			if len(raw) > 0 && raw[0] == '"' {
				var s string
				if json.Unmarshal(raw, &s) == nil {
					return strings.TrimSpace(s), true
				}
			}
			if string(raw) == "null" {
				return "", true
			}
			return string(raw), true
		})
		if err != nil {
			return Row{}, &RowError{Line: j.line, Err: err}
		}
		row.Line = j.line
		return row, nil
	}
	if err := j.sc.Err(); err != nil {
		return Row{}, fmt.Errorf("%w: line %d: %v", ErrFormat, j.line+1, err)
	}
	return Row{}, io.EOF
}

// Keys of the value getter Mapping.row uses.
const (
	keyTime = iota
	keyInput
	keyOutput
	keyHashIDs
	keyModel
	keySession
)

// row parses one row's values; get returns a value by key and whether the
// row has it.
func (m *Mapping) row(get func(key int) (string, bool)) (Row, error) {
	var row Row
	ts, ok := get(keyTime)
	if !ok || ts == "" {
		return row, fmt.Errorf("%w: no %s", ErrFormat, m.Time)
	}
	at, rel, err := parseTime(ts, m.TimeUnit)
	if err != nil {
		return row, fmt.Errorf("%w: %s %q: %v", ErrFormat, m.Time, ts, err)
	}
	row.At, row.Relative = at, rel
	in, ok := get(keyInput)
	if !ok {
		return row, fmt.Errorf("%w: no %s", ErrFormat, m.Input)
	}
	if row.Input, err = parseTokens(in); err != nil {
		return row, fmt.Errorf("%w: %s %q: %v", ErrFormat, m.Input, in, err)
	}
	if out, ok := get(keyOutput); ok && out != "" {
		if row.Output, err = parseTokens(out); err != nil {
			return row, fmt.Errorf("%w: %s %q: %v", ErrFormat, m.Output, out, err)
		}
	}
	if h, ok := get(keyHashIDs); ok && h != "" {
		if row.HashIDs, err = parseHashIDs(h); err != nil {
			return row, fmt.Errorf("%w: %s: %v", ErrFormat, m.HashIDs, err)
		}
	}
	row.Model, _ = get(keyModel)
	row.Session, _ = get(keySession)
	return row, row.check()
}

// datetimeLayouts are the absolute time spellings UnitDatetime accepts.
var datetimeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
}

// parseTime reads a time in unit; relative units give an offset from the
// Unix epoch and rel true.
func parseTime(s, unit string) (t time.Time, rel bool, err error) {
	if unit == UnitDatetime {
		for _, l := range datetimeLayouts {
			if t, err = time.Parse(l, s); err == nil {
				return t.UTC(), false, nil
			}
		}
		return time.Time{}, false, errors.New("want RFC 3339 or YYYY-MM-DD HH:MM:SS.fffffff")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return time.Time{}, false, errors.New("want a non-negative number")
	}
	scale := map[string]float64{UnitSeconds: 1e9, UnitMilliseconds: 1e6, UnitMicroseconds: 1e3, UnitNanoseconds: 1,
		UnitUnixSeconds: 1e9, UnitUnixMillis: 1e6}[unit]
	ns := v * scale
	if ns > 1<<62 {
		return time.Time{}, false, errors.New("too large")
	}
	rel = unit != UnitUnixSeconds && unit != UnitUnixMillis
	return time.Unix(0, int64(math.Round(ns))).UTC(), rel, nil
}

// parseTokens reads a token count: an integer, or a number with a zero
// fraction ("129.0", as pandas writes).
func parseTokens(s string) (int, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > maxTokens {
			return 0, errors.New("out of range")
		}
		return int(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < 0 || f > maxTokens {
		return 0, errors.New("want a token count")
	}
	return int(f), nil
}

// parseHashIDs reads a JSON array of integers or integers separated by
// spaces, commas or semicolons.
func parseHashIDs(s string) ([]int64, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' })
	if len(fields) > maxHashIDs {
		return nil, fmt.Errorf("%d hash ids", len(fields))
	}
	ids := make([]int64, len(fields))
	for i, f := range fields {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("hash id %q is not an integer", f)
		}
		ids[i] = n
	}
	return ids, nil
}
