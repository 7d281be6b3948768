package formats_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/internal/cputime"
	"github.com/reelkit/reel/replayer"
)

// Benchmarks for docs/performance.md ("Formats"):
//
//	go test ./formats -run '^$' -bench 'Formats|Read' -benchtime 3x -count 3
//
// One iteration of BenchmarkFormats writes the whole corpus (16384 redacted
// exchanges, corpus_test.go) through a fresh writer with its spool, through
// one without, and compresses the writer's own uncompressed pages (captured
// once, before timing) with the same zstd codec and level: the zstd-alone
// floor, on the same bytes, timed in the same iteration so both see the
// same machine load. The three are timed in rotating order. Metrics:
//
//	writer/zstd       zstd-alone time ÷ writer time (spool on); target ≥ 0.70
//	nospool/zstd      the same without the spool
//	cpu-writer/zstd   the same two in CPU time (user + system, every thread:
//	cpu-nospool/zstd  GC, spool fsyncs) summed over iterations; robust to load
//	rec/s             writer records/s (spool on, one goroutine)
//	zstd-rec/s        zstd alone, the same records' pages, records/s
//	disk-B/rec        Parquet bytes on disk per record
//	gzip-B/rec        GoReplay file output of the same exchanges, gzip -6, per record
//	disk/gzip         target ≤ 0.333
//
// Ratios are per iteration; the reported one is their median.
func BenchmarkFormats(b *testing.B) {
	for _, spec := range corpora {
		b.Run(spec.name, func(b *testing.B) { benchFormats(b, spec) })
	}
}

