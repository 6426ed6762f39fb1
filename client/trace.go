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

// Bounds of one trace: its records, its distinct body excerpts and the
// rest of its text.
const (
	maxTraceRequests     = 500
	maxTraceExcerptBytes = 32 << 10
	maxTraceTextBytes    = 128 << 10
	excerptNotKept       = "(not kept: this poll's body excerpts reached their bound)"
)

// Trace records what the requests of one poll did, for the debug views.
// Everything in it has been redacted.
type Trace struct {
	mu           sync.Mutex
	requests     []TraceRequest
	dropped      int
	excerpts     map[string]string // distinct excerpts share their bytes
	excerptBytes int
	textBytes    int
}

// TraceRequest is one request of a poll, or one pagination decision.
type TraceRequest struct {
	Start           time.Time
	Endpoint        Endpoint
	Method          string
	URL             string // redacted
	Status          int
	Bytes           int64 // read off the connection, compressed when gzip
	Duration        time.Duration
	Reason          Reason
	Error           string
	Page            int    // within a list walk, 0 outside lists
	Note            string // what the walk did after this page
	NoteFailed      bool   // the walk stopped here, failing the list
	BodyExcerpt     string // the start of the body or its JSON message
	ContentType     string
	Location        string // a redirect's, redacted
	WWWAuthenticate string
	Phases          Phases
	RetryAfter      string
	HoldOffUntil    time.Time // end of the hold-off started, if any
}

// Requests returns a copy of the recorded requests, in the order they
// finished, and how many were left out past the bound.
func (t *Trace) Requests() ([]TraceRequest, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TraceRequest(nil), t.requests...), t.dropped
}

// add keeps r, its strings cut, unless the trace is full: then r is
// counted as dropped, save the note of a failed walk.
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

// keepExcerpt returns the copy of s the trace keeps; t.mu is held.
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

// sensitiveParam matches query parameter names whose values are hidden.
var sensitiveParam = regexp.MustCompile(`(?i)key|token|secret|pass|auth|sig|session|credential`)

// RedactURL renders u for people: without user info, and with the values of
// credential-like query parameters replaced.
func RedactURL(u *url.URL) string {
	c := *u
	c.User = nil
	if c.RawQuery != "" {
		q, err := url.ParseQuery(c.RawQuery)
		redacted := err != nil // re-encoding drops what could not be read
		for name := range q {
			if sensitiveParam.MatchString(name) {
				q[name] = []string{"REDACTED"}
				redacted = true
			}
		}
		if redacted {
			c.RawQuery = q.Encode()
		}
	}
	return c.String()
}

// redactedError keeps the chain of err under a redacted message.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// Phases are the moments of one exchange from the start of the request,
// zero for a step that did not happen.
type Phases struct {
	DNS, Connect, TLS, FirstByte time.Duration
	Reused                       bool // over an idle connection
}

// phaseTimer records the phases of one exchange; its hooks may run on the
// transport's goroutines.
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
