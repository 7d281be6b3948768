// Package formats owns reel's on-disk formats: the exchange/1 and result/1
// Parquet schemas, the dataset writer (row-group bounds, rotation, Hive layout,
// temporary names, write-ahead spool) and the time-ordered dataset reader.
//
// Every column is documented in docs/schema.md.
package formats

// Version is reel's version, written into every file's metadata.
const Version = "0.1.0"
