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
//
// Disk full (or any failed write): the frames that could not be written stay
// in memory, the segment is cut back to its last whole frame, and the write
// is tried again with the next frames and at every sync, so nothing accepted
// is lost while the disk recovers. A segment file is created only with its
// first bytes, and removed again if they could not be written: no empty
// segments. Frames waiting in memory are bounded (maxPending); beyond it new
// records are refused, which the caller counts. The session's size
// (segSizes) counts bytes on disk only.

const (
	frameHeader = 'H'
	frameOpen   = 'O'
	frameRecord = 'R'

	spoolDirName = "_spool"
	lockName     = "lock"
	maxFrame     = 1 << 30
	spoolBuffer  = 256 << 10 // frames are written out in chunks of about this size
	maxPending   = 16 << 20  // frames kept in memory while the disk refuses them
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
	start  time.Time // when the session started, as its id says (sessionStart)
	lock   *os.File
	spool  bool
	header []byte // 'H' frame payload (JSON)
	disk   disk

	seg      int            // current segment number, 0 before the first
	f        diskFile       // the current segment; nil until its first bytes are written
	onDisk   int64          // bytes of the current segment on disk: whole frames only
	buf      []byte         // frames not yet on disk
	pending  map[uint32]int // 'R' frames in buf, by file ordinal
	failing  error          // why buf could not be written out; nil while writes succeed
	segSizes map[int]int64  // live segments and their bytes on disk
}

// ErrSpoolFull is returned (wrapped, with the disk's error) for records
// refused because maxPending bytes of frames are waiting for a disk that
// refuses writes.
var ErrSpoolFull = errors.New("spool cannot keep up: the disk refuses writes")

// openSession creates and locks Dir/_spool/<recorder>-<start>, bumping start
// by a second while the name is taken, and returns it with its session id.
func openSession(root, recorder string, now time.Time, schema string, meta map[string]string, spool bool, d disk) (*session, string, error) {
	spoolRoot := filepath.Join(root, spoolDirName)
	if err := os.MkdirAll(spoolRoot, 0o755); err != nil {
		return nil, "", fmt.Errorf("create spool: %w", err)
	}
	start := sessionStart(spoolRoot, recorder, now)
	for range 1000 {
		sid := recorder + "-" + start.Format(sessionTimeFormat)
		start = start.Add(time.Millisecond)
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
		s := &session{dir: dir, start: start.Add(-time.Millisecond), lock: lock, spool: spool, disk: d, segSizes: map[int]int64{}, pending: map[uint32]int{}}
		if spool {
			h, err := encodeJSON(spoolHeader{Schema: schema, Codec: codecVersion, Meta: meta})
			if err != nil {
				s.remove()
				return nil, "", err
			}
			s.header = h
			s.startSegment(nil) // created with its first bytes (writeOut)
		}
		saveSessionStart(spoolRoot, recorder, s.start)
		syncDir(spoolRoot)
		return s, sid, nil
	}
	return nil, "", errors.New("create spool: no free session name")
}

// sessionTimeFormat is the start time in session ids, and so in file
// names: UTC to the millisecond.
const sessionTimeFormat = "20060102T150405.000Z"

// sessionStart is the start of a new session of recorder: now to the
// millisecond, but later than the last session of the same recorder on
// this spool root. File names carry the session id, and a writer to a
// bucket deletes its local files once uploaded, so without the mark a
// recorder restarted within the same millisecond — or after the clock
// stepped back — would name a file as its predecessor did and overwrite
// that upload.
func sessionStart(spoolRoot, recorder string, now time.Time) time.Time {
	start := now.UTC().Truncate(time.Millisecond)
	if b, err := os.ReadFile(filepath.Join(spoolRoot, sessionMarkName(recorder))); err == nil {
		if ms, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && ms >= start.UnixMilli() {
			start = time.UnixMilli(ms + 1).UTC()
		}
	}
	return start
}

// saveSessionStart records the start of recorder's newest session (see
// sessionStart). A failure only weakens the guarantee: it is not worth
// refusing to record for.
func saveSessionStart(spoolRoot, recorder string, start time.Time) {
	mark := filepath.Join(spoolRoot, sessionMarkName(recorder))
	tmp := mark + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(start.UnixMilli(), 10)+"\n"), 0o644); err == nil {
		if os.Rename(tmp, mark) != nil {
			os.Remove(tmp)
		}
	}
}

