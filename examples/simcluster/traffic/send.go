package traffic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Result is one sent request.
type Result struct {
	Seq          int
	Offset       time.Duration // planned offset
	Lag          time.Duration // actual send − due time
	Status       int           // 0 when no response
	Err          error
	TTFT         time.Duration // send → first token-bearing event (streams)
	E2E          time.Duration // send → end of body
	OutputTokens int           // from usage, else token events
	PromptTokens int           // planned
	Long         bool
	BatchSize    int // x-batch-size, -1 when absent
	QueueDepth   int // x-queue-depth, -1 when absent
	// Session is the request's session (nil: a single request); Answer is
	// the answer's text, which the session's next turn carries.
	Session *SessionPlan
	Answer  string
}

// Summary counts what a run did.
type Summary struct {
	Planned      int           // requests the plan held
	Sent         int           // requests sent
	OK           int           // 2xx with a complete body
	Failed       int           // errors and non-2xx
	Skipped      int           // due while MaxInFlight were in flight
	Long         int           // incident requests sent
	Sessions     int           // sessions started
	FollowUps    int           // later turns of sessions sent (closed loop, after the previous answer)
	OutputTokens int64         // tokens received
	MaxLag       time.Duration // worst send lag
	Elapsed      time.Duration // start to last response
	Errors       map[string]int
}

// ErrNoTarget is returned by Run without Options.Target.
var ErrNoTarget = errors.New("traffic: no target URL")

// Run sends the plan for opts to opts.Target open-loop: request i is sent
// at start + offset_i however slow the target is, never more than
// MaxInFlight at once. It returns when every sent request has finished or
// ctx is done (then with ctx's error and the summary so far).
func Run(ctx context.Context, opts Options) (*Summary, error) {
	if opts.Target == "" {
		return nil, ErrNoTarget
	}
	p, err := NewPlanner(opts)
	if err != nil {
		return nil, err
	}
	o := p.o
	client := o.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: o.MaxInFlight,
			DisableCompression:  true,
		}}
	}
	target := strings.TrimSuffix(o.Target, "/")

	var (
		mu  sync.Mutex // guards sum and serialises OnResult
		sum = &Summary{Errors: map[string]int{}}
		wg  sync.WaitGroup
	)
	slots := make(chan struct{}, o.MaxInFlight)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	start := time.Now()
	followSeq := o.MaxRequests // later turns are numbered after the plan
	// sendTurn sends r and, for a session turn that was answered, the next
	// turn a think time after the answer ended, until the session is over
	// or ctx ends. The caller holds a slot for r.
	var sendTurn func(r Planned, due time.Time)
	sendTurn = func(r Planned, due time.Time) {
		defer wg.Done()
		res := send(ctx, client, target, &r, due, o.RequestTimeout)
		<-slots
		mu.Lock()
		sum.add(res)
		if o.OnResult != nil {
			o.OnResult(res)
		}
		next, think, ok := followUp(&r, res.Answer)
		if ok && res.Err == nil && res.Status/100 == 2 && ctx.Err() == nil {
			next.Seq, next.Offset = followSeq, time.Since(start)+think
			followSeq++
			sum.FollowUps++
		} else {
			ok = false
		}
		mu.Unlock()
		if !ok {
			return
		}
		at := time.Now().Add(think)
		t := time.NewTimer(think)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		select { // a session waits for a slot: it is closed loop, never skipped
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Add(1)
		go sendTurn(next, at)
	}
	for ctx.Err() == nil {
		r, ok := p.Next()
		if !ok {
			break
		}
		sum.Planned++
		due := start.Add(r.Offset)
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break
			}
		}
		select {
		case slots <- struct{}{}:
		default:
			mu.Lock()
			sum.Skipped++
			mu.Unlock()
			continue
		}
		if r.Session != nil {
			mu.Lock()
			sum.Sessions++
			mu.Unlock()
		}
		wg.Add(1)
		go sendTurn(r, due)
	}
	wg.Wait()
	sum.Elapsed = time.Since(start)
	return sum, ctx.Err()
}

