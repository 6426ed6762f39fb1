package client

import (
	"context"
	"crypto/tls"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"sync"
	"time"
)

// maxTraceRequests bounds a trace, so a poll with a large detail subset
// cannot hold on to unbounded memory through the recent-polls page.
const maxTraceRequests = 500

// maxTraceExcerptBytes bounds the body excerpts of one trace, counting
// each distinct excerpt once: 500 detail views failing with 512-byte
// bodies would otherwise keep 250 KiB per poll, 25 MB over the recent
// polls. Identical excerpts ("Not found." from many detail views) share
// their bytes and cost nothing more.
const maxTraceExcerptBytes = 32 << 10

// excerptNotKept stands for an excerpt past maxTraceExcerptBytes.
const excerptNotKept = "(not kept: this poll's body excerpts reached their bound)"

// maxTraceTextBytes bounds the rest of a trace's text (URLs, notes, errors,
// headers), each string of which is cut to maxShown bytes: a service that
// names 16 KiB next links then costs a poll no more than any other.
const maxTraceTextBytes = 128 << 10

// Trace records what the requests of one poll did, for the debug views.
// Everything in it has passed through redaction: no secret, no
// Authorization value, no credentials in URLs.
type Trace struct {
	mu       sync.Mutex
	requests []TraceRequest
	dropped  int
	// excerpts holds each distinct body excerpt kept, excerptBytes their
	// size.
	excerpts     map[string]string
	excerptBytes int
	textBytes    int
}

// TraceRequest is one request of a poll, or one pagination decision.
type TraceRequest struct {
	Start    time.Time
	Endpoint Endpoint
	Method   string
	// URL is redacted: no user info, and the values of query parameters
	// that look like credentials replaced.
	URL    string
	Status int
	// Bytes counts the body bytes read off the connection: compressed
	// ones when the answer was gzip, so a refused gzip bomb shows how
	// little of it was read.
	Bytes    int64
	Duration time.Duration
	Reason   Reason
	Error    string
	// Page is the page number within a list walk, 0 outside lists.
	Page int
	// Note tells what the walk did after this page.
	Note string
	// BodyExcerpt is the start of the response body, or its JSON detail,
	// message or error field, with the key cut out; empty when there was
	// no body or it was not kept.
	BodyExcerpt string
	// ContentType is the response's Content-Type header.
	ContentType string
	// Location is a redirect's Location header as sent, redacted as URL
	// is.
	Location string
	// WWWAuthenticate is the WWW-Authenticate header of an answer that is
	// not 2xx: a 401's says which scheme and why.
	WWWAuthenticate string
	// NoteFailed tells that the walk stopped at this note, failing the
	// list.
	NoteFailed bool
	// Phases are the times from the request's start to each step of the
	// exchange; zero for a step that did not happen (a reused connection
	// needs no DNS, connect or TLS).
	Phases Phases
	// RetryAfter is the Retry-After header as the service sent it, and
	// HoldOffUntil the end of the hold-off it started; zero when none.
	RetryAfter   string
	HoldOffUntil time.Time
}

// Requests returns a copy of the recorded requests, in the order they
// finished, and how many were left out past the bound.
func (t *Trace) Requests() ([]TraceRequest, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TraceRequest(nil), t.requests...), t.dropped
}

// add keeps r, its strings cut to maxShown bytes, unless the trace holds
// maxTraceRequests records or maxTraceTextBytes of their strings already:
// then r is counted as dropped, save the note of a failed walk, which
// says why the list failed.
func (t *Trace) add(r TraceRequest) {
	t.mu.Lock()
	defer t.mu.Unlock()
	size := 0
	for _, s := range [...]*string{&r.URL, &r.Error, &r.Note, &r.ContentType, &r.Location, &r.WWWAuthenticate, &r.RetryAfter} {
		*s = cutText(*s, maxShown)
		size += len(*s)
	}
	if len(t.requests) >= maxTraceRequests || t.textBytes+size > maxTraceTextBytes && !r.NoteFailed {
		t.dropped++
		return
	}
	t.textBytes += size
	if r.BodyExcerpt != "" {
		r.BodyExcerpt = t.keepExcerpt(r.BodyExcerpt)
	}
	t.requests = append(t.requests, r)
}

// keepExcerpt returns the copy of s the trace keeps: one shared with an
// identical excerpt, or excerptNotKept past the bound; t.mu is held.
func (t *Trace) keepExcerpt(s string) string {
	if kept, ok := t.excerpts[s]; ok {
		return kept
	}
	if t.excerptBytes+len(s) > maxTraceExcerptBytes {
		return excerptNotKept
	}
	if t.excerpts == nil {
		t.excerpts = make(map[string]string)
	}
	t.excerpts[s] = s
	t.excerptBytes += len(s)
	return s
}

type traceKey struct{}

// WithTrace returns a context under which the client records every
// request into t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

func traceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// sensitiveParam matches query parameter names whose values are never
// shown.
var sensitiveParam = regexp.MustCompile(`(?i)key|token|secret|pass|auth|sig|session|credential`)

// RedactURL renders u for people: without user info, and with the values of
// credential-like query parameters replaced.
func RedactURL(u *url.URL) string {
	c := *u
	c.User = nil
	if c.RawQuery != "" {
		q, err := url.ParseQuery(c.RawQuery)
		// Pairs the parser cannot read (a ";", a bad escape) are dropped
		// by re-encoding, as they could hide a credential.
		redacted := err != nil
		for name := range q {
			if sensitiveParam.MatchString(name) {
				q[name] = []string{"REDACTED"}
				redacted = true
			}
		}
		// A query with nothing to hide stays as it was written.
		if redacted {
			c.RawQuery = q.Encode()
		}
	}
	return c.String()
}

// redactedError keeps the chain of err for errors.Is and errors.As while its
// message has the key removed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Phases are the moments of one exchange, each measured from the start of
// the request: what blackbox_exporter's debug output calls phases.
type Phases struct {
	DNS, Connect, TLS, FirstByte time.Duration
	// Reused tells that the request went over an idle connection.
	Reused bool
}

// phaseTimer records the phases of one exchange through httptrace. Its
// hooks may run on the transport's goroutines, hence the lock.
type phaseTimer struct {
	mu     sync.Mutex
	start  time.Time
	phases Phases
}

func (p *phaseTimer) mark(d *time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if *d == 0 && !p.start.IsZero() {
		*d = time.Since(p.start)
	}
}

func (p *phaseTimer) clientTrace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		DNSDone:              func(httptrace.DNSDoneInfo) { p.mark(&p.phases.DNS) },
		ConnectDone:          func(string, string, error) { p.mark(&p.phases.Connect) },
		TLSHandshakeDone:     func(tls.ConnectionState, error) { p.mark(&p.phases.TLS) },
		GotFirstResponseByte: func() { p.mark(&p.phases.FirstByte) },
		GotConn: func(info httptrace.GotConnInfo) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.phases.Reused = info.Reused
		},
	}
}

func (p *phaseTimer) result() Phases {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.phases
}
