// Package formats owns reel's on-disk formats: the exchange/1 and result/1
// Parquet schemas, the dataset writer (row-group bounds, rotation, Hive layout,
// temporary names, write-ahead spool) and the time-ordered dataset reader.
//
// Every column is documented in docs/schema.md.
package formats

// Version is the version of the reel that writes files (reel.version in
// every file's metadata, the HTML reports' footer): the reel module's
// version from the build information — a release tag under `go install
// …@v1.2.0`, a VCS pseudo-version for a build in a checkout, "devel" when
// the build has none. A release built with -ldflags "-X main.version=…"
// has cmd/reel set it at start-up, so the binary and its files say the
// same thing.
var Version = moduleVersion()
