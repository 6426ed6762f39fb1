package client

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

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
type originGuard struct {
	allowed origin
	next    http.RoundTripper
}

func (g *originGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if originOf(req.URL) != g.allowed {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, errForeignOrigin
	}
	return g.next.RoundTrip(req)
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
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		return nil
	}
}
