package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"

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
// It wraps prometheus/common's round tripper rather than an http.Transport
// of our own making, so that http_client_config means what it means
// everywhere in the Prometheus ecosystem, with no copy of that code to
// keep in step: CA, certificate and key files re-read when they change,
// proxy_url, proxy_from_environment, no_proxy and proxy_connect_header,
// http_headers, enable_http2, and the credentials file read on every
// request. What it does not let us set, the idle connections kept per host
// (up to 1,000, for five minutes), the connection tracker enforces through
// the dial function it does let us give: see connTracker.
type Transport struct {
	rt      http.RoundTripper
	proxy   func(*http.Request) (*url.URL, error)
	redact  redactor
	keyFile *keyFileCache
	conns   *connTracker
}

// NewTransport validates an HTTP client configuration and builds the
// transport that Clients share through Config.Transport. userAgent
// defaults to deployment_service_exporter/<version>.
func NewTransport(cfg config.HTTPClientConfig, userAgent string) (*Transport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("http client config: %w", err)
	}
	if userAgent == "" {
		userAgent = "deployment_service_exporter/" + version.Version
	}
	t := &Transport{conns: newConnTracker(), proxy: cfg.Proxy()}
	rt, err := config.NewRoundTripperFromConfig(cfg, "deployment_service",
		config.WithUserAgent(userAgent), config.WithDialContextFunc(t.conns.dial))
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	t.rt = rt
	t.redact, t.keyFile = keyLookup(cfg.Authorization)
	return t, nil
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
// used one, so a target keeps at most one idle connection whatever the
// concurrency of its polls, and, once the pool's last Client has closed,
// that one too. A Client dropped while a poll of its own is in flight
// thus closes its connections when that poll's last request ends.
//
// Go's transport learns of a closed connection from its read loop, which
// takes it out of the idle pool. A request that picked it up just before
// is a GET on a reused connection: the transport retries it on another.
type connTracker struct {
	dialer net.Dialer
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

func newConnTracker() *connTracker {
	return &connTracker{pools: make(map[string]*connPool)}
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
func (l *lease) end() {
	l.t.mu.Lock()
	p := l.t.pool(l.key)
	p.inflight--
	victims := l.t.trim(l.key, p)
	l.t.mu.Unlock()
	closeConns(victims)
}

// release ends the Client's use of the pool, closing its connections if
// it was the last Client and nothing is in flight. It is idempotent.
func (l *lease) release() {
	if l.released.Swap(true) {
		return
	}
	l.t.mu.Lock()
	p := l.t.pool(l.key)
	p.clients--
	victims := l.t.trim(l.key, p)
	l.t.mu.Unlock()
	closeConns(victims)
}

// trim takes out of p the connections to close: none while a request is
// in flight, all when no Client is left, else all but the most recently
// used. It drops a pool left empty. t.mu is held.
func (t *connTracker) trim(key string, p *connPool) []*trackedConn {
	if p.inflight > 0 {
		return nil
	}
	var keep *trackedConn
	if p.clients > 0 {
		for c := range p.conns {
			if keep == nil || c.used.Load() > keep.used.Load() {
				keep = c
			}
		}
	}
	var victims []*trackedConn
	for c := range p.conns {
		if c != keep {
			victims = append(victims, c)
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
	if l != nil && p.inflight == 0 && (p.clients == 0 || len(p.conns) > 0) {
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
