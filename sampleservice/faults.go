package sampleservice

import (
	"fmt"
	"time"
)

// Fault makes an endpoint misbehave, to test how clients cope with a broken
// or hostile service. The zero Fault means normal behaviour. When several
// fields are set, RedirectTo wins over Body and Status, which win over
// GzipBomb, which wins over OversizeBytes; Delay, RetryAfter and Truncate
// combine with any of them.
type Fault struct {
	// Status answers with this HTTP status and a small JSON error body; a
	// 401 as a refused key is answered, with WWW-Authenticate: Token.
	Status int
	// RetryAfter is sent as the Retry-After header ("30" or an HTTP date),
	// typically with Status 429 or 503.
	RetryAfter string
	// Delay is slept before answering; it ends early when the client gives
	// up, so tests of timeouts do not leak handlers.
	Delay time.Duration
	// Body is served verbatim instead of the normal body (status 200 unless
	// Status is set): malformed JSON, wrong shapes, HTML error pages.
	Body string
	// Truncate sends the first half of the body while declaring its full
	// Content-Length, then drops the connection: an unexpected EOF.
	Truncate bool
	// OversizeBytes serves a valid JSON body of at least this many bytes,
	// streamed: lists become a plain array of generated entries, objects
	// gain a long "padding" string.
	OversizeBytes int64
	// GzipBomb answers, whatever the client asked, a gzip stream that
	// inflates to at least this many bytes of valid JSON (an empty list or
	// object padded with spaces), about a thousand times its compressed
	// size: a compression bomb. It is streamed from a few precomputed gzip
	// members, so gigabytes cost the service nothing.
	GzipBomb int64
	// NextURL replaces the next link (the envelope's "next", or the Link
	// header's rel="next") with this URL, on every page including the
	// last: a foreign origin, or a loop.
	NextURL string
	// LoopNext points the last page's next link back at page 1.
	LoopNext bool
	// RedirectTo answers 302 Found with this Location (absolute, possibly
	// another origin, or a relative path).
	RedirectTo string
	// OnPage restricts the whole fault to one page number of a list, so that
	// e.g. only page 2 fails; 0 applies it to every request. Answers without
	// pages (plain arrays, root, detail views) count as page 1.
	OnPage int
}

// activeOn reports whether f applies to the given page.
func (f Fault) activeOn(page int64) bool {
	return f != Fault{} && (f.OnPage <= 0 || int64(f.OnPage) == page)
}

// SetFault makes endpoint (one of the Endpoint constants) misbehave as f
// until changed; the zero Fault restores normal behaviour. An unknown
// endpoint panics, since a typo would otherwise silently test nothing.
func (s *Service) SetFault(endpoint string, f Fault) {
	switch endpoint {
	case EndpointRoot, EndpointProjects, EndpointLocations, EndpointLocationDetail:
	default:
		panic(fmt.Sprintf("sampleservice: unknown endpoint %q", endpoint))
	}
	s.faultsMu.Lock()
	defer s.faultsMu.Unlock()
	if f == (Fault{}) {
		delete(s.faults, endpoint)
	} else {
		s.faults[endpoint] = f
	}
}

// SetDetailFault makes the detail view of one location id misbehave as f,
// overriding the endpoint-wide location_detail fault for that id, so that
// one location can be down while others are up. The zero Fault removes the
// override.
func (s *Service) SetDetailFault(id int, f Fault) {
	s.faultsMu.Lock()
	defer s.faultsMu.Unlock()
	if f == (Fault{}) {
		delete(s.detailFaults, int64(id))
	} else {
		s.detailFaults[int64(id)] = f
	}
}

// ClearFaults restores normal behaviour everywhere.
func (s *Service) ClearFaults() {
	s.faultsMu.Lock()
	defer s.faultsMu.Unlock()
	s.faults = make(map[string]Fault)
	s.detailFaults = make(map[int64]Fault)
}

// fault returns the fault in force for a request.
func (s *Service) fault(endpoint string, id int64) Fault {
	s.faultsMu.RLock()
	defer s.faultsMu.RUnlock()
	if endpoint == EndpointLocationDetail {
		if f, ok := s.detailFaults[id]; ok {
			return f
		}
	}
	return s.faults[endpoint]
}
