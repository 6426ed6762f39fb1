package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestCauseOf(t *testing.T) {
	network := func(err error) error { return &Error{Endpoint: EndpointRoot, Reason: ReasonNetwork, Err: err} }
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"connection refused", network(fmt.Errorf("get: %w", refused)), CauseConnectionRefused},
		{"name not found", network(&net.DNSError{Err: "no such host", Name: "deploy.invalid", IsNotFound: true}), CauseNameNotFound},
		{"tls certificate", network(&tls.CertificateVerificationError{Err: errors.New("unknown authority")}), CauseTLS},
		{"tls record", network(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), CauseTLS},
		{"reset", network(io.ErrUnexpectedEOF), CauseConnectionReset},
		{"other network", network(errors.New("something odd")), CauseOther},
		{"timeout", &Error{Reason: ReasonTimeout, Err: errors.New("deadline")}, CauseTimeout},
		{"http status", &Error{Reason: ReasonHTTPStatus, Status: 500, Err: errors.New("500")}, ""},
		{"no reason", errors.New("plain"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CauseOf(tc.err); got != tc.want {
				t.Errorf("CauseOf(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}
