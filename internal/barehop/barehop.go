// Package barehop is the benchmarks' peer for the sidecar: a stock
// httputil.ReverseProxy that records nothing, so bench/capture and
// bench/proxy compare reel against the same hop. It flushes as
// ReverseProxy does by default: every write of an event stream or a body
// of unknown length, and a body with a Content-Length once (flushing that
// after every write, FlushInterval -1, sent the head and the body in two
// packets and made the peer ≈ 60 µs slower per JSON answer than reel's
// proxy).
package barehop

import (
	"net/http"
	"net/http/httputil"
	"net/url"
)

// New returns the bare reverse proxy to upstream. It enables full duplex
// on every request, as reel's proxy does: without it net/http's HTTP/1
// server closes the request body once the response starts, the
// transport's final read of a POST body then fails and tears down the
// upstream connection, and a few per cent of streamed answers to POSTs
// arrive cut ("unexpected EOF" at the client; golang/go#40747). The peer
// would then do less work than the proxy it is compared with.
func New(upstream *url.URL) http.Handler {
	p := httputil.NewSingleHostReverseProxy(upstream)
	p.Transport = &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, DisableCompression: true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		p.ServeHTTP(w, r)
	})
}
