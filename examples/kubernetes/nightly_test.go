package kubernetes

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// writeYesterday records a quiet hour (10:00, 40 exchanges) and a peak hour
// (14:00, 200 exchanges, 10 ms apart) of yesterday, UTC; exchange i carries
// "req-i" in its prompt.
func writeYesterday(t *testing.T, dir string) string {
	t.Helper()
	day := time.Now().UTC().Add(-24 * time.Hour).Truncate(24 * time.Hour)
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: dir, Recorder: "gw-1", Source: "test", NoSpool: true})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pad := make([]byte, 512)
	id := 0
	for _, h := range []struct {
		hour time.Duration
		n    int
	}{{10 * time.Hour, 40}, {14 * time.Hour, 200}} {
		for k := range h.n {
			id++
			for j := range pad {
				pad[j] = byte(rng.Uint32())
			}
			ts := day.Add(h.hour + time.Duration(k)*10*time.Millisecond)
			x := formats.Exchange{Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "gw-1", Seq: int64(id), ConnID: int64(id%16 + 1),
				Method: "POST", Host: "gateway.prod.example", Path: "/v1/completions", ReqContentType: "application/json",
				ReqBody: fmt.Appendf(nil, `{"model":"m","prompt":"req-%d %s","max_tokens":8}`, id, hex.EncodeToString(pad)),
				Model:   "m", PromptTokens: 300, OutputTokens: 8, Status: 200}
			if err := w.Write(&x); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return day.Format("2006-01-02")
}

// shadow is a loopback stand-in for the candidate build: each request takes
// a fixed time set by its exchange id, times slow.
func shadow(t *testing.T, slow int) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, rest, _ := strings.Cut(string(b), `"prompt":"req-`)
		num, _, _ := strings.Cut(rest, " ")
		id, _ := strconv.Atoi(num)
		time.Sleep(time.Duration(slow*(30+10*(id%5))) * time.Millisecond)
		// A stream, like the candidate's chat completions: the nightly's
		// ttft rule needs token events (a rule over no data fails).
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"b\"}}],\"usage\":{\"completion_tokens\":8}}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestNightlyRegression runs the CronJob's two steps as written in
// nightly-regression.yaml (its /bin/sh scripts, env and the reel built from
// this tree), on volumes and a shadow stood in for by temp directories and
// a loopback server: without a baseline the Job fails; a candidate twice as
// fast as the baseline passes; one three times as slow fails on the
// regression. (Latency is wall-clock time on a shared machine: the passing
// candidate is faster, not equal, so noise cannot trip a rule.)
func TestNightlyRegression(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 2 s of traffic three times")
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	var p *pod
	for _, d := range loadManifests(t, ".") {
		if d.file == "nightly-regression.yaml" && str(d.m, "kind") == "CronJob" {
			p, _ = podOf(t, d)
		}
	}
	if p == nil {
		t.Fatal("no CronJob in nightly-regression.yaml")
	}
	var replayStep, compareStep *container
	for _, c := range p.containers() {
		switch {
		case c.init && str(c.m, "name") == "replay":
			replayStep = &c
		case !c.init && str(c.m, "name") == "compare":
			compareStep = &c
		}
	}
	if replayStep == nil || compareStep == nil {
		t.Fatal("want initContainer replay and container compare")
	}
	cli := buildReel(t)
	data, results := t.TempDir(), t.TempDir()
	day := writeYesterday(t, data)

	// step runs one container's command as the kubelet would, with the
	// volumes and the shadow swapped for the test's.
	step := func(c *container, job, target string) (string, int) {
		t.Helper()
		env, err := c.env(0)
		if err != nil {
			t.Fatal(err)
		}
		env["DATA"], env["RESULTS"], env["TARGET"], env["JOB_NAME"] = data, results, target, job
		var argv []string
		for _, a := range append(strs(c.m, "command"), strs(c.m, "args")...) {
			v, err := expand(a, env, false)
			if err != nil {
				t.Fatal(err)
			}
			argv = append(argv, v)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = []string{"PATH=" + filepath.Dir(cli.bin) + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	night := func(job, target string) (string, int) {
		out, code := step(replayStep, job, target)
		if code != 0 {
			t.Fatalf("replay step of %s exited %d:\n%s", job, code, out)
		}
		if want := "replaying " + day + "T14:00:00Z .. " + day + "T15:00:00Z"; !strings.Contains(out, want) {
			t.Fatalf("replay step of %s did not pick yesterday's peak hour (%q):\n%s", job, want, out)
		}
		if !strings.Contains(out, "sent 200") {
			t.Fatalf("replay step of %s did not send the peak hour's 200 requests:\n%s", job, out)
		}
		return step(compareStep, job, target)
	}

	out, code := night("reel-nightly-1", shadow(t, 2))
	if code == 0 || !strings.Contains(out, "no baseline") {
		t.Fatalf("without a baseline the compare step exited %d:\n%s", code, out)
	}
	if err := os.Rename(filepath.Join(results, "nightly", "reel-nightly-1"), filepath.Join(results, "baseline")); err != nil {
		t.Fatal(err)
	}
	if out, code := night("reel-nightly-2", shadow(t, 1)); code != 0 {
		t.Errorf("a faster candidate failed the nightly (exit %d):\n%s", code, out)
	}
	out, code = night("reel-nightly-3", shadow(t, 6))
	if code != 1 || !strings.Contains(out, "REGRESSION") {
		t.Errorf("a 3× slower candidate: compare exited %d, want 1 with a regression verdict:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(results, "nightly", "reel-nightly-3.html")); err != nil {
		t.Errorf("no HTML comparison beside the run: %v", err)
	}
}
