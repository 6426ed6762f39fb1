package client

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/config"
	"github.com/prometheus/common/version"
)

// Transport carries the requests of every Client built on it. Each module
// of the configuration file has one, shared by all its /probe targets:
// the TLS settings, the proxy, the headers and the key source are set up
// once, and the connection pool is common, so that a target costs about
// one idle connection instead of a transport of its own. It is safe for
// concurrent use.
//
// It is an http.Transport of our own, built from the HTTPClientConfig
// with prometheus/common's parts (its TLS configuration, proxy function,
// and the round trippers that add the Authorization header, http_headers
// and the User-Agent, and that reload CA, certificate and key files when
// they change), rather than the round tripper prometheus/common builds
// whole. That one keeps up to 1,000 idle connections per host, and wraps
// every connection in go-conntrack with an x/net/trace event log that
// holds room for 100 events: 8 KB a connection, 8.7 MB at 1,000 targets,
// more than their request metrics. Ours keeps at most one idle connection
// per target (as many as the Client's concurrency when the transport is
// its own), with buffers sized for what it sends and reads, and knows
// every connection through its dial function (see connTracker), which
// lets a Client's connections close when it does.
type Transport struct {
	rt      http.RoundTripper
	proxy   func(*http.Request) (*url.URL, error)
	redact  *secrets
	keyFile *keyFileCache
	conns   *connTracker
}

// maxResponseHeaderBytes bounds an answer's headers; more is too_large.
const maxResponseHeaderBytes = 64 << 10

// idleConnTimeout is how long an idle connection stays open: as long as
// prometheus/common keeps one, above the sane scrape intervals, so that a
// target's connection lasts from one scrape to the next.
const idleConnTimeout = 5 * time.Minute

// NewTransport validates an HTTP client configuration and builds the
// transport that Clients share through Config.Transport, keeping at most
// one idle connection per target. userAgent defaults to
// deployment_service_exporter/<version>. The only
// authorization it sends is an authorization of any type with credentials
// inline or in a file (the service's is Token); basic_auth, oauth2,
// bearer_token and credentials_ref are refused.
func NewTransport(cfg config.HTTPClientConfig, userAgent string) (*Transport, error) {
	return newTransport(cfg, userAgent, 1)
}

