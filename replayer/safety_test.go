package replayer

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// TestTargetSafetyAliases: the recorded upstream (the production backend
// the sidecar forwarded to) is refused like a recorded host, and so are
// other spellings of a refused address, unless allowed.
func TestTargetSafetyAliases(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name, target, host, upstream string
		header                       string // --header Host value
		column                       string // "" = allowed
	}{
		{"unrelated host", "http://127.0.0.1:9", "gateway.prod.example", "", "", ""},
		{"recorded upstream", "http://127.0.0.1:9", "gateway.prod.example", "127.0.0.1:8000", "", "upstream"},
		{"recorded upstream URL", "http://127.0.0.1:9", "gateway.prod.example", "http://127.0.0.1:8000/v1", "", "upstream"},
		{"access-log retries", "http://127.0.0.1:9", "gateway.prod.example", "10.9.9.9:8000, 127.0.0.1:8001", "", "upstream"},
		{"localhost for a recorded 127.0.0.1", "http://localhost:9", "127.0.0.1:8000", "", "", "host"},
		{"127.0.0.1 for a recorded localhost", "http://127.0.0.1:9", "localhost:8000", "", "", "host"},
		{"IPv4-mapped IPv6", "http://[::ffff:127.0.0.1]:9", "127.0.0.1", "", "", "host"},
		{"IPv4-mapped upstream", "http://127.0.0.1:9", "gateway.prod.example", "[::ffff:127.0.0.1]:8000", "", "upstream"},
		{"Host header naming production", "http://10.9.9.8:9", "gateway.prod.example", "", "gateway.prod.example", "host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := exchangeAt(at, 1, 1)
			x.Host, x.Upstream = tc.host, tc.upstream
			u, err := url.Parse(tc.target)
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{Target: u, Headers: http.Header{}}
			if tc.header != "" {
				opts.Headers.Set("Host", tc.header)
			}
			_, err = NewPlan(context.Background(), sliceOpener([]*formats.Exchange{x}), opts)
			var rh *RecordedHostError
			switch {
			case tc.column == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.column != "" && !errors.As(err, &rh):
				t.Fatalf("err %v: want a RecordedHostError", err)
			case tc.column != "" && (rh.Column != tc.column || !strings.Contains(err.Error(), "--allow-recorded-host")):
				t.Fatalf("err %v (column %q): want the %s column named and the flag", err, rh.Column, tc.column)
			}
			opts.AllowRecordedHost = true
			if _, err := NewPlan(context.Background(), sliceOpener([]*formats.Exchange{x}), opts); err != nil {
				t.Fatalf("allowed: %v", err)
			}
		})
	}
}

// TestHostHeader: --header 'Host: …' sets the virtual host on the wire
// (it used to be dropped without a word).
func TestHostHeader(t *testing.T) {
	got := make(chan string, 4)
	srv := newArrivals(t, func(w http.ResponseWriter, r *http.Request, id int64) {
		got <- r.Host
		w.Write([]byte("ok"))
	})
	x := exchangeAt(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC), 1, 1)
	h := http.Header{}
	h.Set("Host", "shadow.internal")
	run(t, []*formats.Exchange{x}, Options{Target: srv.url(t), Headers: h}, 1)
	if host := <-got; host != "shadow.internal" {
		t.Errorf("the shadow saw Host %q, want shadow.internal", host)
	}
}

// TestFrameRangeDots: A..B reads times that hold ':' themselves.
func TestFrameRangeDots(t *testing.T) {
	day := time.Date(2026, 11, 25, 13, 0, 0, 0, time.UTC)
	r, err := ParseFrameRange("14:00:05..14:01:00", day)
	if err != nil || !r.From.Time.Equal(day.Add(time.Hour+5*time.Second)) || !r.To.Time.Equal(day.Add(time.Hour+time.Minute)) {
		t.Fatalf("14:00:05..14:01:00 → %+v, %v", r, err)
	}
	if r, err := ParseFrameRange("12..20", day); err != nil || r.From.Index != 12 || r.To.Index != 20 {
		t.Fatalf("12..20 → %+v, %v", r, err)
	}
	if r, err := ParseFrameRange("3..", day); err != nil || r.From.Index != 3 || r.To.Set {
		t.Fatalf("3.. → %+v, %v", r, err)
	}
	if _, err := ParseFrameRange("x..y", day); err == nil {
		t.Fatal("x..y accepted")
	}
}
