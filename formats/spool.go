package formats

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The write-ahead spool. A writer session owns Dir/_spool/<session>/, locked
// with flock while the session lives, holding numbered segments
// seg-00000001.wal, seg-00000002.wal, ... Each segment is a sequence of
// frames:
//
//	uint32 LE  body length
//	uint32 LE  CRC-32C of the body
//	body:      kind byte, then
//	  'H' header: uvarint 0, JSON {schema, meta}  (first frame of every segment)
//	  'O' open:   uvarint file ordinal, file path relative to Dir
//	  'R' record: uvarint file ordinal, encoded record (codec.go)
//
// A file's records and its 'O' frame sit in segments at or after the one that
// was current when the file was opened; a segment is deleted once no open file
// started in it or before. A torn or damaged frame ends its segment.

const (
	frameHeader = 'H'
	frameOpen   = 'O'
	frameRecord = 'R'

	spoolDirName = "_spool"
	lockName     = "lock"
	maxFrame     = 1 << 30
	spoolBuffer  = 256 << 10 // frames are written out in chunks of about this size
)

var (
	crcTable = crc32.MakeTable(crc32.Castagnoli)

	// errTorn marks a frame that is cut short or fails its checksum.
	errTorn = errors.New("torn or damaged spool frame")
)

// spoolHeader is the 'H' frame: what a recovering writer needs to rebuild the
// files of a dead session.
type spoolHeader struct {
	Schema string            `json:"schema"`
	Codec  int               `json:"codec"` // codecVersion
	Meta   map[string]string `json:"meta"`
}

// session is a writer's claim on a dataset directory.
type session struct {
	dir    string
	lock   *os.File
	spool  bool
	header []byte // 'H' frame payload (JSON)

	seg      int // current segment number, 0 before the first
	f        *os.File
	buf      []byte        // frames not yet written to f
	broken   bool          // the current segment failed a write; rotate before the next frame
	segSizes map[int]int64 // live segments and their sizes
}

// openSession creates and locks Dir/_spool/<recorder>-<start>, bumping start
// by a second while the name is taken, and returns it with its session id.
func openSession(root, recorder string, now time.Time, schema string, meta map[string]string, spool bool) (*session, string, error) {
	spoolRoot := filepath.Join(root, spoolDirName)
	if err := os.MkdirAll(spoolRoot, 0o755); err != nil {
		return nil, "", fmt.Errorf("create spool: %w", err)
	}
	start := now.UTC().Truncate(time.Second)
	for range 1000 {
		sid := recorder + "-" + start.Format("20060102T150405Z")
		start = start.Add(time.Second)
		// Build the directory under a hidden name and rename it, so nobody
		// sees an unlocked session directory.
		tmp := filepath.Join(spoolRoot, ".new-"+sid+"-"+strconv.Itoa(os.Getpid()))
		if err := os.Mkdir(tmp, 0o755); err != nil {
			return nil, "", fmt.Errorf("create spool: %w", err)
		}
		lock, err := lockDir(tmp)
		if err != nil {
			os.RemoveAll(tmp)
			return nil, "", fmt.Errorf("create spool: %w", err)
		}
		dir := filepath.Join(spoolRoot, sid)
		if err := os.Rename(tmp, dir); err != nil {
			lock.Close()
			os.RemoveAll(tmp)
			continue // taken
		}
		s := &session{dir: dir, lock: lock, spool: spool, segSizes: map[int]int64{}}
		if spool {
			h, err := encodeJSON(spoolHeader{Schema: schema, Codec: codecVersion, Meta: meta})
			if err != nil {
				s.remove()
				return nil, "", err
			}
			s.header = h
			if err := s.rotate(); err != nil {
				s.remove()
				return nil, "", fmt.Errorf("create spool: %w", err)
			}
		}
		syncDir(spoolRoot)
		return s, sid, nil
	}
	return nil, "", errors.New("create spool: no free session name")
}

// lockDir creates (or opens) dir/lock and takes an exclusive flock on it
// without waiting; it fails with syscall.EWOULDBLOCK if another process holds
// it.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (s *session) spooling() bool { return s.spool }
func (s *session) segment() int   { return s.seg }

func (s *session) bytes() int64 {
	var n int64
	for _, b := range s.segSizes {
		n += b
	}
	return n
}

// appendOpen records that file ordinal will be renamed to rel.
func (s *session) appendOpen(ordinal uint32, rel string) error {
	return s.append(frameOpen, ordinal, func(b []byte) []byte { return append(b, filepath.ToSlash(rel)...) })
}

// appendRecord appends one record of file ordinal, encoded by encode
// (which appends the record's encoding to its argument).
func (s *session) appendRecord(ordinal uint32, encode func([]byte) []byte) error {
	return s.append(frameRecord, ordinal, encode)
}

