package cluster

import "github.com/prometheus/client_golang/prometheus"

// metrics are the Prometheus series /metrics serves, under vLLM's names
// (vllm/v1/metrics/loggers.py) so scrapers and dashboards built for vLLM
// read the simulator unchanged. Latencies are wall time.
type metrics struct {
	running, waiting, waitingLong, kvUsage prometheus.Gauge
	promptTokens, genTokens, preemptions   prometheus.Counter
	cacheQueries, cacheHits, steps         prometheus.Counter
	ttft, itl, e2e, queue                  prometheus.Observer
	promptLen, stepTokens                  prometheus.Observer
	success                                *prometheus.CounterVec
}

// vLLM's bucket boundaries for the latency histograms.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	e2eBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
		40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	tokenBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000,
		10000, 20000, 50000, 100000}
)

func newMetrics(reg prometheus.Registerer, model string) *metrics {
	labels := prometheus.Labels{"model_name": model}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(g)
		return g
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
		reg.MustRegister(h)
		return h
	}
	m := &metrics{
		running:      gauge("vllm:num_requests_running", "Number of requests in the running batch."),
		waiting:      gauge("vllm:num_requests_waiting", "Number of requests waiting to be admitted."),
		waitingLong:  gauge("simcluster:num_requests_waiting_long", "Of the waiting requests, those in the long-prompt queue."),
		kvUsage:      gauge("vllm:gpu_cache_usage_perc", "KV-cache usage, 1 means 100 percent."),
		promptTokens: counter("vllm:prompt_tokens_total", "Prefill tokens processed."),
		genTokens:    counter("vllm:generation_tokens_total", "Generation tokens processed."),
		preemptions:  counter("vllm:num_preemptions_total", "Cumulative number of preemptions."),
		cacheQueries: counter("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache."),
		cacheHits:    counter("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache."),
		steps:        counter("simcluster:engine_steps_total", "Engine steps run."),
		ttft:         histogram("vllm:time_to_first_token_seconds", "Time to first token in seconds.", ttftBuckets),
		itl:          histogram("vllm:time_per_output_token_seconds", "Time between output tokens in seconds.", itlBuckets),
		e2e:          histogram("vllm:e2e_request_latency_seconds", "End-to-end request latency in seconds.", e2eBuckets),
		queue:        histogram("vllm:request_queue_time_seconds", "Time spent waiting before admission, in seconds.", e2eBuckets),
		promptLen:    histogram("vllm:request_prompt_tokens", "Prompt tokens per request.", tokenBuckets),
		stepTokens:   histogram("vllm:iteration_tokens_total", "Tokens per engine step.", tokenBuckets),
		success: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm:request_success_total", Help: "Finished requests by finish reason.", ConstLabels: labels,
		}, []string{"finished_reason"}),
	}
	reg.MustRegister(m.success)
	return m
}
