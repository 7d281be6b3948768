package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestQuickStory runs the --quick story and its checks: with sessions no
// later turn goes out before its predecessor's answer, open loop sends
// some early, and the slower shadow's queue is shallower with sessions.
func TestQuickStory(t *testing.T) {
	if testing.Short() {
		t.Skip("the quick story takes about 30 s of wall time; run without -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, []string{"--quick", "--out", t.TempDir()}, &out, &out); err != nil {
		t.Fatalf("story: %v\n%s", err, out.String())
	}
	for _, want := range []string{"sessions (infer):", "later turns sent before the answer", "session delay p50 / p99"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
