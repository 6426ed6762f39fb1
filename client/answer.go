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
	"unicode/utf8"
)

// What came back from the service, for the trace only: when an alert
// fires, "unexpected status Unauthorized" says less than Django REST
// framework's {"detail": "Invalid token."}. None of it ever goes into an
// error, a log line or a metric, and all of it is redacted and bounded.

const (
	// maxExcerpt bounds a body excerpt, "…" included.
	maxExcerpt = 512
	// errorBodyBytes is how much of an error answer's body is read for its
	// excerpt, before and after decompression: small enough to cost
	// nothing, large enough for any error document worth showing and to
	// hold a key that straddles the excerpt's end, so it is cut out whole
	// before the cut.
	errorBodyBytes = 4 << 10
	// capturedBodyBytes is how much of a 2xx body is kept while it is
	// decoded, for the excerpt of one that turns out invalid.
	capturedBodyBytes = 2 * maxExcerpt
	// maxHeaderShown bounds a header value shown (Content-Type,
	// Retry-After); maxShown any other text kept from a request or an
	// answer: a URL, a redirect's Location, a note, an error.
	maxHeaderShown = 256
	maxShown       = 2 << 10
	// drainBytes is how much of a body is read after its answer is known,
	// so the connection can be reused; a body with more left than that is
	// not worth the wait.
	drainBytes = 4 << 10
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

// noteHeaders keeps the headers of resp worth showing: Content-Type always,
// Location for a redirect, Retry-After for an answer that is not 2xx, and
// WWW-Authenticate, which says why a 401 refused the key.
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

// shownLocation renders a redirect's Location as the service sent it,
// relative or not, redacted as trace URLs are: what a proxy or a login
// page wrote is what tells its story.
func (c *Client) shownLocation(resp *http.Response) string {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return ""
	}
	u, err := url.Parse(loc)
	if err != nil {
		// Shown as it came, it could carry credentials RedactURL would
		// have removed.
		return "(not a valid URL)"
	}
	return c.shown(RedactURL(u), maxShown)
}

// shown makes text from the service fit for a page: the key cut out,
// control characters escaped, and at most limit bytes.
func (c *Client) shown(s string, limit int) string {
	if s == "" {
		return ""
	}
	return cutText(escapeControls(c.redact.clean(strings.ToValidUTF8(s, "\uFFFD"))), limit)
}

// readErrorBody reads the start of an error answer's body, at most
// errorBodyBytes of it, decompressed when it is gzip. The bytes read are
// counted by wire. What cannot be read (a broken connection, a corrupt
// stream, an unknown coding) leaves what was read so far, possibly
// nothing: an excerpt is a courtesy, never a failure.
func readErrorBody(wire *limitedReader, h http.Header) []byte {
	wire.n = errorBodyBytes
	// LimitReader stops at the bound without the probe for more that
	// wire would make, which would read a byte it does not count.
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

// excerpt renders the start of a body for the trace: the value of a
// top-level "detail", "message" or "error" string when the body is a JSON
// object with one (Django REST framework's errors are {"detail": "…"}),
// else the body as text; with the key cut out before the text is cut to
// maxExcerpt bytes, so no part of it survives at the cut.
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

// messageFields are the members of a JSON error document that say what
// went wrong, in the order they are looked for.
var messageFields = []string{"detail", "message", "error"}

// jsonMessage returns the first non-empty string among the messageFields
// of a JSON object, "" when body is no such object.
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
// as Go escapes (\x1b, \u0085), so text from the service can neither
// drive a terminal nor break a page, and a person still sees what came.
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

// cutText cuts s to at most limit bytes, "…" included, at the start of a
// UTF-8 character.
func cutText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit - len(fieldEllipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fieldEllipsis
}

// prefixReader passes a body through, keeping a copy of its first
// capturedBodyBytes for the excerpt of a body that turns out invalid.
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
