package formats

import (
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"syscall"
)

// quotaDisk is a file system of limit bytes: everything under root counts
// (Parquet files, temporaries, spool segments), and removing files gives the
// space back. A write past the limit writes what fits and fails with ENOSPC,
// as a full file system does.
type quotaDisk struct {
	root  string
	limit atomic.Int64
}

func (q *quotaDisk) create(name string) (diskFile, error) {
	if q.used() >= q.limit.Load() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOSPC}
	}
	f, err := osDisk{}.create(name)
	if err != nil {
		return nil, err
	}
	return &quotaFile{diskFile: f, q: q, name: name}, nil
}

// used is the bytes of every file under root.
func (q *quotaDisk) used() int64 {
	var n int64
	filepath.WalkDir(q.root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

type quotaFile struct {
	diskFile
	q    *quotaDisk
	name string
}

func (f *quotaFile) Write(p []byte) (int, error) {
	room := f.q.limit.Load() - f.q.used()
	if room >= int64(len(p)) {
		return f.diskFile.Write(p)
	}
	n := 0
	if room > 0 {
		n, _ = f.diskFile.Write(p[:room])
	}
	return n, &fs.PathError{Op: "write", Path: f.name, Err: syscall.ENOSPC}
}

// newQuotaDisk returns a disk of limit bytes for the dataset at root.
func newQuotaDisk(root string, limit int64) *quotaDisk {
	q := &quotaDisk{root: root}
	q.limit.Store(limit)
	return q
}
