package recorder

import (
	"context"
	"fmt"

	"github.com/reelkit/reel/formats"
)

// DefaultRowGroupBytes bounds a recording's row groups when the dataset
// options leave RowGroupBytes zero: smaller than formats' default, because
// a sidecar holds an open row group per hour partition in memory beside the
// traffic it forwards.
const DefaultRowGroupBytes = 8 << 20

// OpenDataset opens a dataset writer with the dataset options and starts a
// Recorder writing to it through red (nil: raw). It is how every recording
// program is wired — reel record, the weekly-incident example, the proxy
// benchmark — so their datasets are written the same way:
//
//   - dataset.RowGroupBytes defaults to DefaultRowGroupBytes;
//   - dataset.RedactionFingerprint defaults to red's Fingerprint() (when it
//     has one), or "raw" when red is nil;
//   - the recorder id is dataset.Recorder, or opts.Config.Recorder when
//     that one is empty, and the same in file names and rows;
//   - the sequence numbers and connection ids count from the writer's epoch
//     (unique across restarts on the directory);
//   - the spool gauges of opts.Pipeline.Metrics read the writer's Stats;
//   - dataset.Warn defaults to opts.Pipeline.Warn: the writer reports there
//     what it works around (a file that could not be closed, a failed spool
//     sync, a removed spool directory).
//
// The writer is returned for its Stats (what recovery found, what was
// written); the Recorder owns it and closes it in Close.
func OpenDataset(ctx context.Context, dataset formats.WriterOptions, red Redactor, opts Options) (*Recorder, *formats.Writer[formats.Exchange], error) {
	if dataset.RowGroupBytes == 0 {
		dataset.RowGroupBytes = DefaultRowGroupBytes
	}
	if dataset.RedactionFingerprint == "" {
		if red == nil {
			dataset.RedactionFingerprint = "raw"
		} else if f, ok := red.(interface{ Fingerprint() string }); ok {
			dataset.RedactionFingerprint = f.Fingerprint()
		}
	}
	if dataset.Warn == nil {
		dataset.Warn = opts.Pipeline.Warn
	}
	switch {
	case dataset.Recorder == "":
		dataset.Recorder = opts.Config.Recorder
	case opts.Config.Recorder == "":
		opts.Config.Recorder = dataset.Recorder
	}
	w, err := formats.NewWriter[formats.Exchange](ctx, dataset)
	if err != nil {
		return nil, nil, fmt.Errorf("open dataset: %w", err)
	}
	if opts.Pipeline.Metrics == nil {
		opts.Pipeline.Metrics = NewMetrics(nil)
	}
	opts.Pipeline.Metrics.SetDatasetStats(w.Stats)
	return New(w, red, opts), w, nil
}
