package htmlreport

import (
	"bytes"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/analysis/analysistest"
	"github.com/reelkit/reel/formats"
)

func incident(t *testing.T, scale float64) *analysis.Analyzer {
	t.Helper()
	slo, err := analysis.ParseSLO("ttft=500ms,e2e=1.2s")
	if err != nil {
		t.Fatal(err)
	}
	a := analysis.New(analysis.Options{SLO: slo})
	xs := analysistest.WeeklyIncident(7)
	for _, r := range analysistest.Replayed(xs, 0, func(x *formats.Exchange) float64 {
		if !x.Time().Before(analysistest.BurstFrom) && x.Time().Before(analysistest.BurstTo) {
			return scale
		}
		return 1
	}) {
		a.AddResult(r)
	}
	return a
}

var svgRe = regexp.MustCompile(`(?s)<svg .*?</svg>`)

// sampleDir keeps the pages TestPages renders; docs/img's screenshots are
// taken from them:
//
//	go test ./analysis/htmlreport -run TestPages -sample-dir /tmp/pages
//	chromium --headless --screenshot=docs/img/report.png --window-size=1280,1600 file:///tmp/pages/report.html
var sampleDir = flag.String("sample-dir", "", "write the rendered sample pages to this directory")

func keep(t *testing.T, name string, page []byte) {
	t.Helper()
	if *sampleDir == "" {
		return
	}
	if err := os.WriteFile(filepath.Join(*sampleDir, name), page, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkPage asserts a page is self-contained and its SVGs are well-formed XML.
func checkPage(t *testing.T, page string, want ...string) {
	t.Helper()
	body := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
	for _, bad := range []string{"<script", "http://", "https://", "src=", "url(", "@import", "NaN", "Inf"} {
		if strings.Contains(body, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	svgs := svgRe.FindAllString(page, -1)
	if len(svgs) < 5 {
		t.Errorf("page has %d charts, want at least 5", len(svgs))
	}
	for _, s := range svgs {
		d := xml.NewDecoder(strings.NewReader(s))
		for {
			if _, err := d.Token(); err != nil {
				if err.Error() != "EOF" {
					t.Errorf("chart is not well-formed: %v\n%.300s", err, s)
				}
				break
			}
		}
	}
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("page lacks %q", w)
		}
	}
}

func TestPages(t *testing.T) {
	base, fix := incident(t, 1), incident(t, 0.45)
	t.Run("report", func(t *testing.T) {
		var b bytes.Buffer
		if err := WriteReport(&b, "reel report: results/incident-replay", base.Summary()); err != nil {
			t.Fatal(err)
		}
		keep(t, "report.html", b.Bytes())
		checkPage(t, b.String(), "reel report: results/incident-replay", "E2E latency per frame", "long-prompt share", "SLO windows", `class="miss"`, "frames of 5s")
	})
	t.Run("stats", func(t *testing.T) {
		slo, _ := analysis.ParseSLO("ttft=500ms,e2e=1.2s")
		rec := analysis.New(analysis.Options{SLO: slo})
		for _, x := range analysistest.WeeklyIncident(7) {
			rec.AddExchange(x)
		}
		var b bytes.Buffer
		if err := WriteStats(&b, "reel stats: capture/", rec.Stats()); err != nil {
			t.Fatal(err)
		}
		keep(t, "stats.html", b.Bytes())
		checkPage(t, b.String(), "likely cause: long prompts", `class="band"`, "prefix sharing")
	})
	t.Run("compare", func(t *testing.T) {
		c := analysis.Compare(base, fix, analysis.CompareOptions{Resamples: 200})
		rules, _ := analysis.ParseRules("p99>+10%")
		v := c.Judge(rules)
		var b bytes.Buffer
		if err := WriteCompare(&b, "results/incident-replay", "results/long-queue-fix", c, &v); err != nil {
			t.Fatal(err)
		}
		keep(t, "compare.html", b.Bytes())
		checkPage(t, b.String(), "OK: none of ", "A p99", "B p99", "CI of Δ", `class="sig"`, "B has the tail in 0 of them (gone in B)")
	})
	t.Run("empty", func(t *testing.T) {
		var b bytes.Buffer
		if err := WriteReport(&b, "<empty> & co", analysis.New(analysis.Options{}).Summary()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "no data") {
			t.Error("an empty report must say there is no data")
		}
		if !strings.Contains(b.String(), "&lt;empty&gt; &amp; co") || strings.Contains(b.String(), "<empty>") {
			t.Error("the title must be escaped")
		}
	})
}

func TestChartTicks(t *testing.T) {
	c := Chart{XKind: xTime}
	ticks := c.xTicks(float64(analysistest.Start.Unix()), float64(analysistest.Start.Add(5*time.Minute).Unix()))
	if len(ticks) < 3 || len(ticks) > 9 || ticks[0].label != "14:00" {
		t.Errorf("time ticks %+v", ticks)
	}
	if s := niceStep(7.3, 5); s != 2 {
		t.Errorf("niceStep(7.3, 5) = %v, want 2", s)
	}
}
