package recorder

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Drop and skip reasons used in the metrics' reason label.
const (
	DropQueueFull  = "queue_full"  // the queue held Queue exchanges
	DropQueueBytes = "queue_bytes" // the queue held QueueBytes of bodies
	DropWrite      = "write_error" // the sink failed (disk full, I/O error)
	DropClosed     = "closed"      // submitted after Close
	SkipFiltered   = "filtered"    // the path/method/host filter excluded it
	SkipSampled    = "sampled"     // --sample left it out
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

	spool atomic.Pointer[func() int64]
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
			Name: "reel_proxy_errors_total", Help: "Proxied requests that failed, by kind (upstream, client_abort)."}, []string{"kind"}),
	}
	for _, r := range []string{DropQueueFull, DropQueueBytes, DropWrite, DropClosed} {
		m.Dropped.WithLabelValues(r)
	}
	for _, r := range []string{SkipFiltered, SkipSampled} {
		m.Skipped.WithLabelValues(r)
	}
	for _, k := range []string{"upstream", "client_abort"} {
		m.ProxyErrors.WithLabelValues(k)
	}
	spool := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "reel_recorder_spool_bytes", Help: "Bytes in the write-ahead spool not yet in a closed Parquet file."},
		func() float64 {
			if f := m.spool.Load(); f != nil {
				return float64((*f)())
			}
			return 0
		})
	if reg != nil {
		reg.MustRegister(m.Recorded, m.Dropped, m.Skipped, m.Bytes, m.QueueDepth, m.RedactionErrors,
			m.WriteSeconds, m.ProxySeconds, m.ProxyErrors, spool)
	}
	return m
}

// SetSpoolBytes sets the function the spool-size gauge reads (the dataset
// writer's statistics).
func (m *Metrics) SetSpoolBytes(f func() int64) { m.spool.Store(&f) }
