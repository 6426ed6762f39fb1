// Package client reads the deployment service's JSON API: the root, the lists and the detail views.
package client

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/config"
	"golang.org/x/time/rate"
)

// Defaults for the limits of Config, used where a field is left at zero.
const (
	DefaultConcurrency      = 4
	DefaultMaxPages         = 1000
	DefaultMaxResponseBytes = 64 << 20
)

// Observer is told about every request sent (status 0 without a response) and every failed request.
type Observer interface {
	ObserveRequest(endpoint Endpoint, status int, d time.Duration)
	ObserveError(endpoint Endpoint, reason Reason)
}

// Config is everything a Client needs; zero limits take the defaults above.
type Config struct {
	BaseURL          *url.URL // may have a path prefix
	HTTPClientConfig config.HTTPClientConfig
	UserAgent        string     // defaults to deployment_service_exporter/<version>
	Transport        *Transport // shared by the Clients of one module, from NewTransport
	Concurrency      int        // requests in flight at once
	MaxPages         int        // pages read for one list
	MaxResponseBytes int64      // largest body, counted after decompression
	RateLimit        float64    // requests per second, 0 for no limit
	DisableGzip      bool       // stop asking for gzip; gzip answers are still read
	Observer         Observer
	HoldOffs         *HoldOffs // shared hold-offs by origin and credentials; nil for the Client's own
}

// Client reads the API of one service. It is safe for concurrent use.
type Client struct {
	cfg     Config // with its defaults
	origin  origin
	http    *http.Client
	closed  atomic.Bool
	limiter *rate.Limiter
	redact  *secrets
}

// WithDefaults returns cfg with its zero limits set to the defaults.
func (cfg Config) WithDefaults() Config {
	cfg.Concurrency = cmp.Or(max(cfg.Concurrency, 0), DefaultConcurrency)
	cfg.MaxPages = cmp.Or(max(cfg.MaxPages, 0), DefaultMaxPages)
	// At most 1 PiB, more than any answer: the bounds computed from it cannot overflow.
	cfg.MaxResponseBytes = min(cmp.Or(max(cfg.MaxResponseBytes, 0), DefaultMaxResponseBytes), 1<<50)
	return cfg
}

// New validates cfg and builds a Client.
func New(cfg Config) (*Client, error) {
	if err := validateBaseURL(cfg.BaseURL); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	cfg.Observer = cmp.Or(cfg.Observer, Observer(nopObserver{}))
	cfg.HoldOffs = cmp.Or(cfg.HoldOffs, NewHoldOffs())
	if cfg.Transport == nil {
		var err error
		if cfg.Transport, err = newTransport(cfg.HTTPClientConfig, cfg.UserAgent, cfg.Concurrency); err != nil {
			return nil, err
		}
	}
	c := &Client{cfg: cfg, origin: originOf(cfg.BaseURL), redact: cfg.Transport.redact}
	c.http = &http.Client{Transport: &originGuard{allowed: c.origin, t: cfg.Transport}, CheckRedirect: c.checkRedirect}
	if cfg.RateLimit > 0 { // a burst of one spaces requests evenly
		c.limiter = rate.NewLimiter(rate.Limit(cfg.RateLimit), 1)
	}
	return c, nil
}

// Concurrency returns the most requests a poll sends at once; the poller holds to it.
func (c *Client) Concurrency() int { return c.cfg.Concurrency }

// RateLimited tells whether the client waits for a rate limit's turns, given in the order asked.
func (c *Client) RateLimited() bool { return c.limiter != nil }

type nopObserver struct{}

func (nopObserver) ObserveRequest(Endpoint, int, time.Duration) {}
func (nopObserver) ObserveError(Endpoint, Reason)               {}

// Close closes the idle connections of the Client's transport (other Clients' too), and its requests' as they end.
func (c *Client) Close() {
	c.closed.Store(true)
	c.cfg.Transport.CloseIdle()
}

// Result is what every call reports, whatever happened.
type Result struct {
	Status   int           // of the last response, 0 when none came
	Duration time.Duration // all pages together
	Err      error         // usually an *Error
}

// DetailResult is the outcome of LocationDetail.
type DetailResult struct {
	Result
	Fields map[string]string // the requested top-level scalar fields present
}

// Root reads the API root and checks that it is a JSON object.
func (c *Client) Root(ctx context.Context) Result {
	start := time.Now()
	status, _, err := c.get(ctx, EndpointRoot, c.endpointURL("api/"), 0, func(body io.Reader, _ *http.Response) error {
		_, err := decodeObject(body, nil, nil)
		return err
	})
	return Result{Status: status, Duration: time.Since(start), Err: err}
}

