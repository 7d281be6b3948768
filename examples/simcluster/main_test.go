package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"testing"
)

func TestPlanOutput(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"--generate", "--plan", "--duration", "5s", "--incident-at", "1s", "--incident-for", "2s", "--long-share", "1", "--seed", "4"}, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v (%s)", err, errOut.String())
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	n, long, last := 0, 0, -1.0
	for sc.Scan() {
		var line struct {
			OffsetMs float64         `json:"offset_ms"`
			Path     string          `json:"path"`
			Long     bool            `json:"long"`
			Body     json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if line.OffsetMs < last || line.OffsetMs >= 5000 || line.Path != "/v1/chat/completions" || len(line.Body) < 100 {
			t.Fatalf("line %d: %+v", n, line)
		}
		last = line.OffsetMs
		n++
		if line.Long {
			long++
		}
	}
	if n < 10 || long == 0 {
		t.Errorf("%d planned requests, %d long", n, long)
	}
}

func TestGenerateAgainstInProcessCluster(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"--generate", "--time-scale", "20", "--speed", "20", "--duration", "1s", "--long-prompt-threshold", "4096"}, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v (%s)", err, errOut.String())
	}
	m := regexp.MustCompile(`planned (\d+), sent (\d+), ok (\d+), failed 0, skipped 0`).FindStringSubmatch(out.String())
	if m == nil || m[1] != m[2] || m[2] != m[3] || m[1] == "0" {
		t.Errorf("summary not all OK:\n%s", out.String())
	}
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--stream-usage", "sometimes"},
		{"extra"},
		{"--generate", "--trace", "/nonexistent/trace.csv"},
		{"--time-scale", "-1"},
		{"--generate", "--plan", "--long-share", "3"},
		{"--no-such-flag"},
	} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, &out, &errOut); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
