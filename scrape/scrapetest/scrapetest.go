// Package scrapetest serves the misbehaving metrics endpoints that scraping
// must survive: one that hangs, one that fails, one that serves garbage.
package scrapetest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BadEndpoints are loopback servers that never yield a usable scrape.
type BadEndpoints struct {
	Hang    string // URL that never answers until the test ends (or the request is cancelled)
	Fail    string // URL that answers 503
	Garbage string // URL that answers 200 with text no Prometheus parser accepts
}

// StartBadEndpoints starts the three servers; they stop when tb ends.
func StartBadEndpoints(tb testing.TB) BadEndpoints {
	tb.Helper()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	fail := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>{{not metrics}} = = =\n\x00\xff</body></html>")
	}))
	tb.Cleanup(func() {
		close(release) // before Close, which waits for the hanging handler
		hang.Close()
		fail.Close()
		garbage.Close()
	})
	return BadEndpoints{Hang: hang.URL, Fail: fail.URL, Garbage: garbage.URL}
}