// LocationDetail reads the detail view of one location and returns the requested top-level scalar fields.
func (c *Client) LocationDetail(ctx context.Context, id int64, fields []string) DetailResult {
	var res DetailResult
	u := c.endpointURL("api/projects/locations/" + strconv.FormatInt(id, 10) + "/")
	res.Status, res.Duration, res.Err = c.get(ctx, EndpointLocationDetail, u, 0, func(body io.Reader, _ *http.Response) error {
		var err error
		res.Fields, err = decodeObject(body, fields, c.redact)
		return err
	})
	return res
}

type decodeFunc func(body io.Reader, resp *http.Response) error // of a bounded, decompressed body

// exchange is one request and its record for the trace.
type exchange struct {
	c    *Client
	ctx  context.Context
	ep   Endpoint
	mu   sync.Mutex // guards rec.Phases, set by the transport's goroutines
	rec  TraceRequest
	sent time.Time                      // zero when never sent
	conn atomic.Pointer[statusLineConn] // the connection of a plain HTTP/1 request
}

// get sends one GET request, hands its body to decode and reports it; it returns the status, the time since sending and an *Error.
func (c *Client) get(ctx context.Context, ep Endpoint, u *url.URL, page int, decode decodeFunc) (int, time.Duration, error) {
	x := &exchange{c: c, ctx: ctx, ep: ep}
	x.rec = TraceRequest{Start: time.Now(), Endpoint: ep, Method: http.MethodGet, Page: page}
	status, err := x.send(u, decode)
	x.mu.Lock()
	r := x.rec
	x.mu.Unlock()
	r.URL = c.redact.clean(RedactURL(u))
	r.Status, r.Duration = status, time.Since(r.Start)
	if e, ok := err.(*Error); ok { // every error of send
		r.Reason, r.Error = e.Reason, e.Err.Error()
	}
	traceFrom(ctx).add(r)
	if x.sent.IsZero() {
		return status, 0, err
	}
	return status, time.Since(x.sent), err
}

func (x *exchange) send(u *url.URL, decode decodeFunc) (int, error) {
	c, ep := x.c, x.ep
	if status, err := c.heldOff(ep); err != nil {
		return status, err
	}
	if c.limiter != nil {
		if err := c.limiter.Wait(x.ctx); err != nil {
			return 0, c.fail(ep, ReasonTimeout, 0, fmt.Errorf("waiting for the rate limit: %w", err))
		}
		if status, err := c.heldOff(ep); err != nil { // begun while this request waited
			return status, err
		}
	}
	h := http.Header{"Accept": {"application/json"}}
	if !c.cfg.DisableGzip { // decompressed here, so that the size limit counts decompressed bytes
		h.Set("Accept-Encoding", "gzip")
	}
	ctx := httptrace.WithClientTrace(x.ctx, x.clientTrace())
	req := (&http.Request{Method: http.MethodGet, URL: u, Header: h}).WithContext(ctx)
	x.sent = time.Now()
	resp, err := c.http.Do(req)
	if errors.Is(err, ErrKeyUnavailable) { // never sent and no fault of the service: nothing is counted
		x.sent = time.Time{}
		return 0, &Error{Endpoint: ep, Err: scrubURLError(err)}
	}
	if err != nil {
		reason, status := classify(x.ctx, err), 0
		if s := x.conn.Load().redirectStatus(); reason == ReasonNetwork && s != 0 {
			reason, status, err = ReasonHTTPStatus, s, fmt.Errorf("unexpected status %s: its headers are malformed, so it is not followed", http.StatusText(s))
		}
		if !errors.Is(err, errForeignOrigin) { // the guard stopped it before sending
			c.cfg.Observer.ObserveRequest(ep, status, time.Since(x.sent))
		}
		return status, c.fail(ep, reason, status, scrubURLError(err))
	}
	status, err := x.readResponse(resp, decode)
	c.cfg.Observer.ObserveRequest(ep, status, time.Since(x.sent))
	return status, err
}

func (x *exchange) clientTrace() *httptrace.ClientTrace {
	p := &x.rec.Phases
	mark := func(d *time.Duration) {
		x.mu.Lock()
		defer x.mu.Unlock()
		if *d == 0 {
			*d = time.Since(x.sent)
		}
	}
	return &httptrace.ClientTrace{
		DNSDone:              func(httptrace.DNSDoneInfo) { mark(&p.DNS) },
		ConnectDone:          func(string, string, error) { mark(&p.Connect) },
		TLSHandshakeDone:     func(tls.ConnectionState, error) { mark(&p.TLS) },
		GotFirstResponseByte: func() { mark(&p.FirstByte) },
		GotConn: func(info httptrace.GotConnInfo) {
			conn, _ := info.Conn.(*statusLineConn)
			x.conn.Store(conn)
			x.mu.Lock()
			defer x.mu.Unlock()
			p.Reused = info.Reused
		},
	}
}

