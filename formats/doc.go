// Package formats owns reel's on-disk formats: the exchange/1 and result/1
// Parquet schemas, the dataset writer (row-group bounds, rotation, Hive layout,
// temporary names, write-ahead spool) and the time-ordered dataset reader.
//
// Every column is documented in docs/schema.md.
//
// # Closing
//
// reel has one Close convention, written down here, in its lowest package,
// and followed by every package above it (after litestream):
//
//   - A type that does work in the background or holds work not yet done —
//     a Writer with open files and a spool, a recorder.Recorder with its
//     queue, a scrape.Scraper, the simulated cluster's Server — has
//     Close(ctx context.Context) error. Close stops it taking work,
//     finishes or hands over what it holds, and waits; when ctx ends first
//     it returns ctx's error and says what was left where (a Writer leaves
//     unclosed files' records in the spool for the next writer to recover).
//     Stopping is cancelling a context or calling Close; never exiting.
//   - A type that only holds open files, with nothing to finish — a
//     Reader — is an io.Closer: Close() error, which never waits.
//   - Figures a caller needs afterwards come from their own method (Stats,
//     Metrics), never from Close's return values.
package formats

// Version is the version of the reel that writes files (reel.version in
// every file's metadata, the HTML reports' footer): the reel module's
// version from the build information — a release tag under `go install
// …@v1.2.0`, a VCS pseudo-version for a build in a checkout, "devel" when
// the build has none. A release built with -ldflags "-X main.version=…"
// has cmd/reel set it at start-up, so the binary and its files say the
// same thing.
var Version = moduleVersion()
