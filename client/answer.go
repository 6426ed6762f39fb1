package client

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Bounds of what the trace keeps of an answer.
const (
	maxExcerpt        = 512     // a body excerpt, "…" included
	errorBodyBytes    = 4 << 10 // read of an error body, room for a key at the cut
	capturedBodyBytes = 2 * maxExcerpt
	maxHeaderShown    = 256
	maxShown          = 2 << 10 // a URL, a Location, a note, an error
	drainBytes        = 4 << 10 // read after the answer, so the connection is reused
)

// answer is what the trace shows of a response beyond its status.
type answer struct {
	contentType  string
	authenticate string
	location     string
	retryAfter   string
	holdOffUntil time.Time
	excerpt      string
}

// fill copies a into the trace record r.
func (a *answer) fill(r *TraceRequest) {
	r.ContentType, r.Location, r.RetryAfter = a.contentType, a.location, a.retryAfter
	r.WWWAuthenticate = a.authenticate
	r.HoldOffUntil, r.BodyExcerpt = a.holdOffUntil, a.excerpt
}

// noteHeaders keeps the headers of resp worth showing.
func (c *Client) noteHeaders(a *answer, resp *http.Response) {
	a.contentType = c.shown(resp.Header.Get("Content-Type"), maxHeaderShown)
	status := resp.StatusCode
	if status >= 200 && status <= 299 {
		return
	}
	a.retryAfter = c.shown(resp.Header.Get("Retry-After"), maxHeaderShown)
	a.authenticate = c.shown(strings.Join(resp.Header.Values("WWW-Authenticate"), ", "), maxHeaderShown)
	if status >= 300 && status <= 399 {
		a.location = c.shownLocation(resp)
	}
}

// shownLocation renders a redirect's Location as sent, redacted.
func (c *Client) shownLocation(resp *http.Response) string {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return ""
	}
	u, err := url.Parse(loc)
	if err != nil {
		return "(not a valid URL)"
	}
	return c.shown(RedactURL(u), maxShown)
}

// shown makes text from the service fit for a page: redacted, escaped, cut.
func (c *Client) shown(s string, limit int) string {
	if s == "" {
		return ""
	}
	return cutText(escapeControls(c.redact.clean(strings.ToValidUTF8(s, "\uFFFD"))), limit)
}

// readErrorBody reads the start of an error answer's body, decompressed, if it can.
func readErrorBody(wire *limitedReader, h http.Header) []byte {
	wire.n = errorBodyBytes
	// LimitReader spares wire's probe for more, a byte it would not count.
	raw, _ := io.ReadAll(io.LimitReader(wire, errorBodyBytes))
	gz, err := gzipEncoded(h, nil)
	switch {
	case err != nil:
		return nil
	case !gz:
		return raw
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil
	}
	plain, _ := io.ReadAll(io.LimitReader(zr, errorBodyBytes))
	return plain
}

// excerpt renders the start of a body for the trace: its JSON message, else
// the text, redacted before it is cut so no part of a key survives.
func (c *Client) excerpt(body []byte) string {
	text := jsonMessage(body)
	if text == "" {
		text = strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))
	}
	if text == "" {
		return ""
	}
	return cutText(escapeControls(c.redact.clean(text)), maxExcerpt)
}

// messageFields say what went wrong in a JSON error document, in order.
var messageFields = []string{"detail", "message", "error"}

// jsonMessage returns the first non-empty messageFields string of a JSON object.
func jsonMessage(body []byte) string {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	for _, f := range messageFields {
		var s string
		if raw, ok := doc[f]; ok && json.Unmarshal(raw, &s) == nil && strings.TrimSpace(s) != "" {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// escapeControls writes control characters other than tab and line feed
// as Go escapes, so text from the service cannot drive a terminal.
func escapeControls(s string) string {
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !isControl(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

func isControl(r rune) bool {
	return (r < 0x20 && r != '\t' && r != '\n') || (r >= 0x7f && r <= 0x9f)
}

// cutText cuts s to at most limit bytes, "…" included, at a character start.
func cutText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return runeCut(s, limit-len(fieldEllipsis)) + fieldEllipsis
}

// prefixReader passes a body through, keeping its first capturedBodyBytes.
type prefixReader struct {
	r      io.Reader
	prefix []byte
}

func (p *prefixReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if room := capturedBodyBytes - len(p.prefix); room > 0 && n > 0 {
		p.prefix = append(p.prefix, b[:min(n, room)]...)
	}
	return n, err
}