func (x *exchange) readResponse(resp *http.Response, decode decodeFunc) (int, error) {
	c := x.c
	wire := &limitedReader{r: resp.Body}
	defer func() { // draining lets the connection be reused, unless the Client was closed
		drained, _ := io.CopyN(io.Discard, resp.Body, drainBytes)
		_ = resp.Body.Close()
		if c.closed.Load() {
			c.cfg.Transport.CloseIdle()
		}
		x.rec.Bytes = wire.read + drained
	}()
	x.rec.ContentType = c.shown(resp.Header.Get("Content-Type"), maxHeaderShown)
	status := resp.StatusCode
	if status < 200 || status > 299 {
		return status, x.statusError(resp, wire)
	}
	if _, err := x.readBody(resp, wire, decode); err != nil {
		return status, c.fail(x.ep, classify(x.ctx, err), status, err)
	}
	return status, nil
}

// readBody bounds, decompresses and decodes a body, and returns its start.
func (x *exchange) readBody(resp *http.Response, wire *limitedReader, decode decodeFunc) (start prefix, err error) {
	gz, err := gzipEncoded(resp.Header, x.c.redact.clean)
	if err != nil {
		return nil, err
	}
	limit := x.c.cfg.MaxResponseBytes
	wire.n = limit
	if gz { // deflate adds 5 bytes per 64 KiB at most
		wire.n = limit + limit/1024 + 4<<10
	}
	if resp.ContentLength > wire.n {
		return nil, fmt.Errorf("declared length %d: %w", resp.ContentLength, errTooLarge)
	}
	var body io.Reader = wire
	if gz {
		zr, err := newGunzipReader(wire)
		if err != nil {
			return nil, err
		}
		defer zr.release()
		body = &limitedReader{r: zr, n: limit}
	}
	if err = decode(io.TeeReader(body, &start), resp); errors.Is(err, errInvalidBody) {
		x.rec.BodyExcerpt = x.c.excerpt(start)
	}
	return start, err
}

// statusError reports a non-2xx answer, keeps its headers worth showing, and starts any hold-off it asks for.
func (x *exchange) statusError(resp *http.Response, wire *limitedReader) *Error {
	c, h, status := x.c, resp.Header, resp.StatusCode
	start, _ := x.readBody(resp, wire, func(body io.Reader, _ *http.Response) error {
		_, err := io.CopyN(io.Discard, body, 2*maxExcerpt) // what start keeps
		return err
	})
	x.rec.BodyExcerpt = c.excerpt(start)
	x.rec.RetryAfter = c.shown(h.Get("Retry-After"), maxHeaderShown)
	x.rec.WWWAuthenticate = c.shown(strings.Join(h.Values("WWW-Authenticate"), ", "), maxHeaderShown)
	msg, why := "unexpected status "+http.StatusText(status), ""
	if x.rec.Location, why = c.redirect(resp); why != "" {
		msg += ": " + why
	}
	e := c.fail(x.ep, ReasonHTTPStatus, status, errors.New(msg))
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		if d := parseRetryAfter(h.Get("Retry-After"), time.Now()); d > 0 {
			x.rec.HoldOffUntil = c.cfg.HoldOffs.extend(c.holdOffKey(), time.Now().Add(d), status)
		}
	}
	return e
}

// fail reports a failed request and builds its error, redacted and cut.
func (c *Client) fail(ep Endpoint, reason Reason, status int, err error) *Error {
	c.cfg.Observer.ObserveError(ep, reason)
	raw := err.Error()
	if msg := cutText(c.redact.clean(raw), maxShown); msg != raw {
		err = &msgError{msg, err}
	}
	return &Error{Endpoint: ep, Reason: reason, Status: status, Err: err}
}

// scrubURLError drops the URL, which could carry credentials, from a *url.Error.
func scrubURLError(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// limitedReader reads at most n bytes, failing with errTooLarge past them.
type limitedReader struct {
	r    io.Reader
	n    int64
	read int64
	err  error // the first error but io.EOF
}

func (l *limitedReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p[:min(int64(len(p)), l.n+1)]) // one byte more tells whether there are more
	if int64(n) > l.n {
		n, err = int(l.n), errTooLarge
	}
	l.n -= int64(n)
	l.read += int64(n)
	if err != nil && err != io.EOF && l.err == nil {
		l.err = err
	}
	return n, err
}

