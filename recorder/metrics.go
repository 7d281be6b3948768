package recorder

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reelkit/reel/formats"
)

// Drop and skip reasons used in the metrics' reason label.
const (
	DropQueueFull  = "queue_full"  // the queue held Queue exchanges
	DropQueueBytes = "queue_bytes" // the queue held QueueBytes of bodies
	DropWrite      = "write_error" // the sink failed (disk full, I/O error)
	DropClosed     = "closed"      // submitted after Close
	// DropLost counts exchanges the sink accepted (and counted in
	// exchanges_total) but lost later: their file failed and the disk
	// refused their spool frames until shutdown, or the spool directory
	// holding them was removed. Rows on disk = exchanges_total − lost.
	DropLost     = "lost"
	SkipFiltered = "filtered" // the path/method/host filter excluded it
	SkipSampled  = "sampled"  // --sample left it out
)

// Metrics are the recorder's Prometheus metrics. Sources record their own
// figures through the exported fields (the proxy observes ProxySeconds).
type Metrics struct {
	Recorded        prometheus.Counter     // reel_recorder_exchanges_total
	Dropped         *prometheus.CounterVec // reel_recorder_dropped_total{reason}
	Skipped         *prometheus.CounterVec // reel_recorder_skipped_total{reason}
	Bytes           prometheus.Counter     // reel_recorder_body_bytes_total
	QueueDepth      prometheus.Gauge       // reel_recorder_queue_depth
	RedactionErrors prometheus.Counter     // reel_recorder_redaction_errors_total
	WriteSeconds    prometheus.Histogram   // reel_recorder_write_seconds
	ProxySeconds    prometheus.Histogram   // reel_proxy_request_duration_seconds
	ProxyErrors     *prometheus.CounterVec // reel_proxy_errors_total{kind}

	dataset atomic.Pointer[func() formats.Stats] // see SetDatasetStats
}

// NewMetrics creates the metrics and registers them on reg (nil: not
// registered, useful in tests). Use a registry you own, not the global one.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Recorded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reel_recorder_exchanges_total", Help: "Exchanges written to the dataset."}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reel_recorder_dropped_total", Help: "Exchanges observed but not recorded, by reason."}, []string{"reason"}),
		Skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reel_recorder_skipped_total", Help: "Exchanges left out on purpose (filters, sampling), by reason."}, []string{"reason"}),
		Bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reel_recorder_body_bytes_total", Help: "Request and response body bytes written (after capping, before compression)."}),
		QueueDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "reel_recorder_queue_depth", Help: "Exchanges waiting to be redacted and written."}),
		RedactionErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reel_recorder_redaction_errors_total", Help: "Exchanges whose redaction failed (written fail-closed)."}),
		WriteSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "reel_recorder_write_seconds", Help: "Time to hand one exchange to the dataset writer.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 4, 10)}),
		ProxySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "reel_proxy_request_duration_seconds", Help: "Proxied request duration, first request byte to last response byte.",
			Buckets: prometheus.ExponentialBuckets(250e-6, 2.5, 14)}),
		ProxyErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reel_proxy_errors_total", Help: "Proxied requests that failed, by kind (upstream, client_abort, bad_request); each failed request counts once."}, []string{"kind"}),
	}
	for _, r := range []string{DropQueueFull, DropQueueBytes, DropWrite, DropClosed, DropLost} {
		m.Dropped.WithLabelValues(r)
	}
	for _, r := range []string{SkipFiltered, SkipSampled} {
		m.Skipped.WithLabelValues(r)
	}
	for _, k := range []string{"upstream", "client_abort", "bad_request"} {
		m.ProxyErrors.WithLabelValues(k)
	}
	spool := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "reel_recorder_spool_bytes", Help: "Bytes of the write-ahead spool on disk (records not yet in a closed Parquet file)."},
		func() float64 { return float64(m.datasetStats().SpoolBytes) })
	recreated := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "reel_recorder_spool_recreated_total", Help: "Times the spool directory was found removed while recording and made again."},
		func() float64 { return float64(m.datasetStats().SpoolRecreated) })
	if reg != nil {
		reg.MustRegister(m.Recorded, m.Dropped, m.Skipped, m.Bytes, m.QueueDepth, m.RedactionErrors,
			m.WriteSeconds, m.ProxySeconds, m.ProxyErrors, spool, recreated)
	}
	return m
}

// SetDatasetStats sets the function the spool gauges read: the dataset
// writer's Stats (OpenDataset sets it).
func (m *Metrics) SetDatasetStats(f func() formats.Stats) { m.dataset.Store(&f) }

func (m *Metrics) datasetStats() formats.Stats {
	if f := m.dataset.Load(); f != nil {
		return (*f)()
	}
	return formats.Stats{}
}