func benchFormats(b *testing.B, spec corpusSpec) {
	recs := corpus(b, spec)
	raw := goReplay(recs)
	gz := gzipSize(raw)

	// Capture pass: the pages the writer compresses, and its size on disk.
	var pages [][]byte
	var pageBytes int64
	dir := b.TempDir()
	disk := writeAll(b, recs, formats.WithPageTap(formats.WriterOptions{Dir: dir, Recorder: "bench", NoSpool: true},
		func(p []byte) { pages = append(pages, p); pageBytes += int64(len(p)) }))
	codec := &zstd.Codec{Level: formats.DefaultLevel} // the writer's level

	var ratios, nsRatios []float64
	var tWriter, tZstd time.Duration
	var cWriter, cNoSpool, cZstd time.Duration // CPU time, all threads
	b.SetBytes(int64(len(raw) / len(recs)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var tw, tn, tz time.Duration
		for k := range 3 {
			switch (i + k) % 3 {
			case 0:
				start, cpu := time.Now(), cputime.Process()
				writeAll(b, recs, formats.WriterOptions{Dir: b.TempDir(), Recorder: "bench"})
				tw = time.Since(start)
				cWriter += cputime.Process() - cpu
			case 1:
				start, cpu := time.Now(), cputime.Process()
				writeAll(b, recs, formats.WriterOptions{Dir: b.TempDir(), Recorder: "bench", NoSpool: true})
				tn = time.Since(start)
				cNoSpool += cputime.Process() - cpu
			case 2:
				start, cpu := time.Now(), cputime.Process()
				var dst []byte
				for _, p := range pages {
					dst, _ = codec.Encode(dst[:0], p)
				}
				tz = time.Since(start)
				cZstd += cputime.Process() - cpu
			}
		}
		tWriter += tw
		tZstd += tz
		ratios = append(ratios, tz.Seconds()/tw.Seconds())
		nsRatios = append(nsRatios, tz.Seconds()/tn.Seconds())
	}
	b.StopTimer()
	n := float64(len(recs))
	b.ReportMetric(median(ratios), "writer/zstd")
	b.ReportMetric(median(nsRatios), "nospool/zstd")
	b.ReportMetric(n*float64(b.N)/tWriter.Seconds(), "rec/s")
	b.ReportMetric(n*float64(b.N)/tZstd.Seconds(), "zstd-rec/s")
	if cWriter > 0 && cNoSpool > 0 {
		b.ReportMetric(cZstd.Seconds()/cWriter.Seconds(), "cpu-writer/zstd")
		b.ReportMetric(cZstd.Seconds()/cNoSpool.Seconds(), "cpu-nospool/zstd")
	}
	b.ReportMetric(float64(pageBytes)/n, "page-B/rec")
	b.ReportMetric(float64(len(raw))/n, "raw-B/rec")
	b.ReportMetric(float64(disk)/n, "disk-B/rec")
	b.ReportMetric(float64(gz)/n, "gzip-B/rec")
	b.ReportMetric(float64(disk)/float64(gz), "disk/gzip")
}

// writeAll writes recs through a new writer and returns the bytes on disk.
func writeAll(b *testing.B, recs []formats.Exchange, opts formats.WriterOptions) int64 {
	w, err := formats.NewWriter[formats.Exchange](context.Background(), opts)
	if err != nil {
		b.Fatal(err)
	}
	for i := range recs {
		x := recs[i] // the writer keeps x's slices: they are shared, never modified
		if err := w.Write(&x); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	n := w.Stats().BytesWritten
	os.RemoveAll(opts.Dir) // keep the temp disk small across iterations
	return n
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkShred: records/s turned into (uncompressed) Parquet pages by the
// hand-written shredder and, on the same rows with the same options, by
// parquet-go's reflective GenericWriter.Write that it replaced. No zstd, no
// spool, no disk: the CPU cost of shredding, column buffers and page
// assembly alone.
//
//	go test ./formats -run '^$' -bench 'Shred' -benchtime 5x -count 3 -cpu 1
func BenchmarkShred(b *testing.B) {
	recs := corpus(b, corpora[0])
	for _, path := range []string{"reflect", "shred"} {
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cputime.Process()
			for i := 0; i < b.N; i++ {
				if err := formats.WriteUncompressed(recs, 8192, path == "reflect"); err != nil {
					b.Fatal(err)
				}
			}
			cpu = cputime.Process() - cpu
			b.ReportMetric(float64(len(recs)*b.N)/b.Elapsed().Seconds(), "rec/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(len(recs)*b.N), "cpu-ns/rec")
		})
	}
}

// BenchmarkRead: records/s through the time-ordered reader, on the chat
// corpus written four times over (four hours of files).
func BenchmarkRead(b *testing.B) {
	recs := corpus(b, corpora[0])
	dir := b.TempDir()
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: dir, NoSpool: true})
	if err != nil {
		b.Fatal(err)
	}
	for round := range 4 {
		for i := range recs {
			x := recs[i]
			x.TsUnixNs += int64(round) * int64(time.Hour)
			x.Ts = x.Ts.Add(time.Duration(round) * time.Hour)
			if err := w.Write(&x); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := w.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	readLoop(b, dir, formats.ReaderOptions{})
}

// BenchmarkReadColumns: records/s and allocations per record through the
// reader on the chat-sse corpus (16 KiB streamed responses), decoding every
// column ("all") or only what a replay reads ("replay", replayer.Columns).
//
//	go test ./formats -run '^$' -bench ReadColumns -benchtime 20000x -count 3
func BenchmarkReadColumns(b *testing.B) {
	recs := corpus(b, corpora[2])
	dir := b.TempDir()
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: dir, NoSpool: true})
	if err != nil {
		b.Fatal(err)
	}
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Run("all", func(b *testing.B) { readLoop(b, dir, formats.ReaderOptions{}) })
	b.Run("replay", func(b *testing.B) { readLoop(b, dir, formats.ReaderOptions{Columns: replayer.Columns()}) })
}

