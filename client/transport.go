package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/config"
	"github.com/prometheus/common/version"
)

// Transport carries the requests of every Client built on it: each module
// of the configuration file has one, shared by its /probe targets, with
// its TLS settings, proxy, headers, key source and connection pool. It is
// an http.Transport built from prometheus/common's parts rather than the
// round tripper that package builds whole (docs/development.md says why).
type Transport struct {
	rt      http.RoundTripper
	redact  *secrets
	keyFile *keyFileCache
}

// maxResponseHeaderBytes bounds an answer's headers; more is too_large.
const maxResponseHeaderBytes = 64 << 10

// idleConnTimeout is how long an idle connection stays open: as long as
// prometheus/common keeps one, above the sane scrape intervals, so that a
// target's connection lasts from one scrape to the next.
const idleConnTimeout = 5 * time.Minute

// NewTransport validates an HTTP client configuration and builds the
// transport that Clients share through Config.Transport, keeping one idle
// connection per host. userAgent defaults to
// deployment_service_exporter/<version>. The only authorization it sends
// is one with credentials inline or in a file (the service's is Token);
// basic_auth, oauth2, bearer_token and credentials_ref are refused.
func NewTransport(cfg config.HTTPClientConfig, userAgent string) (*Transport, error) {
	return newTransport(cfg, userAgent, 1)
}

// newTransport is NewTransport keeping up to idle idle connections per
// host: a Client's own transport keeps as many as its concurrency, for
// its next poll.
func newTransport(cfg config.HTTPClientConfig, userAgent string, idle int) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("http client config: %w", err)
	}
	if err := CheckFiles(&cfg); err != nil {
		return nil, fmt.Errorf("http client config: %w", err)
	}
	a := cfg.Authorization
	if cfg.BasicAuth != nil || cfg.OAuth2 != nil || cfg.BearerToken != "" || cfg.BearerTokenFile != "" || a != nil && a.CredentialsRef != "" {
		return nil, errors.New("http client config: only an authorization with credentials or credentials_file is supported")
	}
	if userAgent == "" {
		userAgent = "deployment_service_exporter/" + version.Version
	}
	t := &Transport{}
	tlsConfig, err := config.NewTLSConfig(&cfg.TLSConfig)
	if err != nil {
		return nil, fmt.Errorf("http client config: %w", err)
	}
	newRT := func(tlsConfig *tls.Config) (http.RoundTripper, error) {
		return roundTripper(&cfg, tlsConfig, userAgent, idle), nil
	}
	if tc := cfg.TLSConfig; tc.CAFile == "" && tc.CertFile == "" && tc.KeyFile == "" {
		t.rt, _ = newRT(tlsConfig)
	} else {
		// Files are re-read on every request and the transport rebuilt
		// when one changed, so that renewed certificates need no restart.
		files := config.TLSRoundTripperSettings{
			CA:   secretReader(config.Secret(tc.CA), tc.CAFile, maxCAFileBytes),
			Cert: secretReader(config.Secret(tc.Cert), tc.CertFile, maxKeyFileBytes),
			Key:  secretReader(tc.Key, tc.KeyFile, maxKeyFileBytes),
		}
		if t.rt, err = config.NewTLSRoundTripper(tlsConfig, files, newRT); err != nil {
			return nil, fmt.Errorf("http client config: %w", err)
		}
	}
	t.redact, t.keyFile = secretsOf(&cfg)
	return t, nil
}

// roundTripper is an http.Transport keeping up to idle idle connections
// per host, with the headers on top: Authorization, http_headers,
// User-Agent, in prometheus/common's order.
func roundTripper(cfg *config.HTTPClientConfig, tlsConfig *tls.Config, userAgent string, idle int) http.RoundTripper {
	base := &http.Transport{
		Proxy:              cfg.Proxy(),
		ProxyConnectHeader: cfg.GetProxyConnectHeader(),
		TLSClientConfig:    tlsConfig,
		// The client asks for gzip itself, so that the size limit
		// applies to the decompressed bytes.
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		MaxIdleConnsPerHost:    idle,
		IdleConnTimeout:        idleConnTimeout,
		// Buffers live as long as their connection: a GET fits in 1 KiB,
		// and 2 KiB holds most answers' headers (docs/development.md).
		WriteBufferSize:       1 << 10,
		ReadBufferSize:        2 << 10,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		Protocols:             &http.Protocols{},
	}
	base.Protocols.SetHTTP1(true)
	if cfg.EnableHTTP2 {
		base.Protocols.SetHTTP2(true)
		base.HTTP2 = &http.HTTP2Config{SendPingTimeout: time.Minute}
	}
	var rt http.RoundTripper = base
	if a := cfg.Authorization; a != nil {
		rt = config.NewAuthorizationCredentialsRoundTripper(a.Type, secretReader(a.Credentials, a.CredentialsFile, maxKeyFileBytes), rt)
	}
	if cfg.HTTPHeaders != nil {
		rt = guardHeaderFiles(cfg.HTTPHeaders, config.NewHeadersRoundTripper(cfg.HTTPHeaders, rt))
	}
	return config.NewUserAgentRoundTripper(userAgent, rt)
}

// secretReader reads a secret given inline or in a file of at most max
// bytes; nil for none.
func secretReader(inline config.Secret, file string, max int64) config.SecretReader {
	switch {
	case inline != "":
		return config.NewInlineSecret(string(inline))
	case file != "":
		return fileSecret{path: file, max: max}
	}
	return nil
}

// lease is one Client's use of a Transport.
type lease struct {
	t      *Transport
	closed atomic.Bool
}

// release closes the idle connections of the transport, other Clients'
// included, and makes the Client's requests still in flight close theirs
// as they end. It is idempotent.
func (l *lease) release() {
	l.closed.Store(true)
	l.t.closeIdle()
}

func (t *Transport) closeIdle() {
	if c, ok := t.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// roundTrip sends req through the transport as one of the lease's
// requests.
func (t *Transport) roundTrip(l *lease, req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &leasedBody{ReadCloser: resp.Body, l: l}
	return resp, nil
}

// leasedBody closes its connection once read when its Client has closed:
// a body read to its end has put the connection back among the idle ones.
type leasedBody struct {
	io.ReadCloser
	l *lease
}

func (b *leasedBody) Close() error {
	err := b.ReadCloser.Close()
	if b.l.closed.Load() {
		b.l.t.closeIdle()
	}
	return err
}
