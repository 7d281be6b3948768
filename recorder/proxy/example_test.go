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
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: "traffic", Recorder: "sidecar-1"})
	if err != nil {
		log.Fatal(err)
	}
	pipe := recorder.NewPipeline(w, nil, recorder.PipelineOptions{})
	defer pipe.Close(context.Background())
	upstream, _ := url.Parse("http://127.0.0.1:8000")
	p, err := proxy.New(proxy.Options{
		Upstream:  upstream,
		Assembler: recorder.NewAssembler(recorder.Config{Recorder: "sidecar-1", Upstream: upstream.Host}),
		Pipeline:  pipe,
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(proxy.NewServer("127.0.0.1:8081", p).ListenAndServe())
}
