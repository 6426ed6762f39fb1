package client

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/config"
	"github.com/prometheus/common/version"
)

// Transport carries requests with the settings of one module, over its connection pool.
type Transport struct {
	rt          http.RoundTripper
	redact      *secrets
	keyFile     *fileSecret   // the authorization's credentials_file
	headerFiles []*fileSecret // of http_headers
	pool        func() (http.RoundTripper, error)
}

// NewTransport validates an HTTP client configuration and builds a transport for Config.Transport.
func NewTransport(cfg config.HTTPClientConfig, userAgent string) (*Transport, error) {
	return newTransport(cfg, userAgent, 1) // one idle connection per host
}

func newTransport(cfg config.HTTPClientConfig, userAgent string, idle int) (*Transport, error) {
	if err := cmp.Or(cfg.Validate(), CheckFiles(&cfg)); err != nil {
		return nil, fmt.Errorf("http client config: %w", err)
	}
	a := cfg.Authorization
	if cfg.BasicAuth != nil || cfg.OAuth2 != nil || cfg.BearerToken != "" || cfg.BearerTokenFile != "" || a != nil && a.CredentialsRef != "" {
		return nil, errors.New("http client config: only an authorization with credentials or credentials_file is supported")
	}
	userAgent = cmp.Or(userAgent, "deployment_service_exporter/"+version.Version)
	t := &Transport{}
	tlsConfig, err := config.NewTLSConfig(&cfg.TLSConfig)
	if err != nil {
		return nil, fmt.Errorf("http client config: %w", err)
	}
	newRT := func(tlsConfig *tls.Config) (http.RoundTripper, error) {
		return roundTripper(&cfg, tlsConfig, userAgent, idle), nil
	}
	tc := cfg.TLSConfig
	files := config.TLSRoundTripperSettings{ // re-read, so that renewed certificates need no restart
		CA:   secretReader(config.Secret(tc.CA), tc.CAFile, maxCAFileBytes),
		Cert: secretReader(config.Secret(tc.Cert), tc.CertFile, maxKeyFileBytes),
		Key:  secretReader(tc.Key, tc.KeyFile, maxKeyFileBytes),
	}
	t.pool = func() (http.RoundTripper, error) { return config.NewTLSRoundTripper(tlsConfig, files, newRT) }
	if t.rt, err = t.pool(); err != nil {
		return nil, fmt.Errorf("http client config: %w", err)
	}
	t.findSecrets(&cfg)
	return t, nil
}

// roundTripper is an http.Transport with the headers of cfg on top, in prometheus/common's order.
func roundTripper(cfg *config.HTTPClientConfig, tlsConfig *tls.Config, userAgent string, idle int) http.RoundTripper {
	base := &http.Transport{
		Proxy:                  cfg.Proxy(),
		ProxyConnectHeader:     cfg.GetProxyConnectHeader(),
		TLSClientConfig:        tlsConfig.Clone(), // each pool's own: HTTP/2 setup writes to it
		DisableCompression:     true,              // the client decompresses, bounded
		MaxResponseHeaderBytes: 64 << 10,          // more is too_large
		MaxIdleConnsPerHost:    idle,
		IdleConnTimeout:        5 * time.Minute, // as prometheus/common's, above scrape intervals
		WriteBufferSize:        1 << 10,         // buffers live as long as their connection (docs/development.md)
		ReadBufferSize:         2 << 10,
		TLSHandshakeTimeout:    10 * time.Second,
		ForceAttemptHTTP2:      cfg.EnableHTTP2,
		DialContext:            dialStatusLine,
	}
	if cfg.EnableHTTP2 {
		base.HTTP2 = &http.HTTP2Config{SendPingTimeout: time.Minute}
	}
	var rt http.RoundTripper = base
	if a := cfg.Authorization; a != nil {
		rt = config.NewAuthorizationCredentialsRoundTripper(a.Type, secretReader(a.Credentials, a.CredentialsFile, maxKeyFileBytes), rt)
	}
	if cfg.HTTPHeaders != nil {
		rt = config.NewHeadersRoundTripper(cfg.HTTPHeaders, rt)
	}
	return config.NewUserAgentRoundTripper(userAgent, rt)
}

// secretReader reads a secret given inline or in a file of at most max bytes; nil for none.
func secretReader(inline config.Secret, file string, max int64) config.SecretReader {
	switch {
	case inline != "":
		return config.NewInlineSecret(string(inline))
	case file != "":
		return &fileSecret{path: file, max: max}
	}
	return nil
}

// checkKey fails when the key file or a header file holds no key to send.
func (t *Transport) checkKey() error {
	if t.keyFile != nil {
		if _, err := t.keyFile.key(); err != nil {
			return fmt.Errorf("%w: %w", ErrKeyUnavailable, err)
		}
	}
	for _, f := range t.headerFiles {
		if _, err := f.read(); err != nil {
			return fmt.Errorf("%w: cannot read the header file %s: %w", ErrKeyUnavailable, f.path, err)
		}
	}
	return nil
}

// WithOwnPool returns a transport with t's settings and secrets but a connection pool of its own.
func (t *Transport) WithOwnPool() (*Transport, error) {
	rt, err := t.pool()
	if err != nil {
		return nil, fmt.Errorf("http client config: %w", err)
	}
	own := *t
	own.rt = rt
	return &own, nil
}

// CloseIdle closes the connections of the transport's pool that carry no request.
func (t *Transport) CloseIdle() { (&http.Client{Transport: t.rt}).CloseIdleConnections() }

var dialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second} // http.DefaultTransport's

func dialStatusLine(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &statusLineConn{Conn: conn}, nil
}

// statusLineConn keeps the start of the latest answer read over a plain HTTP connection: when net/http
// refuses that answer's headers (a control character in a Location), its status is known from here alone.
type statusLineConn struct {
	net.Conn
	mu   sync.Mutex
	head []byte
}

func (c *statusLineConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.head = c.head[:0] // a new request: its answer comes next
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *statusLineConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	c.head = append(c.head, b[:min(n, 12-len(c.head))]...)
	c.mu.Unlock()
	return n, err
}

// redirectStatus returns the status of the latest answer if its status line is an HTTP/1 3xx one, else 0.
func (c *statusLineConn) redirectStatus() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if head := string(c.head); len(head) == 12 && strings.HasPrefix(head, "HTTP/1.") && head[8:10] == " 3" {
		code, _ := strconv.Atoi(head[9:])
		return code
	}
	return 0
}