// readLoop reads b.N records from dir, reopening it at the end.
func readLoop(b *testing.B, dir string, opts formats.ReaderOptions) {
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	var r *formats.Reader[formats.Exchange]
	var err error
	for n < b.N {
		if r == nil {
			if r, err = formats.OpenReader[formats.Exchange](context.Background(), []string{dir}, opts); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := r.Next(); err == io.EOF {
			r.Close()
			r = nil
			continue
		} else if err != nil {
			b.Fatal(err)
		}
		n++
	}
	if r != nil {
		r.Close()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkBodyFloor bounds what any lossless layout can reach on the disk/gzip
// target: it compresses only the request and the response bodies of each
// corpus — nothing else a record holds — with xz -9e, each column as one
// stream with all its records in the window (what no page-by-page format can
// do), and reports the bytes per record next to a third of the GoReplay
// baseline. When floor-B/rec exceeds third-gzip-B/rec, the ⅓ target is below
// what the bodies themselves compress to. Needs xz on PATH.
//
//	go test ./formats -run '^$' -bench BodyFloor -benchtime 1x
func BenchmarkBodyFloor(b *testing.B) {
	xz, err := exec.LookPath("xz")
	if err != nil {
		b.Skip("xz not on PATH")
	}
	for _, spec := range corpora {
		b.Run(spec.name, func(b *testing.B) {
			recs := corpus(b, spec)
			third := float64(gzipSize(goReplay(recs))) / 3
			var req, resp []byte
			for i := range recs {
				req = append(req, recs[i].ReqBody...)
				resp = append(resp, recs[i].RespBody...)
			}
			b.ResetTimer()
			var floor int64
			for range b.N {
				floor = 0
				for _, col := range [][]byte{req, resp} {
					floor += xzSize(b, xz, col)
				}
			}
			n := float64(len(recs))
			b.ReportMetric(float64(floor)/n, "floor-B/rec")
			b.ReportMetric(third/n, "third-gzip-B/rec")
			b.ReportMetric(float64(floor)/third, "floor/third")
		})
	}
}

// BenchmarkCompact: disk per exchange of the chat corpus as the live writer
// leaves it (four recorders' files in one hour, as sidecars write them),
// with the live writer's defaults and with its cheapest setting (fast:
// zstd fastest, 1 MiB pages, the defaults before), and after `reel
// compact` (formats.Compact with its defaults) of the live files, against
// the bodies-alone floor of BenchmarkBodyFloor (xz -9e) and the floor of
// every column (columnStreams, xz -9e), computed in the same run.
// cpu-µs/rec is the writer's CPU time per record (every thread), the cost
// of each live setting. With -v it logs each dataset's bytes by column.
//
//	go test ./formats -run '^$' -bench Compact -benchtime 1x -count 3
func BenchmarkCompact(b *testing.B) {
	recs := corpus(b, corpora[0]) // chat
	n := float64(len(recs))
	var floor, allFloor int64
	cols := map[string]map[string]int64{"xz -9e floor": {}} // dataset → column → compressed bytes
	if xz, err := exec.LookPath("xz"); err == nil {
		streams := columnStreams(recs)
		for name, col := range streams {
			size := xzSize(b, xz, col)
			cols["xz -9e floor"][name] = size
			allFloor += size
			if name == "req_body" || name == "resp_body" {
				floor += size
			}
		}
		b.ReportMetric(float64(floor)/n, "floor-B/rec")
		b.ReportMetric(float64(allFloor)/n, "allcols-floor-B/rec")
	}
	// writeLive writes the corpus as four recorders and returns the
	// dataset's bytes and the writers' CPU time.
	writeLive := func(dir string, opts formats.WriterOptions) (int64, time.Duration) {
		var bytes int64
		cpu := cputime.Process()
		for r := range 4 {
			o := opts
			o.Dir, o.Recorder = dir, fmt.Sprintf("gw-%d", r)
			w, err := formats.NewWriter[formats.Exchange](context.Background(), o)
			if err != nil {
				b.Fatal(err)
			}
			for i := r; i < len(recs); i += 4 {
				x := recs[i]
				if err := w.Write(&x); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			bytes += w.Stats().BytesWritten
		}
		return bytes, cputime.Process() - cpu
	}
	var live, fast, compacted int64
	var cpuLive, cpuFast, cpuCompact time.Duration
	for range b.N {
		dir := b.TempDir()
		var c time.Duration
		live, c = writeLive(dir, formats.WriterOptions{})
		cpuLive += c
		liveFiles, err := formats.ListFiles([]string{dir})
		if err != nil {
			b.Fatal(err)
		}
		cols["live"] = columnBytes(b, liveFiles)
		fastDir := b.TempDir()
		fast, c = writeLive(fastDir, formats.WriterOptions{Level: zstd.SpeedFastest, PageBytes: 1 << 20})
		cpuFast += c
		os.RemoveAll(fastDir)
		cpu := cputime.Process()
		if _, err := formats.Compact(context.Background(), dir, formats.CompactOptions{MinAge: -1}); err != nil {
			b.Fatal(err)
		}
		cpuCompact += cputime.Process() - cpu
		files, err := formats.ListFiles([]string{dir})
		if err != nil {
			b.Fatal(err)
		}
		cols["compact"] = columnBytes(b, files)
		compacted = 0
		for _, f := range files {
			fi, err := formats.StatFile(f)
			if err != nil {
				b.Fatal(err)
			}
			compacted += fi.Size
		}
		os.RemoveAll(dir)
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / n / float64(b.N) }
	b.ReportMetric(float64(live)/n, "live-B/rec")
	b.ReportMetric(float64(fast)/n, "fast-B/rec")
	b.ReportMetric(float64(compacted)/n, "compact-B/rec")
	b.ReportMetric(per(cpuLive), "live-cpu-µs/rec")
	b.ReportMetric(per(cpuFast), "fast-cpu-µs/rec")
	b.ReportMetric(per(cpuCompact), "compact-cpu-µs/rec")
	logColumns(b, cols, n)
	if floor > 0 {
		b.ReportMetric(float64(live)/float64(floor), "live/floor")
		b.ReportMetric(float64(fast)/float64(floor), "fast/floor")
		b.ReportMetric(float64(compacted)/float64(floor), "compact/floor")
		b.ReportMetric(float64(compacted)/float64(allFloor), "compact/allcols-floor")
		b.ReportMetric(float64(live)/float64(allFloor), "live/allcols-floor")
	}
}

// columnBytes sums the compressed column chunks of files by top-level
// column (a list's or map's leaves under their column's name, a map's keys
// and values apart).
func columnBytes(b *testing.B, files []string) map[string]int64 {
	b.Helper()
	out := map[string]int64{}
	for _, path := range files {
		pf, f := openParquet(b, path)
		for _, rg := range pf.Metadata().RowGroups {
			for _, c := range rg.Columns {
				name := c.MetaData.PathInSchema[0]
				if leaf := c.MetaData.PathInSchema[len(c.MetaData.PathInSchema)-1]; leaf == "key" || leaf == "value" {
					name += "." + leaf
				}
				out[name] += c.MetaData.TotalCompressedSize
			}
		}
		f.Close()
	}
	return out
}

// openParquet opens path with parquet-go; the caller closes f.
func openParquet(b *testing.B, path string) (pf *parquet.File, f *os.File) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	if pf, err = parquet.OpenFile(f, st.Size()); err != nil {
		b.Fatal(err)
	}
	return pf, f
}

// logColumns logs each dataset's bytes per record by column, largest first
// (go test -v shows them): where the bytes go.
func logColumns(b *testing.B, cols map[string]map[string]int64, n float64) {
	for _, set := range slices.Sorted(maps.Keys(cols)) {
		byCol := cols[set]
		names := slices.Collect(maps.Keys(byCol))
		slices.SortFunc(names, func(x, y string) int { return cmp.Compare(byCol[y], byCol[x]) })
		var sb strings.Builder
		for _, name := range names {
			fmt.Fprintf(&sb, " %s=%.1f", name, float64(byCol[name])/n)
		}
		b.Logf("%s B/rec by column:%s", set, sb.String())
	}
}

// xzSize is the size of data compressed by xz -9e on one thread.
func xzSize(b *testing.B, xz string, data []byte) int64 {
	b.Helper()
	cmd := exec.Command(xz, "-9e", "-T1", "-c")
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("xz: %v", err)
	}
	return int64(len(out))
}

// columnStreams serializes every column of recs as one stream, in row
// order, the way a columnar file holds it before compression: integers
// and booleans fixed-width little-endian, timestamps as int64
// microseconds, strings length-prefixed, bodies concatenated, lists and maps
// count-prefixed (map entries by key). Compressed with xz -9e, the
// streams are the floor of the whole exchange — the bodies' floor plus
// what the other columns, random identifiers among them, cost at best.
func columnStreams(recs []formats.Exchange) map[string][]byte {
	streams := map[string][]byte{}
	typ := reflect.TypeFor[formats.Exchange]()
	for i := range recs {
		v := reflect.ValueOf(&recs[i]).Elem()
		for f := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(f).Tag.Get("parquet"), ",")
			streams[name] = appendValue(streams[name], v.Field(f))
		}
	}
	return streams
}

