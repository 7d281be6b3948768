package formats

// Per-type facts the writer and reader need: schema name, the time column
// that orders a dataset, and a cheap size estimate for row-group bounds.

// schemaName is the reel.schema value of files holding T.
func schemaName[T Record]() string {
	var zero T
	switch any(&zero).(type) {
	case *Exchange:
		return ExchangeSchema
	case *Metric:
		return MetricSchema
	default:
		return ResultSchema
	}
}

// timeColumn is the column whose row-group statistics bound a file's time
// range: an int64 nanosecond column for exchanges, the µs timestamp for
// results.
func timeColumn[T Record]() string {
	var zero T
	switch any(&zero).(type) {
	case *Exchange, *Metric:
		return "ts_unix_ns"
	default:
		return "orig_ts"
	}
}

// timeKey is a record's position in time, in ns since the Unix epoch, at the
// precision the file stores it (µs for results).
func timeKey[T Record](p *T) int64 {
	switch r := any(p).(type) {
	case *Exchange:
		return r.TsUnixNs
	case *Result:
		return r.OrigTs.UnixMicro() * 1000
	case *Metric:
		return r.TsUnixNs
	}
	return 0
}

// sizeEstimate approximates a record's uncompressed bytes in a row group.
func sizeEstimate[T Record](p *T) int64 {
	switch r := any(p).(type) {
	case *Exchange:
		n := 256 + len(r.Recorder) + len(r.Session) + len(r.Client) + len(r.Method) + len(r.Host) +
			len(r.Path) + len(r.Query) + len(r.ReqContentType) + len(r.ReqBody) + len(r.Model) +
			len(r.PromptTokensSource) + 8*len(r.PrefixHashes) + len(r.Topic) + len(r.RespContentType) +
			len(r.RespBody) + 4*len(r.EventGapsUs) + len(r.Upstream) + len(r.Error) + len(r.RedactErr)
		n += mapSize(r.ReqHeaders) + mapSize(r.RespHeaders) + mapSize(r.Context)
		return int64(n)
	case *Result:
		return int64(192 + len(r.RunID) + len(r.Recorder) + len(r.Error) + 4*len(r.ITLUs) +
			len(r.Method) + len(r.Path) + len(r.Model))
	case *Metric:
		return metricSize(r)
	}
	return 0
}

func mapSize(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v) + 8
	}
	return n
}

// boundlessColumns are the column paths whose min/max statistics are not
// worth writing (nor computing, twice per page): bodies, and the keys and
// values of the header maps, which no query engine prunes on.
func boundlessColumns[T Record]() [][]string {
	var zero T
	if _, ok := any(&zero).(*Exchange); ok {
		return [][]string{
			{"req_body"}, {"resp_body"},
			{"req_headers", "key_value", "key"}, {"req_headers", "key_value", "value"},
			{"resp_headers", "key_value", "key"}, {"resp_headers", "key_value", "value"},
			{"context", "key_value", "key"}, {"context", "key_value", "value"},
		}
	}
	return nil
}