// gzipEncoded tells whether a body is gzip; another coding than identity is refused.
func gzipEncoded(h http.Header, clean func(string) string) (bool, error) {
	gz := false
	for _, v := range h.Values("Content-Encoding") {
		for raw := range strings.SplitSeq(v, ",") {
			switch c := strings.ToLower(strings.TrimSpace(raw)); c {
			case "", "identity":
			case "gzip", "x-gzip":
				if gz {
					return false, fmt.Errorf("body is gzip-compressed twice: %w", errInvalidBody)
				}
				gz = true
			default:
				raw = cutText(strings.TrimSpace(clean(raw)), 32+len(fieldEllipsis))
				return false, fmt.Errorf("body has Content-Encoding %q, which the exporter cannot read (only gzip): %w", raw, errInvalidBody)
			}
		}
	}
	return gz, nil
}

// gunzipReader decompresses a gzip stream; errors of wire pass, a corrupt stream is an invalid body.
type gunzipReader struct {
	wire *limitedReader
	br   *bufio.Reader
	zr   gzip.Reader
}

var gunzipPool = sync.Pool{New: func() any { // decompressors of 45 KB each (docs/development.md)
	return &gunzipReader{br: bufio.NewReaderSize(nil, 4<<10)}
}}

func newGunzipReader(wire *limitedReader) (*gunzipReader, error) {
	g := gunzipPool.Get().(*gunzipReader)
	g.wire = wire
	g.br.Reset(wire)
	if err := g.zr.Reset(g.br); err != nil {
		err = g.translate(err)
		g.release()
		return nil, err
	}
	return g, nil
}

func (g *gunzipReader) Read(p []byte) (int, error) {
	n, err := g.zr.Read(p)
	if err != nil && err != io.EOF {
		err = g.translate(err)
	}
	return n, err
}

func (g *gunzipReader) translate(err error) error {
	switch {
	case g.wire.err != nil:
		return g.wire.err
	case err == io.EOF, errors.Is(err, io.ErrUnexpectedEOF): // an empty body is no gzip stream
		return &bodyError{msgError{"gzip stream ends early", io.ErrUnexpectedEOF}}
	}
	return &bodyError{msgError{"corrupt gzip stream: " + err.Error(), err}}
}

func (g *gunzipReader) release() {
	g.wire = nil
	g.br.Reset(nil)
	gunzipPool.Put(g)
}

const maxHoldOffs = 10_000 // ten times the /probe pairs

// HoldOffs keeps the hold-offs asked for by a 429 or 503 with Retry-After, by origin and credentials.
type HoldOffs struct {
	mu sync.Mutex
	m  map[string]holdOff
}

type holdOff struct {
	until  time.Time
	status int
}

// NewHoldOffs returns an empty store.
func NewHoldOffs() *HoldOffs {
	return &HoldOffs{m: make(map[string]holdOff)}
}

func (h *HoldOffs) extend(key string, until time.Time, status int) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, ok := h.m[key]
	if ok && !until.After(old.until) {
		return old.until
	}
	if !ok && len(h.m) >= maxHoldOffs { // drop the one ending soonest, ended or not
		byEnd := func(a, b string) int { return h.m[a].until.Compare(h.m[b].until) }
		delete(h.m, slices.MinFunc(slices.Collect(maps.Keys(h.m)), byEnd))
	}
	h.m[key] = holdOff{until: until, status: status}
	return until
}

// HoldOff reports until when the client holds off after a 429 or 503, and that status.
func (c *Client) HoldOff() (until time.Time, status int) {
	h, key := c.cfg.HoldOffs, c.holdOffKey()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[key].until, h.m[key].status
}

func (c *Client) heldOff(ep Endpoint) (int, error) {
	if until, status := c.HoldOff(); time.Now().Before(until) {
		return status, &Error{Endpoint: ep, Status: status, Err: ErrHeldOff}
	}
	return 0, nil
}

// holdOffKey names the client's origin and a digest of the secrets and certificate it sends.
func (c *Client) holdOffKey() string {
	_, secrets := c.redact.values()
	tc := c.cfg.HTTPClientConfig.TLSConfig
	sum := sha256.Sum256([]byte(secrets + "\x00" + string(tc.Cert) + "\x00" + tc.CertFile))
	return c.origin.String() + " " + hex.EncodeToString(sum[:16])
}

const maxRetryAfter = 10 * time.Minute

// parseRetryAfter reads a Retry-After header, seconds or an HTTP date; 0 when broken.
func parseRetryAfter(h string, now time.Time) time.Duration {
	var d time.Duration
	if secs, err := strconv.ParseUint(h, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		d = time.Duration(min(secs, uint64(maxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}
