// Package client reads the deployment service's JSON API: the root, the
// project and location lists, and location detail views.
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
	"unicode/utf8"

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

// Observer is told about every request sent (status 0 when no response
// came) and every failed request, sent or not.
type Observer interface {
	ObserveRequest(endpoint Endpoint, status int, d time.Duration)
	ObserveError(endpoint Endpoint, reason Reason)
}

// Config is everything a Client needs. BaseURL and HTTPClientConfig are
// required; zero limits take the defaults above.
type Config struct {
	BaseURL          *url.URL // may have a path prefix
	HTTPClientConfig config.HTTPClientConfig
	UserAgent        string // defaults to deployment_service_exporter/<version>
	// Transport, when set, is shared by the Clients of one module and was
	// built by NewTransport from HTTPClientConfig and UserAgent.
	Transport        *Transport
	Concurrency      int     // requests in flight at once
	MaxPages         int     // pages read for one list
	MaxResponseBytes int64   // largest body, counted after decompression
	RateLimit        float64 // requests per second, 0 for no limit
	DisableGzip      bool    // stop asking for gzip; gzip answers are still read
	Observer         Observer
	HoldOffs         *HoldOffs // shared hold-offs by origin; nil for the Client's own
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
	holdOffs  *HoldOffs
	holdKey   string
}

// WithDefaults returns cfg with its zero limits set to the defaults.
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
		lease:     &lease{t: t},
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
		// A burst of one spaces requests evenly.
		c.limiter = rate.NewLimiter(rate.Limit(cfg.RateLimit), 1)
	}
	if c.observer == nil {
		c.observer = nopObserver{}
	}
	return c, nil
}

// ErrURLCredentials is the error of a base URL with a user or password in it.
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

// validateBaseURL checks that u is an absolute http or https base URL.
func validateBaseURL(u *url.URL) error {
	switch {
	case u == nil:
		return errors.New("no base URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("not an absolute http or https URL such as https://deploy.example.com")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("URL has no host")
	case strings.ContainsFunc(u.Hostname(), func(r rune) bool { return r >= utf8.RuneSelf }):
		// Go dials the IDNA form, so what was matched would not be what is dialled.
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

// Close closes the idle connections of the Client's transport, those of
// Clients sharing it too; requests sent after Close still work.
func (c *Client) Close() { c.lease.release() }

// HoldOff reports until when the client holds off after a 429 or 503, and that status.
func (c *Client) HoldOff() (until time.Time, status int) {
	h := c.holdOffs.get(c.holdKey)
	return h.until, h.status
}

func (c *Client) heldOff(now time.Time) (int, bool) {
	until, status := c.HoldOff()
	return status, now.Before(until)
}

// holdOff extends the hold-off by d from now, returning the end in force.
func (c *Client) holdOff(d time.Duration, status int) time.Time {
	return c.holdOffs.extend(c.holdKey, time.Now().Add(d), status)
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
		var err error
		res.Fields, err = decodeObject(body, fields, c.redact.clean)
		return err
	})
	// The time from sending, not from waiting for a turn.
	res.Duration = sent
	return res
}

// decodeFunc reads a bounded, decompressed body; resp gives its headers and URL.
type decodeFunc func(body io.Reader, resp *http.Response) error

// exchange is what one request leaves for its caller and the trace.
type exchange struct {
	sent   time.Time // zero when never sent
	wire   int64     // body bytes read off the connection
	answer answer    // filled only when traced
	phases *phaseTimer
}

// get sends one GET request, hands its body to decode and reports it to the
// observer and the trace. It returns the status, the time since sending and
// an *Error on failure; holding tells that the caller holds a request slot.
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
	// A hold-off may have begun while this request waited.
	if status, held := c.heldOff(time.Now()); held {
		return status, &Error{Endpoint: ep, Status: status, Err: ErrHeldOff}
	}

	req, err := c.newRequest(ctx, u, x)
	if err != nil {
		return 0, c.fail(ep, ReasonNetwork, 0, errors.New("cannot build the request"))
	}
	start := time.Now()
	x.sent = start
	if x.phases != nil {
		x.phases.start = start
	}
	resp, err := c.http.Do(req)
	if errors.Is(err, ErrKeyUnavailable) {
		// Never sent and no fault of the service: nothing is counted.
		x.sent = time.Time{}
		return 0, &Error{Endpoint: ep, Err: scrubURLError(err)}
	}
	if err != nil {
		// A request the guard stopped was never sent.
		if !errors.Is(err, errForeignOrigin) {
			c.observer.ObserveRequest(ep, 0, time.Since(start))
		}
		return 0, c.fail(ep, classifyTransport(ctx, err), 0, scrubURLError(err))
	}
	status, err := c.readResponse(ctx, ep, resp, x, decode)
	c.observer.ObserveRequest(ep, status, time.Since(start))
	return status, err
}

