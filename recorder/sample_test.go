package recorder

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/formatstest"
)

// TestSamplingRule: the one rule every source gets. A session is kept or
// left out whole, whatever connections it uses; without a session a
// connection is kept or left out whole; a passive source's finished
// exchange (Record) gets the same answer as the proxy's request head
// (Want); and about Sample of the keys are kept.
func TestSamplingRule(t *testing.T) {
	head := func(session string) Request {
		h := http.Header{}
		if session != "" {
			h.Set("X-Session-Id", session)
		}
		return Request{Method: "POST", Host: "gw", Path: "/v1/chat/completions", Header: h}
	}
	const keys = 2000
	tests := []struct {
		name string
		// key i, exchange j of it: its session and connection
		at func(i, j int) (string, ConnInfo)
	}{
		{"session over many connections", func(i, j int) (string, ConnInfo) {
			return fmt.Sprint("session-", i), ConnInfo{ID: int64(i*10 + j), Client: fmt.Sprintf("10.0.0.%d:%d", j, 4000+j)}
		}},
		{"connection without a session", func(i, j int) (string, ConnInfo) {
			return "", ConnInfo{ID: int64(i + 1), Seq: int32(j), Client: "10.0.0.1:5000"}
		}},
		{"access log: client address only", func(i, j int) (string, ConnInfo) {
			return "", ConnInfo{Client: fmt.Sprint("10.1.", i/250, ".", i%250)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &countSink{}
			r := New(sink, nil, Options{Sample: 0.3, Pipeline: PipelineOptions{Queue: 4 * keys}})
			kept, recorded := 0, 0
			for i := range keys {
				s, c := tt.at(i, 0)
				want := r.Want(head(s), c)
				for j := 1; j < 4; j++ {
					s, c := tt.at(i, j)
					if got := r.Want(head(s), c); got != want {
						t.Fatalf("key %d: exchange %d sampled %v, exchange 0 %v: the key is split", i, j, got, want)
					}
					// The finished exchange, as capture or an import hands it over.
					r.Record(&formats.Exchange{Method: "POST", Host: "gw", Path: "/v1/chat/completions", Session: s, ConnID: c.ID, ConnSeq: c.Seq, Client: c.Client})
				}
				if want {
					kept++
					recorded += 3
				}
			}
			if kept < keys*25/100 || kept > keys*35/100 {
				t.Errorf("sample 0.3 kept %d of %d keys", kept, keys)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := r.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if sink.n != recorded {
				t.Errorf("Record kept %d finished exchanges, Want kept %d of their request heads", sink.n, recorded)
			}
		})
	}
}

// TestEpoch: sequence numbers and connection ids count up from the epoch,
// which New takes from a sink that has one.
func TestEpoch(t *testing.T) {
	epoch := time.UnixMilli(1764579600123)
	r := New(epochSink{epoch}, nil, Options{})
	defer r.Close(context.Background())
	base := EpochBase(epoch)
	if base != 1764579600123<<14 {
		t.Fatalf("EpochBase = %d", base)
	}
	if got := r.NewConn(); got != base+1 {
		t.Errorf("first connection id %d, want %d", got, base+1)
	}
	if got := r.Begin(epoch, ConnInfo{}).Seq(); got != base+1 {
		t.Errorf("first seq %d, want %d", got, base+1)
	}
	if got := New(&countSink{}, nil, Options{}).Begin(epoch, ConnInfo{}).Seq(); got != 1 {
		t.Errorf("without an epoch the first seq is %d, want 1", got)
	}
	later := New(epochSink{epoch.Add(time.Millisecond)}, nil, Options{})
	if got := later.Begin(epoch, ConnInfo{}).Seq(); got <= base+1<<14-1 {
		t.Errorf("a recorder 1 ms later starts at %d, inside the earlier one's %d numbers", got, 1<<14)
	}
}

type epochSink struct{ at time.Time }

func (epochSink) Write(*formats.Exchange) error { return nil }
func (epochSink) Close(context.Context) error   { return nil }
func (s epochSink) Epoch() time.Time            { return s.at }

// TestRestartKeepsKeysUnique records twice on one dataset directory, as a
// restarted recorder does: (recorder, seq), the join key from results back
// to the recording, and conn_id, which replay's --conn recorded groups by,
// must not repeat across the two runs.
func TestRestartKeepsKeysUnique(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for run := range 2 {
		rec, _, err := OpenDataset(ctx, formats.WriterOptions{Dir: dir, Recorder: "gw-1"}, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			conn := ConnInfo{ID: rec.NewConn(), Client: "10.0.0.1:4000"}
			for j := range 3 {
				conn.Seq = int32(j)
				r := rec.Begin(time.Now(), conn)
				r.SetRequest(Request{Method: "GET", Host: "gw", Path: "/run", RawQuery: fmt.Sprint("run=", run), Header: http.Header{}})
				r.SetResponse(time.Now(), 200, http.Header{})
				if !rec.Submit(r.Finish(time.Now(), true)) {
					t.Fatal("dropped")
				}
			}
		}
		if err := rec.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	seqs := map[string]bool{}
	connRun := map[int64]string{}
	rows := 0
	for _, x := range formatstest.Read[formats.Exchange](t, dir) {
		rows++
		key := fmt.Sprint(x.Recorder, "/", x.Seq)
		if seqs[key] {
			t.Errorf("(recorder, seq) %s recorded twice", key)
		}
		seqs[key] = true
		if run, ok := connRun[x.ConnID]; ok && run != x.Query {
			t.Errorf("conn_id %d used by %s and %s", x.ConnID, run, x.Query)
		}
		connRun[x.ConnID] = x.Query
	}
	if rows != 12 {
		t.Fatalf("read %d rows, want 12", rows)
	}
}
