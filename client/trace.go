package client

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"
)

const (
	maxTraceRequests     = 500
	maxTraceExcerptBytes = 32 << 10  // the distinct body excerpts of one trace
	maxTraceTextBytes    = 128 << 10 // the rest of its text
	maxExcerpt           = 512       // one body excerpt, "…" included
	maxHeaderShown       = 256
	maxShown             = 2 << 10 // a URL, a Location, a note, an error
	drainBytes           = 4 << 10 // read after the answer, so the connection is reused
	excerptNotKept       = "(not kept: this poll's body excerpts reached their bound)"
)

// Trace records what the requests of one poll did, redacted, for the debug views.
type Trace struct {
	mu           sync.Mutex
	requests     []TraceRequest
	dropped      int
	excerpts     map[string]string
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
	Phases          Phases // moments from Start, zero for a step not taken
	RetryAfter      string
	HoldOffUntil    time.Time // end of the hold-off started, if any
}

type Phases struct {
	DNS, Connect, TLS, FirstByte time.Duration
	Reused                       bool // over an idle connection
}

// Requests returns the requests kept, in the order they finished, and how many were not.
func (t *Trace) Requests() (kept []TraceRequest, dropped int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TraceRequest(nil), t.requests...), t.dropped
}

// add keeps r, its strings cut, unless the trace is full; the note of a failed walk is always kept.
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
	switch kept, ok := t.excerpts[r.BodyExcerpt]; {
	case ok || r.BodyExcerpt == "":
		r.BodyExcerpt = kept // equal excerpts share their bytes
	case t.excerptBytes+len(r.BodyExcerpt) > maxTraceExcerptBytes:
		r.BodyExcerpt = excerptNotKept
	default:
		if t.excerpts == nil {
			t.excerpts = make(map[string]string)
		}
		t.excerpts[r.BodyExcerpt] = r.BodyExcerpt
		t.excerptBytes += len(r.BodyExcerpt)
	}
	t.requests = append(t.requests, r)
}

type traceKey struct{}

// WithTrace returns a context under which the client records every request into t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// traceFrom returns the trace of ctx, or a new one to be dropped: every poll is traced.
func traceFrom(ctx context.Context) *Trace {
	if t, _ := ctx.Value(traceKey{}).(*Trace); t != nil {
		return t
	}
	return &Trace{}
}

// shown makes text from the service fit for a page: redacted, cut, control characters but the line feed replaced.
func (c *Client) shown(s string, limit int) string {
	return cutText(printable(c.redact.clean(strings.ToValidUTF8(s, "\uFFFD"))), limit)
}

// excerpt renders a body's first "detail", "message" or "error" string, or else its text, redacted before it is cut.
func (c *Client) excerpt(body []byte) string {
	var doc map[string]any
	_ = json.Unmarshal(body, &doc)
	for _, f := range []string{"detail", "message", "error"} {
		if s, _ := doc[f].(string); strings.TrimSpace(s) != "" {
			return c.shown(strings.TrimSpace(s), maxExcerpt)
		}
	}
	return c.shown(strings.TrimSpace(string(body)), maxExcerpt)
}

// cutText cuts s to at most limit bytes, "…" included, at a character start.
func cutText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return runeCut(s, limit-len(fieldEllipsis)) + fieldEllipsis
}

// prefix keeps the first 2*maxExcerpt bytes written to it.
type prefix []byte

func (p *prefix) Write(b []byte) (int, error) {
	*p = append(*p, b[:min(len(b), max(0, 2*maxExcerpt-len(*p)))]...)
	return len(b), nil
}