// newRequest builds a GET request for u, timing its phases when traced.
func (c *Client) newRequest(ctx context.Context, u *url.URL, x *exchange) (*http.Request, error) {
	if traceFrom(ctx) != nil {
		x.phases = &phaseTimer{}
		ctx = httptrace.WithClientTrace(ctx, x.phases.clientTrace())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if c.gzip {
		// Decompressing ourselves lets the size limit count decompressed bytes.
		req.Header.Set("Accept-Encoding", "gzip")
	}
	return req, nil
}

// readResponse checks the status of resp and decodes its body.
func (c *Client) readResponse(ctx context.Context, ep Endpoint, resp *http.Response, x *exchange, decode decodeFunc) (int, error) {
	wire := &limitedReader{r: resp.Body}
	defer func() {
		// Draining lets the connection be reused.
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
		body := readErrorBody(wire, resp.Header)
		if traced {
			x.answer.excerpt = c.excerpt(body)
		}
		return status, c.statusError(ep, resp, &x.answer)
	}
	return status, c.readBody(ctx, ep, resp, wire, x, decode)
}

// readBody bounds a 2xx body, decompresses it and decodes it.
func (c *Client) readBody(ctx context.Context, ep Endpoint, resp *http.Response, wire *limitedReader, x *exchange, decode decodeFunc) error {
	status := resp.StatusCode
	gz, err := gzipEncoded(resp.Header, c.redact.clean)
	if err != nil {
		return c.fail(ep, ReasonInvalidBody, status, err)
	}
	wire.n = c.maxBytes
	if gz {
		wire.n = maxCompressed(c.maxBytes)
	}
	if resp.ContentLength > wire.n {
		return c.fail(ep, ReasonTooLarge, status, fmt.Errorf("declared length %d: %w", resp.ContentLength, errTooLarge))
	}
	var body io.Reader = wire
	if gz {
		zr, err := newGunzipReader(wire)
		if err != nil {
			return c.fail(ep, c.bodyReason(ctx, err), status, err)
		}
		defer zr.release()
		body = &limitedReader{r: zr, n: c.maxBytes}
	}
	var prefix *prefixReader
	if traceFrom(ctx) != nil {
		// Only the start of an invalid body is shown.
		prefix = &prefixReader{r: body}
		body = prefix
	}
	if err := decode(body, resp); err != nil {
		reason := c.bodyReason(ctx, err)
		if prefix != nil && reason == ReasonInvalidBody {
			x.answer.excerpt = c.excerpt(prefix.prefix)
		}
		return c.fail(ep, reason, status, err)
	}
	return nil
}

// bodyReason classifies an error met while reading and decoding a body.
func (c *Client) bodyReason(ctx context.Context, err error) Reason {
	if errors.Is(err, errInvalidBody) {
		return ReasonInvalidBody
	}
	return classifyTransport(ctx, err)
}

// statusError reports a non-2xx answer, and starts any hold-off it asks for.
func (c *Client) statusError(ep Endpoint, resp *http.Response, a *answer) *Error {
	status := resp.StatusCode
	err := fmt.Errorf("unexpected status %s", http.StatusText(status))
	if status >= 300 && status <= 399 {
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

// fail reports a failed request and builds its error, redacted and cut.
func (c *Client) fail(ep Endpoint, reason Reason, status int, err error) *Error {
	c.observer.ObserveError(ep, reason)
	raw := err.Error()
	if msg := cutText(c.redact.clean(raw), maxShown); msg != raw {
		err = &redactedError{msg: msg, err: err}
	}
	return &Error{Endpoint: ep, Reason: reason, Status: status, Err: err}
}

// acquire waits within ctx for a request slot, unless the caller holds one,
// then for the rate limiter; root and list requests (high) go first.
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

// scrubURLError drops the URL, which could carry credentials, from a *url.Error.
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// limitedReader reads at most n bytes, failing with errTooLarge past them.
type limitedReader struct {
	r    io.Reader
	n    int64
	read int64
	err  error
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
