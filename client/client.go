// Package client reads the deployment service's JSON API: the root, the
// project and location lists, and location detail views. It owns everything
// HTTP: the base URL and its path prefix, headers and the key, pagination,
// size limits, the redirect policy, rate limiting and the classification of
// failures. It knows nothing of Prometheus metric names.
package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/config"
	"github.com/prometheus/common/version"
	"golang.org/x/time/rate"
)

// Defaults for the limits of Config, used where a field is left at zero.
const (
	DefaultConcurrency      = 4
	DefaultMaxPages         = 1000
	DefaultMaxResponseBytes = 64 << 20
)

// Observer is told about every request the client makes. The collector
// implements it with the long-lived request metrics.
type Observer interface {
	// ObserveRequest is called once per HTTP request sent; status is 0 when
	// no response came.
	ObserveRequest(endpoint Endpoint, status int, d time.Duration)
	// ObserveError is called once per failed request, sent or not.
	ObserveError(endpoint Endpoint, reason Reason)
}

// Config is everything a Client needs. BaseURL and HTTPClientConfig are
// required; zero limits take the defaults above.
type Config struct {
	// BaseURL is the service's base URL, possibly with a path prefix.
	BaseURL *url.URL
	// HTTPClientConfig carries TLS, proxy and the authorization (type Token,
	// with the key inline or in a file that is re-read on every request).
	HTTPClientConfig config.HTTPClientConfig
	// UserAgent defaults to deployment_service_exporter/<version>.
	UserAgent string
	// Transport, when set, carries the requests: the Clients of one
	// module share it, with its connections. It was built by NewTransport
	// from HTTPClientConfig and UserAgent, which are not read again. When
	// nil, the Client builds a transport of its own from them, which keeps
	// up to Concurrency idle connections rather than one.
	Transport *Transport
	// Concurrency is the most requests in flight at once.
	Concurrency int
	// MaxPages is the most pages read for one list.
	MaxPages int
	// MaxResponseBytes is the largest body read, counted after
	// decompression; the compressed bytes are bounded too (maxCompressed).
	MaxResponseBytes int64
	// RateLimit is the most requests per second, 0 for no limit.
	RateLimit float64
	// DisableGzip stops the client from asking for gzip. Answers that come
	// gzip all the same are still decompressed.
	DisableGzip bool
	// Observer, when set, is told about every request.
	Observer Observer
	// HoldOffs, when set, keeps the hold-offs of the Client's origin, as
	// it does for the other Clients given it; when nil, the Client keeps
	// its own.
	HoldOffs *HoldOffs
}

// Client reads the API of one service. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	origin    origin
	http      *http.Client
	lease     *lease
	userAgent string
	slots     *slots
	limiter   *rate.Limiter
	maxPages  int
	maxBytes  int64
	gzip      bool
	observer  Observer
	redact    *secrets
	// holdOffs keeps the hold-off of the origin, under holdKey.
	holdOffs *HoldOffs
	holdKey  string
}

// WithDefaults returns cfg with the limits it leaves at zero set to the
// defaults a Client uses for them.
func (cfg Config) WithDefaults() Config {
	cfg.Concurrency = orDefault(cfg.Concurrency, DefaultConcurrency)
	cfg.MaxPages = orDefault(cfg.MaxPages, DefaultMaxPages)
	cfg.MaxResponseBytes = orDefault(cfg.MaxResponseBytes, DefaultMaxResponseBytes)
	return cfg
}

