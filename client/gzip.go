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

// gzipEncoded tells whether the body of an answer with header h is gzip.
// Any coding but gzip and identity is refused, named as clean, when set, leaves it.
func gzipEncoded(h http.Header, clean func(string) string) (bool, error) {
	gz := false
	for _, v := range h.Values("Content-Encoding") {
		for raw := range strings.SplitSeq(v, ",") {
			switch c := strings.ToLower(strings.TrimSpace(raw)); c {
			case "", "identity":
			case "gzip", "x-gzip":
				if gz {
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

// maxCompressed bounds the compressed bytes read for limit decompressed
// ones: deflate grows data by at most 5 bytes per 64 KiB block.
func maxCompressed(limit int64) int64 {
	return limit + limit/1024 + 4<<10
}

// gunzipReader decompresses a gzip stream from wire, whose own errors pass
// as they are; a corrupt stream is an invalid body.
type gunzipReader struct {
	wire *limitedReader
	br   *bufio.Reader
	zr   gzip.Reader
}

// gunzipPool keeps decompressors, 45 KB each, for reuse (docs/development.md).
var gunzipPool sync.Pool

// newGunzipReader starts decompressing wire; it reads the gzip header.
func newGunzipReader(wire *limitedReader) (*gunzipReader, error) {
	g, _ := gunzipPool.Get().(*gunzipReader)
	if g == nil {
		g = &gunzipReader{br: bufio.NewReaderSize(nil, 4<<10)}
	}
	g.wire = wire
	g.br.Reset(wire)
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

// translate turns an error of the decompressor into that of the connection
// under it, if that failed, or else into an invalid body.
func (g *gunzipReader) translate(err error) error {
	switch {
	case g.wire.err != nil:
		return g.wire.err
	case err == io.EOF, errors.Is(err, io.ErrUnexpectedEOF): // an empty body is no gzip stream
		return &gzipError{bodyError{msg: "gzip stream ends early", err: io.ErrUnexpectedEOF}}
	}
	return &gzipError{bodyError{msg: "corrupt gzip stream: " + err.Error(), err: err}}
}

// gzipError reports a corrupt gzip stream, which is no bodyError of the decoder.
type gzipError struct{ bodyError }

// release returns g to the pool; g is unusable after.
func (g *gunzipReader) release() {
	g.wire = nil
	g.br.Reset(nil)
	gunzipPool.Put(g)
}
