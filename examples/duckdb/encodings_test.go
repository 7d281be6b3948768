package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reelkit/reel/formats"
)

// TestDuckDBReadsEveryEncoding reads back, value by value, the columns
// whose Parquet encodings reel chooses (docs/schema.md: DELTA_BINARY_PACKED
// timestamps and sequence numbers, dictionary-encoded header maps,
// DELTA_LENGTH_BYTE_ARRAY bodies and strings, DELTA_BINARY_PACKED timings
// and token gaps), from files as the live
// writer leaves them and after reel compact.
func TestDuckDBReadsEveryEncoding(t *testing.T) {
	const n = 3000
	recs := make([]formats.Exchange, n)
	for i := range recs {
		ts := t0.Add(time.Duration(i)*997*time.Millisecond + time.Duration(i%1000)*time.Nanosecond)
		recs[i] = formats.Exchange{
			Ts: ts, TsUnixNs: ts.UnixNano(), Recorder: "edge-1", Seq: int64(i + 1), Method: "POST",
			Path: "/v1/chat/completions", Query: fmt.Sprintf("i=%d", i%7), Status: 200,
			ReqHeaders:  map[string]string{"content-type": "application/json", "x-request-id": fmt.Sprintf("req-%08x", i*2654435761)},
			RespHeaders: map[string]string{"x-request-id": fmt.Sprintf("resp-%d", i), "x-batch-size": fmt.Sprint(i % 32)},
			ReqBody:     []byte(fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"question %d"}]}`, i)),
			RespBody:    []byte(fmt.Sprintf(`{"choices":[{"message":{"content":"answer %d"}}]}`, i*i)),
			Error:       map[bool]string{true: "upstream reset"}[i%50 == 0],
			BatchSize:   -1, QueueDepth: -1, Complete: true,
			TTFTNs: int64(i%97) * 1_000_003, DurationNs: int64(i*7919%100_000) * 10_007, PromptTokens: int32(i % 4000),
			EventGapsUs: gapsOf(i),
		}
	}
	dir := t.TempDir()
	writeAll(t, formats.WriterOptions{Dir: dir, Recorder: "edge-1", RowGroupRows: 1000}, recs)
	db := openDuckDB(t)
	check := func(what string) {
		t.Helper()
		rows, err := db.Query(fmt.Sprintf(`SELECT seq, ts_unix_ns, epoch_us(ts), query, error, req_body, resp_body,
			req_headers['x-request-id'], resp_headers['x-request-id'], resp_headers['x-batch-size'], cardinality(req_headers),
			status, ttft_ns, duration_ns, prompt_tokens, array_to_string(event_gaps_us, ',')
			FROM read_parquet('%s', hive_partitioning = true) ORDER BY seq`, datasetGlob(dir)))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer rows.Close()
		i := 0
		for ; rows.Next(); i++ {
			var seq, tsNs, tsUs, nReq, ttft, dur int64
			var status, prompt int32
			var query, errText, reqID, respID, batch, gaps string
			var req, resp []byte
			if err := rows.Scan(&seq, &tsNs, &tsUs, &query, &errText, &req, &resp, &reqID, &respID, &batch, &nReq,
				&status, &ttft, &dur, &prompt, &gaps); err != nil {
				t.Fatalf("%s: row %d: %v", what, i, err)
			}
			x := recs[i]
			if seq != x.Seq || tsNs != x.TsUnixNs || tsUs != x.Ts.UnixMicro() || query != x.Query || errText != x.Error ||
				!bytes.Equal(req, x.ReqBody) || !bytes.Equal(resp, x.RespBody) || reqID != x.ReqHeaders["x-request-id"] ||
				respID != x.RespHeaders["x-request-id"] || batch != x.RespHeaders["x-batch-size"] || nReq != 2 {
				t.Fatalf("%s: row %d reads back as seq %d ts %d/%d query %q error %q req %q resp %q ids %q %q batch %q, %d request headers; wrote %+v",
					what, i, seq, tsNs, tsUs, query, errText, req, resp, reqID, respID, batch, nReq, x)
			}
			if status != x.Status || ttft != x.TTFTNs || dur != x.DurationNs || prompt != x.PromptTokens || gaps != joinInts(x.EventGapsUs) {
				t.Fatalf("%s: row %d reads back as status %d ttft %d duration %d prompt %d gaps [%s]; wrote %d %d %d %d %v",
					what, i, status, ttft, dur, prompt, gaps, x.Status, x.TTFTNs, x.DurationNs, x.PromptTokens, x.EventGapsUs)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if i != n {
			t.Fatalf("%s: DuckDB read %d rows, want %d", what, i, n)
		}
	}
	check("as written")
	if _, err := formats.Compact(context.Background(), dir, formats.CompactOptions{MinAge: -1}); err != nil {
		t.Fatal(err)
	}
	check("compacted")
}

// gapsOf is row i's event_gaps_us: lists of 0–40 gaps, some empty, with
// jumps wide enough to need many bits in a miniblock and negative
// differences between neighbours.
func gapsOf(i int) []int32 {
	g := make([]int32, i%41)
	for k := range g {
		g[k] = int32((i*31+k*977)%50_000 + 1)
		if k%13 == 5 {
			g[k] = int32(1_000_000 + i)
		}
	}
	return g
}

// joinInts formats v as DuckDB's array_to_string(list, ',') does.
func joinInts(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ",")
}
