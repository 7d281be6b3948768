package scrape

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/reelkit/reel/examples/simcluster/cluster"
)

// BenchmarkParse parses one scrape of the simulated cluster's /metrics
// (vLLM's names and histograms: about 200 samples) into metrics/1 rows.
func BenchmarkParse(b *testing.B) {
	c, err := cluster.New(cluster.Options{})
	if err != nil {
		b.Fatal(err)
	}
	fams, err := c.Registry().Gather()
	if err != nil {
		b.Fatal(err)
	}
	var body bytes.Buffer
	enc := expfmt.NewEncoder(&body, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			b.Fatal(err)
		}
	}
	s := &Scraper{opts: Options{}.withDefaults()}
	at := time.Now()
	rows, _, err := s.parse(bytes.NewReader(body.Bytes()), expfmt.NewFormat(expfmt.TypeTextPlain), "src", at)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(body.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := s.parse(bytes.NewReader(body.Bytes()), expfmt.NewFormat(expfmt.TypeTextPlain), "src", at); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(rows)), "samples/scrape")
}
