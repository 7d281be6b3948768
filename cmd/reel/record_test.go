package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// TestRecordChild is not a test: TestRecordKill re-executes the test binary
// to run it as a `reel record` process it can SIGKILL.
func TestRecordChild(t *testing.T) {
	args := os.Getenv("REEL_TEST_RECORD_ARGS")
	if args == "" {
		t.Skip("only runs as TestRecordKill's child")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, strings.Split(args, "\x1f"), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startRecorder runs `reel record args...` in a child process and waits
// until its proxy answers.
func startRecorder(t *testing.T, listen string, args []string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRecordChild$")
	cmd.Env = append(os.Environ(), "REEL_TEST_RECORD_ARGS="+strings.Join(args, "\x1f"))
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + listen + "/ready")
		if err == nil {
			resp.Body.Close()
			return cmd
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Fatal("recorder did not start within 20 s")
	return nil
}

// stopRecorder sends the recorder child SIGTERM and fails the test unless it
// exits cleanly within timeout; what names it in the failure ("restarted
// recorder").
func stopRecorder(t *testing.T, child *exec.Cmd, what string, timeout time.Duration) {
	t.Helper()
	child.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s exited with %v", what, err)
		}
	case <-time.After(timeout):
		child.Process.Kill()
		t.Fatalf("%s did not exit within %v of SIGTERM", what, timeout)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("child: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestRecordKill sends SIGKILL to a recorder mid-traffic, restarts it on the
// same directory and checks that every exchange acknowledged to its client
// before the last sync interval is in the dataset, exactly once.
func TestRecordKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts recorder processes")
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"score":0.5}`))
	}))
	defer upstream.Close()
	dir := t.TempDir()
	listen, metrics := freeAddr(t), freeAddr(t)
	const syncEvery = 100 * time.Millisecond
	args := []string{"record", "--listen", listen, "--upstream", upstream.URL, "--out", dir, "--raw",
		"--sync-every", syncEvery.String(), "--metrics-listen", metrics, "--recorder-id", "killtest", "--path", "/score"}

	child := startRecorder(t, listen, args)
	acked := map[int]time.Time{}
	client := &http.Client{Timeout: 5 * time.Second}
	stop := time.Now().Add(1500 * time.Millisecond)
	for i := 0; time.Now().Before(stop) && i < 100000; i++ {
		resp, err := client.Post("http://"+listen+"/score?i="+strconv.Itoa(i), "application/json", strings.NewReader(`{"user":1}`))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		acked[i] = time.Now()
		time.Sleep(200 * time.Microsecond) // a steady rate, not a flood
	}
	// Fail-open drops (a starved writer on a loaded machine) are not crash
	// losses: count them just before the kill.
	dropped := scrapeSum(t, "http://"+metrics+"/metrics", "reel_recorder_dropped_total")
	killedAt := time.Now()
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	child.Wait()

	// Restart: the new recorder recovers the spool; then stop it cleanly.
	child = startRecorder(t, listen, args)
	stopRecorder(t, child, "restarted recorder", 30*time.Second)

	r, err := formats.OpenReader[formats.Exchange](context.Background(), []string{dir}, formats.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	seen := map[int]int{}
	for {
		x, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		i, err := strconv.Atoi(strings.TrimPrefix(x.Query, "i="))
		if err != nil {
			t.Fatalf("unexpected exchange %s?%s", x.Path, x.Query)
		}
		seen[i]++
	}
	// The spool is synced every syncEvery; an exchange also spends up to
	// about one more interval in the queue and writer on a loaded machine.
	cutoff := killedAt.Add(-2 * syncEvery)
	lost, old := 0, 0
	var oldestLost time.Duration
	for i, at := range acked {
		if seen[i] == 0 && killedAt.Sub(at) > oldestLost {
			oldestLost = killedAt.Sub(at)
		}
		if seen[i] > 1 {
			t.Errorf("exchange %d recorded %d times", i, seen[i])
		}
		if at.Before(cutoff) {
			old++
			if seen[i] == 0 {
				lost++
			}
		}
	}
	t.Logf("%d requests acknowledged, %d before the cutoff, %d recorded, %v dropped by the queue; the oldest lost was acknowledged %v before the kill", len(acked), old, len(seen), dropped, oldestLost)
	if old == 0 {
		t.Fatal("no request was acknowledged before the cutoff: the test proved nothing")
	}
	if float64(lost) > dropped {
		t.Fatalf("%d of %d exchanges acknowledged before %v ahead of the kill were lost (%v dropped by the fail-open queue)", lost, old, 2*syncEvery, dropped)
	}
}

// scrapeSum adds up every sample of a Prometheus metric.
func scrapeSum(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum := 0.0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1048576", 1 << 20, true}, {"512KiB", 512 << 10, true}, {"128MiB", 128 << 20, true},
		{"1GB", 1e9, true}, {"1.5G", 3 << 29, true}, {"2k", 2048, true}, {"10 MiB", 10 << 20, true},
		{"", 0, false}, {"-1MiB", 0, false}, {"lots", 0, false}, {"1PiB", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSize(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("parseSize(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestRecordUsage(t *testing.T) {
	d := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{}, "--out is required"},
		{[]string{"--out", d}, "no source"},
		{[]string{"--out", d, "--upstream", "x", "--sample", "2"}, "--sample"},
		{[]string{"--out", d, "--upstream", "http://h", "--max-body", "big"}, "--max-body"},
		{[]string{"--out", d, "--upstream", "ftp://h", "--raw", "--metrics-listen", ""}, "--upstream"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			err := runRecord(context.Background(), tt.args, io.Discard, io.Discard)
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want a usage error about %q", err, tt.want)
			}
		})
	}
}
