package client

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// The client asks for gzip and decompresses answers itself, as a stream:
// the size limit (Config.MaxResponseBytes) then bounds the decompressed
// bytes, so that a compression bomb, a few megabytes inflating to
// gigabytes, ends as a too_large error after reading at most the limit,
// in the memory of one decompressor.
//
// The standard library's decompressor was chosen over
// github.com/klauspost/compress by measurement (BENCHMARKS.md, "gzip").

// gzipEncoded tells whether the body of an answer with header h is gzip.
// Identity, or no Content-Encoding, is read as it is; any other coding is
// refused, since the body could not be read, and named in the error as
// clean leaves it (when not nil).
func gzipEncoded(h http.Header, clean func(string) string) (bool, error) {
	codings := h.Values("Content-Encoding")
	gz := false
	for _, v := range codings {
		for raw := range strings.SplitSeq(v, ",") {
			switch c := strings.ToLower(strings.TrimSpace(raw)); c {
			case "", "identity":
			case "gzip", "x-gzip":
				if gz {
					// Compressed twice: nobody does that but a hostile
					// service, and one layer is all that is undone.
					return false, fmt.Errorf("body is gzip-compressed twice: %w", errInvalidBody)
				}
				gz = true
			default:
				if clean != nil {
					raw = clean(raw)
				}
				raw = cutText(strings.TrimSpace(raw), 32+len(fieldEllipsis))
				return false, fmt.Errorf("body has Content-Encoding %q, which the exporter cannot read (only gzip): %w", raw, errInvalidBody)
			}
		}
	}
	return gz, nil
}

// maxCompressed bounds the compressed bytes read for a decompressed limit
// of limit bytes. Deflate never grows data by more than 5 bytes per stored
// block of 64 KiB, plus headers, so a stream of an acceptable body fits
// well within this bound, and no compressed stream is read without end.
func maxCompressed(limit int64) int64 {
	return limit + limit/1024 + 4<<10
}

// gunzipReader decompresses a gzip stream, telling a corrupt stream
// (invalid_body) from a connection that broke or a limit that was hit
// under it (whose errors pass as they are).
type gunzipReader struct {
	wire *limitedReader
	br   *bufio.Reader
	zr   gzip.Reader
}

// gunzipPool keeps decompressors, 40-odd KiB each, for reuse across
// requests.
var gunzipPool sync.Pool

// newGunzipReader starts decompressing wire; it reads the gzip header.
func newGunzipReader(wire *limitedReader) (*gunzipReader, error) {
	g, _ := gunzipPool.Get().(*gunzipReader)
	if g == nil {
		g = &gunzipReader{br: bufio.NewReaderSize(nil, 4<<10)}
	}
	g.wire = wire
	g.br.Reset(wire)
	// bufio.Reader is an io.ByteReader, so the decompressor reads through
	// it without a buffer of its own.
	if err := g.zr.Reset(g.br); err != nil {
		err = g.translate(err)
		g.release()
		return nil, err
	}
	return g, nil
}

func (g *gunzipReader) Read(p []byte) (int, error) {
	n, err := g.zr.Read(p)
	if err != nil && err != io.EOF {
		err = g.translate(err)
	}
	return n, err
}

// translate turns an error of the decompressor into the error of the
// connection under it, if that failed, or else into an invalid body.
func (g *gunzipReader) translate(err error) error {
	if g.wire.err != nil {
		return g.wire.err
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF // an empty body is no gzip stream
	}
	return &gzipError{err: err}
}

// release returns g to the pool; g is unusable after.
func (g *gunzipReader) release() {
	g.wire = nil
	g.br.Reset(nil)
	gunzipPool.Put(g)
}

// gzipError reports a corrupt gzip stream: a bad header or checksum, bad
// deflate data, or a stream that ends early although the body was read
// whole. It matches errInvalidBody.
type gzipError struct{ err error }

func (e *gzipError) Error() string {
	if errors.Is(e.err, io.ErrUnexpectedEOF) {
		return "gzip stream ends early"
	}
	return "corrupt gzip stream: " + e.err.Error()
}

func (e *gzipError) Is(target error) bool { return target == errInvalidBody }
func (e *gzipError) Unwrap() error        { return e.err }
