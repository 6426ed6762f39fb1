package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Reason classifies why a request failed. The values are the contract's
// `reason` label values, so they must never change.
type Reason string

// The failure reasons of the contract.
const (
	ReasonTimeout     Reason = "timeout"
	ReasonNetwork     Reason = "network"
	ReasonHTTPStatus  Reason = "http_status"
	ReasonInvalidBody Reason = "invalid_body"
	ReasonTooLarge    Reason = "too_large"
	ReasonPagination  Reason = "pagination"
)

// Reasons lists every failure reason, so that counters can be exported at
// zero before the first failure.
var Reasons = []Reason{
	ReasonTimeout, ReasonNetwork, ReasonHTTPStatus,
	ReasonInvalidBody, ReasonTooLarge, ReasonPagination,
}

// Endpoint names one of the API views the client reads. The values are the
// contract's `endpoint` label values.
type Endpoint string

// The endpoints of the contract.
const (
	EndpointRoot           Endpoint = "root"
	EndpointProjects       Endpoint = "projects"
	EndpointLocations      Endpoint = "locations"
	EndpointLocationDetail Endpoint = "location_detail"
)

// Endpoints lists every endpoint in a stable order.
var Endpoints = []Endpoint{EndpointRoot, EndpointProjects, EndpointLocations, EndpointLocationDetail}

// ErrHeldOff is wrapped by errors of requests that were not sent because
// the service asked the exporter to back off (429 or 503 with Retry-After).
var ErrHeldOff = errors.New("holding off after the service asked to retry later")

// errTooLarge is returned by the body reader once the body passes the limit.
var errTooLarge = errors.New("response body exceeds the size limit")

// Error describes a failed request. It never carries the key, headers or
// the body: only the endpoint, a classification and the HTTP status.
type Error struct {
	Endpoint Endpoint
	Reason   Reason
	// Status is the HTTP status of the response, 0 when none came.
	Status int
	// RetryAfter is how long the service asked the exporter to wait, taken
	// from the Retry-After header of a 429 or 503; 0 when it asked nothing.
	RetryAfter time.Duration
	Err        error
}

// Error implements error: the endpoint, the reason and the status, then
// the cause.
func (e *Error) Error() string {
	what := string(e.Reason)
	if what == "" {
		what = "not sent"
	}
	if e.Status != 0 {
		return fmt.Sprintf("%s: %s (HTTP %d): %v", e.Endpoint, what, e.Status, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", e.Endpoint, what, e.Err)
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the failure reason of err, or "" when err is nil or not
// a request failure (such as a hold-off).
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// classifyTransport turns an error of http.Client.Do or of reading a body
// into a reason. Deadlines and cancellations are timeouts: the poll ran out
// of time, whether its own or Prometheus'.
func classifyTransport(ctx context.Context, err error) Reason {
	switch {
	case errors.Is(err, errTooLarge), headersTooLarge(err):
		return ReasonTooLarge
	case errors.Is(err, errForeignOrigin):
		return ReasonPagination
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return ReasonTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ReasonTimeout
	}
	return ReasonNetwork
}

// headersTooLarge tells whether err is net/http's for an answer whose
// headers pass the transport's MaxResponseHeaderBytes, which it does not
// export: HTTP/1's message, or HTTP/2's.
func headersTooLarge(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "server response headers exceeded") ||
		strings.Contains(msg, "response header list larger than advertised limit")
}

// maxRetryAfter bounds a hold-off, so a wrong header cannot silence the
// exporter for days.
const maxRetryAfter = 10 * time.Minute

// parseRetryAfter reads a Retry-After header in either of its forms:
// delay-seconds or an HTTP date. It returns 0 for an absent or broken header.
func parseRetryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	var d time.Duration
	if isDigits(h) {
		secs, err := strconv.ParseInt(h, 10, 64)
		if err != nil {
			// Too many digits for an int64: far beyond the bound anyway.
			return maxRetryAfter
		}
		if secs <= 0 {
			return 0
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