func appendValue(b []byte, v reflect.Value) []byte {
	switch x := v.Interface().(type) {
	case time.Time:
		return binary.LittleEndian.AppendUint64(b, uint64(x.UnixMicro()))
	case []byte: // the bodies, concatenated as BenchmarkBodyFloor compresses them
		return append(b, x...)
	case map[string]string:
		b = binary.AppendUvarint(b, uint64(len(x)))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			b = append(binary.AppendUvarint(b, uint64(len(k))), k...)
			b = append(binary.AppendUvarint(b, uint64(len(x[k]))), x[k]...)
		}
		return b
	case *int32:
		if x == nil {
			return append(b, 0)
		}
		return binary.LittleEndian.AppendUint32(append(b, 1), uint32(*x))
	}
	switch v.Kind() {
	case reflect.String:
		return append(binary.AppendUvarint(b, uint64(v.Len())), v.String()...)
	case reflect.Bool:
		if v.Bool() {
			return append(b, 1)
		}
		return append(b, 0)
	case reflect.Int32:
		return binary.LittleEndian.AppendUint32(b, uint32(v.Int()))
	case reflect.Int64:
		return binary.LittleEndian.AppendUint64(b, uint64(v.Int()))
	case reflect.Slice:
		b = binary.AppendUvarint(b, uint64(v.Len()))
		for i := range v.Len() {
			b = appendValue(b, v.Index(i))
		}
		return b
	}
	panic("columnStreams: no serialization for " + v.Type().String())
}

