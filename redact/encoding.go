package redact

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"
)

// MaxDecodedBytes bounds a compressed body once decompressed; a larger one
// fails closed rather than using unbounded memory.
const MaxDecodedBytes = 64 << 20

// codec undoes and redoes one Content-Encoding.
type codec struct {
	decode func(io.Reader) (io.ReadCloser, error)
	encode func(w io.Writer) (io.WriteCloser, error)
}

var codecs = map[string]codec{
	"gzip": {
		decode: func(r io.Reader) (io.ReadCloser, error) { return gzip.NewReader(r) },
		encode: func(w io.Writer) (io.WriteCloser, error) { return gzip.NewWriterLevel(w, gzip.BestSpeed) },
	},
	"deflate": { // HTTP's "deflate" is the zlib format
		decode: func(r io.Reader) (io.ReadCloser, error) { return zlib.NewReader(r) },
		encode: func(w io.Writer) (io.WriteCloser, error) { return zlib.NewWriterLevel(w, zlib.BestSpeed) },
	},
	"zstd": {
		decode: func(r io.Reader) (io.ReadCloser, error) {
			d, err := zstd.NewReader(r, zstd.WithDecoderMaxMemory(MaxDecodedBytes), zstd.WithDecoderConcurrency(1))
			if err != nil {
				return nil, err
			}
			return d.IOReadCloser(), nil
		},
		encode: func(w io.Writer) (io.WriteCloser, error) {
			return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		},
	},
}

func init() { codecs["x-gzip"] = codecs["gzip"] }

// contentCodec returns the codec for a Content-Encoding value; ok is false
// for an encoding reel cannot undo (br, compress, stacked encodings).
func contentCodec(contentEncoding string) (c codec, identity, ok bool) {
	ce := strings.ToLower(strings.TrimSpace(contentEncoding))
	if ce == "" || ce == "identity" {
		return codec{}, true, true
	}
	c, ok = codecs[ce]
	return c, false, ok
}

// decodeBody decompresses body. A body cut short (the recorder truncates
// at --max-body) yields what could be decompressed.
func decodeBody(c codec, body []byte) ([]byte, error) {
	zr, err := c.decode(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, MaxDecodedBytes+1))
	if len(out) > MaxDecodedBytes {
		return nil, fmt.Errorf("decompressed body over %d bytes", MaxDecodedBytes)
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) || len(out) == 0 && err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	return out, nil
}

// encodeBody compresses a redacted body back with the same encoding, so it
// still matches the recorded Content-Encoding header.
func encodeBody(c codec, body []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := c.encode(&buf)
	if err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	if _, err := zw.Write(body); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	return buf.Bytes(), nil
}
