package proxy_test

import (
	"context"
	"log"
	"net/url"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/proxy"
)

// A recording sidecar on 127.0.0.1:8081 in front of a model server, writing
// unredacted exchanges (pass a *redact.Redactor instead of nil in production).
func ExampleNew() {
	upstream, _ := url.Parse("http://127.0.0.1:8000")
	rec, _, err := recorder.OpenDataset(context.Background(), formats.WriterOptions{Dir: "traffic", Recorder: "sidecar-1"},
		nil, recorder.Options{Config: recorder.Config{Upstream: upstream.Host}})
	if err != nil {
		log.Fatal(err)
	}
	defer rec.Close(context.Background())
	p, err := proxy.New(proxy.Options{Upstream: upstream, Recorder: rec})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(proxy.NewServer("127.0.0.1:8081", p).ListenAndServe())
}
