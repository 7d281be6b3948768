// Command duckdb queries a reel exchange dataset with DuckDB: requests and
// p50/p99 latency per minute, straight from the Parquet files.
//
//	go run . ./capture
//
// It lives in its own module because DuckDB needs cgo and reel's main module
// builds with CGO_ENABLED=0.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

// perMinuteSQL is the query docs/schema.md shows; %s is the dataset glob.
const perMinuteSQL = `
SELECT date_trunc('minute', ts) AS minute,
       count(*) AS requests,
       quantile_cont(duration_ns / 1e6, 0.5) AS p50_ms,
       quantile_cont(duration_ns / 1e6, 0.99) AS p99_ms
FROM read_parquet('%s', hive_partitioning = true)
GROUP BY minute ORDER BY minute`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run . DATASET_DIR")
		os.Exit(2)
	}
	if err := run(context.Background(), os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "duckdb:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir string) error {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return fmt.Errorf("open duckdb: %w", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, fmt.Sprintf(perMinuteSQL, datasetGlob(dir)))
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	defer rows.Close()
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MINUTE\tREQUESTS\tP50_MS\tP99_MS")
	for rows.Next() {
		var minute time.Time
		var n int64
		var p50, p99 float64
		if err := rows.Scan(&minute, &n, &p50, &p99); err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\n", minute.UTC().Format(time.RFC3339), n, p50, p99)
	}
	tw.Flush()
	return rows.Err()
}

// datasetGlob is the read_parquet pattern for every file of a dataset. Files
// being written end in .parquet.tmp and the spool in .wal, so the pattern
// never matches them.
func datasetGlob(dir string) string {
	return filepath.ToSlash(filepath.Join(dir, "**", "*.parquet"))
}