// append adds a frame whose payload fill appends, encoding it straight into
// the segment's write buffer (no copy of the record between encoding and
// the write), and writes the buffer out once it holds spoolBuffer bytes.
func (s *session) append(kind byte, ordinal uint32, fill func([]byte) []byte) error {
	if s.broken {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	start := len(s.buf)
	b := append(s.buf, 0, 0, 0, 0, 0, 0, 0, 0, kind)
	b = binary.AppendUvarint(b, uint64(ordinal))
	b = fill(b)
	body := b[start+8:]
	binary.LittleEndian.PutUint32(b[start:], uint32(len(body)))
	binary.LittleEndian.PutUint32(b[start+4:], crc32.Checksum(body, crcTable))
	s.buf = b
	s.segSizes[s.seg] += int64(len(b) - start)
	if len(s.buf) >= spoolBuffer {
		return s.writeOut()
	}
	return nil
}

// writeOut writes the buffered frames to the current segment.
func (s *session) writeOut() error {
	if len(s.buf) == 0 {
		return nil
	}
	_, err := s.f.Write(s.buf)
	s.buf = s.buf[:0]
	if cap(s.buf) > 4*spoolBuffer {
		s.buf = nil // a huge record passed: don't keep its memory
	}
	if err != nil {
		s.broken = true
	}
	return err
}

// flush writes buffered frames to the current segment and returns it for an
// fsync, or nil when there is nothing to sync.
func (s *session) flush() (*os.File, error) {
	if !s.spool || s.f == nil || s.broken {
		return nil, nil
	}
	if err := s.writeOut(); err != nil {
		return nil, err
	}
	return s.f, nil
}

// sync writes buffered frames and fsyncs the current segment.
func (s *session) sync() error {
	if !s.spool || s.f == nil || s.broken {
		return nil
	}
	if err := s.writeOut(); err != nil {
		return err
	}
	if err := s.f.Sync(); err != nil {
		s.broken = true
		return err
	}
	return nil
}

// rotate closes the current segment and starts the next one.
func (s *session) rotate() error { return s.rotateSegment(false) }

// rotateSegment is rotate; with discard, the current segment is about to be
// deleted (every record in it sits in a closed, synced file), so its
// buffered frames are dropped and it is not fsynced: that would write out,
// and wait for, up to a whole file's worth of records for nothing.
func (s *session) rotateSegment(discard bool) error {
	if !s.spool {
		return nil
	}
	if s.f != nil && discard {
		s.buf = s.buf[:0]
		s.f.Close()
		s.f = nil
	}
	if s.f != nil {
		err := s.sync()
		if cerr := s.f.Close(); err == nil {
			err = cerr
		}
		s.f = nil
		if err != nil && !s.broken {
			return err
		}
	}
	s.seg++
	f, err := os.OpenFile(filepath.Join(s.dir, segName(s.seg)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		s.broken = true
		return err
	}
	s.f, s.broken = f, false
	s.buf = s.buf[:0] // frames of a broken segment are not carried over
	s.segSizes[s.seg] = 0
	return s.append(frameHeader, 0, func(b []byte) []byte { return append(b, s.header...) })
}

// dropBefore deletes the segments numbered below keep.
func (s *session) dropBefore(keep int) {
	for seg := range s.segSizes {
		if seg < keep {
			if err := os.Remove(filepath.Join(s.dir, segName(seg))); err == nil || os.IsNotExist(err) {
				delete(s.segSizes, seg)
			}
		}
	}
}

// release closes the spool and unlocks the session, keeping its files for the
// next writer to recover.
func (s *session) release() {
	if s.f != nil {
		s.sync()
		s.f.Close()
		s.f = nil
	}
	s.lock.Close()
}

// remove deletes the session directory and unlocks it.
func (s *session) remove() error {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	// Move the directory out of sight first: a writer starting beside us
	// (another shard) must never find it half-deleted and unlocked, and take
	// it for a dead session to recover.
	target := s.dir
	gone := filepath.Join(filepath.Dir(s.dir), ".done-"+filepath.Base(s.dir))
	if os.Rename(s.dir, gone) == nil {
		target = gone
	}
	err := os.RemoveAll(target)
	s.lock.Close()
	if err != nil {
		return fmt.Errorf("remove spool: %w", err)
	}
	return nil
}

func segName(n int) string { return fmt.Sprintf("seg-%08d.wal", n) }

// segments lists a spool directory's segment numbers in order.
func segments(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []int
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, "seg-") || !strings.HasSuffix(name, ".wal") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "seg-"), ".wal"))
		if err == nil && n > 0 {
			segs = append(segs, n)
		}
	}
	sort.Ints(segs)
	return segs, nil
}

// frameReader reads spool frames. Next returns io.EOF at a clean end and
// errTorn for a frame cut short or failing its checksum; either ends the
// segment.
type frameReader struct {
	r      *bufio.Reader
	remain int64 // bytes left in the input, bounds allocations
	buf    []byte
}

func newFrameReader(r io.Reader, size int64) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 256<<10), remain: size}
}

// next returns the next frame. payload is valid until the following call.
func (fr *frameReader) next() (kind byte, ordinal uint32, payload []byte, err error) {
	var hdr [8]byte
	n, err := io.ReadFull(fr.r, hdr[:])
	if n == 0 && (err == io.EOF) {
		return 0, 0, nil, io.EOF
	}
	if err != nil {
		return 0, 0, nil, errTorn
	}
	fr.remain -= 8
	size := int64(binary.LittleEndian.Uint32(hdr[0:4]))
	if size < 1 || size > maxFrame || size > fr.remain {
		return 0, 0, nil, errTorn
	}
	if int64(cap(fr.buf)) < size {
		fr.buf = make([]byte, size)
	}
	body := fr.buf[:size]
	if _, err := io.ReadFull(fr.r, body); err != nil {
		return 0, 0, nil, errTorn
	}
	fr.remain -= size
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(hdr[4:8]) {
		return 0, 0, nil, errTorn
	}
	kind, body = body[0], body[1:]
	o, k := binary.Uvarint(body)
	if k <= 0 || o > 1<<32-1 {
		return 0, 0, nil, errTorn
	}
	return kind, uint32(o), body[k:], nil
}