// newTransport is NewTransport keeping up to idle idle connections per
// pool: a Client's own transport keeps as many as its concurrency, so
// that the service behind /metrics, alone, finds them all on its next
// poll.
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
	t := &Transport{conns: newConnTracker(idle), proxy: cfg.Proxy()}
	tlsConfig, err := config.NewTLSConfig(&cfg.TLSConfig)
	if err != nil {
		return nil, fmt.Errorf("http client config: %w", err)
	}
	newRT := func(tlsConfig *tls.Config) (http.RoundTripper, error) {
		return t.roundTripper(&cfg, tlsConfig, userAgent), nil
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

// roundTripper is the transport with the headers on top: Authorization,
// http_headers, User-Agent, in prometheus/common's order.
func (t *Transport) roundTripper(cfg *config.HTTPClientConfig, tlsConfig *tls.Config, userAgent string) http.RoundTripper {
	base := &http.Transport{
		Proxy:              t.proxy,
		ProxyConnectHeader: cfg.GetProxyConnectHeader(),
		DialContext:        t.conns.dial,
		TLSClientConfig:    tlsConfig,
		// The client asks for gzip itself, so that the size limit
		// applies to the decompressed bytes.
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		MaxIdleConnsPerHost:    t.conns.idle,
		IdleConnTimeout:        idleConnTimeout,
		// Buffers live as long as their connection, idle ones included:
		// the defaults (4 KiB each) cost 8 KB a target. A GET with its
		// headers is well under 1 KiB; 2 KiB holds an answer's headers,
		// and bodies bypass the buffer, read in 32 KiB chunks.
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

// poolKey names the connections that requests to base can use: those
// Go's http.Transport pools together for it (see connectMethod.key in
// net/http). Without a proxy, that is the scheme and the address; behind
// one, the proxy and, except for http targets behind an http or https
// proxy (which share the proxy's connections), the target's address.
func (t *Transport) poolKey(base *url.URL) string {
	target := canonicalAddr(base)
	var proxy *url.URL
	if t.proxy != nil {
		// An error here is one for every request too; they fail without
		// a connection.
		proxy, _ = t.proxy(&http.Request{Method: http.MethodGet, URL: base, Header: http.Header{}})
	}
	if proxy == nil {
		return base.Scheme + " " + target
	}
	if (proxy.Scheme == "http" || proxy.Scheme == "https") && base.Scheme == "http" {
		target = ""
	}
	return proxy.String() + " " + base.Scheme + " " + target
}

// canonicalAddr is host:port of u, the port made explicit.
func canonicalAddr(u *url.URL) string {
	o := originOf(u)
	return net.JoinHostPort(o.host, o.port)
}

// errPoolClosed fails a connection that finished dialing after every
// client of its pool had closed, with no request waiting for it.
var errPoolClosed = errors.New("connection no longer needed: its clients have closed")

// connTracker knows every connection of a Transport and, for each pool
// (see poolKey), how many Clients use it and how many of their requests
// are in flight. When no request of a pool is in flight, every connection
// of that pool is idle: the tracker then closes all but the most recently
// used one (idle of them), so a target keeps at most one idle connection
// whatever the concurrency of its polls, and, once the pool's last Client
// has closed, that one too. A Client dropped while a poll of its own is in flight
// thus closes its connections when that poll's last request ends.
//
// Go's transport learns of a closed connection from its read loop, which
// takes it out of the idle pool. A request that picked it up just before
// is a GET on a reused connection: the transport retries it on another.
type connTracker struct {
	dialer net.Dialer
	// idle is the most idle connections kept per pool.
	idle int
	// seq orders the reads of all connections, to tell the most recently
	// used one of a pool.
	seq atomic.Uint64

	// dialedHook, set by tests only, runs when a dial has completed,
	// before the connection is tracked.
	dialedHook func()

	mu    sync.Mutex
	pools map[string]*connPool
}

type connPool struct {
	clients, inflight int
	conns             map[*trackedConn]struct{}
}

func newConnTracker(idle int) *connTracker {
	return &connTracker{idle: max(idle, 1), pools: make(map[string]*connPool)}
}

// leaseKey carries a request's lease in its context, down to dial.
type leaseKey struct{}

// lease is one Client's use of a pool.
type lease struct {
	t        *connTracker
	key      string
	released atomic.Bool
}

// lease registers a Client of the pool key.
func (t *connTracker) lease(key string) *lease {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pool(key).clients++
	return &lease{t: t, key: key}
}

// pool returns the pool of key, made when missing; t.mu is held.
func (t *connTracker) pool(key string) *connPool {
	p, ok := t.pools[key]
	if !ok {
		p = &connPool{conns: make(map[*trackedConn]struct{})}
		t.pools[key] = p
	}
	return p
}

// begin counts a request in flight.
func (l *lease) begin() {
	l.t.mu.Lock()
	defer l.t.mu.Unlock()
	l.t.pool(l.key).inflight++
}

// end counts a request done, and trims the pool once none is in flight.
func (l *lease) end() { l.drop(func(p *connPool) { p.inflight-- }) }

// release ends the Client's use of the pool, closing its connections if
// it was the last Client and nothing is in flight. It is idempotent.
func (l *lease) release() {
	if l.released.Swap(true) {
		return
	}
	l.drop(func(p *connPool) { p.clients-- })
}

// drop lowers a count of the pool with less, then closes the connections
// that trim takes out, outside the lock.
func (l *lease) drop(less func(*connPool)) {
	l.t.mu.Lock()
	p := l.t.pool(l.key)
	less(p)
	victims := l.t.trim(l.key, p)
	l.t.mu.Unlock()
	closeConns(victims)
}

// trim takes out of p the connections to close: none while a request is
// in flight, all when no Client is left, else all but the t.idle most
// recently used. It drops a pool left empty. t.mu is held.
func (t *connTracker) trim(key string, p *connPool) []*trackedConn {
	if p.inflight > 0 {
		return nil
	}
	keep := 0
	if p.clients > 0 {
		keep = t.idle
	}
	var victims []*trackedConn
	if len(p.conns) > keep {
		conns := slices.Collect(maps.Keys(p.conns))
		slices.SortFunc(conns, func(a, b *trackedConn) int { return cmp.Compare(b.used.Load(), a.used.Load()) })
		victims = conns[keep:]
		for _, c := range victims {
			delete(p.conns, c)
		}
	}
	if p.clients == 0 && len(p.conns) == 0 {
		delete(t.pools, key)
	}
	return victims
}

func closeConns(cs []*trackedConn) {
	for _, c := range cs {
		_ = c.Conn.Close()
	}
}

// dial is the transport's dial function: it dials as net.Dialer does and
// tracks the connection under the pool of the request that asked for it.
func (t *connTracker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := t.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if t.dialedHook != nil {
		t.dialedHook()
	}
	l, _ := ctx.Value(leaseKey{}).(*lease)
	key := ""
	if l != nil {
		key = l.key
	}
	tc := &trackedConn{Conn: c, t: t, key: key}
	tc.used.Store(t.seq.Add(1))
	t.mu.Lock()
	p := t.pool(key)
	if l != nil && p.inflight == 0 && (p.clients == 0 || len(p.conns) >= t.idle) {
		// Dialed for a request that has since ended (Go's transport
		// finishes a dial that another connection's release made
		// needless, and pools the result), and no request waits for it:
		// it would only be an idle connection too many, or one of a pool
		// whose Clients have all closed.
		t.trim(key, p)
		t.mu.Unlock()
		_ = c.Close()
		return nil, errPoolClosed
	}
	p.conns[tc] = struct{}{}
	t.mu.Unlock()
	return tc, nil
}

// forget drops a connection that the transport closed.
func (t *connTracker) forget(c *trackedConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.pools[c.key]; ok {
		delete(p.conns, c)
		if p.clients == 0 && p.inflight == 0 && len(p.conns) == 0 {
			delete(t.pools, c.key)
		}
	}
}

// trackedConn is a connection known to a connTracker.
type trackedConn struct {
	net.Conn
	t    *connTracker
	key  string
	used atomic.Uint64
	once sync.Once
}

func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.used.Store(c.t.seq.Add(1))
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.t.forget(c) })
	return c.Conn.Close()
}

// trackedBody ends its request's lease when closed: the response has been
// read, and its connection is back in the pool.
type trackedBody struct {
	io.ReadCloser
	once sync.Once
	l    *lease
}

func (b *trackedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.l.end)
	return err
}

// roundTrip sends req through the transport as one of the lease's
// requests.
func (t *Transport) roundTrip(l *lease, req *http.Request) (*http.Response, error) {
	l.begin()
	resp, err := t.rt.RoundTrip(req.WithContext(context.WithValue(req.Context(), leaseKey{}, l)))
	if err != nil {
		l.end()
		return nil, err
	}
	resp.Body = &trackedBody{ReadCloser: resp.Body, l: l}
	return resp, nil
}