// New validates cfg and builds a Client.
func New(cfg Config) (*Client, error) {
	if err := validateBaseURL(cfg.BaseURL); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	if cfg.UserAgent == "" {
		cfg.UserAgent = "deployment_service_exporter/" + version.Version
	}
	t := cfg.Transport
	if t == nil {
		var err error
		if t, err = newTransport(cfg.HTTPClientConfig, cfg.UserAgent, cfg.Concurrency); err != nil {
			return nil, err
		}
	}
	c := &Client{
		base:      cfg.BaseURL,
		origin:    originOf(cfg.BaseURL),
		lease:     t.conns.lease(t.poolKey(cfg.BaseURL)),
		redact:    t.redact,
		userAgent: cfg.UserAgent,
		slots:     newSlots(cfg.Concurrency),
		maxPages:  cfg.MaxPages,
		maxBytes:  cfg.MaxResponseBytes,
		gzip:      !cfg.DisableGzip,
		observer:  cfg.Observer,
		holdOffs:  cfg.HoldOffs,
		holdKey:   originOf(cfg.BaseURL).String(),
	}
	if c.holdOffs == nil {
		c.holdOffs = NewHoldOffs()
	}
	c.http = &http.Client{
		Transport:     &originGuard{allowed: c.origin, t: t, lease: c.lease},
		CheckRedirect: redirectPolicy(c.origin),
	}
	if cfg.RateLimit > 0 {
		// A burst of one spaces requests evenly, which is what a service
		// that publishes a rate limit expects.
		c.limiter = rate.NewLimiter(rate.Limit(cfg.RateLimit), 1)
	}
	if c.observer == nil {
		c.observer = nopObserver{}
	}
	return c, nil
}

// ErrURLCredentials is the error of a base URL with a user or password in
// it. Where the key should go instead depends on the caller: the key flags
// for --api.url, the module for /probe.
var ErrURLCredentials = errors.New("URL must not carry credentials")

// ParseBaseURL parses and checks a base URL. Its errors never repeat the
// input, which could carry credentials.
func ParseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a valid URL: give an absolute http or https URL such as https://deploy.example.com")
	}
	if err := validateBaseURL(u); err != nil {
		return nil, err
	}
	return u, nil
}

