package analysis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"

	"github.com/reelkit/reel/formats"
)

// Dataset kinds DatasetKind reports.
const (
	KindExchange = "exchange" // a recording (exchange/N)
	KindResult   = "result"   // replay results (result/N)
)

// DatasetKind reports whether paths (files, directory trees, globs) hold a
// recording or replay results, from the first readable file's schema.
func DatasetKind(paths []string) (string, error) {
	files, err := formats.ListFiles(paths)
	if err != nil {
		return "", fmt.Errorf("list dataset: %w", err)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("list dataset: no Parquet files in %s", strings.Join(paths, " "))
	}
	var firstErr error
	for _, f := range files {
		fi, err := formats.StatFile(f)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		kind, _, _ := strings.Cut(fi.Schema, "/")
		if kind != KindExchange && kind != KindResult {
			return "", fmt.Errorf("read dataset: %s holds %q, not a recording or results", f, fi.Schema)
		}
		return kind, nil
	}
	return "", fmt.Errorf("read dataset: %w", firstErr)
}

// AddDataset streams every row of paths into a, in time order across files
// (shards of one run merge into one set), and returns how many rows it read.
// It stops early when ctx is cancelled. A recording is read without the
// columns the analysis never uses (bodies, headers) unless opt.Columns
// says otherwise, in one pass for the metrics and Options.Sessions. With
// more than one P (GOMAXPROCS) the metrics are added on a goroutine of
// their own beside the rest (metricsPipe); the Summary is the same either
// way.
func (a *Analyzer) AddDataset(ctx context.Context, paths []string, opt formats.ReaderOptions) (int64, error) {
	return a.addDataset(ctx, paths, opt, runtime.GOMAXPROCS(0) > 1)
}

func (a *Analyzer) addDataset(ctx context.Context, paths []string, opt formats.ReaderOptions, piped bool) (int64, error) {
	kind, err := DatasetKind(paths)
	if err != nil {
		return 0, err
	}
	if kind == KindExchange {
		if opt.Columns == nil {
			opt.Columns = exchangeColumns
			if a.sessions != nil {
				opt.Columns = union(exchangeColumns, SessionColumns())
			}
		}
		return addRows(ctx, a, paths, opt, piped, a.exchangeRow)
	}
	return addRows(ctx, a, paths, opt, piped, a.resultRow)
}

// addRows adds every row of paths to a, each mapped into an observation by
// row; piped, the metrics' part of each runs on a second goroutine.
func addRows[T formats.Record](ctx context.Context, a *Analyzer, paths []string, opt formats.ReaderOptions, piped bool, row func(*observation, *T)) (int64, error) {
	// One observation for every row, row setting each of its fields:
	// given to row, a function value, one a row would escape to the heap.
	o := new(observation)
	if !piped {
		batch := make([]request, 0, pipeBatchRows) // the metrics a batch at a time, as the pipe adds them
		n, err := addAll(ctx, paths, opt, func(rec *T) {
			row(o, rec)
			if a.admit(o) {
				a.identify(o)
				if batch = append(batch, o.request); len(batch) == cap(batch) {
					a.addRequests(batch)
					batch = batch[:0]
				}
				a.addTimed(o)
			}
		})
		a.addRequests(batch)
		return n, err
	}
	p := startMetricsPipe(a)
	defer p.close()
	return addAll(ctx, paths, opt, func(rec *T) {
		row(o, rec)
		if a.admit(o) {
			a.identify(o)
			p.add(&o.request)
			a.addTimed(o)
		}
	})
}

func addAll[T formats.Record](ctx context.Context, paths []string, opt formats.ReaderOptions, add func(*T)) (int64, error) {
	r, err := formats.OpenReader[T](ctx, paths, opt)
	if err != nil {
		return 0, fmt.Errorf("open dataset: %w", err)
	}
	defer r.Close()
	var n int64
	for {
		if n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return n, err
			}
		}
		rec, err := r.Scan() // add keeps nothing of the record itself
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read dataset: %w", err)
		}
		add(rec)
		n++
	}
}

// union returns the names of a, then those of b not in a.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, n := range b {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