func (s *Summary) add(r *Result) {
	s.Sent++
	if r.Long {
		s.Long++
	}
	s.MaxLag = max(s.MaxLag, r.Lag)
	s.OutputTokens += int64(r.OutputTokens)
	switch {
	case r.Err != nil:
		s.Failed++
		s.Errors[errorKind(r.Err)]++
	case r.Status/100 != 2:
		s.Failed++
		s.Errors["HTTP "+strconv.Itoa(r.Status)]++
	default:
		s.OK++
	}
}

// errorKind is a short, low-cardinality label for an error.
func errorKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, errStreamError):
		return "stream error event"
	case errors.Is(err, errTruncated):
		return "truncated stream"
	}
	return "transport"
}

var (
	errStreamError = errors.New("error event in stream")
	errTruncated   = errors.New("stream ended without [DONE]")
)

// send performs one request and measures it.
func send(ctx context.Context, client *http.Client, target string, r *Planned, due time.Time, timeout time.Duration) *Result {
	res := &Result{Seq: r.Seq, Offset: r.Offset, PromptTokens: r.PromptTokens, Long: r.Long, BatchSize: -1, QueueDepth: -1, Session: r.Session}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target+r.Path, bytes.NewReader(r.Body))
	if err != nil {
		res.Err = fmt.Errorf("build request: %w", err)
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	if r.Session != nil {
		req.Header.Set("X-Session-Id", r.Session.Header())
	}
	if r.Stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	sent := time.Now()
	res.Lag = sent.Sub(due)
	resp, err := client.Do(req)
	if err != nil {
		res.Err = err
		return res
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	if v, err := strconv.Atoi(resp.Header.Get("x-batch-size")); err == nil {
		res.BatchSize = v
	}
	if v, err := strconv.Atoi(resp.Header.Get("x-queue-depth")); err == nil {
		res.QueueDepth = v
	}
	if resp.StatusCode/100 != 2 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var out struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		res.E2E = time.Since(sent)
		if err != nil {
			res.Err = fmt.Errorf("read body: %w", err)
		} else if resp.StatusCode/100 == 2 && json.Unmarshal(body, &out) == nil {
			res.OutputTokens = out.Usage.CompletionTokens
			if len(out.Choices) > 0 {
				res.Answer = out.Choices[0].Message.Content
			}
		}
		return res
	}
	res.Err = readStream(resp.Body, sent, res)
	return res
}

// readStream reads an OpenAI SSE stream, timing the first token-bearing
// event and counting tokens.
func readStream(body io.Reader, sent time.Time, res *Result) error {
	br := bufio.NewReaderSize(body, 64<<10)
	events, usage := 0, -1
	var answer strings.Builder // the first choice's text, for a session's next turn
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// An event longer than the buffer: skip the rest of the line.
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			res.E2E = time.Since(sent)
			if err == io.EOF {
				return errTruncated
			}
			return fmt.Errorf("read stream: %w", err)
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			res.E2E = time.Since(sent)
			// Read to the end of the response, as OpenAI's SDKs do, so the
			// connection is reused and a proxy in between sees a clean finish
			// rather than a client that hung up.
			_, _ = io.Copy(io.Discard, io.LimitReader(br, 64<<10))
			res.OutputTokens = events
			if usage >= 0 {
				res.OutputTokens = usage
			}
			res.Answer = answer.String()
			return nil
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				Text string `json:"text"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(data, &c) != nil {
			continue
		}
		if c.Error != nil {
			res.E2E = time.Since(sent)
			return errStreamError
		}
		if c.Usage != nil {
			usage = c.Usage.CompletionTokens
		}
		if len(c.Choices) > 0 {
			answer.WriteString(c.Choices[0].Delta.Content)
		}
		if len(c.Choices) > 0 && (c.Choices[0].Delta.Content != "" || c.Choices[0].Text != "") {
			if events == 0 {
				res.TTFT = time.Since(sent)
			}
			events++
		}
	}
}
