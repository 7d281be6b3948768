package accesslog_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/recorder"
	"github.com/reelkit/reel/recorder/accesslog"
	"github.com/reelkit/reel/recorder/recordertest"
)

// nginxLog (a var: it has a 1100-byte line) is what the package comment's log_format writes (escape=json),
// with bad lines mixed in.
var nginxLog = `{"msec":"1772632800.250","request_time":"0.250","upstream_response_time":"0.240","upstream_header_time":"0.040","remote_addr":"10.0.0.7","host":"gw.example","request_method":"POST","request_uri":"/v1/chat/completions?x=1","status":"200","content_type":"application/json","request_length":"312","content_length":"63","body_bytes_sent":"512","upstream_addr":"10.1.0.5:8000","upstream_http_x_batch_size":"8","upstream_http_x_queue_depth":"3","request_body":"{\"model\":\"m1\",\"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9\"}]}"}
not json at all
{"msec":"1772632801.000","request_time":"0.010","request":"GET /healthz HTTP/1.1","status":200,"body_bytes_sent":2,"upstream_http_x_batch_size":"-","request_body":"-"}

{"msec":"1772632802.000","request_method":"POST"}
{"request_method":"GET","request_uri":"/no-time","status":"200"}
{"msec":"1772632803.500","request_time":"0.500","upstream_response_time":"0.100, 0.380","upstream_header_time":"0.050, 0.080","request_method":"POST","request_uri":"/v1/embeddings","status":"502","content_length":"100000","request_body":""}
{"msec":"1772632804.000","request_method":"GET","request_uri":"/` + strings.Repeat("x", 1100) + `","status":"200"}
{"msec":"1772632805.000","request_method":"DELETE","request_uri":"/v1/files/1","status":"204"}`

func TestImportNginx(t *testing.T) {
	var got []*formats.Exchange
	rep, err := accesslog.Import(context.Background(), strings.NewReader(nginxLog), accesslog.Options{
		Emit:     func(x *formats.Exchange) { got = append(got, x) },
		Recorder: newRecorder(t, recorder.Config{Recorder: "nginx-import"}),
		MaxLine:  1024,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lines != 9 || rep.Imported != 4 || rep.Bad != 4 {
		t.Errorf("report: %d lines, %d imported, %d bad; want 9, 4, 4", rep.Lines, rep.Imported, rep.Bad)
	}
	wantBad := []struct {
		line int
		err  error
	}{{2, accesslog.ErrNotJSON}, {5, accesslog.ErrNoRequest}, {6, accesslog.ErrNoTime}, {8, accesslog.ErrLineTooBig}}
	if len(rep.Errors) != len(wantBad) {
		t.Fatalf("errors: %v", rep.Errors)
	}
	for i, w := range wantBad {
		if e := rep.Errors[i]; e.Line != w.line || !errors.Is(e, w.err) {
			t.Errorf("bad line %d: got %v, want line %d: %v", i, e, w.line, w.err)
		}
	}
	if len(got) != 4 {
		t.Fatalf("got %d exchanges", len(got))
	}
	chat := got[0]
	wantStart := time.Unix(1772632800, 0).UTC()
	if !chat.Ts.Equal(wantStart) || chat.DurationNs != int64(250*time.Millisecond) || chat.TTFBNs != int64(50*time.Millisecond) {
		t.Errorf("chat timing: ts %v, duration %v, ttfb %v", chat.Ts, time.Duration(chat.DurationNs), time.Duration(chat.TTFBNs))
	}
	if chat.Method != "POST" || chat.Path != "/v1/chat/completions" || chat.Query != "x=1" || chat.Host != "gw.example" ||
		chat.Status != 200 || chat.Client != "10.0.0.7" || chat.Upstream != "10.1.0.5:8000" {
		t.Errorf("chat request: %+v", chat)
	}
	// escape=json escaped the client's own \u00e9; decoding restores it.
	if string(chat.ReqBody) != `{"model":"m1","messages":[{"role":"user","content":"h\u00e9"}]}` || chat.ReqContentType != "application/json" {
		t.Errorf("chat body %q (%q)", chat.ReqBody, chat.ReqContentType)
	}
	if chat.BatchSize != 8 || chat.QueueDepth != 3 || chat.RespBodyBytes != 512 || !chat.Complete {
		t.Errorf("chat: batch %d, queue %d, resp bytes %d, complete %v", chat.BatchSize, chat.QueueDepth, chat.RespBodyBytes, chat.Complete)
	}
	health := got[1]
	if health.Method != "GET" || health.Path != "/healthz" || health.Status != 200 || health.RespBodyBytes != 2 ||
		health.BatchSize != -1 || len(health.ReqBody) != 0 || !health.Complete {
		t.Errorf("health: %+v", health)
	}
	emb := got[2]
	if emb.Complete || emb.Error != "incomplete: request body not logged" || emb.Status != 502 ||
		emb.TTFBNs != int64(200*time.Millisecond) || emb.ReqBodyBytes != 100000 {
		t.Errorf("embeddings: complete %v, error %q, status %d, ttfb %v, req bytes %d",
			emb.Complete, emb.Error, emb.Status, time.Duration(emb.TTFBNs), emb.ReqBodyBytes)
	}
	if got[3].Method != "DELETE" || got[3].Seq <= emb.Seq {
		t.Errorf("last: %s seq %d", got[3].Method, got[3].Seq)
	}
}

func TestParseMapping(t *testing.T) {
	m, err := accesslog.ParseMapping([]string{"time=ts", "request_body=body", "header:x-gpu=upstream_http_x_gpu"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Time != "ts" || m.RequestBody != "body" || m.Headers["x-gpu"] != "upstream_http_x_gpu" {
		t.Errorf("%+v", m)
	}
	for _, bad := range []string{"nonsense", "colour=x", "time="} {
		if _, err := accesslog.ParseMapping([]string{bad}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// A custom mapping is used for import.
	var got []*formats.Exchange
	line := `{"ts":"2026-03-04T14:00:00.5Z","request_method":"GET","request_uri":"/x","status":"200","body":"b","upstream_http_x_gpu":"3"}`
	rep, err := accesslog.Import(context.Background(), strings.NewReader(line), accesslog.Options{
		Mapping:  m,
		Recorder: newRecorder(t, recorder.Config{ContextHeaders: []string{"x-gpu"}}),
		Emit:     func(x *formats.Exchange) { got = append(got, x) }})
	if err != nil || rep.Imported != 1 {
		t.Fatalf("import: %v, %+v", err, rep)
	}
	if string(got[0].ReqBody) != "b" || got[0].Context["x-gpu"] != "3" || got[0].Ts.Nanosecond() != 5e8 {
		t.Errorf("%+v", got[0])
	}
}

func FuzzImport(f *testing.F) {
	for _, l := range strings.Split(nginxLog, "\n") {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		rep, err := accesslog.Import(context.Background(), strings.NewReader(string(data)), accesslog.Options{
			Emit: func(*formats.Exchange) { n++ }, MaxLine: 4096})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Imported != n || rep.Imported+rep.Bad > rep.Lines {
			t.Fatalf("report %+v, emitted %d", rep, n)
		}
	})
}

// newRecorder builds the import's exchanges with cfg; the tests take them
// raw through Emit.
func newRecorder(tb testing.TB, cfg recorder.Config) *recorder.Recorder {
	rec, _ := recordertest.New(tb, recorder.Options{Config: cfg})
	return rec
}
