package sampleservice

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
)

// renderer writes a response body. Bodies are rendered rather than built so
// that they can be streamed, measured and rendered again (see Truncate)
// without ever being held in memory.
type renderer func(w io.Writer) error

// send writes status and the rendered body. A body that cannot be completed
// aborts the connection, so the client sees an error rather than a body that
// merely looks complete.
func send(w http.ResponseWriter, status int, render renderer, truncate bool) {
	if truncate {
		sendTruncated(w, status, render)
		return
	}
	w.WriteHeader(status)
	bw := bufio.NewWriterSize(w, 32<<10)
	if err := render(bw); err != nil && !errors.Is(err, http.ErrBodyNotAllowed) {
		abort(w)
		return
	}
	_ = bw.Flush()
}

// sendTruncated declares the full length of the body, sends half of it and
// drops the connection.
func sendTruncated(w http.ResponseWriter, status int, render renderer) {
	full := &countingWriter{w: io.Discard}
	if err := render(full); err != nil {
		abort(w)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(full.n, 10))
	w.WriteHeader(status)
	bw := bufio.NewWriter(&limitWriter{w: w, left: full.n / 2})
	_ = render(bw)
	_ = bw.Flush()
	abort(w)
}

// abort drops the connection after flushing what was written, so the client
// sees an error instead of a response that looks complete (net/http would
// otherwise finish even an empty answer as a 200).
func abort(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if conn, _, err := rc.Hijack(); err == nil {
		_ = conn.Close()
		return
	}
	panic(http.ErrAbortHandler) // HTTP/2 and other writers that cannot hijack
}

// writeDetail sends a DRF-style error body.
func writeDetail(w http.ResponseWriter, status int, detail string) {
	send(w, status, detailBody(detail), false)
}

func detailBody(detail string) renderer {
	return objectBody(struct {
		Detail string `json:"detail"`
	}{detail})
}

func objectBody(v any) renderer {
	return func(w io.Writer) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
}

func rawBody(s string) renderer {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

// appendNullable appends s as a JSON string, or null when s is nil. URLs are
// not HTML-escaped, matching what real services send.
func appendNullable(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(*s)
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// countingWriter measures what passes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// errLimit stops a rendering once a truncated body has been sent.
var errLimit = errors.New("sampleservice: body limit reached")

// limitWriter passes through at most left bytes.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) <= l.left {
		n, err := l.w.Write(p)
		l.left -= int64(n)
		return n, err
	}
	n, err := l.w.Write(p[:l.left])
	l.left -= int64(n)
	if err == nil {
		err = errLimit
	}
	return n, err
}