// validateBaseURL checks that u can serve as a base URL: absolute http or
// https, a host, and no credentials, query or fragment.
func validateBaseURL(u *url.URL) error {
	switch {
	case u == nil:
		return errors.New("no base URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("not an absolute http or https URL such as https://deploy.example.com")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("URL has no host")
	case !isASCII(u.Hostname()):
		// Go's transport dials the IDNA form of such a host, in which
		// "。" and "．" become dots: what a target was matched as would
		// not be what is dialled.
		return errors.New("URL host must be ASCII: give an internationalised name in its xn-- form")
	case u.User != nil:
		return ErrURLCredentials
	case u.RawQuery != "" || u.ForceQuery:
		return errors.New("URL must not have a query")
	case u.Fragment != "":
		return errors.New("URL must not have a fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return errors.New("URL port must be a number from 1 to 65535")
		}
	}
	return nil
}

// Close ends the Client's use of its transport. Its connections close at
// once, or as soon as the requests it still has in flight end, unless
// another Client of the same origin shares them (in which case one idle
// connection stays for it). Requests sent after Close still work, on
// fresh connections that close when they end.
func (c *Client) Close() { c.lease.release() }

// HoldOff reports until when the client refuses to send requests because
// the service answered 429 or 503 with Retry-After, and that status.
func (c *Client) HoldOff() (until time.Time, status int) {
	h := c.holdOffs.get(c.holdKey)
	return h.until, h.status
}

func (c *Client) heldOff(now time.Time) (int, bool) {
	until, status := c.HoldOff()
	return status, now.Before(until)
}

// holdOff starts or extends the hold-off by d from now, and returns the
// end of the hold-off in force.
func (c *Client) holdOff(d time.Duration, status int) time.Time {
	return c.holdOffs.extend(c.holdKey, time.Now().Add(d), status)
}

// Result is what every call reports, whatever happened.
type Result struct {
	// Status is the HTTP status of the last response, 0 when none came.
	Status int
	// Duration is the wall time of the call, all pages together.
	Duration time.Duration
	// Err is nil on success, else usually an *Error.
	Err error
}

// DetailResult is the outcome of LocationDetail.
type DetailResult struct {
	Result
	// Fields holds the requested top-level scalar fields that were present.
	Fields map[string]string
}

// Root reads the API root and checks that it is a JSON object.
func (c *Client) Root(ctx context.Context) Result {
	start := time.Now()
	status, _, err := c.get(ctx, EndpointRoot, c.endpointURL("api/"), 0, false, func(body io.Reader, _ *http.Response) error {
		_, err := decodeObject(body, nil, nil)
		return err
	})
	return Result{Status: status, Duration: time.Since(start), Err: err}
}

// LocationDetail reads the detail view of one location and returns the
// requested top-level scalar fields. A value longer than 1,024 bytes is cut
// to its first 1,024 bytes, at a character boundary, followed by "…".
func (c *Client) LocationDetail(ctx context.Context, id int64, fields []string) DetailResult {
	var res DetailResult
	u := c.endpointURL("api/projects/locations/" + strconv.FormatInt(id, 10) + "/")
	var sent time.Duration
	res.Status, sent, res.Err = c.get(ctx, EndpointLocationDetail, u, 0, false, func(body io.Reader, _ *http.Response) error {
		// Field values become label values: a service that echoes the key
		// in one must not put it on /metrics.
		var err error
		res.Fields, err = decodeObject(body, fields, c.redact.clean)
		return err
	})
	// The time of the request itself, not of its wait for a turn: with a
	// large subset the last ids would otherwise look slow. A request never
	// sent took no time.
	res.Duration = sent
	return res
}

// decodeFunc reads a response body, bounded by the size limit and
// decompressed. resp is the response it came with, for its headers and the
// URL it answered (resp.Request.URL, after redirects); its Body must not be
// read.
type decodeFunc func(body io.Reader, resp *http.Response) error

// exchange is what one request leaves for its caller and the trace.
type exchange struct {
	// sent is when the request went out, zero when it was never sent.
	sent time.Time
	// wire counts the body bytes read from the connection: compressed
	// ones when the answer is gzip.
	wire int64
	// answer is what the trace shows of the response, filled only when
	// the poll is traced.
	answer answer
	// phases times the steps of the exchange, when the poll is traced.
	phases *phaseTimer
}

// get sends one GET request and hands the body, bounded by the size limit
// and decompressed, to decode. It returns the status of the response (0
// when none came) and an *Error on any failure, having reported the
// request to the observer and to the poll's trace. holding tells that the
// caller already holds a request slot, as a list walk does for all its
// pages.
//
// It also returns how long the request took from the moment it was sent,
// 0 when it was never sent.
func (c *Client) get(ctx context.Context, ep Endpoint, u *url.URL, page int, holding bool, decode decodeFunc) (int, time.Duration, error) {
	rec := TraceRequest{Start: time.Now(), Endpoint: ep, Method: http.MethodGet, Page: page}
	var x exchange
	status, err := c.send(ctx, ep, u, holding, &x, decode)
	if tr := traceFrom(ctx); tr != nil {
		rec.URL = c.redact.clean(RedactURL(u))
		rec.Status, rec.Bytes, rec.Duration = status, x.wire, time.Since(rec.Start)
		x.answer.fill(&rec)
		if x.phases != nil {
			rec.Phases = x.phases.result()
		}
		if err != nil {
			rec.Reason, rec.Error = ReasonOf(err), err.Error()
			var e *Error
			if errors.As(err, &e) {
				rec.Error = e.Err.Error()
			}
		}
		tr.add(rec)
	}
	var took time.Duration
	if !x.sent.IsZero() {
		took = time.Since(x.sent)
	}
	return status, took, err
}

func (c *Client) send(ctx context.Context, ep Endpoint, u *url.URL, holding bool, x *exchange, decode decodeFunc) (int, error) {
	if status, held := c.heldOff(time.Now()); held {
		return status, &Error{Endpoint: ep, Status: status, Err: ErrHeldOff}
	}
	release, err := c.acquire(ctx, ep != EndpointLocationDetail, holding)
	if err != nil {
		c.observer.ObserveError(ep, ReasonTimeout)
		return 0, &Error{Endpoint: ep, Reason: ReasonTimeout, Err: err}
	}
	defer release()
	// A hold-off may have begun while this request waited for its turn.
	if status, held := c.heldOff(time.Now()); held {
		return status, &Error{Endpoint: ep, Status: status, Err: ErrHeldOff}
	}
	if err := sendCheck(ctx); err != nil {
		return 0, &Error{Endpoint: ep, Err: err}
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, c.fail(ep, ReasonNetwork, 0, errors.New("cannot build the request"))
	}
	req.Header.Set("Accept", "application/json")
	if c.gzip {
		// prometheus/common's transport disables Go's transparent
		// compression, so the client asks and decompresses itself, which
		// also lets the size limit apply to the decompressed bytes.
		req.Header.Set("Accept-Encoding", "gzip")
	}

	if traceFrom(ctx) != nil {
		x.phases = &phaseTimer{}
		req = req.WithContext(httptrace.WithClientTrace(ctx, x.phases.clientTrace()))
	}
	start := time.Now()
	x.sent = start
	if x.phases != nil {
		x.phases.start = start
	}
	resp, err := c.http.Do(req)
	if errors.Is(err, ErrKeyUnavailable) {
		// Never sent, and no fault of the service: no request and no
		// failure reason are counted.
		x.sent = time.Time{}
		return 0, &Error{Endpoint: ep, Err: scrubURLError(err)}
	}
	if err != nil {
		// A request the guard stopped was never sent: it is an error, not
		// a request without an answer.
		if !errors.Is(err, errForeignOrigin) {
			c.observer.ObserveRequest(ep, 0, time.Since(start))
		}
		return 0, c.fail(ep, classifyTransport(ctx, err), 0, scrubURLError(err))
	}
	status, err := c.readResponse(ctx, ep, resp, x, decode)
	c.observer.ObserveRequest(ep, status, time.Since(start))
	return status, err
}

// readResponse checks the status and size of resp and decodes its body.
// Every body byte read, the drain's included, is counted in x.wire; when
// the poll is traced, x.answer gets what the trace shows of the response.
func (c *Client) readResponse(ctx context.Context, ep Endpoint, resp *http.Response, x *exchange, decode decodeFunc) (int, error) {
	wire := &limitedReader{r: resp.Body}
	defer func() {
		// Draining a little lets the connection be reused.
		drained, _ := io.CopyN(io.Discard, resp.Body, drainBytes)
		_ = resp.Body.Close()
		x.wire = wire.read + drained
	}()
	traced := traceFrom(ctx) != nil
	if traced {
		c.noteHeaders(&x.answer, resp)
	}
	status := resp.StatusCode
	if status < 200 || status > 299 {
		// The body of an error says what went wrong; its start is read
		// whether or not the poll is traced, since draining reads it anyway.
		body := readErrorBody(wire, resp.Header)
		if traced {
			x.answer.excerpt = c.excerpt(body)
		}
		return status, c.statusError(ep, resp, &x.answer)
	}
	gz, err := gzipEncoded(resp.Header, c.redact.clean)
	if err != nil {
		return status, c.fail(ep, ReasonInvalidBody, status, err)
	}
	wire.n = c.maxBytes
	if gz {
		wire.n = maxCompressed(c.maxBytes)
	}
	if resp.ContentLength > wire.n {
		return status, c.fail(ep, ReasonTooLarge, status, fmt.Errorf("declared length %d: %w", resp.ContentLength, errTooLarge))
	}
	var body io.Reader = wire
	if gz {
		zr, err := newGunzipReader(wire)
		if err != nil {
			return status, c.fail(ep, c.bodyReason(ctx, err), status, err)
		}
		defer zr.release()
		body = &limitedReader{r: zr, n: c.maxBytes}
	}
	var prefix *prefixReader
	if traced {
		// Only the start of a body that turns out invalid is shown: a
		// good body is never kept.
		prefix = &prefixReader{r: body}
		body = prefix
	}
	if err := decode(body, resp); err != nil {
		reason := c.bodyReason(ctx, err)
		if prefix != nil && reason == ReasonInvalidBody {
			x.answer.excerpt = c.excerpt(prefix.prefix)
		}
		return status, c.fail(ep, reason, status, err)
	}
	return status, nil
}

// bodyReason classifies an error met while reading and decoding a body.
func (c *Client) bodyReason(ctx context.Context, err error) Reason {
	if errors.Is(err, errInvalidBody) {
		return ReasonInvalidBody
	}
	return classifyTransport(ctx, err)
}

// statusError reports an answer that is not 2xx, and starts a hold-off
// when a 429 or 503 asks for one, noting its end in a.
func (c *Client) statusError(ep Endpoint, resp *http.Response, a *answer) *Error {
	status := resp.StatusCode
	err := fmt.Errorf("unexpected status %s", http.StatusText(status))
	if status >= 300 && status <= 399 {
		// Only redirects that the policy refused reach this point.
		if why := c.refusedRedirect(resp); why != "" {
			err = fmt.Errorf("unexpected status %s: %s", http.StatusText(status), why)
		}
	}
	e := c.fail(ep, ReasonHTTPStatus, status, err)
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		if d := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); d > 0 {
			e.RetryAfter = d
			a.holdOffUntil = c.holdOff(d, status)
		}
	}
	return e
}

