package client

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// ErrKeyUnavailable is wrapped by the error returned, before anything is
// sent, when a key or header file cannot be read or holds no usable key
// (emptied by a writer that is not atomic, say): sending "Token " with no
// key would only earn a 401. The error names the file and says why a read
// failed (too many open files, permissions…), never what the file holds.
var ErrKeyUnavailable = errors.New("the API key is unavailable")

// errForeignOrigin is returned for any request whose URL leaves the origin
// of the base URL. Nothing that carries the key may leave that origin.
var errForeignOrigin = errors.New("refusing to send a request to another origin")

// maxRedirects bounds same-origin redirects within one request.
const maxRedirects = 5

// endpointURL joins a path below the base URL, keeping its prefix as
// given: an escaped slash (%2F) in it is sent escaped.
func (c *Client) endpointURL(rel string) *url.URL {
	u := *c.base
	u.RawPath = strings.TrimRight(c.base.EscapedPath(), "/") + "/" + rel
	u.Path, _ = url.PathUnescape(u.RawPath) // an escaped path unescapes
	return &u
}

// origin is the scheme, host and port of a URL, with the port made explicit
// so that http://h and http://h:80 compare equal and http://h:81 does not.
type origin struct {
	scheme, host, port string
}

func originOf(u *url.URL) origin {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return origin{scheme: scheme, host: strings.ToLower(u.Hostname()), port: port}
}

func (o origin) String() string {
	return o.scheme + "://" + net.JoinHostPort(o.host, o.port)
}

// maxShownHost bounds a host name shown in a message; DNS names are at
// most 253 bytes, anything longer is not worth repeating.
const maxShownHost = 253

// foreign renders an origin that came from the service (a next link, a
// redirect) for a message: scheme, host and port only, never a path, a
// query or user info, and the host bounded.
func (o origin) foreign() string {
	if len(o.host) > maxShownHost {
		o.host = o.host[:maxShownHost] + "…"
	}
	return o.String()
}

// misdirected names another origin than the allowed one in a message, with
// a guess at the usual cause: a reverse proxy in front of the service that
// does not tell it the address clients use, so that it builds its links
// from its own.
func (o origin) misdirected(allowed origin) string {
	hint := "a reverse proxy not forwarding the Host header?"
	if o.scheme != allowed.scheme && o.host == allowed.host {
		hint = "a TLS-terminating proxy not sending X-Forwarded-Proto?"
	}
	return fmt.Sprintf("%s, another origin than %s (%s)", o.foreign(), allowed, hint)
}

// originGuard sits outermost in the transport chain, in front of the round
// tripper that adds the Authorization header, so a request to another
// origin fails before any credential is attached to it.
//
// It also checks that a key file still holds a usable key, since the round
// tripper underneath would send whatever it finds, and it sends the
// request through the shared Transport as one of its Client's (lease).
type originGuard struct {
	allowed origin
	t       *Transport
	lease   *lease
}

func (g *originGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	err := errForeignOrigin
	if originOf(req.URL) == g.allowed {
		if err = g.checkKey(); err == nil {
			return g.t.roundTrip(g.lease, req)
		}
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return nil, err
}

// checkKey fails when the key file holds no key that can be sent, saying
// why.
func (g *originGuard) checkKey() error {
	if g.t.keyFile == nil {
		return nil
	}
	key, err := g.t.keyFile.read()
	switch {
	case err != nil:
		return fmt.Errorf("%w: cannot read the key file %s: %w", ErrKeyUnavailable, g.t.keyFile.path, err)
	case key == "":
		return fmt.Errorf("%w: the key file %s is empty", ErrKeyUnavailable, g.t.keyFile.path)
	case !ValidKey(key):
		return fmt.Errorf("%w: the key file %s has control characters such as a line break inside the key", ErrKeyUnavailable, g.t.keyFile.path)
	}
	return nil
}

// redirectPolicy follows redirects only within the allowed origin. Go's
// default policy forwards the Authorization header to any port of the same
// host; ours hands the 3xx back instead, which the caller reports as an
// http_status failure.
func redirectPolicy(allowed origin) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if originOf(req.URL) != allowed {
			return http.ErrUseLastResponse
		}
		if len(via) >= maxRedirects {
			// Report the last redirect as it came: an http_status failure
			// with its 3xx, not a network error.
			return http.ErrUseLastResponse
		}
		return nil
	}
}

// refusedRedirect explains a redirect answer that the policy did not
// follow: one to another origin, named, or one too many. It returns "" for
// a redirect without a usable Location.
func (c *Client) refusedRedirect(resp *http.Response) string {
	loc := resp.Header.Get("Location")
	if loc == "" || resp.Request == nil {
		return ""
	}
	target, err := resp.Request.URL.Parse(loc)
	if err != nil {
		return ""
	}
	if o := originOf(target); o != c.origin {
		if looksLikeLogin(target) {
			// A login page means the service did not take the request
			// as an API call: the key was refused or missing, or the URL
			// is a web front-end's rather than the API's.
			return fmt.Sprintf("redirect to a login page at %s not followed: the key is never sent to another origin (is the key accepted, and is the URL the API's rather than a web front-end's?)", o.foreign())
		}
		return "redirect to " + o.misdirected(c.origin) + " not followed: the key is never sent to another origin"
	}
	return fmt.Sprintf("redirect not followed after %d redirects", maxRedirects)
}

// loginWords are path segments and query names that mark a login page:
// Django's /accounts/login/?next=, single sign-on and OAuth endpoints.
var loginWords = []string{"login", "signin", "sign-in", "sso", "oauth", "oauth2", "saml", "auth", "authorize", "cas"}

// looksLikeLogin tells whether u is most likely a login page, from its
// path segments and query names alone.
func looksLikeLogin(u *url.URL) bool {
	for _, seg := range strings.FieldsFunc(strings.ToLower(u.Path), func(r rune) bool { return r == '/' || r == '.' }) {
		if slices.Contains(loginWords, seg) {
			return true
		}
	}
	q := u.Query()
	return q.Has("next") || q.Has("returnTo") || q.Has("return_to") || q.Has("redirect_uri") || q.Has("service")
}