// BenchmarkLiveBigBodies: the live writer's levels and page sizes on
// exchanges with 16 KiB request and response bodies (words drawn from a
// small vocabulary, so they compress like prose), one writer: bytes on
// disk, writer CPU per exchange and the peak heap in use while writing
// (sampled every 100 records; the corpus itself, about 190 MiB, is
// counted in every row alike).
//
//	go test ./formats -run '^$' -bench LiveBigBodies -benchtime 1x -count 3
func BenchmarkLiveBigBodies(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	words := strings.Fields("the model token cache prefix answer user system of kv gpu batch")
	recs := make([]formats.Exchange, 6000)
	body := func() []byte {
		p := make([]byte, 0, 16<<10)
		for len(p) < 16<<10 {
			p = append(append(p, words[rng.IntN(len(words))]...), ' ')
		}
		return p
	}
	for i := range recs {
		recs[i] = formats.Exchange{Seq: int64(i + 1), TsUnixNs: time.Date(2025, 3, 14, 10, 0, 0, 0, time.UTC).UnixNano() + int64(i)*1e6,
			ReqBody: body(), RespBody: body()}
	}
	for _, c := range []struct {
		name string
		opts formats.WriterOptions
	}{
		{"fast", formats.WriterOptions{Level: zstd.SpeedFastest}},
		{"default", formats.WriterOptions{}},
		{"default-4MiB-pages", formats.WriterOptions{PageBytes: 4 << 20}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var bytes int64
			var peak uint64
			var cpu time.Duration
			for range b.N {
				runtime.GC()
				o := c.opts
				o.Dir, o.Recorder = b.TempDir(), "big"
				c0 := cputime.Process()
				w, err := formats.NewWriter[formats.Exchange](context.Background(), o)
				if err != nil {
					b.Fatal(err)
				}
				var ms runtime.MemStats
				for i := range recs {
					x := recs[i]
					if err := w.Write(&x); err != nil {
						b.Fatal(err)
					}
					if i%100 == 0 {
						runtime.ReadMemStats(&ms)
						peak = max(peak, ms.HeapInuse)
					}
				}
				if err := w.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				cpu += cputime.Process() - c0
				bytes = w.Stats().BytesWritten
				os.RemoveAll(o.Dir)
			}
			n := float64(len(recs))
			b.ReportMetric(float64(bytes)/n, "B/rec")
			b.ReportMetric(float64(cpu.Microseconds())/n/float64(b.N), "cpu-µs/rec")
			b.ReportMetric(float64(peak>>20), "peak-heap-MiB")
		})
	}
}

