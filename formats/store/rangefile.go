package store

import (
	"io"
	"sync"
)

// TailBlock is how much of an object's end one fetch brings in when a small
// read lands there: a Parquet reader reads the 8-byte trailer, then the
// footer before it, and both come from this one block.
const TailBlock = 32 << 10

// RangeFile is a File whose bytes a backend fetches by ranges: every read
// fetches exactly the bytes asked for, except reads in the last TailBlock,
// which are served from one fetch of that block. It is what every object
// store's Open returns.
type RangeFile struct {
	size int64
	get  func(buf []byte, off int64) error

	mu   sync.Mutex // guards tail
	tail []byte     // the object's last min(size, TailBlock) bytes, once fetched
}

// NewRangeFile returns the File of an object of size bytes; get fills buf
// with the object's bytes at off (a ranged GET) and must be safe for
// concurrent use.
func NewRangeFile(size int64, get func(buf []byte, off int64) error) *RangeFile {
	return &RangeFile{size: size, get: get}
}

func (f *RangeFile) Size() int64  { return f.size }
func (f *RangeFile) Close() error { return nil }

// ReadAt reads len(p) bytes at off (fewer, with io.EOF, at the end).
func (f *RangeFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errNegativeOffset
	}
	if off >= f.size {
		return 0, io.EOF
	}
	want := p
	if off+int64(len(p)) > f.size {
		want = p[:f.size-off]
	}
	tailStart := max(0, f.size-TailBlock)
	if off >= tailStart {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.tail == nil {
			buf := make([]byte, f.size-tailStart)
			if err := f.get(buf, tailStart); err != nil {
				return 0, err
			}
			f.tail = buf
		}
		return result(copy(want, f.tail[off-tailStart:]), len(p))
	}
	if err := f.get(want, off); err != nil {
		return 0, err
	}
	return result(len(want), len(p))
}

func result(n, asked int) (int, error) {
	if n < asked {
		return n, io.EOF
	}
	return n, nil
}
