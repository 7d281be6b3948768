// Package formatstest has helpers for tests that write and read reel
// datasets: one call each, failing the test on any error.
package formatstest

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/reelkit/reel/formats"
)

// Write writes rows as a dataset under dir and closes it. opts.Dir is set
// to dir; an empty opts.Recorder is "test"; the spool is off (NoSpool)
// unless opts asks for SyncEvery, since a test's dataset needs no crash
// safety.
func Write[T formats.Record](tb testing.TB, dir string, opts formats.WriterOptions, rows []*T) {
	tb.Helper()
	opts.Dir = dir
	if opts.Recorder == "" {
		opts.Recorder = "test"
	}
	if opts.SyncEvery == 0 {
		opts.NoSpool = true
	}
	w, err := formats.NewWriter[T](context.Background(), opts)
	if err != nil {
		tb.Fatalf("new writer: %v", err)
	}
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			tb.Fatalf("write: %v", err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		tb.Fatalf("close writer: %v", err)
	}
}

// Read reads every row of the datasets, files or globs in paths, in time
// order.
func Read[T formats.Record](tb testing.TB, paths ...string) []*T {
	tb.Helper()
	r, err := formats.OpenReader[T](context.Background(), paths, formats.ReaderOptions{})
	if err != nil {
		tb.Fatalf("open reader: %v", err)
	}
	defer r.Close()
	var out []*T
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatalf("read: %v", err)
		}
		out = append(out, rec)
	}
}
