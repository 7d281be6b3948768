package formats

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/reelkit/reel/formats/store"
)

// MetricSchema is the reel.schema value of files holding Metric rows.
const MetricSchema = "metrics/1"

// MetricsDir returns where the server-side samples scraped beside the
// dataset or result set in dir are kept: the sibling directory DIR.metrics
// (DIR.metrics/dt=YYYY-MM-DD/hour=HH/*.parquet). A sibling rather than a
// subdirectory, so that query engines reading DIR/**/*.parquet see one
// schema; `reel stats`, `reel report` and `reel compare` look there.
func MetricsDir(dir string) string {
	if store.IsURL(dir) {
		return strings.TrimRight(dir, "/") + ".metrics"
	}
	return filepath.Clean(dir) + ".metrics"
}

// Metric is one scraped Prometheus sample: a row of the metrics/1 schema.
// Counters, histograms and summaries are stored raw, as exposed (histogram
// buckets as NAME_bucket with an "le" label, NAME_sum, NAME_count); rates
// are derived at analysis time.
//
// The writer shreds rows by hand (shred.go): a field added, removed or
// moved here must be mirrored there, in schema order;
// TestShredMatchesReflection fails until it is.
type Metric struct {
	Ts       time.Time         `parquet:"ts,timestamp(microsecond)"` // when the scrape started, UTC, µs precision
	TsUnixNs int64             `parquet:"ts_unix_ns"`                // the same, ns since the Unix epoch
	Source   string            `parquet:"source,dict"`               // the scraped endpoint's URL (no credentials)
	Name     string            `parquet:"name,dict"`                 // metric name, e.g. vllm:num_requests_waiting
	Labels   map[string]string `parquet:"labels"`                    // every label but __name__
	Value    float64           `parquet:"value"`                     // the sample value; NaN and ±Inf kept
}

// Time reports when the sample was scraped; it orders and partitions
// metrics files.
func (m *Metric) Time() time.Time { return time.Unix(0, m.TsUnixNs).UTC() }

func appendMetric(b []byte, m *Metric) []byte {
	b = appendTime(b, m.Ts)
	b = binary.AppendVarint(b, m.TsUnixNs)
	b = appendString(b, m.Source)
	b = appendString(b, m.Name)
	b = appendMap(b, m.Labels)
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(m.Value))
}

func (d *decoder) metric(m *Metric) {
	m.Ts = d.time()
	m.TsUnixNs = d.varint()
	m.Source = d.string()
	m.Name = d.string()
	m.Labels = d.stringMap()
	if p := d.take(8); !d.bad {
		m.Value = math.Float64frombits(binary.LittleEndian.Uint64(p))
	}
}

func metricSize(m *Metric) int64 {
	return int64(64 + len(m.Source) + len(m.Name) + mapSize(m.Labels))
}
