package formats

import (
	"io"
	"os"
)

// disk creates the files a writer writes into — Parquet files under their
// temporary names and spool segments — so that tests can give a writer a
// disk that fills up (quotaDisk in disk_test.go) and check that nothing
// accepted is lost and nothing lost goes uncounted. Everything else (mkdir,
// rename, remove, reading) goes to the operating system directly.
type disk interface {
	// create creates name, which must not exist, for appending.
	create(name string) (diskFile, error)
}

// diskFile is an open file of a disk: an *os.File on the real one.
type diskFile interface {
	io.Writer
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
}

// osDisk is the operating system's file system.
type osDisk struct{}

func (osDisk) create(name string) (diskFile, error) {
	// O_APPEND: after a failed write is cut back (Truncate), the next write
	// goes to the new end instead of leaving a hole.
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return f, nil
}