// BenchmarkScanColumns: the CPU cost per row of reading what `reel stats`
// reads in its two passes (the analysis's columns, "analysis", then the
// sessions pass's, "sessions") from a 1M-row recording shaped like bench/memory's traffic
// (streaming chat, ~20 token gaps a row), through Reader.Scan, beside the
// peer of the same run: parquet-go reading and decoding the same column
// chunks' pages alone (decompression, values and levels, nothing put into a
// record). Each iteration times both on the whole file, in alternating
// order, as process CPU time. Metrics:
//
//	scan-cpu-ns/row   Reader.Scan, CPU ns per row (GC included)
//	pages-cpu-ns/row  the page-decode peer, CPU ns per row
//	scan/pages        the ratio, per iteration, median reported
//	rows/cpu-s        Reader.Scan's rows per CPU-second
//
//	go test ./formats -run '^$' -bench ScanColumns -benchtime 3x -count 3 -cpu 1
func BenchmarkScanColumns(b *testing.B) {
	const rows = 1_000_000
	dir := b.TempDir()
	writeTraffic(b, dir, rows)
	for _, set := range []struct {
		name    string
		columns []string
	}{
		{"analysis", analysis.ExchangeColumns()},
		{"sessions", analysis.SessionColumns()},
	} {
		b.Run(set.name, func(b *testing.B) {
			var scanCPU, pagesCPU time.Duration
			var ratios []float64
			for i := range b.N {
				var s, p time.Duration
				if i%2 == 0 {
					s, p = scanCPUTime(b, dir, set.columns, rows), pageCPUTime(b, dir, set.columns)
				} else {
					p, s = pageCPUTime(b, dir, set.columns), scanCPUTime(b, dir, set.columns, rows)
				}
				scanCPU += s
				pagesCPU += p
				ratios = append(ratios, float64(s)/float64(p))
			}
			slices.Sort(ratios)
			n := float64(rows * b.N)
			b.ReportMetric(float64(scanCPU.Nanoseconds())/n, "scan-cpu-ns/row")
			b.ReportMetric(float64(pagesCPU.Nanoseconds())/n, "pages-cpu-ns/row")
			b.ReportMetric(ratios[len(ratios)/2], "scan/pages")
			b.ReportMetric(n/scanCPU.Seconds(), "rows/cpu-s")
		})
	}
}

