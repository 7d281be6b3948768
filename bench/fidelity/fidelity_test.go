package main

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// TestFidelity runs a small fidelity measurement (see the package
// comment) and holds it to SPEC §9: the redacted replay's cached prompt
// tokens within ±3 % of the raw replay's, the raw replay's within ±2 % of
// production's, and redacted prompts within ±3 % of the raw ones' tokens.
func TestFidelity(t *testing.T) {
	if testing.Short() {
		t.Skip("records and replays about 100 requests")
	}
	out, err := run(context.Background(), config{Dir: t.TempDir(), Sessions: 10, Gap: 12 * time.Millisecond, Scale: 20, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	out.write(&b)
	t.Log("\n" + b.String())
	if out.Production.Cached == 0 || out.Production.Reporting != out.Production.Requests {
		t.Fatalf("production reported no cache reuse: %+v", out.Production)
	}
	if out.Scheme != "redact/2" {
		t.Errorf("scheme %s", out.Scheme)
	}
	for _, c := range []struct {
		what  string
		b, a  int64
		bound float64
	}{
		{"raw replay's cached tokens vs production's", out.Raw.Cached, out.Production.Cached, 0.02},
		{"redacted replay's cached tokens vs the raw replay's", out.Redacted.Cached, out.Raw.Cached, 0.03},
		{"redacted prompt tokens vs raw", out.RedactedBodyTokens, out.RawBodyTokens, 0.03},
	} {
		if r := rel(c.b, c.a); math.Abs(r) > c.bound {
			t.Errorf("%s: %+.2f%%, want within ±%.0f%%", c.what, 100*r, 100*c.bound)
		}
	}
}
