package client

import (
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// errKeyUnavailable is returned, before anything is sent, when the key
// file cannot be read or holds no usable key (emptied by a writer that is
// not atomic, say): sending "Token " with no key would only earn a 401.
var errKeyUnavailable = errors.New("the API key is unavailable: the key file is unreadable, empty or holds control characters")

// errForeignOrigin is returned for any request whose URL leaves the origin
// of the base URL. Nothing that carries the key may leave that origin.
var errForeignOrigin = errors.New("refusing to send a request to another origin")

// maxRedirects bounds same-origin redirects within one request.
const maxRedirects = 5

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

// originGuard sits outermost in the transport chain, in front of the round
// tripper that adds the Authorization header, so a request to another
// origin fails before any credential is attached to it.
//
// It also checks that a key file still holds a usable key, since the round
// tripper underneath would send whatever it finds.
type originGuard struct {
	allowed origin
	next    http.RoundTripper
	keyFile redactor // nil unless the key comes from a file
}

func (g *originGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	var err error
	switch {
	case originOf(req.URL) != g.allowed:
		err = errForeignOrigin
	case g.keyFile != nil && !ValidKey(g.keyFile()):
		err = errKeyUnavailable
	default:
		return g.next.RoundTrip(req)
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return nil, err
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// transport underneath.
func (g *originGuard) CloseIdleConnections() {
	if ci, ok := g.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
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