// writeTraffic writes n exchanges like bench/memory's dataset into dir:
// Poisson arrivals at 5,000/s, log-normal TTFT and token gaps, 8–31 output
// tokens, three models, 200 clients.
func writeTraffic(b *testing.B, dir string, n int) {
	b.Helper()
	w, err := formats.NewWriter[formats.Exchange](context.Background(), formats.WriterOptions{Dir: dir, Recorder: "bench", NoSpool: true})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	models := []string{"llama-3-8b", "llama-3-70b", "qwen-2.5-7b"}
	t := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	gaps := make([]int32, 0, 32)
	for i := range n {
		t = t.Add(time.Duration(rng.ExpFloat64() * float64(200*time.Microsecond)))
		out := int32(8 + rng.IntN(24))
		ttft := time.Duration(math.Exp(math.Log(0.08)+0.5*rng.NormFloat64()) * float64(time.Second))
		gaps = gaps[:0]
		dur := ttft + time.Millisecond
		for range out - 1 {
			g := int32(math.Exp(math.Log(20_000) + 0.3*rng.NormFloat64()))
			gaps = append(gaps, g)
			dur += time.Duration(g) * time.Microsecond
		}
		x := formats.Exchange{
			Ts: t, TsUnixNs: t.UnixNano(), Recorder: "bench", Seq: int64(i + 1),
			ConnID: int64(i%512 + 1), ConnSeq: int32(i / 512), Client: "10.0.0." + strconv.Itoa(1+rng.IntN(200)),
			Method: "POST", Host: "prod.example", Path: "/v1/chat/completions",
			ReqContentType: "application/json", ReqBody: []byte(`{"messages":[{"role":"user","content":"question"}]}`), ReqBodyBytes: 120,
			Model: models[rng.IntN(len(models))], Stream: true, MaxTokens: out, PromptTokens: int32(math.Exp(5.5 + 0.6*rng.NormFloat64())),
			PromptTokensSource: "usage", Status: 200, RespContentType: "text/event-stream", RespBodyBytes: 600,
			TTFBNs: int64(ttft) - 200_000, DurationNs: int64(dur), TTFTNs: int64(ttft),
			Events: out + 2, EventGapsUs: slices.Clone(gaps), OutputTokens: out,
			BatchSize: -1, QueueDepth: -1, Complete: true,
		}
		if err := w.Write(&x); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// scanCPUTime reads every row of dir's columns through Reader.Scan and
// returns the process CPU time it took.
func scanCPUTime(b *testing.B, dir string, columns []string, want int) time.Duration {
	b.Helper()
	cpu := cputime.Process()
	r, err := formats.OpenReader[formats.Exchange](context.Background(), []string{dir}, formats.ReaderOptions{Columns: columns})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	n := 0
	for ; ; n++ {
		if _, err := r.Scan(); err == io.EOF {
			break
		} else if err != nil {
			b.Fatal(err)
		}
	}
	if n != want {
		b.Fatalf("scanned %d rows, wrote %d", n, want)
	}
	return cputime.Process() - cpu
}

// pageCPUTime reads and decodes every page of dir's column chunks for
// columns (and the time column) with parquet-go alone, and returns the
// process CPU time it took.
func pageCPUTime(b *testing.B, dir string, columns []string) time.Duration {
	b.Helper()
	want := map[string]bool{"ts_unix_ns": true}
	for _, c := range columns {
		want[c] = true
	}
	files, err := formats.ListFiles([]string{dir})
	if err != nil {
		b.Fatal(err)
	}
	cpu := cputime.Process()
	for _, path := range files {
		pf, f := openParquet(b, path)
		for _, rg := range pf.RowGroups() {
			for i, path := range pf.Schema().Columns() {
				if !want[path[0]] {
					continue
				}
				pages := rg.ColumnChunks()[i].Pages()
				for {
					p, err := pages.ReadPage()
					if err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
					parquet.Release(p)
				}
				pages.Close()
			}
		}
		f.Close()
	}
	return cputime.Process() - cpu
}