// fail reports a failed request and builds its error, with the secrets cut
// out of the message in case the service echoed one, and the message cut
// to maxShown bytes.
func (c *Client) fail(ep Endpoint, reason Reason, status int, err error) *Error {
	c.observer.ObserveError(ep, reason)
	raw := err.Error()
	if msg := cutText(c.redact.clean(raw), maxShown); msg != raw {
		err = &redactedError{msg: msg, err: err}
	}
	return &Error{Endpoint: ep, Reason: reason, Status: status, Err: err}
}

// acquire waits for a free request slot, unless the caller holds one, and
// for the rate limiter, both within ctx, so a request that cannot start
// before the deadline fails as a timeout instead of blocking the scrape.
// Root and list requests (high) go before detail views. The rate limiter
// is waited for while holding the slot, so the slots' priority order is
// also the order of the turns.
func (c *Client) acquire(ctx context.Context, high, holding bool) (func(), error) {
	release := func() {}
	if !holding {
		if err := c.slots.acquire(ctx, high); err != nil {
			return nil, fmt.Errorf("waiting for a request slot: %w", err)
		}
		release = c.slots.release
	}
	if c.limiter != nil {
		if err := c.limiter.Wait(ctx); err != nil {
			release()
			return nil, fmt.Errorf("waiting for the rate limit: %w", err)
		}
	}
	return release, nil
}

// scrubURLError drops the URL from a *url.Error: URLs are logged by
// endpoint label, and a proxy URL could carry credentials.
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// limitedReader reads at most n bytes and fails with errTooLarge when the
// body holds more, so an oversized answer is an error, never a truncation.
type limitedReader struct {
	r    io.Reader
	n    int64
	read int64
	// err is the first error other than io.EOF that r returned, so that a
	// decompressor's complaint about a stream cut short can be told from
	// the connection breaking.
	err error
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		var probe [1]byte
		n, err := l.r.Read(probe[:])
		if n > 0 {
			err = errTooLarge
		}
		l.noteErr(err)
		return 0, err
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	l.read += int64(n)
	l.noteErr(err)
	return n, err
}

func (l *limitedReader) noteErr(err error) {
	if err != nil && err != io.EOF && l.err == nil {
		l.err = err
	}
}

type nopObserver struct{}

func (nopObserver) ObserveRequest(Endpoint, int, time.Duration) {}
func (nopObserver) ObserveError(Endpoint, Reason)               {}

func orDefault[T int | int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
