package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
)

// Reason classifies why a request failed: the contract's `reason` label values.
type Reason string

const (
	ReasonTimeout     Reason = "timeout"
	ReasonNetwork     Reason = "network"
	ReasonHTTPStatus  Reason = "http_status"
	ReasonInvalidBody Reason = "invalid_body"
	ReasonTooLarge    Reason = "too_large"
	ReasonPagination  Reason = "pagination"
)

var Reasons = []Reason{ReasonTimeout, ReasonNetwork, ReasonHTTPStatus, ReasonInvalidBody, ReasonTooLarge, ReasonPagination}

// Endpoint names an API view read: the contract's `endpoint` label values.
type Endpoint string

const (
	EndpointRoot           Endpoint = "root"
	EndpointProjects       Endpoint = "projects"
	EndpointLocations      Endpoint = "locations"
	EndpointLocationDetail Endpoint = "location_detail"
)

var Endpoints = []Endpoint{EndpointRoot, EndpointProjects, EndpointLocations, EndpointLocationDetail}

var (
	// ErrHeldOff is wrapped by errors of requests not sent during a hold-off.
	ErrHeldOff = errors.New("holding off after the service asked to retry later")
	// ErrKeyUnavailable is wrapped by the error of a request not sent for want of a usable key or header file.
	ErrKeyUnavailable = errors.New("the API key is unavailable")
	// ErrURLCredentials is the error of a base URL with a user or password in it.
	ErrURLCredentials = errors.New("URL must not carry credentials")
	errTooLarge       = errors.New("response body exceeds the size limit")
	errForeignOrigin  = errors.New("refusing to send a request to another origin")
	// errInvalidBody is wrapped by every error about a body not of the expected JSON shape.
	errInvalidBody = errors.New("invalid body")
	errBadLink     = errors.New(`not of the RFC 8288 form <URL>; rel="next"`)
)

// Error describes a failed request, never with the key, headers or body.
type Error struct {
	Endpoint Endpoint
	Reason   Reason
	Status   int // 0 when no response came
	Err      error
}

func (e *Error) Error() string {
	what := cmp.Or(string(e.Reason), "not sent")
	if e.Status != 0 {
		what += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	return fmt.Sprintf("%s: %s: %v", e.Endpoint, what, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// msgError keeps the chain of err under another message.
type msgError struct {
	msg string
	err error
}

func (e *msgError) Error() string { return e.msg }
func (e *msgError) Unwrap() error { return e.err }

// ReasonOf returns the failure reason of err, "" when it has none.
func ReasonOf(err error) Reason {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Reason
	}
	return ""
}

func classify(ctx context.Context, err error) Reason {
	var ne net.Error
	switch {
	case errors.Is(err, errInvalidBody):
		return ReasonInvalidBody
	case errors.Is(err, errTooLarge), strings.Contains(err.Error(), "server response headers exceeded"),
		strings.Contains(err.Error(), "response header list larger than advertised limit"): // over MaxResponseHeaderBytes
		return ReasonTooLarge
	case errors.Is(err, errForeignOrigin):
		return ReasonPagination
	case ctx.Err() != nil, errors.Is(err, context.Canceled), errors.As(err, &ne) && ne.Timeout(): // DeadlineExceeded too
		return ReasonTimeout
	}
	return ReasonNetwork
}

const (
	CauseConnectionRefused = "connection_refused"
	CauseNameNotFound      = "name_not_found"
	CauseTLS               = "tls"
	CauseConnectionReset   = "connection_reset"
	CauseTimeout           = "timeout"
	CauseOther             = "other"
)

// CauseOf names the cause of a network or timeout failure, "" for other failures.
func CauseOf(err error) string {
	var dnsErr *net.DNSError
	switch r := ReasonOf(err); {
	case r == ReasonTimeout:
		return CauseTimeout
	case r != ReasonNetwork:
		return ""
	case errors.Is(err, syscall.ECONNREFUSED):
		return CauseConnectionRefused
	case errors.As(err, &dnsErr):
		return CauseNameNotFound
	case strings.Contains(err.Error(), "tls: "): // every error of crypto/tls says so
		return CauseTLS
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return CauseConnectionReset
	}
	return CauseOther
}
