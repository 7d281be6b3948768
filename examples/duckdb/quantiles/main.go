// Command quantiles computes, with DuckDB, the quantiles `reel stats`
// reports for a recording's streaming and non-streaming requests alike —
// p50 and p99 of E2E (SPEC §6: ttft_ns + Σ event_gaps_us for a stream,
// duration_ns otherwise) and of TTFT over successful exchanges — and prints
// them as one JSON object with the query's wall time, for
// bench/memory/run.sh to set beside reel's figures:
//
//	go run ./quantiles ./capture
//	go run ./quantiles -threads 1 ./capture   # one DuckDB thread (default: one per core)
//
// DuckDB's quantile_cont interpolates between the two order statistics
// around p·(n−1); reel's exact quantiles are nearest-rank. On the millions
// of rows the benchmark uses the two differ by far less than the 1 % a
// sketched reel quantile may be off.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

const quantilesSQL = `
SELECT count(*),
       quantile_cont(e2e, 0.5), quantile_cont(e2e, 0.99),
       quantile_cont(ttft, 0.5), quantile_cont(ttft, 0.99)
FROM (
  SELECT CASE WHEN ttft_ns > 0 AND len(event_gaps_us) < 65536
              THEN ttft_ns + 1000 * coalesce(list_sum(event_gaps_us), 0)
              ELSE duration_ns END AS e2e,
         nullif(ttft_ns, 0) AS ttft
  FROM read_parquet('%s', hive_partitioning = true)
  WHERE status BETWEEN 200 AND 399 AND error = '' AND complete AND duration_ns > 0
)`

// result is what the command prints.
type result struct {
	Rows      int64   `json:"rows"`
	E2EP50    float64 `json:"e2e_p50_ns"`
	E2EP99    float64 `json:"e2e_p99_ns"`
	TTFTP50   float64 `json:"ttft_p50_ns"`
	TTFTP99   float64 `json:"ttft_p99_ns"`
	QuerySecs float64 `json:"query_seconds"`
	Threads   int     `json:"threads"` // DuckDB's worker threads for the query
}

func main() {
	threads := flag.Int("threads", 0, "DuckDB worker threads (0: DuckDB's default, one per core)")
	flag.Parse()
	if flag.NArg() != 1 || *threads < 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./quantiles [-threads N] DATASET_DIR")
		os.Exit(2)
	}
	if err := run(context.Background(), flag.Arg(0), *threads); err != nil {
		fmt.Fprintln(os.Stderr, "quantiles:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string, threads int) error {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return fmt.Errorf("open duckdb: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // SET applies to the connection the query then uses
	if threads > 0 {
		if _, err := db.ExecContext(ctx, fmt.Sprintf("SET threads = %d", threads)); err != nil {
			return fmt.Errorf("set threads: %w", err)
		}
	}
	var r result
	if err := db.QueryRowContext(ctx, "SELECT current_setting('threads')").Scan(&r.Threads); err != nil {
		return fmt.Errorf("read threads: %w", err)
	}
	start := time.Now()
	row := db.QueryRowContext(ctx, fmt.Sprintf(quantilesSQL, dir+"/**/*.parquet"))
	if err := row.Scan(&r.Rows, &r.E2EP50, &r.E2EP99, &r.TTFTP50, &r.TTFTP99); err != nil {
		return fmt.Errorf("query: %w", err)
	}
	r.QuerySecs = time.Since(start).Seconds()
	return json.NewEncoder(os.Stdout).Encode(r)
}
