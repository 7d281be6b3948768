package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reelkit/reel/analysis/analysistest"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/replayer"
)

// writeRun writes result rows as one run with the replay's metadata.
func writeRun(t *testing.T, dir, runID string, meta map[string]string, rows []*formats.Result) {
	t.Helper()
	m := map[string]string{replayer.MetaRunID: runID, replayer.MetaSpeed: "1", replayer.MetaShard: "0/1"}
	for k, v := range meta {
		m[k] = v
	}
	w, err := formats.NewWriter[formats.Result](context.Background(), formats.WriterOptions{Dir: dir, Recorder: "replay-" + runID, Meta: m})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// failing returns rows like analysistest.Run's where every share-th fails
// with status (0: a transport error).
func failing(n, share int, status int32) []*formats.Result {
	rows := analysistest.Run(9, n, 1)
	for i, r := range rows {
		if i%share != 0 {
			continue
		}
		r.Status, r.TTFTNs, r.TTSTNs, r.OutputTokens, r.ITLUs, r.Events = status, 0, 0, 0, nil, 0
		if status == 0 {
			r.Error, r.TTFBNs = "refused: dial tcp 127.0.0.1:1: connect: connection refused", 0
		}
	}
	return rows
}

func TestCompareVerdicts(t *testing.T) {
	rec, base, _, slow := analysisFixtures(t)
	_ = rec
	dir := t.TempDir()
	dead, errs10 := filepath.Join(dir, "dead"), filepath.Join(dir, "errs10")
	writeRun(t, dead, "dead", nil, failing(300, 1, 0))
	writeRun(t, errs10, "errs10", nil, failing(3000, 10, 500))
	winA, winB := filepath.Join(dir, "winA"), filepath.Join(dir, "winB")
	writeRun(t, winA, "a", map[string]string{replayer.MetaFrom: "2026-11-25T14:00:00Z", replayer.MetaSelection: "all"}, analysistest.Run(1, 500, 1))
	writeRun(t, winB, "b", map[string]string{replayer.MetaFrom: "2026-11-25T14:05:00Z", replayer.MetaSelection: "model x"}, analysistest.Run(2, 500, 1))
	mixed := filepath.Join(dir, "mixed")
	writeRun(t, mixed, "first", nil, analysistest.Run(1, 100, 1))
	writeRun(t, mixed, "second", nil, analysistest.Run(2, 100, 1))
	sweep := filepath.Join(dir, "sweep")
	writeRun(t, filepath.Join(sweep, "speed=1"), "sw", nil, analysistest.Run(1, 100, 1))
	writeRun(t, filepath.Join(sweep, "speed=2"), "sw", map[string]string{replayer.MetaSpeed: "2"}, analysistest.Run(2, 100, 1))

	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr []string
	}{
		{"expectation met", []string{"compare", slow, base, "--expect", "ttft.p99<-20%"}, 0,
			[]string{"EXPECTED: ttft.p99 -", "better, meets rule ttft.p99<-20%"}, nil},
		{"expectation not met", []string{"compare", base, slow, "--expect", "ttft.p99<-20%"}, 1,
			[]string{"NOT MET: ttft.p99 +", "expected ttft.p99<-20%"}, nil},
		{"expectation within noise is not met", []string{"compare", base, base, "--expect", "p99<-1%"}, 1,
			[]string{"NOT MET: "}, nil},
		{"no data in B trips", []string{"compare", base, dead, "--fail-on", "p99>+10%"}, 1,
			[]string{"e2e.p99: no data in B, trips rule p99>+10%", "no data"}, nil},
		{"no data in B is not an expectation met", []string{"compare", base, dead, "--expect", "ttft.p99<-40%"}, 1,
			[]string{"NOT MET: ttft.p99: no data in B"}, nil},
		{"goodput rule without an SLO trips", []string{"compare", base, base, "--fail-on", "goodput<-5%"}, 1,
			[]string{"goodput: no SLO to judge it"}, nil},
		{"error rise fails without an error rule", []string{"compare", base, errs10, "--fail-on", "ttft.p99>+50%"}, 1,
			[]string{"REGRESSION: error_rate 0.0% → 10.0%", "--max-error-rise"}, nil},
		{"error guard can be loosened", []string{"compare", base, errs10, "--fail-on", "ttft.p99>+50%", "--max-error-rise", "0.2"}, 0,
			[]string{"OK: none of 1 rule(s) tripped"}, nil},
		{"different windows are flagged", []string{"compare", winA, winB}, 0,
			[]string{"warning: A and B measured differently: from 2026-11-25T14:00:00Z vs 2026-11-25T14:05:00Z; selection all vs model x"},
			[]string{"measured differently"}},
		{"compare refuses a directory of two runs", []string{"compare", base, mixed}, 2, nil,
			[]string{"holds 2 runs", "first", "second", "try: pass one run's directory"}},
		{"report refuses a directory of two runs", []string{"report", mixed}, 2, nil, []string{"holds 2 runs"}},
		{"report refuses a sweep's root", []string{"report", sweep}, 2, nil, []string{"sw at speed 2", "speed=2"}},
		{"report takes one speed of a sweep", []string{"report", filepath.Join(sweep, "speed=2")}, 0, []string{"100 requests"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			for _, want := range tc.stdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
				}
			}
			for _, want := range tc.stderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
		})
	}
}

// TestInspectMixedSchemas: inspect over unrelated files of two schemas
// summarises them but warns that the totals mix datasets.
func TestInspectMixedSchemas(t *testing.T) {
	dir := t.TempDir()
	writeFilterDataset(t, filepath.Join(dir, "rec"))
	writeRun(t, filepath.Join(dir, "res"), "r", nil, analysistest.Run(1, 10, 1))
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"inspect", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "warning: ") || !strings.Contains(stderr.String(), "2 schemas") {
		t.Errorf("no mixed-schema warning:\n%s", stderr.String())
	}
	stderr.Reset()
	dispatch(context.Background(), []string{"inspect", filepath.Join(dir, "rec")}, &stdout, &stderr)
	if strings.Contains(stderr.String(), "schemas") {
		t.Errorf("warned on one dataset: %s", stderr.String())
	}
}