// sessionMarkName is the file in the spool root holding the start of
// recorder's newest session; a hidden name, so recovery never takes it
// for a session directory.
func sessionMarkName(recorder string) string { return ".last-session-" + recorder }

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
// the write), and writes the buffer out once it holds spoolBuffer bytes. It
// fails (ErrSpoolFull) only when the disk has been refusing writes and
// maxPending bytes wait; a frame it took is kept until it is on disk.
func (s *session) append(kind byte, ordinal uint32, fill func([]byte) []byte) error {
	if s.failing != nil && len(s.buf) >= maxPending {
		if err := s.writeOut(); err != nil {
			return fmt.Errorf("%w: %w", ErrSpoolFull, err)
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
	if kind == frameRecord {
		s.pending[ordinal]++
	}
	if len(s.buf) >= spoolBuffer {
		s.writeOut() // a failure keeps the frames for the next try
	}
	return nil
}

// writeOut writes the buffered frames to the current segment, creating it
// with its first bytes. On failure the segment is cut back to its last
// whole frame (removed if that leaves it empty) and the frames stay
// buffered.
func (s *session) writeOut() error {
	if len(s.buf) == 0 {
		return nil
	}
	if s.f == nil {
		f, err := s.disk.create(filepath.Join(s.dir, segName(s.seg)))
		if err != nil {
			s.failing = err
			return err
		}
		s.f, s.onDisk = f, 0
	}
	n, err := s.f.Write(s.buf)
	if err != nil {
		s.failing = err
		if n > 0 {
			if terr := s.f.Truncate(s.onDisk); terr != nil {
				// The torn tail stays: recovery stops at it, and what
				// follows in this segment would be lost, so start the next.
				s.abandonSegment()
				return err
			}
		}
		if s.onDisk == 0 {
			s.f.Close()
			os.Remove(filepath.Join(s.dir, segName(s.seg)))
			s.f = nil
		}
		return err
	}
	s.onDisk += int64(n)
	s.segSizes[s.seg] = s.onDisk
	s.failing = nil
	s.buf = s.buf[:0]
	if cap(s.buf) > 4*spoolBuffer {
		s.buf = nil // a huge record passed: don't keep its memory
	}
	clear(s.pending)
	return nil
}

// abandonSegment leaves the current segment as it is on disk and moves the
// buffered frames to the next one, after its header.
func (s *session) abandonSegment() {
	s.f.Close()
	s.f = nil
	s.startSegment(s.buf)
}

// startSegment makes the next segment current, its buffer the header frame
// followed by carry (frames of the previous segment not yet on disk).
func (s *session) startSegment(carry []byte) {
	s.seg++
	s.segSizes[s.seg] = 0
	s.onDisk = 0
	head := make([]byte, 0, 16+len(s.header)+len(carry))
	head = append(head, 0, 0, 0, 0, 0, 0, 0, 0, frameHeader)
	head = binary.AppendUvarint(head, 0)
	head = append(head, s.header...)
	body := head[8:]
	binary.LittleEndian.PutUint32(head[0:], uint32(len(body)))
	binary.LittleEndian.PutUint32(head[4:], crc32.Checksum(body, crcTable))
	s.buf = append(head, carry...)
}

// flush writes buffered frames to the current segment and returns it for an
// fsync, or nil when there is nothing to sync.
func (s *session) flush() (diskFile, error) {
	if !s.spool {
		return nil, nil
	}
	if err := s.writeOut(); err != nil {
		return nil, err
	}
	return s.f, nil
}

// sync writes buffered frames and fsyncs the current segment.
func (s *session) sync() error {
	f, err := s.flush()
	if err != nil || f == nil {
		return err
	}
	if err := f.Sync(); err != nil {
		s.failing = err
		return err
	}
	return nil
}

// rotateSegment is rotate; with discard, the current segment is about to be
// deleted (every record in it sits in a closed, synced file), so its
// buffered frames are dropped and it is not fsynced: that would write out,
// and wait for, up to a whole file's worth of records for nothing. Without
// discard, frames that cannot be written now move on to the next segment
// (after its header), still in order.
func (s *session) rotateSegment(discard bool) error {
	if !s.spool {
		return nil
	}
	var carry []byte
	var err error
	if discard {
		clear(s.pending)
	} else {
		err = s.sync()
		carry = s.buf
	}
	if s.f != nil {
		if cerr := s.f.Close(); err == nil {
			err = cerr
		}
		s.f = nil
	}
	s.buf = nil
	s.startSegment(carry)
	return err
}

// recreate makes the session's directory and lock again after they were
// removed, and starts a new segment. The frames buffered for the removed
// segments are dropped: the writer closes the files they belong to next.
func (s *session) recreate() error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	lock, err := lockDir(s.dir)
	if err != nil {
		return err
	}
	s.lock.Close()
	s.lock = lock
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	clear(s.segSizes)
	clear(s.pending)
	s.buf, s.failing = nil, nil
	s.startSegment(nil)
	return nil
}

// lostPending reports the records of the given file ordinals whose frames
// are still only in memory: what a release loses of files that did not
// close.
func (s *session) lostPending(failed map[uint32]bool) int64 {
	var n int64
	for o, c := range s.pending {
		if failed[o] {
			n += int64(c)
		}
	}
	return n
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
	if s.spool {
		s.sync()
	}
	if s.f != nil {
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
